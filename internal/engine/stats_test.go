package engine

import (
	"context"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
)

// TestDescribeStats: DescribeTable reports the items and index entries
// written, recomputed once the figures are older than the interval, and
// filling them in never changes the cached description.
func TestDescribeStats(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	e.stats.interval = 20 * time.Millisecond
	const acct = "000000000000"
	_, err := e.CreateTable(ctx, acct, &CreateTableInput{
		TableName:            ptr("stats"),
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}, {AttributeName: "g", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST",
		GlobalSecondaryIndexes: []GlobalSecondaryIndex{{IndexName: "gix", KeySchema: []KeySchemaElement{{AttributeName: "g", KeyType: "HASH"}},
			Projection: &Projection{ProjectionType: "KEYS_ONLY"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	describe := func() *TableDescription {
		t.Helper()
		out, err := e.DescribeTable(ctx, acct, &TableNameInput{TableName: ptr("stats")})
		if err != nil {
			t.Fatal(err)
		}
		return out.Table
	}
	if d := describe(); d.ItemCount != 0 || d.TableSizeBytes != 0 || d.GlobalSecondaryIndexes[0].ItemCount != 0 {
		t.Fatalf("empty table: %+v", d)
	}
	for _, k := range []string{"a", "b", "c"} {
		it := attr.Item{"pk": attr.StrValue(k), "v": attr.StrValue("xyz")}
		if k != "c" {
			it["g"] = attr.StrValue("g" + k)
		}
		if _, err := e.PutItem(ctx, acct, &PutItemInput{TableName: ptr("stats"), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	var d *TableDescription
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if d = describe(); d.ItemCount == 3 {
			break
		}
	}
	// pk(2)+k(1) + v(1)+xyz(3) = 7, +g(1)+gX(2) = 10 for the two indexed
	if d.ItemCount != 3 || d.TableSizeBytes != 10+10+7 {
		t.Fatalf("table figures %d items, %d bytes", d.ItemCount, d.TableSizeBytes)
	}
	g := d.GlobalSecondaryIndexes[0]
	if g.ItemCount != 2 || g.IndexSizeBytes != 2*(3+3) {
		t.Fatalf("index figures %d items, %d bytes", g.ItemCount, g.IndexSizeBytes)
	}
	tab, err := e.loadTable(ctx, acct, "stats")
	if err != nil {
		t.Fatal(err)
	}
	if tab.stored.Desc.ItemCount != 0 || tab.stored.Desc.GlobalSecondaryIndexes[0].ItemCount != 0 {
		t.Fatal("filling in the figures changed the cached description")
	}
}
