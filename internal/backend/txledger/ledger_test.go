package txledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	. "github.com/extenddb/extenddb/internal/backend/txledger"
	"github.com/extenddb/extenddb/internal/backend/txledger/ledgertest"
)

var (
	tA = backend.TableRef{Account: "acct", Name: "a", ID: 1, Version: 1}
	tB = backend.TableRef{Account: "acct", Name: "b", ID: 2, Version: 1}
)

func newStore() *memStore {
	m := newMemStore()
	m.tables[tA.ID] = tA.Version
	m.tables[tB.ID] = tB.Version
	return m
}

func num(b []byte) int {
	if b == nil {
		return 0
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		panic(err)
	}
	return n
}

func numItem(n int) []byte { return []byte(strconv.Itoa(n)) }

func put(item string) backend.WriteFunc {
	return func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte(item)}, nil }
}

var errNegative = errors.New("balance would go negative")

func add(d int) backend.WriteFunc {
	return func(old []byte) (backend.Change, error) {
		n := num(old) + d
		if n < 0 {
			return backend.Change{}, errNegative
		}
		return backend.Change{Op: backend.Put, Item: numItem(n)}, nil
	}
}

func key(t backend.TableRef, pk string) Key { return Key{Table: t, PK: []byte(pk)} }

func op(k Key, fn backend.WriteFunc) backend.WriteItemParams {
	return backend.WriteItemParams{Table: k.Table, PK: k.PK, SK: k.SK, Fn: fn}
}

func wantKind(t *testing.T, what string, err error, k backend.Kind) {
	t.Helper()
	if !backend.IsKind(err, k) {
		t.Fatalf("%s: got %v, want kind %v", what, err, k)
	}
}

// visible reads an item as a plain reader does.
func visible(t *testing.T, l *Ledger, s Items, k Key) []byte {
	t.Helper()
	rec, err := s.ReadItem(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.Visible(context.Background(), k, rec)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCodec(t *testing.T) {
	chs := []backend.Change{
		{},
		{Op: backend.Put, Item: []byte("x"), Log: []byte{}},
		{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "g", PK: []byte("p")}, {Index: "h", PK: []byte{}, SK: []byte("s")}},
			PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("q"), SK: []byte{0, 1}}, Item: []byte("it")}}, Log: []byte("log")},
	}
	for _, ch := range chs {
		got, err := DecodeChange(EncodeChange(ch))
		if err != nil {
			t.Fatal(err)
		}
		if got.Op != ch.Op || !bytes.Equal(got.Item, ch.Item) || (got.Item == nil) != (ch.Item == nil) || !bytes.Equal(got.Log, ch.Log) ||
			len(got.DeleteIndex) != len(ch.DeleteIndex) || len(got.PutIndex) != len(ch.PutIndex) {
			t.Fatalf("round trip: %+v -> %+v", ch, got)
		}
		for i := range ch.DeleteIndex {
			if got.DeleteIndex[i].Index != ch.DeleteIndex[i].Index || !bytes.Equal(got.DeleteIndex[i].SK, ch.DeleteIndex[i].SK) {
				t.Fatalf("delete index %d: %+v", i, got.DeleteIndex[i])
			}
		}
		if len(ch.PutIndex) > 0 && string(got.PutIndex[0].Item) != "it" {
			t.Fatalf("put index: %+v", got.PutIndex)
		}
		b := EncodeChange(ch)
		for i := range len(b) - 1 {
			if _, err := DecodeChange(b[:i]); err == nil {
				t.Fatalf("truncated change (%d of %d bytes) decoded", i, len(b))
			}
		}
	}
	keys := []Key{{Table: tA, PK: []byte("p")}, {Table: backend.TableRef{Account: "x", Name: "y", ID: -5, Version: 9}, PK: []byte{}, SK: []byte("s")}}
	got, err := DecodeKeys(EncodeKeys(keys))
	if err != nil || len(got) != 2 || got[1].Table != keys[1].Table || string(got[1].SK) != "s" || got[0].SK != nil {
		t.Fatalf("keys round trip: %+v %v", got, err)
	}
	if _, err := DecodeKeys([]byte{9}); err == nil {
		t.Fatal("bad format accepted")
	}
}

func TestTransactWrite(t *testing.T) {
	ctx := context.Background()
	m := newStore()
	l := New(m, Options{})
	a, b, c := key(tA, "a"), key(tB, "b"), key(tA, "c")
	if err := m.write(ctx, l, a, put("a0")); err != nil {
		t.Fatal(err)
	}
	res, err := l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		op(b, func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("b1"), PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("x")}, Item: []byte("b1")}}}, nil
		}),
		op(a, put("a1")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Results[0].Old) != "" || res.Results[0].Change.Op != backend.Put || string(res.Results[1].Old) != "a0" {
		t.Fatalf("results %+v", res.Results)
	}
	if string(visible(t, l, m, a)) != "a1" || string(visible(t, l, m, b)) != "b1" || string(m.indexes["g/x"]) != "b1" {
		t.Fatal("not applied")
	}
	if locks, txs := m.leftovers(); locks != 0 || txs != 0 {
		t.Fatalf("left %d locks, %d records", locks, txs)
	}

	// A failing function cancels everything; every function runs, the
	// reasons come in operation order.
	errX := errors.New("x")
	_, err = l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		op(a, put("a2")),
		op(c, func([]byte) (backend.Change, error) { return backend.Change{}, errX }),
		op(b, func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "g", PK: []byte("x")}}}, nil
		}),
		op(key(tB, "z"), add(-1)),
	}})
	wantKind(t, "canceled", err, backend.KindTransactionCanceled)
	var se *backend.Error
	errors.As(err, &se)
	if len(se.Reasons) != 4 || se.Reasons[0] != nil || se.Reasons[1] != errX || se.Reasons[2] != nil || se.Reasons[3] != errNegative {
		t.Fatalf("reasons %v", se.Reasons)
	}
	if string(visible(t, l, m, a)) != "a1" || string(visible(t, l, m, b)) != "b1" || visible(t, l, m, c) != nil || m.indexes["g/x"] == nil {
		t.Fatal("canceled transaction wrote")
	}
	if locks, txs := m.leftovers(); locks != 0 || txs != 0 {
		t.Fatalf("left %d locks, %d records", locks, txs)
	}

	// A stale description version refuses the whole transaction.
	m.tables[tB.ID] = 2
	_, err = l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(a, put("a3")), op(b, put("b3"))}})
	wantKind(t, "stale version", err, backend.KindTableVersion)
	if string(visible(t, l, m, a)) != "a1" || string(visible(t, l, m, b)) != "b1" {
		t.Fatal("refused transaction wrote")
	}
	m.tables[tB.ID] = 1

	// A table that is not live.
	_, err = l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(a, put("a3")), op(key(backend.TableRef{ID: 99}, "q"), put("q"))}})
	wantKind(t, "missing table", err, backend.KindTableNotFound)
	_, err = l.TransactGet(ctx, backend.TransactGetParams{Keys: []backend.GetItemParams{{Table: tA, PK: a.PK}, {Table: backend.TableRef{ID: 99}, PK: []byte("q")}}})
	wantKind(t, "TransactGet missing table", err, backend.KindTableNotFound)

	// One item twice.
	_, err = l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(a, put("x")), op(b, put("y")), op(a, put("z"))}})
	wantKind(t, "duplicate", err, backend.KindInternal)
	if locks, txs := m.leftovers(); locks != 0 || txs != 0 {
		t.Fatalf("left %d locks, %d records", locks, txs)
	}

	// A condition check (Keep) holds the item and changes nothing.
	res, err = l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		op(a, func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Keep}, nil }), op(c, put("c1")),
	}})
	if err != nil || string(visible(t, l, m, a)) != "a1" || string(visible(t, l, m, c)) != "c1" || string(res.Results[0].Old) != "a1" {
		t.Fatalf("check+put: %+v %v", res, err)
	}
	g, err := l.TransactGet(ctx, backend.TransactGetParams{Keys: []backend.GetItemParams{{Table: tA, PK: a.PK}, {Table: tB, PK: b.PK}, {Table: tA, PK: []byte("none")}}})
	if err != nil || string(g.Items[0]) != "a1" || string(g.Items[1]) != "b1" || g.Items[2] != nil {
		t.Fatalf("TransactGet %+v %v", g, err)
	}
}

// TestPlainWriteConflict: a plain write that meets a live transaction's
// lock waits at most MaxWait, then answers KindTransactionConflict.
func TestPlainWriteConflict(t *testing.T) {
	ctx := context.Background()
	m := newStore()
	k := key(tA, "k")
	l := New(m, Options{LockTimeout: time.Hour, MaxWait: 30 * time.Millisecond})
	id := NewTxID()
	if err := m.CreateTx(ctx, TxRecord{ID: id, State: Pending, Started: time.Now(), Items: []Key{k}}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := m.LockItem(ctx, k, Record{}, id, backend.Change{Op: backend.Delete}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	start := time.Now()
	err := m.write(ctx, l, k, put("w"))
	wantKind(t, "plain write on a live lock", err, backend.KindTransactionConflict)
	if d := time.Since(start); d < 30*time.Millisecond || d > 2*time.Second {
		t.Fatalf("waited %v", d)
	}
	// A write whose context ends before MaxWait stops waiting first, with
	// time left in its context, and answers the conflict too (not the
	// context's end: the wait ran out, the store did not fail).
	l = New(m, Options{LockTimeout: time.Hour, MaxWait: time.Hour})
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	err = m.write(cctx, l, k, put("w"))
	wantKind(t, "plain write on a live lock, short context", err, backend.KindTransactionConflict)
	if cctx.Err() != nil {
		t.Fatalf("the wait used the whole context (%v)", time.Since(start))
	}
}

// TestConformance runs the Store conformance suite on the in-process store.
func TestConformance(t *testing.T) {
	m := newStore()
	be := New(m, Options{})
	next := int64(10)
	ledgertest.Run(t, func(t *testing.T) ledgertest.Env {
		var refs [2]backend.TableRef
		m.mu.Lock()
		for i := range refs {
			next++
			refs[i] = backend.TableRef{Account: "acct", Name: "t" + strconv.FormatInt(next, 10), ID: next, Version: 1}
			m.tables[next] = 1
		}
		m.mu.Unlock()
		return memEnv(m, be, refs)
	})
}

// memEnv is the conformance Env over the in-process store: its own write
// (settling through backend) and plain read (Visible).
func memEnv(m *memStore, be *Ledger, refs [2]backend.TableRef) ledgertest.Env {
	return ledgertest.Env{
		Store:  m,
		Tables: refs,
		Write:  func(ctx context.Context, k Key, fn backend.WriteFunc) error { return m.write(ctx, be, k, fn) },
		Get: func(ctx context.Context, k Key) ([]byte, error) {
			rec, err := m.ReadItem(ctx, k)
			if err != nil {
				return nil, err
			}
			return be.Visible(ctx, k, rec)
		},
	}
}

// TestSlowStoreReaders runs the concurrent scenario on a store whose every
// call takes milliseconds, as a remote server's does on a loaded host: four
// coordinators keep some of the eight accounts locked nearly all the time,
// and the two TransactGet readers must still finish within MaxWait. (A
// reader that needed a pass meeting no lock at all would starve here, as
// on a loaded FerretDB; ADR 0041.)
func TestSlowStoreReaders(t *testing.T) {
	m := newMemStore()
	m.delay = 10 * time.Millisecond
	be := New(m, Options{})
	refs := [2]backend.TableRef{
		{Account: "acct", Name: "s1", ID: 101, Version: 1},
		{Account: "acct", Name: "s2", ID: 102, Version: 1},
	}
	for _, r := range refs {
		m.tables[r.ID] = r.Version
	}
	e := memEnv(m, be, refs)
	e.LockTimeout = 3 * time.Second // as on FerretDB (internal/backend/mongodb/ledger_test.go)
	e.Transfers = 25
	ledgertest.ConcurrentTransfers(t, e)
}

// finishingStore lets one committed transaction's coordinator finish
// (release its lock, applying the change, and delete its record) just
// before a reader's first ReadTx of it: the reader read the item locked,
// and finds the record gone.
type finishingStore struct {
	*memStore
	id   TxID
	k    Key
	done atomic.Bool
}

func (f *finishingStore) ReadTx(ctx context.Context, id TxID) (*TxRecord, error) {
	if id == f.id && f.done.CompareAndSwap(false, true) {
		rec, err := f.memStore.ReadItem(ctx, f.k)
		if err != nil {
			return nil, err
		}
		if ok, err := f.memStore.ReleaseItem(ctx, f.k, rec, true); err != nil || !ok {
			return nil, fmt.Errorf("release: %v %v", ok, err)
		}
		if err := f.memStore.DeleteTx(ctx, id); err != nil {
			return nil, err
		}
	}
	return f.memStore.ReadTx(ctx, id)
}

// lockPending leaves k held by a new PENDING transaction started at
// started, with a put of item: a coordinator that locked k and has not
// decided. It returns the transaction and the locked record.
func lockPending(t *testing.T, m *memStore, k Key, started time.Time, item string) (TxID, Record) {
	t.Helper()
	ctx := context.Background()
	id := NewTxID()
	if err := m.CreateTx(ctx, TxRecord{ID: id, State: Pending, Started: started, Items: []Key{k}}); err != nil {
		t.Fatal(err)
	}
	rec, err := m.ReadItem(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	locked, ok, err := m.LockItem(ctx, k, rec, id, backend.Change{Op: backend.Put, Item: []byte(item)})
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	return id, locked
}

// TestTransactGetRecordGone: a lock whose transaction record is missing
// means an aborted transaction only while the lock is still there; when
// the committed transaction's coordinator finished between the reader's
// read of the item and of the record, the reader must not answer the
// item as it was before the commit.
func TestTransactGetRecordGone(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 2} {
		m := newStore()
		b := New(m, Options{})
		k, o := key(tA, "k"), key(tB, "o")
		if err := m.write(ctx, b, k, put("old")); err != nil {
			t.Fatal(err)
		}
		if err := m.write(ctx, b, o, put("other")); err != nil {
			t.Fatal(err)
		}
		id, _ := lockPending(t, m, k, time.Now(), "new")
		if ok, err := m.SetTxState(ctx, id, Pending, Committed); err != nil || !ok {
			t.Fatalf("commit: %v %v", ok, err)
		}
		keys := []backend.GetItemParams{{Table: tA, PK: k.PK}, {Table: tB, PK: o.PK}}[:n]
		g, err := New(&finishingStore{memStore: m, id: id, k: k}, Options{}).TransactGet(ctx, backend.TransactGetParams{Keys: keys})
		if err != nil || string(g.Items[0]) != "new" || (n == 2 && string(g.Items[1]) != "other") {
			t.Fatalf("%d items: TransactGet %q %v, want the committed item", n, g, err)
		}
	}
}

// TestVisibleRecordGone: a plain read that met a committed transaction's
// lock and then found its record gone (the coordinator released the lock
// and deleted the record in between) must answer the committed item, not
// the one before the commit; a lock that outlives its record is an
// aborted transaction's, and the stored item is answered.
func TestVisibleRecordGone(t *testing.T) {
	ctx := context.Background()
	for _, committed := range []bool{true, false} {
		m := newStore()
		b := New(m, Options{})
		k := key(tA, "k")
		if err := m.write(ctx, b, k, put("old")); err != nil {
			t.Fatal(err)
		}
		id, locked := lockPending(t, m, k, time.Now(), "new")
		want := "new"
		var s Items = &finishingStore{memStore: m, id: id, k: k}
		if committed {
			if ok, err := m.SetTxState(ctx, id, Pending, Committed); err != nil || !ok {
				t.Fatalf("commit: %v %v", ok, err)
			}
		} else {
			// The record is gone and the lock stays: an aborted transaction
			// whose coordinator died before releasing.
			if err := m.DeleteTx(ctx, id); err != nil {
				t.Fatal(err)
			}
			want, s = "old", m
		}
		got, err := New(s, Options{}).Visible(ctx, k, locked)
		if err != nil || string(got) != want {
			t.Fatalf("committed=%v: Visible %q %v, want %q", committed, got, err, want)
		}
	}
}

// countCreates counts the transaction records created through it (one
// per attempt of a TransactWrite).
type countCreates struct {
	*memStore
	n atomic.Int64
}

func (c *countCreates) CreateTx(ctx context.Context, tx TxRecord) error {
	c.n.Add(1)
	return c.memStore.CreateTx(ctx, tx)
}

// TestWaitingCoordinatorStaysAlive: a coordinator holding a lock while it
// waits for another transaction, longer than LockTimeout, keeps its record
// touched, so a writer meeting its lock waits for it instead of aborting
// it for dead; it commits on its first attempt once the other transaction
// is gone (ADR 0042).
func TestWaitingCoordinatorStaysAlive(t *testing.T) {
	ctx := context.Background()
	m := newStore()
	opt := Options{LockTimeout: 200 * time.Millisecond, MaxWait: 5 * time.Second}
	a, b := key(tA, "a"), key(tA, "b")
	// The owner of b looks alive for 500 ms, then dead.
	lockPending(t, m, b, time.Now().Add(300*time.Millisecond), "owner")
	c := &countCreates{memStore: m}
	done := make(chan error, 1)
	go func() {
		_, err := New(c, opt).TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(a, put("t")), op(b, put("t"))}})
		done <- err
	}()
	// The coordinator locks a, then waits for b's owner; a writer of a
	// meets its lock once it is older than LockTimeout. The writer starts
	// only once a is locked: on a loaded machine the coordinator may not
	// have run yet after a fixed pause, and the writer would then write a
	// first and see it overwritten, failing the test for the wrong reason.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		// (A coordinator that already ended, on a starved poller, leaves
		// the writer after it: the checks below hold as well.)
		if locks, _ := m.leftovers(); locks == 2 || len(done) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the coordinator never locked a")
		}
	}
	time.Sleep(opt.LockTimeout + 50*time.Millisecond)
	if err := m.write(ctx, New(m, opt), a, put("w")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := c.n.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1: the waiting coordinator was taken for dead", n)
	}
	if got := visible(t, New(m, opt), m, a); string(got) != "w" {
		t.Fatalf("a = %q, want the writer's, written after the transaction", got)
	}
	if got := visible(t, New(m, opt), m, b); string(got) != "t" {
		t.Fatalf("b = %q, want the transaction's", got)
	}
}

// refuseRelease is a store whose ReleaseItem of one key does nothing (as
// when a dead writer's claim on the item's next version still holds it).
type refuseRelease struct {
	*memStore
	key Key
}

func (r refuseRelease) ReleaseItem(ctx context.Context, k Key, cur Record, commit bool) (bool, error) {
	if string(k.PK) == string(r.key.PK) && k.Table.ID == r.key.Table.ID {
		return false, nil
	}
	return r.memStore.ReleaseItem(ctx, k, cur, commit)
}

// TestFinishKeepsACommittedRecordWhileALockHolds: a committed
// transaction's record is removed only once every lock is released; a
// lock left without its record would read as an aborted transaction's and
// be rolled back, half undoing the transaction.
func TestFinishKeepsACommittedRecordWhileALockHolds(t *testing.T) {
	ctx := context.Background()
	m := newStore()
	a, b := key(tA, "a"), key(tB, "b")
	stuck := refuseRelease{m, b}
	if _, err := New(stuck, Options{}).TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(a, put("a1")), op(b, put("b1"))}}); err != nil {
		t.Fatal(err)
	}
	if _, txs := m.leftovers(); txs != 1 {
		t.Fatalf("%d records after a commit whose release of b failed, want 1", txs)
	}
	// The sweep meets the same refusal: the record must stay.
	if _, err := New(stuck, Options{}).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, txs := m.leftovers(); txs != 1 {
		t.Fatalf("%d records after a sweep that could not release b, want 1", txs)
	}
	// Once releases go through, the transaction is whole.
	l := New(m, Options{})
	if _, err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if string(visible(t, l, m, a)) != "a1" || string(visible(t, l, m, b)) != "b1" {
		t.Fatalf("a = %q, b = %q after the sweep, want a1, b1", visible(t, l, m, a), visible(t, l, m, b))
	}
	if locks, txs := m.leftovers(); locks != 0 || txs != 0 {
		t.Fatalf("left %d locks, %d records", locks, txs)
	}
}
