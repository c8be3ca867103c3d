package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
)

// Checked wraps a backend with what every backend must do and no backend
// re-implements: a panic in an engine function (a write function, an
// UpdateTable function) becomes an error instead of a crash; the Change a
// write function returns is validated before the backend applies it; a
// TransactionCanceled error carries one reason per operation; ListTables,
// Query and Scan keep their ordering promises; and each method answers only
// the error kinds it declares. Its Capabilities are the backend's, each
// under the checks of its own contract. A violation is answered as a KindInternal
// error ("storage contract violation") and reported to onViolation, which
// tests make a test failure and the server logs as an internal error; it
// never crashes the process.
//
// The server wraps every backend it opens; backendtest wraps the backend
// under test, so the conformance suite checks the contract as well.
func Checked(b Backend, onViolation func(error)) Backend {
	if c, ok := b.(*checked); ok {
		b = c.b
	}
	if onViolation == nil {
		onViolation = func(error) {}
	}
	c := &checked{b: b, report: onViolation}
	c.caps = c.checkedCapabilities(b.Capabilities())
	return c
}

type checked struct {
	b      Backend
	report func(error)
	caps   Capabilities
}

// Declared error kinds per method, besides whatever a caller's function
// returned (passed through unchanged). KindInternal and KindUnavailable
// are always allowed.
var (
	kindsCatalogCreate = []Kind{KindTableExists}
	kindsTable         = []Kind{KindTableNotFound}
	kindsNone          = []Kind{}
	kindsWrite         = []Kind{KindTableNotFound, KindTableVersion, KindTransactionConflict, KindUnsupported}
	kindsTransact      = []Kind{KindTableNotFound, KindTableVersion, KindTransactionConflict, KindTransactionCanceled, KindUnsupported}
	kindsDropIndex     = []Kind{KindTableNotFound, KindTableVersion}
	kindsSchema        = []Kind{KindSchema}
)

// violation reports a broken promise and returns the error the caller gets.
func (c *checked) violation(method, format string, args ...any) error {
	err := Errorf(KindInternal, "storage contract violation (backend %s, %s): %s", c.b.Name(), method, fmt.Sprintf(format, args...))
	c.report(err)
	return err
}

// checkErr lets err through when its kind is declared for the method (or
// it is the caller's own function error, in fnErrs), else reports it.
func (c *checked) checkErr(method string, err error, declared []Kind, fnErrs *fnErrors) error {
	if err == nil {
		return nil
	}
	if fnErrs != nil && fnErrs.has(err) {
		return err
	}
	var se *Error
	if !errors.As(err, &se) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		return c.violation(method, "answered an error that is not a storage error: %v", err)
	}
	switch se.Kind {
	case KindInternal, KindUnavailable:
		return err
	}
	if !slices.Contains(declared, se.Kind) {
		return c.violation(method, "answered kind %q, which it does not declare: %v", se.Kind, err)
	}
	return err
}

// fnErrors records the errors the caller's functions returned, so that
// they pass through unchecked (they belong to the engine).
type fnErrors struct{ errs []error }

func (f *fnErrors) add(err error) {
	if err != nil {
		f.errs = append(f.errs, err)
	}
}

func (f *fnErrors) has(err error) bool {
	for _, e := range f.errs {
		if e == err {
			return true
		}
	}
	return false
}

// recovered runs fn and turns a panic into a KindInternal error.
func recovered[T any](what string, fn func() (T, error)) (out T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = Errorf(KindInternal, "%s panicked: %v", what, r)
		}
	}()
	return fn()
}

// ValidateChange checks a Change a write function returned.
func ValidateChange(ch Change) error {
	switch ch.Op {
	case Keep, Delete:
		if ch.Item != nil {
			return fmt.Errorf("op %d carries an item", ch.Op)
		}
		if len(ch.PutIndex) > 0 && ch.Op == Delete {
			return errors.New("a Delete puts index entries")
		}
		if ch.Op == Keep && (len(ch.PutIndex) > 0 || len(ch.DeleteIndex) > 0) {
			return errors.New("a Keep changes index entries")
		}
	case Put:
		if len(ch.Item) == 0 {
			return errors.New("a Put without an item")
		}
	default:
		return fmt.Errorf("unknown op %d", ch.Op)
	}
	for _, k := range ch.DeleteIndex {
		if k.Index == "" || len(k.PK) == 0 {
			return fmt.Errorf("an index key to delete without index name or partition key: %+v", k)
		}
	}
	for i, e := range ch.PutIndex {
		if e.Index == "" || len(e.PK) == 0 {
			return fmt.Errorf("an index entry without index name or partition key: %+v", e.IndexKey)
		}
		for _, o := range ch.PutIndex[:i] {
			if o.Index == e.Index && bytes.Equal(o.PK, e.PK) && bytes.Equal(o.SK, e.SK) {
				return fmt.Errorf("index entry %s %x/%x put twice", e.Index, e.PK, e.SK)
			}
		}
	}
	return nil
}

// checkedFn wraps a write function: panics become errors, its own errors
// are recorded as the caller's, and a malformed Change is refused before
// the backend applies it.
func (c *checked) checkedFn(method string, fn WriteFunc, fe *fnErrors) WriteFunc {
	return func(old []byte) (Change, error) {
		ch, err := recovered("the write function", func() (Change, error) { return fn(old) })
		if err != nil {
			if !IsKind(err, KindInternal) || !isPanic(err) {
				fe.add(err)
			}
			return Change{}, err
		}
		if verr := ValidateChange(ch); verr != nil {
			return Change{}, c.violation(method, "the write function returned a malformed change: %v", verr)
		}
		return ch, nil
	}
}

func isPanic(err error) bool {
	var se *Error
	return errors.As(err, &se) && se.Kind == KindInternal && bytes.Contains([]byte(se.Message), []byte("panicked"))
}

func (c *checked) Name() string { return c.b.Name() }

func (c *checked) CreateTable(ctx context.Context, p CreateTableParams) (*CreateTableResult, error) {
	r, err := c.b.CreateTable(ctx, p)
	return r, c.checkErr("CreateTable", err, kindsCatalogCreate, nil)
}

func (c *checked) GetTable(ctx context.Context, p GetTableParams) (*GetTableResult, error) {
	r, err := c.b.GetTable(ctx, p)
	return r, c.checkErr("GetTable", err, kindsTable, nil)
}

func (c *checked) ListTables(ctx context.Context, p ListTablesParams) (*ListTablesResult, error) {
	r, err := c.b.ListTables(ctx, p)
	if err != nil {
		return nil, c.checkErr("ListTables", err, kindsNone, nil)
	}
	if p.Limit > 0 && len(r.Names) > p.Limit {
		return nil, c.violation("ListTables", "%d names for a limit of %d", len(r.Names), p.Limit)
	}
	for i, n := range r.Names {
		if n <= p.StartAfter {
			return nil, c.violation("ListTables", "name %q is not after StartAfter %q", n, p.StartAfter)
		}
		if i > 0 && r.Names[i-1] >= n {
			return nil, c.violation("ListTables", "names not in ascending order: %q then %q", r.Names[i-1], n)
		}
	}
	return r, nil
}

func (c *checked) UpdateTable(ctx context.Context, p UpdateTableParams) (*UpdateTableResult, error) {
	fe := &fnErrors{}
	fn := p.Fn
	p.Fn = func(old *Table) ([]byte, error) {
		d, err := recovered("the table update function", func() ([]byte, error) { return fn(old) })
		if err != nil && !isPanic(err) {
			fe.add(err)
		}
		return d, err
	}
	r, err := c.b.UpdateTable(ctx, p)
	return r, c.checkErr("UpdateTable", err, kindsTable, fe)
}

func (c *checked) DeleteTable(ctx context.Context, p DeleteTableParams) (*DeleteTableResult, error) {
	r, err := c.b.DeleteTable(ctx, p)
	return r, c.checkErr("DeleteTable", err, kindsTable, nil)
}

func (c *checked) GetItem(ctx context.Context, p GetItemParams) (*GetItemResult, error) {
	r, err := c.b.GetItem(ctx, p)
	return r, c.checkErr("GetItem", err, kindsTable, nil)
}

func (c *checked) WriteItem(ctx context.Context, p WriteItemParams) (*WriteItemResult, error) {
	fe := &fnErrors{}
	p.Fn = c.checkedFn("WriteItem", p.Fn, fe)
	r, err := c.b.WriteItem(ctx, p)
	return r, c.checkErr("WriteItem", err, kindsWrite, fe)
}

func (c *checked) TransactWrite(ctx context.Context, p TransactWriteParams) (*TransactWriteResult, error) {
	fe := &fnErrors{}
	ops := make([]WriteItemParams, len(p.Ops))
	for i, op := range p.Ops {
		op.Fn = c.checkedFn("TransactWrite", op.Fn, fe)
		ops[i] = op
	}
	p.Ops = ops
	r, err := c.b.TransactWrite(ctx, p)
	if err == nil {
		if len(r.Results) != len(p.Ops) {
			return nil, c.violation("TransactWrite", "%d results for %d operations", len(r.Results), len(p.Ops))
		}
		return r, nil
	}
	var se *Error
	if errors.As(err, &se) && se.Kind == KindTransactionCanceled {
		if len(se.Reasons) != len(p.Ops) {
			return nil, c.violation("TransactWrite", "TransactionCanceled with %d reasons for %d operations", len(se.Reasons), len(p.Ops))
		}
		failed := false
		for _, r := range se.Reasons {
			failed = failed || r != nil
		}
		if !failed {
			return nil, c.violation("TransactWrite", "TransactionCanceled without a failed operation")
		}
		return nil, err
	}
	return r, c.checkErr("TransactWrite", err, kindsTransact, fe)
}

func (c *checked) TransactGet(ctx context.Context, p TransactGetParams) (*TransactGetResult, error) {
	r, err := c.b.TransactGet(ctx, p)
	if err == nil && len(r.Items) != len(p.Keys) {
		return nil, c.violation("TransactGet", "%d items for %d keys", len(r.Items), len(p.Keys))
	}
	return r, c.checkErr("TransactGet", err, []Kind{KindTableNotFound, KindTransactionConflict, KindUnsupported}, nil)
}

func (c *checked) Query(ctx context.Context, p QueryParams) (*QueryResult, error) {
	r, err := c.b.Query(ctx, p)
	if err != nil {
		return nil, c.checkErr("Query", err, kindsTable, nil)
	}
	if p.Limit > 0 && len(r.Rows) > p.Limit {
		return nil, c.violation("Query", "%d rows for a limit of %d", len(r.Rows), p.Limit)
	}
	index := p.Index != ""
	pos := func(row Row) [3][]byte { return [3][]byte{row.SK, row.BasePK, row.BaseSK} }
	cmp := func(a, b [3][]byte) int {
		if !index {
			return bytes.Compare(a[0], b[0])
		}
		for i := range a {
			if c := bytes.Compare(a[i], b[i]); c != 0 {
				return c
			}
		}
		return 0
	}
	dir := 1
	if !p.Forward {
		dir = -1
	}
	var prev *[3][]byte
	if p.After != nil {
		prev = &[3][]byte{p.After.SK, p.After.BasePK, p.After.BaseSK}
	}
	for _, row := range r.Rows {
		if !bytes.Equal(row.PK, p.PK) {
			return nil, c.violation("Query", "a row of partition %x in a query of %x", row.PK, p.PK)
		}
		if !inBound(row.SK, p.Lower, p.Upper) {
			return nil, c.violation("Query", "sort key %x outside the bounds", row.SK)
		}
		cur := pos(row)
		if prev != nil && dir*cmp(*prev, cur) >= 0 {
			return nil, c.violation("Query", "rows not strictly in sort key order (forward=%v): %x after %x", p.Forward, cur[0], (*prev)[0])
		}
		prev = &cur
	}
	return r, nil
}

func inBound(k []byte, lo, hi *Bound) bool {
	if lo != nil {
		if c := bytes.Compare(k, lo.Key); c < 0 || (c == 0 && !lo.Inclusive) {
			return false
		}
	}
	if hi != nil {
		if c := bytes.Compare(k, hi.Key); c > 0 || (c == 0 && !hi.Inclusive) {
			return false
		}
	}
	return true
}

// scanPos is a row's place in Scan order: (KeyHash(pk), pk, sk[, base pk,
// base sk]) for the index's or the table's keys.
func scanCompare(aPK, aSK, aBPK, aBSK, bPK, bSK, bBPK, bBSK []byte, index bool) int {
	ha, hb := KeyHash(aPK), KeyHash(bPK)
	if ha != hb {
		if ha < hb {
			return -1
		}
		return 1
	}
	if c := bytes.Compare(aPK, bPK); c != 0 {
		return c
	}
	if c := bytes.Compare(aSK, bSK); c != 0 {
		return c
	}
	if !index {
		return 0
	}
	if c := bytes.Compare(aBPK, bBPK); c != 0 {
		return c
	}
	return bytes.Compare(aBSK, bBSK)
}

func (c *checked) Scan(ctx context.Context, p ScanParams) (*ScanResult, error) {
	r, err := c.b.Scan(ctx, p)
	if err != nil {
		return nil, c.checkErr("Scan", err, kindsTable, nil)
	}
	if p.Limit > 0 && len(r.Rows) > p.Limit {
		return nil, c.violation("Scan", "%d rows for a limit of %d", len(r.Rows), p.Limit)
	}
	index := p.Index != ""
	lo, hi := SegmentRange(p.Segment, p.TotalSegments)
	var pPK, pSK, pBPK, pBSK []byte
	have := false
	if p.After != nil {
		pPK, pSK, pBPK, pBSK, have = p.After.PK, p.After.SK, p.After.BasePK, p.After.BaseSK, true
	}
	for _, row := range r.Rows {
		if h := KeyHash(row.PK); h < lo || h > hi {
			return nil, c.violation("Scan", "row %x outside segment %d of %d", row.PK, p.Segment, p.TotalSegments)
		}
		if have && scanCompare(pPK, pSK, pBPK, pBSK, row.PK, row.SK, row.BasePK, row.BaseSK, index) >= 0 {
			return nil, c.violation("Scan", "rows not strictly in scan order: %x/%x", row.PK, row.SK)
		}
		pPK, pSK, pBPK, pBSK, have = row.PK, row.SK, row.BasePK, row.BaseSK, true
	}
	return r, nil
}

func (c *checked) DropIndex(ctx context.Context, p DropIndexParams) (*DropIndexResult, error) {
	r, err := c.b.DropIndex(ctx, p)
	return r, c.checkErr("DropIndex", err, kindsDropIndex, nil)
}

func (c *checked) Ping(ctx context.Context) error {
	return c.checkErr("Ping", c.b.Ping(ctx), kindsSchema, nil)
}

func (c *checked) Close() error { return c.b.Close() }
