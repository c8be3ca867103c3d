package expr

import (
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

// testValues are the ExpressionAttributeValues most tests share.
var testValues = map[string]string{
	":s":     `{"S":"abc"}`,
	":s2":    `{"S":"abd"}`,
	":pre":   `{"S":"ab"}`,
	":empty": `{"S":""}`,
	":n1":    `{"N":"1"}`,
	":n5":    `{"N":"5"}`,
	":n10":   `{"N":"10"}`,
	":n15":   `{"N":"15"}`,
	":nbig":  `{"N":"12345678901234567890123456789012345678"}`,
	":ntiny": `{"N":"0.0000000000000000000000000000000000001"}`,
	":b":     `{"B":"AQID"}`,
	":bpre":  `{"B":"AQI="}`,
	":t":     `{"BOOL":true}`,
	":f":     `{"BOOL":false}`,
	":null":  `{"NULL":true}`,
	":ss":    `{"SS":["x","y"]}`,
	":ssx":   `{"SS":["x"]}`,
	":ns":    `{"NS":["1","2"]}`,
	":ns3":   `{"NS":["3"]}`,
	":bs":    `{"BS":["AQ=="]}`,
	":l":     `{"L":[{"S":"x"},{"N":"1"}]}`,
	":l2":    `{"L":[{"S":"z"}]}`,
	":m":     `{"M":{"k":{"S":"v"}}}`,
	":tS":    `{"S":"S"}`,
	":tN":    `{"S":"N"}`,
	":tM":    `{"S":"M"}`,
	":tX":    `{"S":"X"}`,
}

func decodeValues(t testing.TB, in map[string]string) map[string]attr.Value {
	t.Helper()
	if in == nil {
		return nil
	}
	out := make(map[string]attr.Value, len(in))
	for k, js := range in {
		v, err := attr.DecodeValue([]byte(js))
		if err != nil {
			t.Fatalf("value %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}

func mustItem(t testing.TB, js string) attr.Item {
	t.Helper()
	if js == "" {
		return nil
	}
	it, err := attr.DecodeItem([]byte(js))
	if err != nil {
		t.Fatalf("item %s: %v", js, err)
	}
	return it
}

func testEnv(t testing.TB, names map[string]string) *Env {
	t.Helper()
	e, err := NewEnv(names, decodeValues(t, testValues))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// testItem is the item condition tests evaluate against.
const testItem = `{
	"s": {"S":"abc"},
	"n": {"N":"10"},
	"n2": {"N":"10.0"},
	"b": {"B":"AQID"},
	"t": {"BOOL":true},
	"nul": {"NULL":true},
	"ss": {"SS":["x","y"]},
	"ns": {"NS":["1","2"]},
	"bs": {"BS":["AQ==","Ag=="]},
	"l": {"L":[{"S":"x"},{"N":"1"},{"M":{"k":{"S":"v"}}}]},
	"m": {"M":{"k":{"S":"v"},"nest":{"M":{"deep":{"N":"3"}}},"arr":{"L":[{"N":"7"}]}}},
	"utf": {"S":"héllo"},
	"with.dot": {"S":"dotted"},
	"Name": {"S":"reserved"},
	"blank": {"S":""}
}`
