package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/engine"
)

// slowDecode is decode without the fast path: encoding/json alone, the
// reference fastDecode must agree with.
func slowDecode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := attr.CheckText(body); err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// statementBodies are ExecuteStatement shapes, taken or left to
// encoding/json.
var statementBodies = []string{
	`{"Statement":"UPDATE t SET a = ? WHERE pk = ?","Parameters":[{"S":"x"},{"M":{"k":{"L":[{"NULL":true}]}}}]}`,
	`{"Statement":"s","Parameters":[{"S":"x"},null]}`,
	`{"Statement":"s","Parameters":[{"S":"x"},]}`,
	`{"Statement":"s","Parameters":{"S":"x"}}`,
	`{"Statement":"s","Limit":3}`,
}

var fastDecodeBodies = []string{
	// The shapes the fast path takes.
	`{"TableName":"t","Item":{"pk":{"S":"a"},"sk":{"N":"1"},"payload":{"S":"` + strings.Repeat("x", 1000) + `"}}}`,
	` { "TableName" : "t" , "Item" : { "pk" : { "S" : "a\u00e9\n" } , "b" : { "B" : "AAEC" } } , "ReturnValues" : "ALL_OLD" } `,
	`{"TableName":"t","Item":{"pk":{"S":"a"},"m":{"M":{"x":{"L":[{"N":"1"},{"NULL":true},{"BOOL":false}]}}},"ss":{"SS":["a","b"]}},"ConditionExpression":"attribute_not_exists(#p) AND :v <> #p","ExpressionAttributeNames":{"#p":"pk"},"ExpressionAttributeValues":{":v":{"S":"z"}},"ReturnConsumedCapacity":"TOTAL","ReturnItemCollectionMetrics":"SIZE","ReturnValuesOnConditionCheckFailure":"ALL_OLD"}`,
	`{"TableName":"t","Item":{}}`,
	`{}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"},"gone":null}}`,
	// Shapes left to encoding/json: results and errors must not change.
	`{"tablename":"t","Item":{"pk":{"S":"a"}}}`,
	`{"TableName":"t","TableName":"u","Item":{"pk":{"S":"a"}}}`,
	`{"TableName":null,"Item":{"pk":{"S":"a"}}}`,
	`{"TableName":"t","Item":null}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}},"Unknown":[1,2,{"x":null}]}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}},"Expected":{"pk":{"Exists":false}}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}}}x`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}},}`,
	`{,"TableName":"t"}`,
	`{"TableName":"t" "Item":{}}`,
	`{"TableName":1,"Item":{"pk":{"S":"a"}}}`,
	`{"TableName":"t","Item":[]}`,
	`{"TableName":"t","Item":{"pk":{}}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a","N":"1"}}}`,
	`{"TableName":"t","Item":{"pk":{"N":"1e999999"}}}`,
	`{"TableName":"t","Item":{"":{"S":"a"}}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a` + "\x01" + `"}}}`,
	`{"TableName":"t","Item":{"pk":{"S":"\ud800"}}}`,
	`{"TableName":"t","Item":{"pk":{"S":"\q"}}}`,
	`{"TableName":"t\"\\\/\b\f\n\r\t\u0041","Item":{"pk":{"S":"a"}}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}},"ExpressionAttributeValues":{":v":null}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}},"ExpressionAttributeValues":{":v":{"S":"1"},":v":{"S":"2"}}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}},"ExpressionAttributeNames":{"#a":"x","#a":"y"}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}},"ExpressionAttributeNames":{"#a":1}}`,
	`{"TableName":"t","Item":{"pk":{"S":"a"}},"ExpressionAttributeNames":{}}`,
	`[]`, `null`, ``, `"x"`, `{"TableName":"t"`,
	`{"TableName":"t","Key":{"pk":{"S":"a"}},"ProjectionExpression":"a, #b","ExpressionAttributeNames":{"#b":"b"},"ConsistentRead":true}`,
	`{"TableName":"t","Key":{"pk":{"S":"a"}},"UpdateExpression":"SET #p = :p ADD ver :one","ExpressionAttributeNames":{"#p":"payload"},"ExpressionAttributeValues":{":p":{"S":"x"},":one":{"N":"1"}},"ReturnValues":"UPDATED_NEW"}`,
	`{"TableName":"t","Key":{"pk":{"S":"a"}},"AttributeUpdates":{"a":{"Action":"PUT","Value":{"S":"x"}}}}`,
	`{"TableName":"t","Key":{"pk":{"S":"a"}},"AttributesToGet":["a"]}`,
	`{"TableName":"t","Key":{"pk":{"S":"a"}},"ConsistentRead":false}`,
	`{"TableName":"t","Key":{"pk":{"S":"a"}},"ConsistentRead":"true"}`,
	`{"TableName":"t","Key":{"pk":{"S":"a"}},"ConsistentRead":truex}`,
	`{"TableName":"t","Key":{"pk":{"S":"a"}},"ConsistentRead":1}`,
}

// TestFastDecodeMatchesEncodingJSON: for every body, every request type of
// the fast path decodes to what encoding/json decodes it to, with the
// same error.
func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	types := []func() any{
		func() any { return new(engine.PutItemInput) },
		func() any { return new(engine.GetItemInput) },
		func() any { return new(engine.UpdateItemInput) },
		func() any { return new(engine.DeleteItemInput) },
		func() any { return new(engine.ExecuteStatementInput) },
	}
	for i, body := range append(append([]string(nil), fastDecodeBodies...), statementBodies...) {
		for _, mk := range types {
			checkFastDecode(t, fmt.Sprintf("body %d", i), []byte(body), mk)
		}
	}
}

func checkFastDecode(t *testing.T, name string, body []byte, mk func() any) {
	t.Helper()
	fast, slow := mk(), mk()
	ferr := decode(body, fast)
	serr := slowDecode(body, slow)
	if fmt.Sprint(ferr) != fmt.Sprint(serr) {
		t.Errorf("%s %T: error %v, encoding/json %v", name, fast, ferr, serr)
		return
	}
	if serr == nil && !reflect.DeepEqual(fast, slow) {
		t.Errorf("%s %T: decoded %+v, encoding/json %+v", name, fast, fast, slow)
	}
}

// TestFastDecodeTakesTheCommonShapes: the bodies the SDKs send for the
// item requests go through the fast path (else it buys nothing).
func TestFastDecodeTakesTheCommonShapes(t *testing.T) {
	for _, c := range []struct {
		v    any
		body string
	}{
		{new(engine.PutItemInput), fastDecodeBodies[0]},
		{new(engine.PutItemInput), fastDecodeBodies[2]},
		{new(engine.GetItemInput), `{"TableName":"t","Key":{"pk":{"S":"a"},"sk":{"N":"1"}},"ProjectionExpression":"a","ExpressionAttributeNames":{"#b":"b"}}`},
		{new(engine.GetItemInput), `{"TableName":"t","Key":{"pk":{"S":"a"}},"ConsistentRead":true}`},
		{new(engine.UpdateItemInput), fastDecodeBodies[len(fastDecodeBodies)-7]},
		{new(engine.DeleteItemInput), `{"TableName":"t","Key":{"pk":{"S":"a"}},"ConditionExpression":"attribute_exists(pk)","ReturnValues":"ALL_OLD"}`},
		{new(engine.ExecuteStatementInput), `{"Statement":"SELECT * FROM t WHERE pk = ? AND sk = ?","Parameters":[{"S":"a"}, {"N":"1"}],"ConsistentRead":true,"ReturnConsumedCapacity":"TOTAL"}`},
		{new(engine.ExecuteStatementInput), `{"Statement":"SELECT * FROM t","Parameters":[],"NextToken":"x","ReturnValuesOnConditionCheckFailure":"ALL_OLD"}`},
	} {
		if !fastDecode([]byte(c.body), c.v) {
			t.Errorf("%T %s: not taken by the fast path", c.v, c.body)
		}
	}
}

// FuzzFastDecode holds the fast path to encoding/json's results on any
// body (go test runs the seeds; go test -fuzz explores).
func FuzzFastDecode(f *testing.F) {
	for _, b := range fastDecodeBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFastDecode(t, "fuzz", body, func() any { return new(engine.PutItemInput) })
		checkFastDecode(t, "fuzz", body, func() any { return new(engine.UpdateItemInput) })
	})
}

// BenchmarkDecodePutItem: a 1 KiB PutItem body (the load tool's shape)
// through encoding/json (before) and through the one-pass decoder.
func BenchmarkDecodePutItem(b *testing.B) {
	body := []byte(`{"TableName":"extenddb-bench-putitem-1kb","Item":{"pk":{"S":"w3-p17"},"sk":{"S":"i000123"},"gpk":{"S":"g3"},"ver":{"N":"1"},"payload":{"S":"` + strings.Repeat("x", 960) + `"}}}`)
	for _, c := range []struct {
		name   string
		decode func([]byte, any) error
	}{{"encoding-json", slowDecode}, {"one-pass", decode}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				var in engine.PutItemInput
				if err := c.decode(body, &in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
