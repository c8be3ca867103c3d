package server

import (
	"context"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/engine"
)

// TestRecountStats: extenddb recount-stats on a stopped server's SQLite
// database reports each table's items and DynamoDB size.
func TestRecountStats(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Storage.DataDir = t.TempDir()
	b, err := OpenBackend(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(b, engine.Options{})
	const acct = "000000000000"
	name := "recounted"
	_, err = e.CreateTable(ctx, acct, &engine.CreateTableInput{
		TableName:            &name,
		KeySchema:            []engine.KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []engine.AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "bb", "ccc"} {
		if _, err := e.PutItem(ctx, acct, &engine.PutItemInput{TableName: &name, Item: attr.Item{"pk": attr.StrValue(k)}}); err != nil {
			t.Fatal(err)
		}
	}
	b.Close()
	var got []RecountResult
	if err := RecountStats(ctx, cfg, acct, nil, func(r RecountResult) { got = append(got, r) }); err != nil {
		t.Fatal(err)
	}
	// pk(2) + the keys (1, 2, 3)
	if len(got) != 1 || got[0].Table != name || !got[0].Counted || got[0].ItemCount != 3 || got[0].SizeBytes != 12 {
		t.Fatalf("recount: %+v", got)
	}
	if err := RecountStats(ctx, cfg, acct, []string{"missing"}, func(RecountResult) {}); err == nil {
		t.Fatal("recount of a missing table: no error")
	}
}
