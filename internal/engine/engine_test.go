package engine

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/expr"
)

// memSQLite opens an in-memory SQLite backend, closed when the test ends.
func memSQLite(t *testing.T) *sqlite.Backend {
	t.Helper()
	b, err := sqlite.Open(context.Background(), sqlite.Options{Memory: true, ItemSize: ItemSize})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// checked wraps b in the storage contract checker; a violation fails t.
func checked(t *testing.T, b backend.Backend) backend.Backend {
	return backend.Checked(b, func(err error) { t.Errorf("%v", err) })
}

func newEngine(t *testing.T) *Engine {
	t.Helper()
	return New(memSQLite(t), Options{})
}

func ptr[T any](v T) *T { return &v }

func code(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestSortKeyRangeBoundaries(t *testing.T) {
	ka := keyAttr{Name: "sk", Type: attr.B}
	lo, hi, err := sortKeyRange(expr.KeyTerm{Name: "sk", Op: expr.BEGINS_WITH, Values: []attr.Value{attr.BinValue([]byte{0xFF, 0xFF})}}, ka)
	if err != nil || !bytes.Equal(lo.Key, []byte{0xFF, 0xFF}) || !lo.Inclusive || hi != nil {
		t.Fatalf("begins_with all-0xFF: %v %v %v", lo, hi, err)
	}
	_, hi, err = sortKeyRange(expr.KeyTerm{Name: "sk", Op: expr.BEGINS_WITH, Values: []attr.Value{attr.BinValue([]byte{1, 0xFF})}}, ka)
	if err != nil || !bytes.Equal(hi.Key, []byte{2}) || hi.Inclusive {
		t.Fatalf("begins_with 01ff: upper %v %v", hi, err)
	}
	n := keyAttr{Name: "sk", Type: attr.N}
	if _, _, err := sortKeyRange(expr.KeyTerm{Name: "sk", Op: expr.BETWEEN, Values: []attr.Value{attr.MustNum("5"), attr.MustNum("-5")}}, n); code(err) != CodeValidation {
		t.Fatalf("BETWEEN 5 AND -5: %v", err)
	}
	if _, _, err := sortKeyRange(expr.KeyTerm{Name: "sk", Op: expr.BEGINS_WITH, Values: []attr.Value{attr.MustNum("5")}}, n); code(err) != CodeValidation {
		t.Fatalf("begins_with on N: %v", err)
	}
}

func TestWriteOptions(t *testing.T) {
	if _, err := writeOptions("ALL_NEW", true, "", "", ""); code(err) != CodeValidation {
		t.Fatalf("ALL_NEW on put: %v", err)
	}
	if ret, err := writeOptions("UPDATED_NEW", false, "TOTAL", "SIZE", "ALL_OLD"); err != nil || !ret {
		t.Fatalf("update options: %v %v", ret, err)
	}
	for _, bad := range [][4]string{{"NOPE", "", "", ""}, {"", "SOME", "", ""}, {"", "", "ALL", ""}, {"", "", "", "ALL_NEW"}} {
		if _, err := writeOptions(bad[0], false, bad[1], bad[2], bad[3]); code(err) != CodeValidation {
			t.Errorf("%v accepted: %v", bad, err)
		}
	}
}

// TestLegacyMatchesExpressions: the legacy parameters are translated to
// expressions; NOT_CONTAINS needs the attribute to exist, as on the service.
func TestLegacyMatchesExpressions(t *testing.T) {
	item := attr.Item{"s": attr.StrValue("hello"), "n": attr.MustNum("5")}
	cases := []struct {
		op   string
		name string
		args []attr.Value
		want bool
	}{
		{"EQ", "n", []attr.Value{attr.MustNum("5.0")}, true},
		{"NE", "n", []attr.Value{attr.MustNum("5")}, false},
		{"BETWEEN", "n", []attr.Value{attr.MustNum("1"), attr.MustNum("5")}, true},
		{"IN", "s", []attr.Value{attr.StrValue("x"), attr.StrValue("hello")}, true},
		{"BEGINS_WITH", "s", []attr.Value{attr.StrValue("he")}, true},
		{"CONTAINS", "s", []attr.Value{attr.StrValue("ell")}, true},
		{"NOT_CONTAINS", "missing", []attr.Value{attr.StrValue("x")}, false},
		{"NOT_CONTAINS", "s", []attr.Value{attr.StrValue("x")}, true},
		{"NULL", "missing", nil, true},
		{"NOT_NULL", "missing", nil, false},
	}
	for _, c := range cases {
		cond, err := legacyFilter(map[string]Condition{c.name: {ComparisonOperator: c.op, AttributeValueList: c.args}}, "")
		if err != nil {
			t.Fatalf("%s: %v", c.op, err)
		}
		if got := cond.Eval(item); got != c.want {
			t.Errorf("%s %s: %v, want %v", c.name, c.op, got, c.want)
		}
	}
	if _, err := legacyFilter(map[string]Condition{"n": {ComparisonOperator: "BETWEEN", AttributeValueList: []attr.Value{attr.MustNum("1")}}}, ""); code(err) != CodeValidation {
		t.Fatalf("BETWEEN with one value: %v", err)
	}
}

// TestTableCacheSeesRecreatedTable: a table deleted and created again
// (new incarnation) is not confused with the old one.
func TestTableCacheSeesRecreatedTable(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	acct := "000000000000"
	create := func(hash string) {
		_, err := e.CreateTable(ctx, acct, &CreateTableInput{TableName: ptr("cache-t"), BillingMode: "PAY_PER_REQUEST",
			KeySchema:            []KeySchemaElement{{AttributeName: hash, KeyType: "HASH"}},
			AttributeDefinitions: []AttributeDefinition{{AttributeName: hash, AttributeType: "S"}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	create("a")
	if _, err := e.PutItem(ctx, acct, &PutItemInput{TableName: ptr("cache-t"), Item: attr.Item{"a": attr.StrValue("1")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DeleteTable(ctx, acct, &TableNameInput{TableName: ptr("cache-t")}); err != nil {
		t.Fatal(err)
	}
	create("b")
	_, err := e.PutItem(ctx, acct, &PutItemInput{TableName: ptr("cache-t"), Item: attr.Item{"a": attr.StrValue("1")}})
	if code(err) != CodeValidation {
		t.Fatalf("put with the old key schema into the new table: %v", err)
	}
	out, err := e.Scan(ctx, acct, &ScanInput{TableName: ptr("cache-t")})
	if err != nil || out.Count != 0 {
		t.Fatalf("new incarnation is not empty: %+v %v", out, err)
	}
}

// TestEveryStorageKindMapped: every storage kind has its code, and an
// internal one shows the client nothing of its cause.
func TestEveryStorageKindMapped(t *testing.T) {
	for _, k := range backend.Kinds() {
		if _, ok := storageKindCodes[k]; !ok {
			t.Errorf("storage kind %s has no code", k)
		}
		ee := FromStorage(&backend.Error{Kind: k, Message: "secret", Cause: errors.New("driver")}).(*Error)
		if ee.Code == CodeInternal && (ee.Message != "Internal server error" || ee.Cause == nil) {
			t.Errorf("kind %s: %+v", k, ee)
		}
	}
	if err := errors.New("x"); FromStorage(err) != err {
		t.Error("a non-storage error was changed")
	}
}

func TestIsNameChars(t *testing.T) {
	for s, want := range map[string]bool{"abc": true, "A-b_c.9": true, "": false, "a b": false, "é": false, "a/b": false, "a\x00": false} {
		if got := isNameChars(s); got != want {
			t.Errorf("isNameChars(%q) = %v", s, got)
		}
	}
}
