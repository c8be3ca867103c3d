package engine

import (
	"context"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// TestItemLoaderMatchesPutItem: an item loaded through ItemLoader gets the
// same key and the same index entries as the same item written by PutItem.
func TestItemLoaderMatchesPutItem(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	_, err := e.CreateTable(ctx, "acct", &CreateTableInput{
		TableName:            ptr("loadme"),
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}, {AttributeName: "sk", AttributeType: "N"}, {AttributeName: "g", AttributeType: "S"}},
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}, {AttributeName: "sk", KeyType: "RANGE"}},
		BillingMode:          "PAY_PER_REQUEST",
		GlobalSecondaryIndexes: []GlobalSecondaryIndex{{IndexName: "by_g",
			KeySchema:  []KeySchemaElement{{AttributeName: "g", KeyType: "HASH"}},
			Projection: &Projection{ProjectionType: "KEYS_ONLY"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: "acct", Name: "loadme"})
	if err != nil {
		t.Fatal(err)
	}
	load, err := e.ItemLoader(st.Table)
	if err != nil {
		t.Fatal(err)
	}
	raw := attr.EncodeItem(attr.Item{"pk": attr.StrValue("a"), "sk": attr.MustNum("1.50"), "g": attr.StrValue("gv"), "x": attr.StrValue("y")})
	pk, sk, ch, err := load(raw)
	if err != nil {
		t.Fatal(err)
	}
	wantPK, _ := attr.KeyBytes(attr.StrValue("a"))
	wantSK, _ := attr.KeyBytes(attr.MustNum("1.5"))
	if string(pk) != string(wantPK) || string(sk) != string(wantSK) || ch.Op != backend.Put || string(ch.Item) != string(raw) {
		t.Fatalf("load: %x %x %+v", pk, sk, ch)
	}
	if len(ch.PutIndex) != 1 || ch.PutIndex[0].Index != "by_g" || len(ch.DeleteIndex) != 0 {
		t.Fatalf("index entries: %+v", ch.PutIndex)
	}
	// The same item through PutItem yields the same entry.
	tbl, err := e.loadTable(ctx, "acct", "loadme")
	if err != nil {
		t.Fatal(err)
	}
	it, _ := attr.DecodeItem(raw)
	put, err := tbl.putChange(nil, it, raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(put.PutIndex) != 1 || string(put.PutIndex[0].PK) != string(ch.PutIndex[0].PK) ||
		string(put.PutIndex[0].SK) != string(ch.PutIndex[0].SK) || string(put.PutIndex[0].Item) != string(ch.PutIndex[0].Item) {
		t.Fatalf("PutItem entry %+v, loader entry %+v", put.PutIndex, ch.PutIndex)
	}
	// An item without its key is refused.
	if _, _, _, err := load(attr.EncodeItem(attr.Item{"x": attr.StrValue("y")})); err == nil {
		t.Fatal("an item without a key was loaded")
	}
}
