package backend

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fakeBackend answers what a test sets; its WriteItem runs the write
// function like a real backend would.
type fakeBackend struct {
	names   []string
	err     error
	rows    []Row
	reasons []error
	applied *Change
	caps    Capabilities
}

func (f *fakeBackend) Name() string { return "fake" }
func (f *fakeBackend) CreateTable(context.Context, CreateTableParams) (*CreateTableResult, error) {
	return &CreateTableResult{}, f.err
}
func (f *fakeBackend) GetTable(context.Context, GetTableParams) (*GetTableResult, error) {
	return &GetTableResult{}, f.err
}
func (f *fakeBackend) ListTables(context.Context, ListTablesParams) (*ListTablesResult, error) {
	return &ListTablesResult{Names: f.names}, f.err
}
func (f *fakeBackend) UpdateTable(_ context.Context, p UpdateTableParams) (*UpdateTableResult, error) {
	if _, err := p.Fn(&Table{}); err != nil {
		return nil, err
	}
	return &UpdateTableResult{}, f.err
}
func (f *fakeBackend) DeleteTable(context.Context, DeleteTableParams) (*DeleteTableResult, error) {
	return &DeleteTableResult{}, f.err
}
func (f *fakeBackend) GetItem(context.Context, GetItemParams) (*GetItemResult, error) {
	if f.err != nil {
		return nil, f.err
	}
	return &GetItemResult{}, nil
}
func (f *fakeBackend) WriteItem(_ context.Context, p WriteItemParams) (*WriteItemResult, error) {
	ch, err := p.Fn(nil)
	if err != nil {
		return nil, err
	}
	f.applied = &ch
	return &WriteItemResult{Change: ch}, f.err
}
func (f *fakeBackend) TransactWrite(_ context.Context, p TransactWriteParams) (*TransactWriteResult, error) {
	if f.reasons != nil {
		return nil, &Error{Kind: KindTransactionCanceled, Reasons: f.reasons}
	}
	return &TransactWriteResult{Results: make([]WriteItemResult, len(p.Ops))}, f.err
}
func (f *fakeBackend) TransactGet(_ context.Context, p TransactGetParams) (*TransactGetResult, error) {
	return &TransactGetResult{Items: make([][]byte, len(p.Keys))}, f.err
}
func (f *fakeBackend) Query(context.Context, QueryParams) (*QueryResult, error) {
	return &QueryResult{Rows: f.rows}, f.err
}
func (f *fakeBackend) Scan(context.Context, ScanParams) (*ScanResult, error) {
	return &ScanResult{Rows: f.rows}, f.err
}
func (f *fakeBackend) DropIndex(context.Context, DropIndexParams) (*DropIndexResult, error) {
	return &DropIndexResult{}, f.err
}
func (f *fakeBackend) Capabilities() Capabilities { return f.caps }
func (f *fakeBackend) Ping(context.Context) error { return f.err }
func (f *fakeBackend) Close() error               { return nil }

func checkedFake(t *testing.T, f *fakeBackend) (Backend, *[]error) {
	var got []error
	return Checked(f, func(err error) { got = append(got, err) }), &got
}

func wantViolation(t *testing.T, what string, err error, got *[]error, substr string) {
	t.Helper()
	if len(*got) != 1 || !strings.Contains((*got)[0].Error(), substr) {
		t.Fatalf("%s: violations %v, want one containing %q", what, *got, substr)
	}
	if !IsKind(err, KindInternal) || !strings.Contains(err.Error(), "storage contract violation") {
		t.Fatalf("%s: caller got %v, want an internal contract violation", what, err)
	}
	*got = nil
}

func TestCheckedCatchesUndeclaredKind(t *testing.T) {
	f := &fakeBackend{err: Errorf(KindTableExists, "x")}
	b, got := checkedFake(t, f)
	_, err := b.GetItem(t.Context(), GetItemParams{})
	wantViolation(t, "GetItem answering TableExists", err, got, `kind "table exists"`)
	f.err = errors.New("a bare driver error")
	_, err = b.Query(t.Context(), QueryParams{})
	wantViolation(t, "Query answering a non-storage error", err, got, "not a storage error")
	// Declared kinds pass untouched.
	f.err = Errorf(KindTableNotFound, "gone")
	if _, err := b.GetItem(t.Context(), GetItemParams{}); !IsKind(err, KindTableNotFound) || len(*got) != 0 {
		t.Fatalf("declared kind: %v, violations %v", err, *got)
	}
}

func TestCheckedCatchesUnsortedListTables(t *testing.T) {
	f := &fakeBackend{names: []string{"b", "a"}}
	b, got := checkedFake(t, f)
	_, err := b.ListTables(t.Context(), ListTablesParams{})
	wantViolation(t, "unsorted ListTables", err, got, "ascending")
	f.names = []string{"a", "b"}
	_, err = b.ListTables(t.Context(), ListTablesParams{StartAfter: "a"})
	wantViolation(t, "ListTables not after StartAfter", err, got, "StartAfter")
	if _, err := b.ListTables(t.Context(), ListTablesParams{}); err != nil || len(*got) != 0 {
		t.Fatalf("sorted ListTables: %v, %v", err, *got)
	}
}

func TestCheckedCatchesMalformedChange(t *testing.T) {
	f := &fakeBackend{}
	b, got := checkedFake(t, f)
	for _, c := range []struct {
		ch   Change
		want string
	}{
		{Change{Op: Put}, "without an item"},
		{Change{Op: Delete, Item: []byte("x")}, "carries an item"},
		{Change{Op: 9}, "unknown op"},
		{Change{Op: Put, Item: []byte("x"), PutIndex: []IndexEntry{{IndexKey: IndexKey{Index: "g"}}}}, "without index name or partition key"},
		{Change{Op: Put, Item: []byte("x"), PutIndex: []IndexEntry{
			{IndexKey: IndexKey{Index: "g", PK: []byte("p")}, Item: []byte("i")},
			{IndexKey: IndexKey{Index: "g", PK: []byte("p")}, Item: []byte("i")}}}, "put twice"},
	} {
		f.applied = nil
		_, err := b.WriteItem(t.Context(), WriteItemParams{Fn: func([]byte) (Change, error) { return c.ch, nil }})
		wantViolation(t, c.want, err, got, c.want)
		if f.applied != nil {
			t.Fatalf("%s: the backend applied the malformed change", c.want)
		}
	}
}

func TestCheckedRecoversPanicsAndPassesFnErrors(t *testing.T) {
	b, got := checkedFake(t, &fakeBackend{})
	_, err := b.WriteItem(t.Context(), WriteItemParams{Fn: func([]byte) (Change, error) { panic("boom") }})
	if !IsKind(err, KindInternal) || !strings.Contains(err.Error(), "panicked: boom") {
		t.Fatalf("panic: %v", err)
	}
	_, err = b.UpdateTable(t.Context(), UpdateTableParams{Fn: func(*Table) ([]byte, error) { panic("bang") }})
	if !IsKind(err, KindInternal) || !strings.Contains(err.Error(), "panicked: bang") {
		t.Fatalf("panic in UpdateTable: %v", err)
	}
	// The engine's own errors come back unchanged, whatever their type.
	mine := errors.New("condition failed")
	if _, err := b.WriteItem(t.Context(), WriteItemParams{Fn: func([]byte) (Change, error) { return Change{}, mine }}); err != mine {
		t.Fatalf("fn error: %v", err)
	}
	if len(*got) != 0 {
		t.Fatalf("violations %v", *got)
	}
}

func TestCheckedTransactionReasons(t *testing.T) {
	f := &fakeBackend{reasons: []error{nil}}
	b, got := checkedFake(t, f)
	ops := []WriteItemParams{{Fn: nil}, {Fn: nil}}
	_, err := b.TransactWrite(t.Context(), TransactWriteParams{Ops: ops})
	wantViolation(t, "reasons count", err, got, "1 reasons for 2 operations")
	f.reasons = []error{nil, nil}
	_, err = b.TransactWrite(t.Context(), TransactWriteParams{Ops: ops})
	wantViolation(t, "no failed reason", err, got, "without a failed operation")
	f.reasons = []error{nil, errors.New("condition")}
	if _, err := b.TransactWrite(t.Context(), TransactWriteParams{Ops: ops}); !IsKind(err, KindTransactionCanceled) || len(*got) != 0 {
		t.Fatalf("well-formed cancel: %v %v", err, *got)
	}
}

func TestCheckedOrdering(t *testing.T) {
	f := &fakeBackend{rows: []Row{{PK: []byte("p"), SK: []byte("b")}, {PK: []byte("p"), SK: []byte("a")}}}
	b, got := checkedFake(t, f)
	_, err := b.Query(t.Context(), QueryParams{PK: []byte("p"), Forward: true})
	wantViolation(t, "query order", err, got, "sort key order")
	if _, err := b.Query(t.Context(), QueryParams{PK: []byte("p"), Forward: false}); err != nil || len(*got) != 0 {
		t.Fatalf("descending query: %v %v", err, *got)
	}
	_, err = b.Query(t.Context(), QueryParams{PK: []byte("p"), Forward: false, Upper: &Bound{Key: []byte("a")}})
	wantViolation(t, "query bound", err, got, "outside the bounds")
	_, err = b.Query(t.Context(), QueryParams{PK: []byte("p"), Forward: false, Limit: 1})
	wantViolation(t, "query limit", err, got, "limit")
	// Scan: rows of one partition out of order, and a repeat of the cursor.
	f.rows = []Row{{PK: []byte("p"), SK: []byte("b")}, {PK: []byte("p"), SK: []byte("a")}}
	_, err = b.Scan(t.Context(), ScanParams{})
	wantViolation(t, "scan order", err, got, "scan order")
	f.rows = []Row{{PK: []byte("p"), SK: []byte("a")}}
	_, err = b.Scan(t.Context(), ScanParams{After: &Cursor{PK: []byte("p"), SK: []byte("a")}})
	wantViolation(t, "scan cursor", err, got, "scan order")
}
