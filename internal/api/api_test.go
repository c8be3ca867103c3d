package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/engine"
)

// TestErrorTableCoversEveryKind walks every engine code and storage kind.
func TestErrorTableCoversEveryKind(t *testing.T) {
	for _, c := range engine.Codes {
		w, ok := errorTable[c]
		if !ok {
			t.Errorf("engine code %s has no wire mapping", c)
			continue
		}
		st, body, internal := mapError(&engine.Error{Code: c, Message: "m"})
		if st != w.status || body.Type != w.prefix+string(c) {
			t.Errorf("%s: got %d %s", c, st, body.Type)
		}
		if internal != (c == engine.CodeInternal) {
			t.Errorf("%s: internal=%v", c, internal)
		}
		if c == engine.CodeValidation && w.prefix != prefixValidate {
			t.Errorf("ValidationException prefix %s", w.prefix)
		}
		if c == engine.CodeSerialization && w.prefix != prefixService {
			t.Errorf("SerializationException prefix %s", w.prefix)
		}
	}
	for _, k := range backend.Kinds() {
		ee, ok := engine.FromStorage(&backend.Error{Kind: k}).(*engine.Error)
		if !ok {
			t.Errorf("storage kind %s has no mapping", k)
			continue
		}
		code := ee.Code
		st, body, internal := mapError(&backend.Error{Kind: k, Message: "secret detail", Cause: errors.New("driver says x")})
		if !strings.HasSuffix(body.Type, "#"+string(code)) {
			t.Errorf("kind %s: __type %s, want %s", k, body.Type, code)
		}
		if code == engine.CodeInternal && (!internal || strings.Contains(body.Message, "secret") || st != 500) {
			t.Errorf("kind %s: internal error leaks or wrong status: %d %q", k, st, body.Message)
		}
		if k == backend.KindUnavailable && st != 503 {
			t.Errorf("unavailable: status %d, want 503", st)
		}
	}
	st, body, internal := mapError(errors.New("boom"))
	if st != 500 || !internal || body.Message != "Internal server error" {
		t.Errorf("unknown error: %d %q %v", st, body.Message, internal)
	}
	st, body, _ = mapError(attr.Serialization("x"))
	if st != 400 || body.Type != prefixService+"SerializationException" {
		t.Errorf("attr serialization: %d %s", st, body.Type)
	}
}

func newServer(t *testing.T) *Server {
	t.Helper()
	b, err := sqlite.Open(context.Background(), sqlite.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return New(engine.New(b, engine.Options{}), Options{Ready: b.Ping})
}

func do(t *testing.T, s *Server, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	if target != "" {
		r.Header.Set("X-Amz-Target", target)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	crc := strconv.FormatUint(uint64(crc32.ChecksumIEEE(w.Body.Bytes())), 10)
	if got := w.Header().Get("x-amz-crc32"); got != crc {
		t.Errorf("x-amz-crc32 %q, body crc %s", got, crc)
	}
	if w.Header().Get("x-amzn-RequestId") == "" {
		t.Error("no x-amzn-RequestId")
	}
	return w
}

func errType(t *testing.T, w *httptest.ResponseRecorder) string {
	var b map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %q: %v", w.Body.String(), err)
	}
	if _, ok := b["message"]; !ok {
		t.Errorf("error body without lowercase message: %s", w.Body.String())
	}
	return b["__type"].(string)
}

func TestProtocol(t *testing.T) {
	s := newServer(t)
	if w := do(t, s, "DynamoDB_20120810.Nope", "{}"); w.Code != 400 || errType(t, w) != prefixService+"UnknownOperationException" {
		t.Errorf("unknown op: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, s, "", "{}"); w.Code != 400 || errType(t, w) != prefixService+"UnknownOperationException" {
		t.Errorf("no target: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, s, "DynamoDB_20120810.ListTables", "{nope"); w.Code != 400 || errType(t, w) != prefixService+"SerializationException" {
		t.Errorf("bad json: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, s, "DynamoDB_20120810.ListTables", `{"Limit":"x"}`); w.Code != 400 || errType(t, w) != prefixService+"SerializationException" {
		t.Errorf("wrong member type: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, s, "DynamoDB_20120810.DescribeTable", `{"TableName":"missing"}`); w.Code != 400 || errType(t, w) != prefixDynamo+"ResourceNotFoundException" {
		t.Errorf("missing table: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, s, "DynamoDB_20120810.DescribeTable", `{}`); w.Code != 400 || errType(t, w) != prefixValidate+"ValidationException" {
		t.Errorf("no table name: %d %s", w.Code, w.Body.String())
	}
	big := `{"TableName":"` + strings.Repeat("a", MaxBodyBytes) + `"}`
	if w := do(t, s, "DynamoDB_20120810.DescribeTable", big); w.Code != 413 {
		t.Errorf("over 16 MB: %d", w.Code)
	}
	if w := do(t, s, "DynamoDB_20120810.ListTables", ``); w.Code != 200 {
		t.Errorf("empty body: %d %s", w.Code, w.Body.String())
	}
	for _, p := range []string{"/health", "/ready"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, p, nil))
		if w.Code != 200 {
			t.Errorf("%s: %d", p, w.Code)
		}
	}
}

// TestNoInputCrashesTheServer feeds mutated bodies to every operation.
func TestNoInputCrashesTheServer(t *testing.T) {
	s := newServer(t)
	do(t, s, "DynamoDB_20120810.CreateTable", `{"TableName":"fuzz","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}],"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}],"BillingMode":"PAY_PER_REQUEST"}`)
	seeds := []string{
		`{"TableName":"fuzz","Item":{"pk":{"S":"a"},"n":{"N":"1"},"l":{"L":[{"M":{"x":{"SS":["a"]}}}]}}}`,
		`{"TableName":"fuzz","Key":{"pk":{"S":"a"}},"UpdateExpression":"SET n = n + :v, l[0].x = :s REMOVE q","ExpressionAttributeValues":{":v":{"N":"2"},":s":{"S":"z"}}}`,
		`{"TableName":"fuzz","KeyConditionExpression":"pk = :p","FilterExpression":"size(l) > :n","ExpressionAttributeValues":{":p":{"S":"a"},":n":{"N":"0"}}}`,
		`{"TransactItems":[{"Put":{"TableName":"fuzz","Item":{"pk":{"S":"b"}}}}]}`,
		`{"RequestItems":{"fuzz":[{"PutRequest":{"Item":{"pk":{"S":"c"}}}}]}}`,
	}
	var ops []string
	for name := range s.ops {
		ops = append(ops, name)
	}
	mutations := 0
	for _, seed := range seeds {
		for i := 0; i < len(seed); i += 3 {
			for _, repl := range []string{"", "{", "]", `"`, "0", "null", "-1e999", `\u0000`} {
				body := seed[:i] + repl + seed[i+1:]
				op := ops[mutations%len(ops)]
				mutations++
				w := do(t, s, "DynamoDB_20120810."+op, body)
				if w.Code >= 500 {
					t.Fatalf("%s with %q: %d %s", op, body, w.Code, w.Body.String())
				}
			}
		}
	}
	if mutations < 500 {
		t.Fatalf("only %d mutations", mutations)
	}
}

// TestStreamsTarget: the DynamoDB Streams API is served under its own
// target prefix on the same endpoint; its operations are not DynamoDB's.
func TestStreamsTarget(t *testing.T) {
	s := newServer(t)
	if w := do(t, s, "DynamoDBStreams_20120810.ListStreams", "{}"); w.Code != 200 || !strings.Contains(w.Body.String(), `"Streams":[]`) {
		t.Errorf("ListStreams: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, s, "DynamoDB_20120810.ListStreams", "{}"); w.Code != 400 || errType(t, w) != prefixService+"UnknownOperationException" {
		t.Errorf("ListStreams under the DynamoDB prefix: %d %s", w.Code, w.Body.String())
	}
	w := do(t, s, "DynamoDBStreams_20120810.Nope", "{}")
	if w.Code != 400 || errType(t, w) != prefixService+"UnknownOperationException" || !strings.Contains(w.Body.String(), "DynamoDB Streams operation Nope") {
		t.Errorf("unknown streams op: %d %s", w.Code, w.Body.String())
	}
	if w := do(t, s, "DynamoDBStreams_20120810.GetRecords", `{"ShardIterator":"x"}`); w.Code != 400 || errType(t, w) != prefixValidate+"ValidationException" {
		t.Errorf("bad iterator: %d %s", w.Code, w.Body.String())
	}
}

// TestReadyReason: /ready says why it is not ready when the readiness
// error carries a reason written for operators (NotReady), and nothing
// more than "unavailable" otherwise (a driver's error may name hosts).
func TestReadyReason(t *testing.T) {
	b, err := sqlite.Open(context.Background(), sqlite.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&NotReady{Reason: "the store was taken over", Err: errors.New("x")}, `{"reason":"the store was taken over","status":"unavailable"}`},
		{fmt.Errorf("wrapped: %w", &NotReady{Reason: "r"}), `{"reason":"r","status":"unavailable"}`},
		{errors.New("dial tcp db.internal:5432: refused"), `{"status":"unavailable"}`},
	} {
		s := New(engine.New(b, engine.Options{}), Options{Ready: func(context.Context) error { return tc.err }})
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/ready", nil))
		if w.Code != 503 || w.Body.String() != tc.want {
			t.Errorf("%v: %d %s, want 503 %s", tc.err, w.Code, w.Body.String(), tc.want)
		}
	}
}
