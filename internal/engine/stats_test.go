package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
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

// TestStatsSkipCreating: a table in CREATING (a restore target being
// loaded) answers ItemCount 0 and starts no statistics read, from
// DescribeTable or from /metrics.
func TestStatsSkipCreating(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	const acct = "000000000000"
	_, err := e.CreateTable(ctx, acct, &CreateTableInput{
		TableName:            ptr("src"),
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST",
	})
	if err != nil {
		t.Fatal(err)
	}
	src, err := e.loadTable(ctx, acct, "src")
	if err != nil {
		t.Fatal(err)
	}
	d := src.stored.Desc
	d.TableName, d.TableStatus = "restoring", "CREATING"
	raw, err := json.Marshal(&storedTable{Desc: d})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.backend.CreateTable(ctx, backend.CreateTableParams{Account: acct, Name: "restoring", Desc: raw})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.DescribeTable(ctx, acct, &TableNameInput{TableName: ptr("restoring")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Table.TableStatus != "CREATING" || out.Table.ItemCount != 0 {
		t.Fatalf("described %s with %d items", out.Table.TableStatus, out.Table.ItemCount)
	}
	ms, _, err := e.TableMetrics(ctx, []string{acct}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Table == "restoring" {
			t.Fatal("/metrics lists the statistics of a CREATING table")
		}
	}
	e.stats.mu.Lock()
	_, started := e.stats.m[res.Table.ID]
	e.stats.mu.Unlock()
	if started {
		t.Fatal("statistics were started for a CREATING table")
	}
	// The ACTIVE table beside it is counted as before.
	if out, err := e.DescribeTable(ctx, acct, &TableNameInput{TableName: ptr("src")}); err != nil || out.Table.TableStatus != "ACTIVE" {
		t.Fatalf("src: %v %v", out, err)
	}
	e.stats.mu.Lock()
	_, started = e.stats.m[src.ref.ID]
	e.stats.mu.Unlock()
	if !started {
		t.Fatal("no statistics for the ACTIVE table")
	}
}

// TestDescribeStatsMaintained: on a backend that keeps the figures with
// its writes, DescribeTable answers them at once after each write (no
// background computation), and a table loaded in bulk (figures unknown)
// is recounted in the background and then answered exactly.
func TestDescribeStatsMaintained(t *testing.T) {
	ctx := context.Background()
	sb := memSQLite(t)
	e := New(checked(t, sb), Options{})
	const acct = "000000000000"
	_, err := e.CreateTable(ctx, acct, &CreateTableInput{
		TableName:            ptr("kept"),
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST",
	})
	if err != nil {
		t.Fatal(err)
	}
	describe := func() *TableDescription {
		t.Helper()
		out, err := e.DescribeTable(ctx, acct, &TableNameInput{TableName: ptr("kept")})
		if err != nil {
			t.Fatal(err)
		}
		return out.Table
	}
	for i, k := range []string{"a", "b", "c"} {
		if _, err := e.PutItem(ctx, acct, &PutItemInput{TableName: ptr("kept"), Item: attr.Item{"pk": attr.StrValue(k)}}); err != nil {
			t.Fatal(err)
		}
		// pk(2) + the key (1): 3 bytes an item, seen by the next describe.
		if d := describe(); d.ItemCount != int64(i+1) || d.TableSizeBytes != 3*int64(i+1) {
			t.Fatalf("after put %d: %d items, %d bytes", i+1, d.ItemCount, d.TableSizeBytes)
		}
	}
	e.stats.mu.Lock()
	running := false
	for _, s := range e.stats.m {
		running = running || s.running != nil || !s.at.IsZero()
	}
	e.stats.mu.Unlock()
	if running {
		t.Fatal("a background computation ran for maintained figures")
	}

	tab, err := e.loadTable(ctx, acct, "kept")
	if err != nil {
		t.Fatal(err)
	}
	var items []backend.BulkItem
	for i := range 50 {
		k := fmt.Sprintf("bulk%02d", i)
		key, _ := attr.KeyBytes(attr.StrValue(k))
		items = append(items, backend.BulkItem{PK: key, Change: backend.Change{Op: backend.Put, Item: attr.EncodeItem(attr.Item{"pk": attr.StrValue(k)})}})
	}
	if err := sb.BulkLoad(ctx, backend.BulkLoadParams{Table: tab.ref, Items: items}); err != nil {
		t.Fatal(err)
	}
	var d *TableDescription
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if d = describe(); d.ItemCount == 53 {
			break
		}
	}
	if d.ItemCount != 53 || d.TableSizeBytes != 9+50*8 {
		t.Fatalf("after a bulk load: %d items, %d bytes", d.ItemCount, d.TableSizeBytes)
	}
	if res, err := sb.Counts(ctx, backend.CountsParams{Table: tab.ref}); err != nil || !res.Counted {
		t.Fatalf("figures not known again after the recount: %+v %v", res, err)
	}
}
