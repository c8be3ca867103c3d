package txledger

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

var (
	tA = storage.TableRef{Account: "acct", Name: "a", ID: 1, Version: 1}
	tB = storage.TableRef{Account: "acct", Name: "b", ID: 2, Version: 1}
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

func put(item string) storage.WriteFunc {
	return func([]byte) (storage.Change, error) { return storage.Change{Op: storage.Put, Item: []byte(item)}, nil }
}

var errNegative = errors.New("balance would go negative")

func add(d int) storage.WriteFunc {
	return func(old []byte) (storage.Change, error) {
		n := num(old) + d
		if n < 0 {
			return storage.Change{}, errNegative
		}
		return storage.Change{Op: storage.Put, Item: numItem(n)}, nil
	}
}

func key(t storage.TableRef, pk string) Key { return Key{Table: t, PK: []byte(pk)} }

func op(k Key, fn storage.WriteFunc) storage.WriteItemParams {
	return storage.WriteItemParams{Table: k.Table, PK: k.PK, SK: k.SK, Fn: fn}
}

func wantKind(t *testing.T, what string, err error, k storage.Kind) {
	t.Helper()
	if !storage.IsKind(err, k) {
		t.Fatalf("%s: got %v, want kind %v", what, err, k)
	}
}

// visible reads an item as a plain reader does.
func visible(t *testing.T, l *Ledger, s Store, k Key) []byte {
	t.Helper()
	rec, err := s.ReadItem(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.Visible(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCodec(t *testing.T) {
	chs := []storage.Change{
		{},
		{Op: storage.Put, Item: []byte("x"), Log: []byte{}},
		{Op: storage.Delete, DeleteIndex: []storage.IndexKey{{Index: "g", PK: []byte("p")}, {Index: "h", PK: []byte{}, SK: []byte("s")}},
			PutIndex: []storage.IndexEntry{{IndexKey: storage.IndexKey{Index: "g", PK: []byte("q"), SK: []byte{0, 1}}, Item: []byte("it")}}, Log: []byte("log")},
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
	keys := []Key{{Table: tA, PK: []byte("p")}, {Table: storage.TableRef{Account: "x", Name: "y", ID: -5, Version: 9}, PK: []byte{}, SK: []byte("s")}}
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
	res, err := l.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{
		op(b, func([]byte) (storage.Change, error) {
			return storage.Change{Op: storage.Put, Item: []byte("b1"), PutIndex: []storage.IndexEntry{{IndexKey: storage.IndexKey{Index: "g", PK: []byte("x")}, Item: []byte("b1")}}}, nil
		}),
		op(a, put("a1")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Results[0].Old) != "" || res.Results[0].Change.Op != storage.Put || string(res.Results[1].Old) != "a0" {
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
	_, err = l.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{
		op(a, put("a2")),
		op(c, func([]byte) (storage.Change, error) { return storage.Change{}, errX }),
		op(b, func([]byte) (storage.Change, error) {
			return storage.Change{Op: storage.Delete, DeleteIndex: []storage.IndexKey{{Index: "g", PK: []byte("x")}}}, nil
		}),
		op(key(tB, "z"), add(-1)),
	}})
	wantKind(t, "canceled", err, storage.KindTransactionCanceled)
	var se *storage.Error
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
	_, err = l.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{op(a, put("a3")), op(b, put("b3"))}})
	wantKind(t, "stale version", err, storage.KindTableVersion)
	if string(visible(t, l, m, a)) != "a1" || string(visible(t, l, m, b)) != "b1" {
		t.Fatal("refused transaction wrote")
	}
	m.tables[tB.ID] = 1

	// A table that is not live.
	_, err = l.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{op(a, put("a3")), op(key(storage.TableRef{ID: 99}, "q"), put("q"))}})
	wantKind(t, "missing table", err, storage.KindTableNotFound)
	_, err = l.TransactGet(ctx, storage.TransactGetParams{Keys: []storage.GetItemParams{{Table: tA, PK: a.PK}, {Table: storage.TableRef{ID: 99}, PK: []byte("q")}}})
	wantKind(t, "TransactGet missing table", err, storage.KindTableNotFound)

	// One item twice.
	_, err = l.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{op(a, put("x")), op(b, put("y")), op(a, put("z"))}})
	wantKind(t, "duplicate", err, storage.KindInternal)
	if locks, txs := m.leftovers(); locks != 0 || txs != 0 {
		t.Fatalf("left %d locks, %d records", locks, txs)
	}

	// A condition check (Keep) holds the item and changes nothing.
	res, err = l.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{
		op(a, func([]byte) (storage.Change, error) { return storage.Change{Op: storage.Keep}, nil }), op(c, put("c1")),
	}})
	if err != nil || string(visible(t, l, m, a)) != "a1" || string(visible(t, l, m, c)) != "c1" || string(res.Results[0].Old) != "a1" {
		t.Fatalf("check+put: %v", err)
	}
	g, err := l.TransactGet(ctx, storage.TransactGetParams{Keys: []storage.GetItemParams{{Table: tA, PK: a.PK}, {Table: tB, PK: b.PK}, {Table: tA, PK: []byte("none")}}})
	if err != nil || string(g.Items[0]) != "a1" || string(g.Items[1]) != "b1" || g.Items[2] != nil {
		t.Fatalf("TransactGet %q %v", g.Items, err)
	}
}

// pendingTx leaves a live transaction holding k, as a coordinator that
// has locked it and not decided yet.
func pendingTx(t *testing.T, m *memStore, k Key, started time.Time, ch storage.Change) TxID {
	t.Helper()
	ctx := context.Background()
	id := NewTxID()
	if err := m.CreateTx(ctx, TxRecord{ID: id, State: Pending, Started: started, Items: []Key{k}}); err != nil {
		t.Fatal(err)
	}
	rec, _ := m.ReadItem(ctx, k)
	if _, ok, err := m.LockItem(ctx, k, rec, id, ch); err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	return id
}

func TestLiveLock(t *testing.T) {
	ctx := context.Background()
	m := newStore()
	k := key(tA, "k")
	l := New(m, Options{LockTimeout: time.Hour, MaxWait: 30 * time.Millisecond, ReaderWait: 10 * time.Millisecond})
	if err := m.write(ctx, l, k, put("v0")); err != nil {
		t.Fatal(err)
	}
	id := pendingTx(t, m, k, time.Now(), storage.Change{Op: storage.Put, Item: []byte("v1")})

	// A plain reader sees the committed item and does not wait.
	if got := visible(t, l, m, k); string(got) != "v0" {
		t.Fatalf("visible %q", got)
	}
	// A writer waits, then answers conflict; so does a transaction.
	err := m.write(ctx, l, k, put("w"))
	wantKind(t, "plain write on a live lock", err, storage.KindTransactionConflict)
	_, err = l.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{op(key(tB, "o"), put("o")), op(k, put("w"))}})
	wantKind(t, "transaction on a live lock", err, storage.KindTransactionConflict)
	if got := visible(t, l, m, key(tB, "o")); got != nil {
		t.Fatalf("conflicted transaction wrote %q", got)
	}
	// Committing makes the after-image visible before any release.
	if ok, _ := m.SetTxState(ctx, id, Pending, Committed); !ok {
		t.Fatal("commit")
	}
	if got := visible(t, l, m, k); string(got) != "v1" {
		t.Fatalf("visible after commit %q", got)
	}
	// A writer rolls a committed lock forward.
	if err := m.write(ctx, l, k, func(old []byte) (storage.Change, error) {
		if string(old) != "v1" {
			return storage.Change{}, errors.New("write function saw " + string(old))
		}
		return storage.Change{Op: storage.Keep}, nil
	}); err != nil {
		t.Fatal(err)
	}
	rec, _ := m.ReadItem(ctx, k)
	if rec.Lock != nil || string(rec.Item) != "v1" {
		t.Fatalf("not rolled forward: %+v", rec)
	}

	// TransactGet aborts a live transaction after ReaderWait.
	id = pendingTx(t, m, k, time.Now(), storage.Change{Op: storage.Delete})
	g, err := l.TransactGet(ctx, storage.TransactGetParams{Keys: []storage.GetItemParams{{Table: tA, PK: k.PK}, {Table: tB, PK: []byte("o")}}})
	if err != nil || string(g.Items[0]) != "v1" {
		t.Fatalf("TransactGet %q %v", g.Items, err)
	}
	if tx, _ := m.ReadTx(ctx, id); tx == nil || tx.State != Aborted {
		t.Fatalf("live transaction not aborted by the reader: %+v", tx)
	}
	// Its coordinator cannot commit any more.
	if ok, _ := m.SetTxState(ctx, id, Pending, Committed); ok {
		t.Fatal("aborted transaction committed")
	}

	// A writer takes over the lock of a transaction older than LockTimeout.
	l2 := New(m, Options{LockTimeout: 10 * time.Millisecond, MaxWait: time.Second})
	pendingTx(t, m, k, time.Now().Add(-time.Second), storage.Change{Op: storage.Delete})
	if err := m.write(ctx, l2, k, put("v2")); err != nil {
		t.Fatal(err)
	}
	if got := visible(t, l, m, k); string(got) != "v2" {
		t.Fatalf("after take-over %q", got)
	}
	// A lock whose record is gone rolls back.
	id = pendingTx(t, m, k, time.Now(), storage.Change{Op: storage.Delete})
	_ = m.DeleteTx(ctx, id)
	if err := m.write(ctx, l, k, put("v3")); err != nil {
		t.Fatal(err)
	}
}

// TestCrashAtEveryStep kills the coordinator of a three-item transaction
// after each of its store calls (before the call, and after the call
// reached the store), then checks that readers see all or nothing, that a
// transaction reported successful is visible, and that the sweep leaves
// no lock and no record.
func TestCrashAtEveryStep(t *testing.T) {
	ctx := context.Background()
	a, b, c := key(tA, "a"), key(tB, "b"), key(tA, "c")
	before := [3]string{"100", "0", ""}
	after := [3]string{"90", "10", "new"}
	future := func() time.Time { return time.Now().Add(time.Hour) }
	for _, mid := range []bool{false, true} {
		completed := false
		for k := int64(0); !completed && k < 100; k++ {
			m := newStore()
			seed := New(m, Options{})
			_ = m.write(ctx, seed, a, put("100"))
			_ = m.write(ctx, seed, b, put("0"))
			cs := &crashStore{Store: m, after: k, mid: mid}
			coord := New(cs, Options{})
			_, err := coord.TransactWrite(ctx, storage.TransactWriteParams{Ops: []storage.WriteItemParams{
				op(a, add(-10)), op(b, add(10)), op(c, put("new")),
			}})
			completed = cs.n.Load() <= k
			// A reader that takes every PENDING transaction for dead.
			r := New(m, Options{Now: future})
			state := func(what string) [3]string {
				g, gerr := r.TransactGet(ctx, storage.TransactGetParams{Keys: []storage.GetItemParams{{Table: tA, PK: a.PK}, {Table: tB, PK: b.PK}, {Table: tA, PK: c.PK}}})
				if gerr != nil {
					t.Fatalf("mid=%v k=%d %s: TransactGet: %v", mid, k, what, gerr)
				}
				got := [3]string{string(g.Items[0]), string(g.Items[1]), string(g.Items[2])}
				if got != before && got != after {
					t.Fatalf("mid=%v k=%d %s: partial transaction %q", mid, k, what, got)
				}
				if err == nil && got != after {
					t.Fatalf("mid=%v k=%d %s: acknowledged transaction not visible: %q", mid, k, what, got)
				}
				return got
			}
			// Plain reads first (no settling), then a consistent read.
			plain := [3]string{string(visible(t, r, m, a)), string(visible(t, r, m, b)), string(visible(t, r, m, c))}
			if plain != before && plain != after {
				t.Fatalf("mid=%v k=%d: plain reads see a partial transaction %q", mid, k, plain)
			}
			s1 := state("before sweep")
			if plain != s1 {
				t.Fatalf("mid=%v k=%d: plain reads %q, TransactGet %q", mid, k, plain, s1)
			}
			if _, err := r.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			if locks, txs := m.leftovers(); locks != 0 || txs != 0 {
				t.Fatalf("mid=%v k=%d: after the sweep %d locks, %d records", mid, k, locks, txs)
			}
			if s2 := state("after sweep"); s2 != s1 {
				t.Fatalf("mid=%v k=%d: sweep changed %q to %q", mid, k, s1, s2)
			}
		}
		if !completed {
			t.Fatalf("mid=%v: the transaction never completed", mid)
		}
	}
}

// TestSweep: the sweep rolls a committed transaction forward, a dead
// pending one back, and leaves young ones alone.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	m := newStore()
	l := New(m, Options{LockTimeout: 50 * time.Millisecond})
	a, b := key(tA, "a"), key(tB, "b")
	idA := pendingTx(t, m, a, time.Now().Add(-time.Second), storage.Change{Op: storage.Put, Item: []byte("A")})
	_, _ = m.SetTxState(ctx, idA, Pending, Committed)
	pendingTx(t, m, b, time.Now().Add(-time.Second), storage.Change{Op: storage.Put, Item: []byte("B")})
	young := pendingTx(t, m, key(tA, "y"), time.Now(), storage.Change{Op: storage.Put, Item: []byte("Y")})
	n, err := l.Sweep(ctx)
	if err != nil || n != 2 {
		t.Fatalf("sweep %d %v", n, err)
	}
	if string(visible(t, l, m, a)) != "A" || visible(t, l, m, b) != nil {
		t.Fatal("sweep decided wrong")
	}
	if locks, txs := m.leftovers(); locks != 1 || txs != 1 {
		t.Fatalf("%d locks, %d records left, want the young one", locks, txs)
	}
	if tx, _ := m.ReadTx(ctx, young); tx == nil || tx.State != Pending {
		t.Fatal("young transaction touched")
	}
}

// TestConcurrentTransfers runs random transfers among accounts in two
// tables from several coordinators, some of which die at random steps,
// with consistent readers, plain writers and a sweeper running. Invariants:
// every TransactGet sees the total; the counter of committed transfers is
// at least the acknowledged ones and at most the attempted ones; at the end
// no lock or record remains.
func TestConcurrentTransfers(t *testing.T) {
	ctx := context.Background()
	m := newStore()
	opt := Options{LockTimeout: 20 * time.Millisecond, MaxWait: 5 * time.Second, ReaderWait: 2 * time.Millisecond}
	l := New(m, opt)
	const accounts, initial = 8, 100
	keys := make([]Key, accounts)
	for i := range keys {
		tb := tA
		if i%2 == 1 {
			tb = tB
		}
		keys[i] = key(tb, "acct"+strconv.Itoa(i))
		if err := m.write(ctx, l, keys[i], put(strconv.Itoa(initial))); err != nil {
			t.Fatal(err)
		}
	}
	counter := key(tA, "counter")
	gets := make([]storage.GetItemParams, accounts)
	for i, k := range keys {
		gets[i] = storage.GetItemParams{Table: k.Table, PK: k.PK}
	}
	var acked, attempted, crashed, canceled, reads atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	fail := func(format string, args ...any) {
		t.Errorf(format, args...)
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < 150; i++ {
				from, to := rng.IntN(accounts), rng.IntN(accounts)
				if from == to {
					continue
				}
				d := 1 + rng.IntN(30)
				ops := []storage.WriteItemParams{op(keys[from], add(-d)), op(keys[to], add(d)), op(counter, add(1))}
				if rng.IntN(3) == 0 {
					third := rng.IntN(accounts)
					if third != from && third != to {
						ops = append(ops, op(keys[third], add(0)))
					}
				}
				var coord *Ledger = l
				dies := rng.IntN(5) == 0
				if dies {
					coord = New(&crashStore{Store: m, after: int64(rng.IntN(14)), mid: rng.IntN(2) == 0}, opt)
				}
				attempted.Add(1)
				_, err := coord.TransactWrite(ctx, storage.TransactWriteParams{Ops: ops})
				switch {
				case err == nil:
					acked.Add(1)
				case dies:
					crashed.Add(1)
				case storage.IsKind(err, storage.KindTransactionCanceled):
					canceled.Add(1)
				default:
					fail("transfer: %v", err)
					return
				}
			}
		}()
	}
	var rg sync.WaitGroup
	for range 2 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				g, err := l.TransactGet(ctx, storage.TransactGetParams{Keys: gets})
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
	// A plain writer rewriting accounts with their own value, and a sweeper.
	rg.Add(2)
	go func() {
		defer rg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := m.write(ctx, l, keys[i%accounts], add(0)); err != nil && !storage.IsKind(err, storage.KindTransactionConflict) {
				fail("plain write: %v", err)
				return
			}
		}
	}()
	go func() {
		defer rg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := l.Sweep(ctx); err != nil {
				fail("sweep: %v", err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	rg.Wait()
	if t.Failed() {
		return
	}
	final := New(m, Options{Now: func() time.Time { return time.Now().Add(time.Hour) }})
	if _, err := final.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if locks, txs := m.leftovers(); locks != 0 || txs != 0 {
		t.Fatalf("%d locks, %d records left", locks, txs)
	}
	sum := 0
	for _, k := range keys {
		v := visible(t, final, m, k)
		if num(v) < 0 {
			t.Fatalf("negative balance %q", v)
		}
		sum += num(v)
	}
	if sum != accounts*initial {
		t.Fatalf("final sum %d", sum)
	}
	n := int64(num(visible(t, final, m, counter)))
	if n < acked.Load() || n > acked.Load()+crashed.Load() {
		t.Fatalf("counter %d: acknowledged %d, crashed %d", n, acked.Load(), crashed.Load())
	}
	if acked.Load() == 0 || reads.Load() == 0 {
		t.Fatalf("nothing ran: %d acknowledged, %d reads", acked.Load(), reads.Load())
	}
	t.Logf("%d attempted, %d acknowledged, %d canceled, %d coordinators died, %d consistent reads, counter %d",
		attempted.Load(), acked.Load(), canceled.Load(), crashed.Load(), reads.Load(), n)
}
