// Package ledgertest is the conformance suite of a txledger.Items: the
// same scenarios (all-or-nothing, live and dead lock holders, the
// recovery sweep, a coordinator killed after every one of its steps,
// concurrent transfers with dying coordinators) run against the
// in-process store of the txledger tests and against every backend that
// implements the Store (Cassandra, MongoDB), on the real server.
package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// Env is one backend's store with two live tables.
type Env struct {
	Store txledger.Items
	// Tables are two live tables (at their current description version).
	Tables [2]backend.TableRef
	// Write is the backend's own single-item write (WriteItem): it must
	// settle a locked item through its ledger (Ledger.Settle).
	Write func(ctx context.Context, k txledger.Key, fn backend.WriteFunc) error
	// Get is the backend's own plain read (GetItem): it must show the
	// committed item of a locked record (Ledger.Visible).
	Get func(ctx context.Context, k txledger.Key) ([]byte, error)
	// LockTimeout for the concurrent scenario's coordinators: long enough
	// for a live coordinator on this store to lock four items (default
	// 20 ms).
	LockTimeout time.Duration
	// Transfers per writer in the concurrent scenario (default 150).
	Transfers int
}

// Run runs every scenario; newEnv gives a fresh Env per scenario (new
// tables; the store may be shared).
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, e Env)
	}{
		{"StoreContract", testStoreContract},
		{"AllOrNothing", testAllOrNothing},
		{"LiveLock", testLiveLock},
		{"Sweep", testSweep},
		{"CrashAtEveryStep", testCrashAtEveryStep},
		{"ConcurrentTransfers", testConcurrentTransfers},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, newEnv(t)) })
	}
}

// ConcurrentTransfers runs the concurrent scenario alone (for a store
// configured differently from the one Run uses, e.g. a slow one).
func ConcurrentTransfers(t *testing.T, e Env) { testConcurrentTransfers(t, e) }

// future is a clock an hour ahead: every PENDING transaction looks dead.
func future() time.Time { return time.Now().Add(time.Hour) }

func num(b []byte) int {
	if b == nil {
		return 0
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		panic(fmt.Sprintf("ledgertest: item %q is not a number", b))
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

func keep([]byte) (backend.Change, error) { return backend.Change{Op: backend.Keep}, nil }

var unique atomic.Int64

// key is a fresh key of table t (keys never repeat within a process, so
// scenarios sharing tables do not meet).
func key(t backend.TableRef, name string) txledger.Key {
	return txledger.Key{Table: t, PK: []byte(fmt.Sprintf("%s-%d-%d", name, time.Now().UnixNano(), unique.Add(1)))}
}

func op(k txledger.Key, fn backend.WriteFunc) backend.WriteItemParams {
	return backend.WriteItemParams{Table: k.Table, PK: k.PK, SK: k.SK, Fn: fn}
}

func get(k txledger.Key) backend.GetItemParams {
	return backend.GetItemParams{Table: k.Table, PK: k.PK, SK: k.SK}
}

func wantKind(t *testing.T, what string, err error, k backend.Kind) {
	t.Helper()
	if !backend.IsKind(err, k) {
		t.Fatalf("%s: got %v, want kind %v", what, err, k)
	}
}

func mustGet(t *testing.T, e Env, k txledger.Key) []byte {
	t.Helper()
	v, err := e.Get(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustWrite(t *testing.T, e Env, k txledger.Key, fn backend.WriteFunc) {
	t.Helper()
	if err := e.Write(context.Background(), k, fn); err != nil {
		t.Fatal(err)
	}
}

// noLeftovers checks that no key is locked and no record of the
// scenario's tables remains.
func noLeftovers(t *testing.T, e Env, keys ...txledger.Key) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys {
		rec, err := e.Store.ReadItem(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Lock != nil {
			t.Fatalf("%s still locked by %s", k.PK, rec.Lock.Tx)
		}
	}
	txs, err := e.Store.ListTx(ctx, future(), 100000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		for _, k := range tx.Items {
			if k.Table.ID == e.Tables[0].ID || k.Table.ID == e.Tables[1].ID {
				t.Fatalf("transaction record %s (%v) left", tx.ID, tx.State)
			}
		}
	}
}

// pendingTx leaves a transaction holding k as a coordinator that has
// locked it and not decided yet.
func pendingTx(t *testing.T, s txledger.Items, k txledger.Key, started time.Time, ch backend.Change) txledger.TxID {
	t.Helper()
	ctx := context.Background()
	id := txledger.NewTxID()
	if err := s.CreateTx(ctx, txledger.TxRecord{ID: id, State: txledger.Pending, Started: started, Items: []txledger.Key{k}}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.ReadItem(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.LockItem(ctx, k, rec, id, ch); err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	return id
}

// testStoreContract checks the Store's compare-and-sets directly.
func testStoreContract(t *testing.T, e Env) {
	ctx := context.Background()
	s := e.Store
	k := key(e.Tables[0], "contract")
	rec, err := s.ReadItem(ctx, k)
	if err != nil || rec.Item != nil || rec.Lock != nil {
		t.Fatalf("absent item: %+v %v", rec, err)
	}
	mustWrite(t, e, k, put("v0"))
	r0, err := s.ReadItem(ctx, k)
	if err != nil || string(r0.Item) != "v0" || r0.Lock != nil {
		t.Fatalf("after write: %+v %v", r0, err)
	}
	if r0.Version == rec.Version {
		t.Fatal("a write did not change the version")
	}
	id := txledger.NewTxID()
	if err := s.CreateTx(ctx, txledger.TxRecord{ID: id, State: txledger.Pending, Started: time.Now(), Items: []txledger.Key{k}}); err != nil {
		t.Fatal(err)
	}
	// A lock conditioned on an old version is refused.
	if _, ok, err := s.LockItem(ctx, k, rec, id, backend.Change{Op: backend.Delete}); err != nil || ok {
		t.Fatalf("lock at a stale version: applied=%v %v", ok, err)
	}
	ch := backend.Change{Op: backend.Put, Item: []byte("v1"), Log: []byte("log")}
	l1, ok, err := s.LockItem(ctx, k, r0, id, ch)
	if err != nil || !ok || l1.Lock == nil || l1.Lock.Tx != id || l1.Version == r0.Version {
		t.Fatalf("lock: %+v %v %v", l1, ok, err)
	}
	got, err := s.ReadItem(ctx, k)
	if err != nil || got.Lock == nil || got.Lock.Tx != id || got.Version != l1.Version || string(got.Item) != "v0" ||
		got.Lock.Change.Op != backend.Put || string(got.Lock.Change.Item) != "v1" || string(got.Lock.Change.Log) != "log" {
		t.Fatalf("locked record: %+v %v", got, err)
	}
	// A second lock on the locked record is refused.
	if _, ok, err := s.LockItem(ctx, k, r0, txledger.NewTxID(), ch); err != nil || ok {
		t.Fatalf("second lock: applied=%v %v", ok, err)
	}
	// Release at a stale version is refused; at the current one applies.
	if ok, err := s.ReleaseItem(ctx, k, txledger.Record{Item: r0.Item, Version: r0.Version, Lock: got.Lock, Token: got.Token}, true); err != nil || ok {
		t.Fatalf("release at a stale version: applied=%v %v", ok, err)
	}
	if ok, err := s.ReleaseItem(ctx, k, got, true); err != nil || !ok {
		t.Fatalf("release: applied=%v %v", ok, err)
	}
	if ok, err := s.ReleaseItem(ctx, k, got, true); err != nil || ok {
		t.Fatalf("second release: applied=%v %v", ok, err)
	}
	r2, err := s.ReadItem(ctx, k)
	if err != nil || r2.Lock != nil || string(r2.Item) != "v1" || r2.Version == got.Version {
		t.Fatalf("released record: %+v %v", r2, err)
	}
	// A rollback leaves the item.
	l2, ok, err := s.LockItem(ctx, k, r2, id, backend.Change{Op: backend.Delete})
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	if ok, err := s.ReleaseItem(ctx, k, l2, false); err != nil || !ok {
		t.Fatalf("rollback: %v %v", ok, err)
	}
	if v := mustGet(t, e, k); string(v) != "v1" {
		t.Fatalf("after rollback %q", v)
	}
	// Transaction records. A PENDING one can be touched (its Started
	// moves), a decided or missing one cannot.
	at := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	if ok, err := s.TouchTx(ctx, id, at); err != nil || !ok {
		t.Fatalf("touch of a pending record: %v %v", ok, err)
	}
	if tx, err := s.ReadTx(ctx, id); err != nil || tx == nil || !tx.Started.Equal(at) {
		t.Fatalf("touched record: %+v %v, want started %v", tx, err, at)
	}
	if ok, err := s.SetTxState(ctx, id, txledger.Committed, txledger.Aborted); err != nil || ok {
		t.Fatalf("state CAS from the wrong state: %v %v", ok, err)
	}
	if ok, err := s.SetTxState(ctx, id, txledger.Pending, txledger.Committed); err != nil || !ok {
		t.Fatalf("commit: %v %v", ok, err)
	}
	if ok, err := s.SetTxState(ctx, id, txledger.Pending, txledger.Aborted); err != nil || ok {
		t.Fatalf("abort after commit: %v %v", ok, err)
	}
	if ok, err := s.TouchTx(ctx, id, at.Add(time.Second)); err != nil || ok {
		t.Fatalf("touch of a committed record: %v %v", ok, err)
	}
	tx, err := s.ReadTx(ctx, id)
	if err != nil || tx == nil || tx.State != txledger.Committed || len(tx.Items) != 1 || !bytes.Equal(tx.Items[0].PK, k.PK) || tx.Items[0].Table != k.Table {
		t.Fatalf("record: %+v %v", tx, err)
	}
	old, err := s.ListTx(ctx, time.Now().Add(-time.Hour), 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range old {
		if o.ID == id {
			t.Fatal("ListTx listed a young record")
		}
	}
	if err := s.DeleteTx(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteTx(ctx, id); err != nil {
		t.Fatalf("delete of an absent record: %v", err)
	}
	if tx, err := s.ReadTx(ctx, id); err != nil || tx != nil {
		t.Fatalf("deleted record: %+v %v", tx, err)
	}
	if ok, err := s.SetTxState(ctx, id, txledger.Pending, txledger.Aborted); err != nil || ok {
		t.Fatalf("state CAS on a missing record: %v %v", ok, err)
	}
	if ok, err := s.TouchTx(ctx, id, at); err != nil || ok {
		t.Fatalf("touch of a missing record: %v %v", ok, err)
	}
}

func testAllOrNothing(t *testing.T, e Env) {
	ctx := context.Background()
	l := txledger.New(e.Store, txledger.Options{})
	tA, tB := e.Tables[0], e.Tables[1]
	a, b, c := key(tA, "a"), key(tB, "b"), key(tA, "c")
	mustWrite(t, e, a, put("a0"))
	res, err := l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(b, put("b1")), op(a, put("a1"))}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Results[0].Old != nil || res.Results[0].Change.Op != backend.Put || string(res.Results[1].Old) != "a0" {
		t.Fatalf("results %+v", res.Results)
	}
	if string(mustGet(t, e, a)) != "a1" || string(mustGet(t, e, b)) != "b1" {
		t.Fatal("not applied")
	}
	errX := errors.New("x")
	_, err = l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		op(a, put("a2")),
		op(c, func([]byte) (backend.Change, error) { return backend.Change{}, errX }),
		op(b, func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Delete}, nil }),
		op(key(tB, "z"), add(-1)),
	}})
	wantKind(t, "canceled", err, backend.KindTransactionCanceled)
	var se *backend.Error
	errors.As(err, &se)
	if len(se.Reasons) != 4 || se.Reasons[0] != nil || se.Reasons[1] != errX || se.Reasons[2] != nil || se.Reasons[3] != errNegative {
		t.Fatalf("reasons %v", se.Reasons)
	}
	if string(mustGet(t, e, a)) != "a1" || string(mustGet(t, e, b)) != "b1" || mustGet(t, e, c) != nil {
		t.Fatal("canceled transaction wrote")
	}
	_, err = l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(a, put("x")), op(b, put("y")), op(a, put("z"))}})
	wantKind(t, "one item twice", err, backend.KindInternal)
	res, err = l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(a, keep), op(c, put("c1")), op(b, func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Delete}, nil
	})}})
	if err != nil || string(mustGet(t, e, a)) != "a1" || string(mustGet(t, e, c)) != "c1" || mustGet(t, e, b) != nil || string(res.Results[0].Old) != "a1" {
		t.Fatalf("check+put+delete: %+v %v", res, err)
	}
	g, err := l.TransactGet(ctx, backend.TransactGetParams{Keys: []backend.GetItemParams{get(a), get(b), get(c), get(key(tB, "none"))}})
	if err != nil || string(g.Items[0]) != "a1" || g.Items[1] != nil || string(g.Items[2]) != "c1" || g.Items[3] != nil {
		t.Fatalf("TransactGet %+v %v", g, err)
	}
	noLeftovers(t, e, a, b, c)
}

func testLiveLock(t *testing.T, e Env) {
	ctx := context.Background()
	s := e.Store
	tA, tB := e.Tables[0], e.Tables[1]
	k, o := key(tA, "k"), key(tB, "o")
	l := txledger.New(s, txledger.Options{LockTimeout: time.Hour, MaxWait: 50 * time.Millisecond})
	mustWrite(t, e, k, put("v0"))
	id := pendingTx(t, s, k, time.Now(), backend.Change{Op: backend.Put, Item: []byte("v1")})
	if got := mustGet(t, e, k); string(got) != "v0" {
		t.Fatalf("plain read of a live transaction's item: %q", got)
	}
	_, err := l.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{op(o, put("o")), op(k, put("w"))}})
	wantKind(t, "transaction on a live lock", err, backend.KindTransactionConflict)
	if got := mustGet(t, e, o); got != nil {
		t.Fatalf("conflicted transaction wrote %q", got)
	}
	if ok, err := s.SetTxState(ctx, id, txledger.Pending, txledger.Committed); err != nil || !ok {
		t.Fatalf("commit: %v %v", ok, err)
	}
	if got := mustGet(t, e, k); string(got) != "v1" {
		t.Fatalf("plain read after the commit, before the release: %q", got)
	}
	// The backend's write rolls the committed lock forward.
	mustWrite(t, e, k, func(old []byte) (backend.Change, error) {
		if string(old) != "v1" {
			return backend.Change{}, fmt.Errorf("write function saw %q", old)
		}
		return backend.Change{Op: backend.Put, Item: []byte("v2")}, nil
	})
	// TransactGet never waits for a live transaction: it answers the
	// committed items (a ledger whose MaxWait is an hour: a reader that
	// waited would hang here), and leaves the transaction PENDING, free
	// to commit. Once it has committed, TransactGet
	// answers its after-image before anyone has released its lock.
	id = pendingTx(t, s, k, time.Now(), backend.Change{Op: backend.Delete})
	r := txledger.New(s, txledger.Options{LockTimeout: time.Hour, MaxWait: time.Hour})
	gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	g, err := r.TransactGet(gctx, backend.TransactGetParams{Keys: []backend.GetItemParams{get(k), get(o)}})
	if err != nil || string(g.Items[0]) != "v2" || g.Items[1] != nil {
		t.Fatalf("TransactGet beside a live transaction: %+v %v", g, err)
	}
	if tx, err := s.ReadTx(ctx, id); err != nil || tx == nil || tx.State != txledger.Pending {
		t.Fatalf("the reader disturbed a live transaction: %+v %v", tx, err)
	}
	if ok, err := s.SetTxState(ctx, id, txledger.Pending, txledger.Committed); err != nil || !ok {
		t.Fatalf("commit after the read: %v %v", ok, err)
	}
	g, err = r.TransactGet(gctx, backend.TransactGetParams{Keys: []backend.GetItemParams{get(k), get(o)}})
	if err != nil || g.Items[0] != nil || g.Items[1] != nil {
		t.Fatalf("TransactGet of a committed, unreleased delete: %+v %v", g, err)
	}
	if rec, err := s.ReadItem(ctx, k); err != nil || rec.Lock == nil || rec.Lock.Tx != id {
		t.Fatalf("the reader released a lock: %+v %v", rec, err)
	}
	mustWrite(t, e, k, func(old []byte) (backend.Change, error) {
		if old != nil {
			return backend.Change{}, fmt.Errorf("write after a committed delete saw %q", old)
		}
		return backend.Change{Op: backend.Put, Item: []byte("v2")}, nil
	})
	_ = s.DeleteTx(ctx, id)
	// The backend's write takes over a transaction older than its
	// LockTimeout, and rolls back a lock whose record is gone.
	pendingTx(t, s, k, time.Now().Add(-time.Hour), backend.Change{Op: backend.Delete})
	mustWrite(t, e, k, put("v3"))
	id = pendingTx(t, s, k, time.Now(), backend.Change{Op: backend.Delete})
	_ = s.DeleteTx(ctx, id)
	mustWrite(t, e, k, put("v4"))
	if got := mustGet(t, e, k); string(got) != "v4" {
		t.Fatalf("after take-over %q", got)
	}
	if _, err := txledger.New(s, txledger.Options{Now: future}).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	noLeftovers(t, e, k, o)
}

func testSweep(t *testing.T, e Env) {
	ctx := context.Background()
	s := e.Store
	l := txledger.New(s, txledger.Options{LockTimeout: time.Minute})
	a, b, y := key(e.Tables[0], "a"), key(e.Tables[1], "b"), key(e.Tables[0], "y")
	idA := pendingTx(t, s, a, time.Now().Add(-time.Hour), backend.Change{Op: backend.Put, Item: []byte("A")})
	if ok, err := s.SetTxState(ctx, idA, txledger.Pending, txledger.Committed); err != nil || !ok {
		t.Fatal("commit", err)
	}
	idB := pendingTx(t, s, b, time.Now().Add(-time.Hour), backend.Change{Op: backend.Put, Item: []byte("B")})
	young := pendingTx(t, s, y, time.Now(), backend.Change{Op: backend.Put, Item: []byte("Y")})
	// A young decided transaction (its coordinator died between the
	// decision and the releases) is finished at once, whatever its age.
	c := key(e.Tables[1], "c")
	idC := pendingTx(t, s, c, time.Now(), backend.Change{Op: backend.Put, Item: []byte("C")})
	if ok, err := s.SetTxState(ctx, idC, txledger.Pending, txledger.Committed); err != nil || !ok {
		t.Fatal("commit", err)
	}
	if _, err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if string(mustGet(t, e, a)) != "A" || mustGet(t, e, b) != nil || string(mustGet(t, e, c)) != "C" {
		t.Fatal("the sweep decided wrong")
	}
	if rec, _ := s.ReadItem(ctx, c); rec.Lock != nil {
		t.Fatal("a young committed transaction's lock is left")
	}
	for _, id := range []txledger.TxID{idA, idB, idC} {
		if tx, err := s.ReadTx(ctx, id); err != nil || tx != nil {
			t.Fatalf("swept record left: %+v %v", tx, err)
		}
	}
	if tx, err := s.ReadTx(ctx, young); err != nil || tx == nil || tx.State != txledger.Pending {
		t.Fatalf("young transaction touched: %+v %v", tx, err)
	}
	if rec, _ := s.ReadItem(ctx, y); rec.Lock == nil {
		t.Fatal("young transaction's lock released")
	}
	if _, err := txledger.New(s, txledger.Options{Now: future}).Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	noLeftovers(t, e, a, b, c, y)
}

// testCrashAtEveryStep kills the coordinator of a three-item transaction
// after each of its store calls (before the call reaches the store, and
// after), then checks that plain and consistent readers see all or
// nothing, that an acknowledged transaction is visible, and that the
// sweep leaves no lock or record and changes nothing visible.
func testCrashAtEveryStep(t *testing.T, e Env) {
	ctx := context.Background()
	before := [3]string{"100", "0", ""}
	after := [3]string{"90", "10", "new"}
	r := txledger.New(e.Store, txledger.Options{Now: future})
	for _, mid := range []bool{false, true} {
		completed := false
		for step := int64(0); !completed && step < 200; step++ {
			a, b, c := key(e.Tables[0], "a"), key(e.Tables[1], "b"), key(e.Tables[0], "c")
			mustWrite(t, e, a, put("100"))
			mustWrite(t, e, b, put("0"))
			cs := &CrashStore{Items: e.Store, After: step, Mid: mid}
			_, err := txledger.New(cs, txledger.Options{}).TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
				op(a, add(-10)), op(b, add(10)), op(c, put("new")),
			}})
			completed = cs.Calls() <= step
			if completed && err != nil {
				t.Fatalf("mid=%v step %d: uncrashed transaction failed: %v", mid, step, err)
			}
			plain := [3]string{string(mustGet(t, e, a)), string(mustGet(t, e, b)), string(mustGet(t, e, c))}
			if plain != before && plain != after {
				t.Fatalf("mid=%v step %d: plain reads see a partial transaction %q", mid, step, plain)
			}
			if err == nil && plain != after {
				t.Fatalf("mid=%v step %d: acknowledged transaction not visible: %q", mid, step, plain)
			}
			g, gerr := r.TransactGet(ctx, backend.TransactGetParams{Keys: []backend.GetItemParams{get(a), get(b), get(c)}})
			if gerr != nil {
				t.Fatalf("mid=%v step %d: TransactGet: %v", mid, step, gerr)
			}
			if got := [3]string{string(g.Items[0]), string(g.Items[1]), string(g.Items[2])}; got != plain {
				t.Fatalf("mid=%v step %d: plain reads %q, TransactGet %q", mid, step, plain, got)
			}
			if _, err := r.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			noLeftovers(t, e, a, b, c)
			if got := [3]string{string(mustGet(t, e, a)), string(mustGet(t, e, b)), string(mustGet(t, e, c))}; got != plain {
				t.Fatalf("mid=%v step %d: the sweep changed %q to %q", mid, step, plain, got)
			}
		}
		if !completed {
			t.Fatalf("mid=%v: the transaction never completed", mid)
		}
	}
}

// testConcurrentTransfers runs random transfers among accounts in both
// tables from four coordinators, a fifth of which die at a random step,
// beside two consistent readers, a plain writer and a sweeper. Every
// TransactGet sees the total; a counter item incremented by every
// transfer ends between the acknowledged and the attempted transfers; no
// lock or record remains.
func testConcurrentTransfers(t *testing.T, e Env) {
	ctx := context.Background()
	lt := e.LockTimeout
	if lt <= 0 {
		lt = 20 * time.Millisecond
	}
	transfers := e.Transfers
	if transfers <= 0 {
		transfers = 150
	}
	opt := txledger.Options{LockTimeout: lt, MaxWait: 10 * time.Second}
	l := txledger.New(e.Store, opt)
	const accounts, initial = 8, 100
	keys := make([]txledger.Key, accounts)
	gets := make([]backend.GetItemParams, accounts)
	for i := range keys {
		keys[i] = key(e.Tables[i%2], "acct"+strconv.Itoa(i))
		gets[i] = get(keys[i])
		mustWrite(t, e, keys[i], put(strconv.Itoa(initial)))
	}
	counter := key(e.Tables[0], "counter")
	var acked, crashed, canceled, reads atomic.Int64
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		failed.Store(true)
		t.Errorf(format, args...)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for i := 0; i < transfers && !failed.Load(); i++ {
				dies := rng.IntN(5) == 0
				err := transfer(ctx, rng, e, l, opt, keys, counter, dies)
				switch {
				case errors.Is(err, errNoTransfer):
				case err == nil:
					acked.Add(1)
				case dies:
					crashed.Add(1)
				case backend.IsKind(err, backend.KindTransactionCanceled):
					canceled.Add(1)
				default:
					fail("transfer: %v", err)
				}
			}
		}()
	}
	stop := make(chan struct{})
	var rg sync.WaitGroup
	for range 2 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				// A pause between reads (a tenth of the lock timeout): a
				// TransactGet never waits for a lock, so back-to-back
				// readers would otherwise take most of a slow server's
				// capacity from the writers.
				select {
				case <-stop:
					return
				case <-time.After(lt / 10):
				}
				g, err := l.TransactGet(ctx, backend.TransactGetParams{Keys: gets})
				if err != nil {
					fail("TransactGet: %v", err)
					return
				}
				sum := 0
				for _, it := range g.Items {
					sum += num(it)
				}
				if sum != accounts*initial {
					fail("TransactGet saw sum %d, want %d", sum, accounts*initial)
					return
				}
				reads.Add(1)
			}
		}()
	}
	rg.Add(2)
	go func() { defer rg.Done(); plainWrites(ctx, e, keys, stop, fail) }()
	go func() { defer rg.Done(); sweeps(ctx, l, 5*lt, stop, fail) }()
	wg.Wait()
	close(stop)
	rg.Wait()
	if t.Failed() {
		return
	}
	checkTransfers(t, e, keys, counter, accounts*initial, acked.Load(), crashed.Load(), canceled.Load(), reads.Load())
}

// plainWrites writes the keys in turn, one every millisecond, outside
// any transaction, until stop is closed; a conflict with a transaction
// is an answer, any other error fails the test.
func plainWrites(ctx context.Context, e Env, keys []txledger.Key, stop <-chan struct{}, fail func(string, ...any)) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(time.Millisecond):
		}
		err := e.Write(ctx, keys[i%len(keys)], add(0))
		if err != nil && !backend.IsKind(err, backend.KindTransactionConflict) {
			fail("plain write: %v", err)
			return
		}
	}
}

// sweeps runs the ledger's sweep every interval until stop is closed.
func sweeps(ctx context.Context, l *txledger.Ledger, every time.Duration, stop <-chan struct{}, fail func(string, ...any)) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(every):
		}
		if _, err := l.Sweep(ctx); err != nil {
			fail("sweep: %v", err)
			return
		}
	}
}

// checkTransfers: after a sweep that finishes every transaction, no lock
// or record is left, no balance is negative, the balances sum to total,
// and the counter counts every acknowledged transfer and at most the
// transfers whose coordinator died besides.
func checkTransfers(t *testing.T, e Env, keys []txledger.Key, counter txledger.Key, total int, acked, crashed, canceled, reads int64) {
	if _, err := txledger.New(e.Store, txledger.Options{Now: future}).Sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	noLeftovers(t, e, append(keys, counter)...)
	sum := 0
	for _, k := range keys {
		v := num(mustGet(t, e, k))
		if v < 0 {
			t.Fatalf("negative balance %d", v)
		}
		sum += v
	}
	if sum != total {
		t.Fatalf("final sum %d, want %d", sum, total)
	}
	n := int64(num(mustGet(t, e, counter)))
	if n < acked || n > acked+crashed {
		t.Fatalf("counter %d: %d acknowledged, %d coordinators died", n, acked, crashed)
	}
	if acked == 0 || reads == 0 {
		t.Fatalf("nothing ran: %d acknowledged, %d reads", acked, reads)
	}
	t.Logf("%d acknowledged, %d canceled, %d coordinators died, %d consistent reads, counter %d",
		acked, canceled, crashed, reads, n)
}

// errNoTransfer: the random transfer drew one account twice and was not
// made.
var errNoTransfer = errors.New("no transfer")

// transfer moves a random amount between two random accounts of keys and
// counts it on counter, sometimes locking a third account (Keep), in one
// ledger transaction; when dies, its coordinator crashes at a random step.
func transfer(ctx context.Context, rng *rand.Rand, e Env, l *txledger.Ledger, opt txledger.Options, keys []txledger.Key, counter txledger.Key, dies bool) error {
	accounts := len(keys)
	from, to := rng.IntN(accounts), rng.IntN(accounts)
	if from == to {
		return errNoTransfer
	}
	d := 1 + rng.IntN(30)
	ops := []backend.WriteItemParams{op(keys[from], add(-d)), op(keys[to], add(d)), op(counter, add(1))}
	if third := rng.IntN(accounts); rng.IntN(3) == 0 && third != from && third != to {
		ops = append(ops, op(keys[third], keep))
	}
	coord := l
	if dies {
		coord = txledger.New(&CrashStore{Items: e.Store, After: int64(rng.IntN(16)), Mid: rng.IntN(2) == 0}, opt)
	}
	_, err := coord.TransactWrite(ctx, backend.TransactWriteParams{Ops: ops})
	return err
}
