package backendtest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// testConditionalRace: 32 concurrent conditional puts on one key (Fn
// fails when an item exists); exactly one wins.
func testConditionalRace(e *env) {
	t := e.t
	ref := e.createTable("race")
	pk, sk := strKey("k"), strKey("s")
	const n = 32
	var wins atomic.Int32
	var winner atomic.Int32
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func(old []byte) (backend.Change, error) {
				if old != nil {
					return backend.Change{}, errCond
				}
				return backend.Change{Op: backend.Put, Item: []byte(fmt.Sprintf("w%d", i))}, nil
			}})
			errs[i] = err
			if err == nil {
				wins.Add(1)
				winner.Store(int32(i))
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d conditional puts won, want exactly 1 (errors %v)", wins.Load(), errs)
	}
	for i, err := range errs {
		if err != nil && !errors.Is(err, errCond) {
			t.Fatalf("loser %d: %v", i, err)
		}
	}
	if got := e.get(ref, pk, sk); string(got) != fmt.Sprintf("w%d", winner.Load()) {
		t.Fatalf("item %q, winner %d", got, winner.Load())
	}
}

// testIncrements: concurrent read-modify-write increments lose nothing.
func testIncrements(e *env) {
	t := e.t
	ref := e.createTable("incr")
	pk := strKey("counter")
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func(old []byte) (backend.Change, error) {
					n := 0
					if old != nil {
						n = itemNum(t, old)
					}
					return backend.Change{Op: backend.Put, Item: numItem(n + 1)}, nil
				}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := itemNum(t, e.get(ref, pk, nil)); got != workers*each {
		t.Fatalf("counter %d, want %d", got, workers*each)
	}
}

// testMixedOutcomes: concurrent writers on distinct keys, half of whose
// functions fail; each outcome is its own (a failing function in a group
// of writes affects no other write).
func testMixedOutcomes(e *env) {
	t := e.t
	ref := e.createTable("mixed")
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk := []byte(fmt.Sprintf("k%02d", i))
			_, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func(old []byte) (backend.Change, error) {
				if i%2 == 1 {
					return backend.Change{Op: backend.Put, Item: []byte("bad")}, errCond
				}
				return backend.Change{Op: backend.Put, Item: pk}, nil
			}})
			if (i%2 == 1) != errors.Is(err, errCond) || (i%2 == 0 && err != nil) {
				t.Errorf("write %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	for i := range n {
		pk := []byte(fmt.Sprintf("k%02d", i))
		got := e.get(ref, pk, nil)
		if i%2 == 0 && !bytes.Equal(got, pk) {
			t.Fatalf("k%02d = %q, want written", i, got)
		}
		if i%2 == 1 && got != nil {
			t.Fatalf("k%02d = %q, want nothing", i, got)
		}
	}
}

// testTransactWrite: all-or-nothing across two tables, Reasons in order.
func testTransactWrite(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	ta, tb := e.createTable("txa"), e.createTable("txb")
	a, bk := strKey("a"), strKey("b")
	e.put(ta, a, nil, []byte("a0"))

	res, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ta, PK: a, Fn: putFn([]byte("a1"))},
		{Table: tb, PK: bk, SK: strKey("s"), Fn: putFn([]byte("b1"), ixe("gsi", strKey("g"), nil, "pb1"))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 2 || string(res.Results[0].Old) != "a0" || res.Results[1].Old != nil || res.Results[1].Change.Op != backend.Put {
		t.Fatalf("results %+v", res.Results)
	}
	if string(e.get(ta, a, nil)) != "a1" || string(e.get(tb, bk, strKey("s"))) != "b1" {
		t.Fatal("transaction not applied")
	}

	errX, errY := errors.New("x failed"), errors.New("y failed")
	_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ta, PK: a, Fn: putFn([]byte("a2"))},
		{Table: tb, PK: strKey("new"), Fn: func([]byte) (backend.Change, error) { return backend.Change{}, errX }},
		{Table: tb, PK: bk, SK: strKey("s"), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "gsi", PK: strKey("g")}}}, nil
		}},
		{Table: ta, PK: strKey("c"), Fn: func([]byte) (backend.Change, error) { return backend.Change{}, errY }},
	}})
	wantKind(t, "failing transaction", err, backend.KindTransactionCanceled)
	var se *backend.Error
	errors.As(err, &se)
	if len(se.Reasons) != 4 || se.Reasons[0] != nil || !errors.Is(se.Reasons[1], errX) || se.Reasons[2] != nil || !errors.Is(se.Reasons[3], errY) {
		t.Fatalf("reasons %v", se.Reasons)
	}
	if string(e.get(ta, a, nil)) != "a1" || string(e.get(tb, bk, strKey("s"))) != "b1" || e.get(tb, strKey("new"), nil) != nil {
		t.Fatal("canceled transaction wrote something")
	}
	if rows := e.queryIx(tb, "gsi", strKey("g"), true, 10); len(rows) != 1 {
		t.Fatalf("canceled transaction changed the index: %d entries", len(rows))
	}

	// Later operations see earlier ones of the same transaction.
	_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ta, PK: strKey("seq"), Fn: putFn([]byte("one"))},
		{Table: tb, PK: strKey("seq"), Fn: putFn([]byte("two"))},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

// testTransactGetConsistent: transfers between two tables keep a sum;
// TransactGet never sees a half-applied transfer.
func testTransactGetConsistent(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	ta, tb := e.createTable("tga"), e.createTable("tgb")
	a, bk := strKey("a"), strKey("b")
	const total = 1000
	e.put(ta, a, nil, numItem(total))
	e.put(tb, bk, nil, numItem(0))
	add := func(d int) backend.WriteFunc {
		return func(old []byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: numItem(itemNum(t, old) + d)}, nil
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var transfers atomic.Int64
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := 1 + (i+w)%5
				_, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
					{Table: ta, PK: a, Fn: add(-d)}, {Table: tb, PK: bk, Fn: add(d)},
				}})
				if err != nil {
					t.Error(err)
					return
				}
				transfers.Add(1)
			}
		}()
	}
	reads := 0
	end := time.Now().Add(400 * time.Millisecond)
	for time.Now().Before(end) || transfers.Load() < 20 {
		res, err := b.TransactGet(ctx, backend.TransactGetParams{Keys: []backend.GetItemParams{{Table: ta, PK: a}, {Table: tb, PK: bk}}})
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
		if s := itemNum(t, res.Items[0]) + itemNum(t, res.Items[1]); s != total {
			close(stop)
			wg.Wait()
			t.Fatalf("TransactGet saw sum %d, want %d (after %d transfers)", s, total, transfers.Load())
		}
		reads++
		if time.Now().After(end.Add(10 * time.Second)) {
			break
		}
	}
	close(stop)
	wg.Wait()
	if transfers.Load() == 0 {
		t.Fatal("no transfer ran")
	}
	res, err := b.TransactGet(ctx, backend.TransactGetParams{Keys: []backend.GetItemParams{{Table: ta, PK: a}, {Table: tb, PK: strKey("missing")}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 2 || res.Items[1] != nil {
		t.Fatalf("TransactGet of a missing item: %q", res.Items)
	}
	t.Logf("%d consistent reads during %d transfers", reads, transfers.Load())
}

// testDeletedTable: item operations on a deleted table's ID answer
// KindTableNotFound, also after a table of the same name is created.
func testDeletedTable(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	ref := e.createTable("del")
	pk := strKey("k")
	e.write(ref, pk, nil, backend.Change{Op: backend.Put, Item: []byte("v"), PutIndex: []backend.IndexEntry{ixe("gsi", strKey("g"), nil, "p")}})
	if _, err := b.DeleteTable(ctx, backend.DeleteTableParams{Account: ref.Account, Name: ref.Name}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, old backend.TableRef) {
		t.Helper()
		_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: old, PK: pk, Fn: putFn([]byte("w"))})
		wantKind(t, when+": WriteItem", err, backend.KindTableNotFound)
		_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{{Table: old, PK: pk, Fn: putFn([]byte("w"))}}})
		wantKind(t, when+": TransactWrite", err, backend.KindTableNotFound)
		_, err = b.GetItem(ctx, backend.GetItemParams{Table: old, PK: pk})
		wantKind(t, when+": GetItem", err, backend.KindTableNotFound)
		_, err = b.Query(ctx, backend.QueryParams{Table: old, PK: pk, Forward: true, Limit: 1})
		wantKind(t, when+": Query", err, backend.KindTableNotFound)
		_, err = b.Scan(ctx, backend.ScanParams{Table: old, Limit: 1})
		wantKind(t, when+": Scan", err, backend.KindTableNotFound)
		_, err = b.TransactGet(ctx, backend.TransactGetParams{Keys: []backend.GetItemParams{{Table: old, PK: pk}}})
		wantKind(t, when+": TransactGet", err, backend.KindTableNotFound)
	}
	check("deleted", ref)
	again, err := b.CreateTable(ctx, backend.CreateTableParams{Account: ref.Account, Name: ref.Name, Desc: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	if again.Table.ID == ref.ID {
		t.Fatal("new incarnation reused the ID")
	}
	check("re-created", ref)
	nref := again.Table.Ref()
	if got := e.get(nref, pk, nil); got != nil {
		t.Fatal("new incarnation sees the old item")
	}
	if rows := e.scanAll(backend.ScanParams{Table: nref}, 10); len(rows) != 0 {
		t.Fatalf("new incarnation scans %d rows", len(rows))
	}
	if rows := e.scanAll(backend.ScanParams{Table: nref, Index: "gsi"}, 10); len(rows) != 0 {
		t.Fatalf("new incarnation has %d index entries", len(rows))
	}
	// A table that never existed.
	_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: backend.TableRef{Account: ref.Account, Name: "never", ID: 1 << 60}, PK: pk, Fn: putFn([]byte("w"))})
	wantKind(t, "never existed", err, backend.KindTableNotFound)
}

// TwoBackendsConditionalRace runs the 32-writer conditional-put race with
// the writers split between two backends opened on one database (as two
// servers would be): every round has exactly one winner, every loser sees
// the winner's item (the write function's own error), the item is the
// winner's, and the winner's index entry exists. Backends whose atomicity
// spans processes call it from their own tests.
func TwoBackendsConditionalRace(t *testing.T, b1, b2 backend.Backend, rounds int) {
	t.Helper()
	ctx := t.Context()
	cr, err := b1.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "race2", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	errExists := errors.New("item exists")
	for round := range rounds {
		pk := []byte(fmt.Sprintf("key-%d", round))
		var wins, winner atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 32)
		for i := range 32 {
			be := b1
			if i%2 == 1 {
				be = b2
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: []byte("s"), Fn: func(old []byte) (backend.Change, error) {
					if old != nil {
						return backend.Change{}, errExists
					}
					return backend.Change{Op: backend.Put, Item: []byte(fmt.Sprint(i)),
						PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("gp"), SK: pk}, Item: []byte(fmt.Sprint(i))}}}, nil
				}})
				errs[i] = err
				if err == nil {
					wins.Add(1)
					winner.Store(int32(i))
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners (errors %v)", round, wins.Load(), errs)
		}
		for i, err := range errs {
			if err != nil && !errors.Is(err, errExists) {
				t.Fatalf("round %d: loser %d: %v", round, i, err)
			}
		}
		g, err := b2.GetItem(ctx, backend.GetItemParams{Table: ref, PK: pk, SK: []byte("s")})
		if err != nil || string(g.Item) != fmt.Sprint(winner.Load()) {
			t.Fatalf("round %d: item %q (%v), winner %d", round, g.Item, err, winner.Load())
		}
	}
	q, err := b1.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: []byte("gp"), Forward: true, Limit: 100})
	if err != nil || len(q.Rows) != rounds {
		t.Fatalf("index entries: %d (%v), want %d", len(q.Rows), err, rounds)
	}
}

// testEventualReadsOwnWrites: a GetItem with Eventual may lag writes made
// through other servers, never a write this backend acknowledged before
// the read began. Per key, one writer puts increasing values and reads each
// back; readers racing it (eventual and consistent reads, which may fill a
// cache) must never return a value older than the last one acknowledged
// before their read began; a delete is seen by every later read. Each
// reader makes up to readsPerAck reads per acknowledged value, then waits
// for the next one: its reads start at the acknowledgement, so they are in
// flight across the writer's read-back and its next write, and the writer
// is not starved of CPU by readers re-reading a value nobody is changing
// (unpaced, 12 readers held SQLite's writer to ~30 ms a write under -race).
func testEventualReadsOwnWrites(e *env) {
	t := e.t
	ref := e.createTable("eventual")
	const keys, writes, readers, readsPerAck = 4, 120, 3, 8
	var wg sync.WaitGroup
	errs := make(chan error, keys*(readers+1))
	value := func(item []byte) int {
		if item == nil {
			return -1
		}
		return itemNumNoT(item)
	}
	for k := range keys {
		pk := strKey(fmt.Sprintf("k%d", k))
		var acked atomic.Int64 // last acknowledged value; -1: deleted
		var done, deleting atomic.Bool
		// tick is closed and replaced at each acknowledgement and at the
		// end; a reader takes it before loading the floor, so no
		// acknowledgement is missed.
		var tickMu sync.Mutex
		tick := make(chan struct{})
		nextTick := func() <-chan struct{} {
			tickMu.Lock()
			defer tickMu.Unlock()
			return tick
		}
		wake := func() {
			tickMu.Lock()
			close(tick)
			tick = make(chan struct{})
			tickMu.Unlock()
		}
		ack := func(v int64) {
			acked.Store(v)
			wake()
		}
		get := func(eventual bool) (int, error) {
			res, err := e.b.GetItem(e.ctx, backend.GetItemParams{Table: ref, PK: pk, Eventual: eventual})
			if err != nil {
				return 0, err
			}
			return value(res.Item), nil
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer wake() // after done: the waiting readers see it
			defer done.Store(true)
			for v := 1; v <= writes; v++ {
				item := numItem(v)
				if _, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func([]byte) (backend.Change, error) {
					return backend.Change{Op: backend.Put, Item: item}, nil
				}}); err != nil {
					errs <- err
					return
				}
				ack(int64(v))
				if got, err := get(true); err != nil || got != v {
					errs <- fmt.Errorf("key %d: eventual read after the acknowledged put of %d: %d, %v", k, v, got, err)
					return
				}
			}
			deleting.Store(true)
			if _, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func([]byte) (backend.Change, error) {
				return backend.Change{Op: backend.Delete}, nil
			}}); err != nil {
				errs <- err
				return
			}
			ack(-1)
			if got, err := get(true); err != nil || got != -1 {
				errs <- fmt.Errorf("key %d: eventual read after the acknowledged delete: %d, %v", k, got, err)
			}
		}()
		for r := range readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wait, sinceAck := nextTick(), 0
				for i := 0; !done.Load(); i++ {
					if sinceAck == readsPerAck {
						<-wait
						wait, sinceAck = nextTick(), 0
						continue
					}
					sinceAck++
					floor := acked.Load()
					got, err := get(r != 0 || i%2 == 0)
					if err != nil {
						errs <- err
						return
					}
					// Absent after a put was acknowledged: only the delete,
					// begun before this read ended.
					stale := floor == -1 && got != -1 ||
						floor > 0 && got == -1 && !deleting.Load() ||
						floor > 0 && got != -1 && int64(got) < floor
					if stale {
						errs <- fmt.Errorf("key %d: a read begun after value %d was acknowledged returned %d", k, floor, got)
						return
					}
				}
				if got, err := get(true); err != nil || got != -1 {
					errs <- fmt.Errorf("key %d: eventual read after the writer ended: %d, %v", k, got, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
