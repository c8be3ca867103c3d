package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/engine"
)

// TestLargeRepliesEncodeAsEncodingJSON: the exact-size encoders of the
// large replies write what encoding/json wrote for them.
func TestLargeRepliesEncodeAsEncodingJSON(t *testing.T) {
	item := engine.RawJSON(`{"pk":{"S":"a<&>"},"n":{"N":"1"}}`)
	outs := []any{
		&engine.BatchGetItemOutput{Responses: map[string][]engine.RawJSON{"b": {item, item}, "a": {}, "c\"<": {item}},
			UnprocessedKeys:  map[string]engine.KeysAndAttributes{"b": {Keys: []attr.Item{{"pk": attr.StrValue("k")}}}},
			ConsumedCapacity: []engine.ConsumedCapacity{{TableName: "a"}}},
		&engine.BatchGetItemOutput{Responses: map[string][]engine.RawJSON{}, UnprocessedKeys: map[string]engine.KeysAndAttributes{}},
		&engine.TransactGetItemsOutput{Responses: []engine.ItemResponse{{Item: item}, {}, {Item: item}}},
		&engine.TransactGetItemsOutput{Responses: []engine.ItemResponse{}, ConsumedCapacity: []engine.ConsumedCapacity{{TableName: "t"}}},
	}
	for _, out := range outs {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			t.Fatal(err)
		}
		got, ok, err := appendReply(nil, out)
		if !ok || err != nil {
			t.Fatalf("%T: %v %v", out, ok, err)
		}
		if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got, w) {
			t.Errorf("%T:\n got %s\nwant %s", out, got, w)
		}
	}
}
