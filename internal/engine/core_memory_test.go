package engine

// The engine's core operations against the in-memory backend: what a
// client of each operation can observe, without the HTTP layer.

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend/memory"
)

const coreAccount = "000000000000"

// memEngine is an engine on a fresh in-memory backend (checked by the
// storage contract checker), with its background work running.
func memEngine(t *testing.T) *Engine {
	t.Helper()
	b := memory.New(memory.Options{ItemSize: ItemSize})
	t.Cleanup(func() { b.Close() })
	e := New(checked(t, b), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	e.Start(ctx, []string{coreAccount})
	t.Cleanup(func() { cancel(); e.Stop() })
	return e
}

// pkSKTable creates table name with string keys pk (HASH) and sk (RANGE).
func pkSKTable(t *testing.T, e *Engine, name string) {
	t.Helper()
	_, err := e.CreateTable(context.Background(), coreAccount, &CreateTableInput{
		TableName:            ptr(name),
		KeySchema:            []KeySchemaElement{{"pk", "HASH"}, {"sk", "RANGE"}},
		AttributeDefinitions: []AttributeDefinition{{"pk", "S"}, {"sk", "S"}},
		BillingMode:          "PAY_PER_REQUEST",
	})
	if err != nil {
		t.Fatalf("CreateTable %s: %v", name, err)
	}
}

func s(v string) attr.Value { return attr.StrValue(v) }

func kv(pairs ...string) attr.Item {
	it := attr.Item{}
	for i := 0; i+1 < len(pairs); i += 2 {
		it[pairs[i]] = s(pairs[i+1])
	}
	return it
}

func decoded(t *testing.T, raw []byte) attr.Item {
	t.Helper()
	if raw == nil {
		return nil
	}
	it, err := attr.DecodeItem(raw)
	if err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return it
}

func TestCoreTableLifecycle(t *testing.T) {
	e := memEngine(t)
	ctx := context.Background()
	pkSKTable(t, e, "life")

	d, err := e.DescribeTable(ctx, coreAccount, &TableNameInput{TableName: ptr("life")})
	if err != nil {
		t.Fatal(err)
	}
	if d.Table.TableName != "life" || d.Table.TableStatus != "ACTIVE" ||
		!reflect.DeepEqual(d.Table.KeySchema, []KeySchemaElement{{"pk", "HASH"}, {"sk", "RANGE"}}) ||
		d.Table.BillingModeSummary == nil || d.Table.BillingModeSummary.BillingMode != "PAY_PER_REQUEST" {
		t.Fatalf("DescribeTable: %+v", d.Table)
	}

	cases := []struct {
		name string
		call func() error
		want Code
	}{
		{"create again", func() error {
			_, err := e.CreateTable(ctx, coreAccount, &CreateTableInput{TableName: ptr("life"),
				KeySchema: []KeySchemaElement{{"pk", "HASH"}}, AttributeDefinitions: []AttributeDefinition{{"pk", "S"}}, BillingMode: "PAY_PER_REQUEST"})
			return err
		}, CodeResourceInUse},
		{"key not defined", func() error {
			_, err := e.CreateTable(ctx, coreAccount, &CreateTableInput{TableName: ptr("other"),
				KeySchema: []KeySchemaElement{{"id", "HASH"}}, AttributeDefinitions: []AttributeDefinition{{"pk", "S"}}, BillingMode: "PAY_PER_REQUEST"})
			return err
		}, CodeValidation},
		{"describe missing", func() error {
			_, err := e.DescribeTable(ctx, coreAccount, &TableNameInput{TableName: ptr("nope")})
			return err
		}, CodeResourceNotFound},
	}
	for _, c := range cases {
		if err := c.call(); code(err) != c.want {
			t.Errorf("%s: %v, want %s", c.name, err, c.want)
		}
	}

	del, err := e.DeleteTable(ctx, coreAccount, &TableNameInput{TableName: ptr("life")})
	if err != nil || del.TableDescription == nil || del.TableDescription.TableName != "life" {
		t.Fatalf("DeleteTable: %+v %v", del, err)
	}
	if _, err := e.DescribeTable(ctx, coreAccount, &TableNameInput{TableName: ptr("life")}); code(err) != CodeResourceNotFound {
		t.Fatalf("DescribeTable after delete: %v", err)
	}
	if _, err := e.DeleteTable(ctx, coreAccount, &TableNameInput{TableName: ptr("life")}); code(err) != CodeResourceNotFound {
		t.Fatalf("DeleteTable twice: %v", err)
	}
}

func TestCoreItemWrites(t *testing.T) {
	e := memEngine(t)
	ctx := context.Background()
	pkSKTable(t, e, "items")
	key := kv("pk", "a", "sk", "1")
	v1 := kv("pk", "a", "sk", "1", "v", "one")
	v2 := kv("pk", "a", "sk", "1", "v", "two")

	get := func() attr.Item {
		t.Helper()
		out, err := e.GetItem(ctx, coreAccount, &GetItemInput{TableName: ptr("items"), Key: key})
		if err != nil {
			t.Fatalf("GetItem: %v", err)
		}
		return decoded(t, out.Item)
	}

	// Each step runs against the state the steps before it left.
	steps := []struct {
		name      string
		call      func() (*ItemOutput, error)
		wantCode  Code
		wantAttrs attr.Item // Attributes returned (ReturnValues)
		wantItem  attr.Item // the item stored afterwards
	}{
		{"put new, ALL_OLD of nothing", func() (*ItemOutput, error) {
			return e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("items"), Item: v1, ReturnValues: "ALL_OLD"})
		}, "", nil, v1},
		{"put if not exists refused, old item on CCF", func() (*ItemOutput, error) {
			return e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("items"), Item: v2,
				ConditionExpression: ptr("attribute_not_exists(pk)"), ReturnValuesOnConditionCheckFailure: "ALL_OLD"})
		}, CodeConditionalCheckFailed, nil, v1},
		{"put replaces, ALL_OLD", func() (*ItemOutput, error) {
			return e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("items"), Item: v2, ReturnValues: "ALL_OLD",
				ConditionExpression: ptr("v = :v"), ExpressionAttributeValues: map[string]attr.Value{":v": s("one")}})
		}, "", v1, v2},
		{"put with ALL_NEW refused", func() (*ItemOutput, error) {
			return e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("items"), Item: v1, ReturnValues: "ALL_NEW"})
		}, CodeValidation, nil, v2},
		{"update ALL_NEW", func() (*ItemOutput, error) {
			return e.UpdateItem(ctx, coreAccount, &UpdateItemInput{TableName: ptr("items"), Key: key,
				UpdateExpression: ptr("SET w = :w"), ExpressionAttributeValues: map[string]attr.Value{":w": s("x")}, ReturnValues: "ALL_NEW"})
		}, "", kv("pk", "a", "sk", "1", "v", "two", "w", "x"), kv("pk", "a", "sk", "1", "v", "two", "w", "x")},
		{"update UPDATED_OLD", func() (*ItemOutput, error) {
			return e.UpdateItem(ctx, coreAccount, &UpdateItemInput{TableName: ptr("items"), Key: key,
				UpdateExpression: ptr("SET v = :v"), ExpressionAttributeValues: map[string]attr.Value{":v": s("three")}, ReturnValues: "UPDATED_OLD"})
		}, "", kv("v", "two"), kv("pk", "a", "sk", "1", "v", "three", "w", "x")},
		{"update with false condition", func() (*ItemOutput, error) {
			return e.UpdateItem(ctx, coreAccount, &UpdateItemInput{TableName: ptr("items"), Key: key,
				UpdateExpression: ptr("REMOVE w"), ConditionExpression: ptr("v = :v"),
				ExpressionAttributeValues: map[string]attr.Value{":v": s("one")}})
		}, CodeConditionalCheckFailed, nil, kv("pk", "a", "sk", "1", "v", "three", "w", "x")},
		{"update of a key attribute refused", func() (*ItemOutput, error) {
			return e.UpdateItem(ctx, coreAccount, &UpdateItemInput{TableName: ptr("items"), Key: key,
				UpdateExpression: ptr("SET sk = :v"), ExpressionAttributeValues: map[string]attr.Value{":v": s("2")}})
		}, CodeValidation, nil, kv("pk", "a", "sk", "1", "v", "three", "w", "x")},
		{"delete with false condition", func() (*ItemOutput, error) {
			return e.DeleteItem(ctx, coreAccount, &DeleteItemInput{TableName: ptr("items"), Key: key,
				ConditionExpression: ptr("attribute_not_exists(v)")})
		}, CodeConditionalCheckFailed, nil, kv("pk", "a", "sk", "1", "v", "three", "w", "x")},
		{"delete ALL_OLD", func() (*ItemOutput, error) {
			return e.DeleteItem(ctx, coreAccount, &DeleteItemInput{TableName: ptr("items"), Key: key, ReturnValues: "ALL_OLD"})
		}, "", kv("pk", "a", "sk", "1", "v", "three", "w", "x"), nil},
		{"delete of a missing item", func() (*ItemOutput, error) {
			return e.DeleteItem(ctx, coreAccount, &DeleteItemInput{TableName: ptr("items"), Key: key, ReturnValues: "ALL_OLD"})
		}, "", nil, nil},
		{"put to a missing table", func() (*ItemOutput, error) {
			return e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("nope"), Item: v1})
		}, CodeResourceNotFound, nil, nil},
	}
	for _, st := range steps {
		out, err := st.call()
		if code(err) != st.wantCode {
			t.Fatalf("%s: error %v, want code %q", st.name, err, st.wantCode)
		}
		if err == nil && !reflect.DeepEqual(out.Attributes, st.wantAttrs) && !(len(out.Attributes) == 0 && st.wantAttrs == nil) {
			t.Errorf("%s: Attributes %v, want %v", st.name, out.Attributes, st.wantAttrs)
		}
		if got := get(); !reflect.DeepEqual(got, st.wantItem) {
			t.Errorf("%s: stored %v, want %v", st.name, got, st.wantItem)
		}
	}

	// A refused condition with ReturnValuesOnConditionCheckFailure
	// ALL_OLD carries the old item.
	if _, err := e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("items"), Item: v1}); err != nil {
		t.Fatal(err)
	}
	_, err := e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("items"), Item: v2,
		ConditionExpression: ptr("attribute_not_exists(pk)"), ReturnValuesOnConditionCheckFailure: "ALL_OLD"})
	if ee, ok := err.(*Error); !ok || ee.Code != CodeConditionalCheckFailed || !reflect.DeepEqual(ee.Item, v1) {
		t.Errorf("CCF with ALL_OLD: %#v, want the old item %v", err, v1)
	}
}

// putN writes items pk=p, sk=000..n-1 to table.
func putN(t *testing.T, e *Engine, table, p string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := e.PutItem(context.Background(), coreAccount, &PutItemInput{TableName: ptr(table),
			Item: kv("pk", p, "sk", fmt.Sprintf("%03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCoreQueryScanPaging(t *testing.T) {
	e := memEngine(t)
	ctx := context.Background()
	pkSKTable(t, e, "paged")
	putN(t, e, "paged", "a", 7)
	putN(t, e, "paged", "b", 3)

	type page func(start attr.Item) (*QueryOutput, error)
	query := func(limit int64, forward bool) page {
		return func(start attr.Item) (*QueryOutput, error) {
			return e.Query(ctx, coreAccount, &QueryInput{TableName: ptr("paged"), KeyConditionExpression: ptr("pk = :p"),
				ExpressionAttributeValues: map[string]attr.Value{":p": s("a")}, Limit: ptr(limit), ScanIndexForward: ptr(forward),
				ExclusiveStartKey: start})
		}
	}
	scan := func(limit int64) page {
		return func(start attr.Item) (*QueryOutput, error) {
			return e.Scan(ctx, coreAccount, &ScanInput{TableName: ptr("paged"), Limit: ptr(limit), ExclusiveStartKey: start})
		}
	}
	cases := []struct {
		name      string
		page      page
		wantPages int
		wantSKs   []string // in the order read
		sorted    bool     // compare as sets (scan order is the backend's)
	}{
		{"query forward by 3", query(3, true), 3, []string{"a000", "a001", "a002", "a003", "a004", "a005", "a006"}, false},
		{"query backward by 4", query(4, false), 2, []string{"a006", "a005", "a004", "a003", "a002", "a001", "a000"}, false},
		{"query all in one", query(100, true), 1, []string{"a000", "a001", "a002", "a003", "a004", "a005", "a006"}, false},
		{"scan by 4", scan(4), 3, []string{"a000", "a001", "a002", "a003", "a004", "a005", "a006", "b000", "b001", "b002"}, true},
	}
	for _, c := range cases {
		var got []string
		var start attr.Item
		pages := 0
		for {
			out, err := c.page(start)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			pages++
			if out.Count != len(*out.Items) || out.ScannedCount != out.Count {
				t.Errorf("%s: Count %d ScannedCount %d, %d items", c.name, out.Count, out.ScannedCount, len(*out.Items))
			}
			for _, raw := range *out.Items {
				it := decoded(t, raw)
				got = append(got, it["pk"].Str+it["sk"].Str)
			}
			if out.LastEvaluatedKey == nil || pages > 20 {
				break
			}
			start = out.LastEvaluatedKey
		}
		if c.sorted {
			sort.Strings(got)
		}
		if pages != c.wantPages || !reflect.DeepEqual(got, c.wantSKs) {
			t.Errorf("%s: %d pages %v, want %d pages %v", c.name, pages, got, c.wantPages, c.wantSKs)
		}
	}
}

func TestCoreBatchWriteGet(t *testing.T) {
	e := memEngine(t)
	ctx := context.Background()
	pkSKTable(t, e, "batch")
	putN(t, e, "batch", "old", 2)

	bw, err := e.BatchWriteItem(ctx, coreAccount, &BatchWriteItemInput{RequestItems: map[string][]WriteRequest{"batch": {
		{PutRequest: &PutRequest{Item: kv("pk", "new", "sk", "1", "v", "x")}},
		{PutRequest: &PutRequest{Item: kv("pk", "new", "sk", "2")}},
		{DeleteRequest: &DeleteRequest{Key: kv("pk", "old", "sk", "000")}},
	}}})
	if err != nil || len(bw.UnprocessedItems) != 0 {
		t.Fatalf("BatchWriteItem: %+v %v", bw, err)
	}

	bad := []struct {
		name string
		in   *BatchWriteItemInput
		want Code
	}{
		{"same key twice", &BatchWriteItemInput{RequestItems: map[string][]WriteRequest{"batch": {
			{PutRequest: &PutRequest{Item: kv("pk", "d", "sk", "1")}},
			{DeleteRequest: &DeleteRequest{Key: kv("pk", "d", "sk", "1")}}}}}, CodeValidation},
		{"missing table", &BatchWriteItemInput{RequestItems: map[string][]WriteRequest{"nope": {
			{PutRequest: &PutRequest{Item: kv("pk", "d", "sk", "1")}}}}}, CodeResourceNotFound},
		{"no requests", &BatchWriteItemInput{RequestItems: map[string][]WriteRequest{}}, CodeValidation},
	}
	for _, c := range bad {
		if _, err := e.BatchWriteItem(ctx, coreAccount, c.in); code(err) != c.want {
			t.Errorf("BatchWriteItem %s: %v, want %s", c.name, err, c.want)
		}
	}

	bg, err := e.BatchGetItem(ctx, coreAccount, &BatchGetItemInput{RequestItems: map[string]KeysAndAttributes{"batch": {Keys: []attr.Item{
		kv("pk", "new", "sk", "1"), kv("pk", "new", "sk", "2"), kv("pk", "old", "sk", "000"), kv("pk", "old", "sk", "001"),
	}}}})
	if err != nil || len(bg.UnprocessedKeys) != 0 {
		t.Fatalf("BatchGetItem: %+v %v", bg, err)
	}
	var got []string
	for _, raw := range bg.Responses["batch"] {
		it := decoded(t, raw)
		got = append(got, it["pk"].Str+"/"+it["sk"].Str+"/"+it["v"].Str)
	}
	sort.Strings(got)
	if want := []string{"new/1/x", "new/2/", "old/001/"}; !reflect.DeepEqual(got, want) {
		t.Errorf("BatchGetItem found %v, want %v (the deleted old/000 absent)", got, want)
	}
	if _, err := e.BatchGetItem(ctx, coreAccount, &BatchGetItemInput{RequestItems: map[string]KeysAndAttributes{"batch": {Keys: []attr.Item{
		kv("pk", "new", "sk", "1"), kv("pk", "new", "sk", "1")}}}}); code(err) != CodeValidation {
		t.Errorf("BatchGetItem of a key twice: %v", err)
	}
}

func TestCoreTransactWriteCancellation(t *testing.T) {
	e := memEngine(t)
	ctx := context.Background()
	pkSKTable(t, e, "txn")
	putN(t, e, "txn", "x", 2) // x/000, x/001

	put := func(sk string) TransactWriteItem {
		return TransactWriteItem{Put: &TransactPut{TableName: ptr("txn"), Item: kv("pk", "y", "sk", sk)}}
	}
	check := func(sk, cond string, old bool) TransactWriteItem {
		c := &ConditionCheck{TableName: ptr("txn"), Key: kv("pk", "x", "sk", sk), ConditionExpression: ptr(cond)}
		if old {
			c.ReturnValuesOnConditionCheckFailure = "ALL_OLD"
		}
		return TransactWriteItem{ConditionCheck: c}
	}
	cases := []struct {
		name    string
		items   []TransactWriteItem
		reasons []CancellationReason // nil: the transaction commits
	}{
		{"second check fails", []TransactWriteItem{put("1"), check("000", "attribute_not_exists(pk)", false)},
			[]CancellationReason{{Code: "None"}, {Code: "ConditionalCheckFailed", Message: "The conditional request failed"}}},
		{"check fails with ALL_OLD", []TransactWriteItem{check("001", "attribute_not_exists(pk)", true), put("2")},
			[]CancellationReason{{Code: "ConditionalCheckFailed", Message: "The conditional request failed", Item: kv("pk", "x", "sk", "001")}, {Code: "None"}}},
		{"all pass", []TransactWriteItem{put("3"), check("000", "attribute_exists(pk)", false)}, nil},
	}
	for _, c := range cases {
		_, err := e.TransactWriteItems(ctx, coreAccount, &TransactWriteItemsInput{TransactItems: c.items})
		if c.reasons == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		ee, ok := err.(*Error)
		if !ok || ee.Code != CodeTransactionCanceled || !reflect.DeepEqual(ee.Reasons, c.reasons) {
			t.Errorf("%s: %#v, want TransactionCanceled with %+v", c.name, err, c.reasons)
		}
	}
	// Only the committed transaction's put landed.
	out, err := e.Query(ctx, coreAccount, &QueryInput{TableName: ptr("txn"), KeyConditionExpression: ptr("pk = :p"),
		ExpressionAttributeValues: map[string]attr.Value{":p": s("y")}})
	if err != nil || out.Count != 1 || decoded(t, (*out.Items)[0])["sk"].Str != "3" {
		t.Errorf("items of y after the transactions: %+v %v, want only y/3", out, err)
	}
	if _, err := e.TransactWriteItems(ctx, coreAccount, &TransactWriteItemsInput{TransactItems: []TransactWriteItem{put("4"), put("4")}}); code(err) != CodeValidation {
		t.Errorf("one item twice in a transaction: %v", err)
	}
}

func TestCoreUpdateTableAddsGSI(t *testing.T) {
	e := memEngine(t)
	ctx := context.Background()
	pkSKTable(t, e, "gsi")
	for i, g := range []string{"red", "blue", "red"} {
		if _, err := e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("gsi"),
			Item: kv("pk", fmt.Sprint(i), "sk", "s", "colour", g)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.UpdateTable(ctx, coreAccount, &UpdateTableInput{TableName: ptr("gsi"),
		AttributeDefinitions: []AttributeDefinition{{"pk", "S"}, {"sk", "S"}, {"colour", "S"}},
		GlobalSecondaryIndexUpdates: []GlobalSecondaryIndexUpdate{{Create: &CreateGSIAction{IndexName: "byColour",
			KeySchema: []KeySchemaElement{{"colour", "HASH"}}, Projection: &Projection{ProjectionType: "ALL"}}}}})
	if err != nil {
		t.Fatalf("UpdateTable: %v", err)
	}
	// The backfill runs in the background; the index turns ACTIVE.
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := e.DescribeTable(ctx, coreAccount, &TableNameInput{TableName: ptr("gsi")})
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Table.GlobalSecondaryIndexes) != 1 || d.Table.GlobalSecondaryIndexes[0].IndexName != "byColour" {
			t.Fatalf("indexes after UpdateTable: %+v", d.Table.GlobalSecondaryIndexes)
		}
		if d.Table.GlobalSecondaryIndexes[0].IndexStatus == "ACTIVE" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("index still %s after 30 s", d.Table.GlobalSecondaryIndexes[0].IndexStatus)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A write after the index exists is indexed too.
	if _, err := e.PutItem(ctx, coreAccount, &PutItemInput{TableName: ptr("gsi"), Item: kv("pk", "9", "sk", "s", "colour", "red")}); err != nil {
		t.Fatal(err)
	}
	out, err := e.Query(ctx, coreAccount, &QueryInput{TableName: ptr("gsi"), IndexName: ptr("byColour"),
		KeyConditionExpression: ptr("colour = :c"), ExpressionAttributeValues: map[string]attr.Value{":c": s("red")}})
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for _, raw := range *out.Items {
		pks = append(pks, decoded(t, raw)["pk"].Str)
	}
	sort.Strings(pks)
	if want := []string{"0", "2", "9"}; !reflect.DeepEqual(pks, want) {
		t.Errorf("red items by the index: %v, want %v", pks, want)
	}
	// Creating it again is refused.
	_, err = e.UpdateTable(ctx, coreAccount, &UpdateTableInput{TableName: ptr("gsi"),
		AttributeDefinitions: []AttributeDefinition{{"colour", "S"}},
		GlobalSecondaryIndexUpdates: []GlobalSecondaryIndexUpdate{{Create: &CreateGSIAction{IndexName: "byColour",
			KeySchema: []KeySchemaElement{{"colour", "HASH"}}, Projection: &Projection{ProjectionType: "ALL"}}}}})
	if code(err) != CodeValidation && code(err) != CodeResourceInUse {
		t.Errorf("creating the index again: %v", err)
	}
}
