package backendtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
)

// Table statistics kept with every write (backend.TableCounter, ADR
// 0053). After every kind of write the maintained figures equal a full
// count of the table (TableStats with the backend's default size, the
// byte length: the suite opens backends without an item size function)
// and the figures the test expects. A backend without the capability is
// skipped loudly.

func (e *env) counter() backend.TableCounter {
	e.t.Helper()
	tc := e.b.Capabilities().Counts
	if tc == nil {
		msg := fmt.Sprintf("capability absent: backend %s does not implement backend.TableCounter; maintained statistics NOT exercised", e.b.Name())
		fmt.Println(msg)
		e.t.Skip(msg)
	}
	return tc
}

// wantCounts checks that the maintained figures are known, equal a full
// count, and (when want is not nil) equal want.
func wantCounts(ctx context.Context, t *testing.T, b backend.Backend, what string, ref backend.TableRef, want *backend.TableStatsResult) {
	t.Helper()
	got, err := b.Capabilities().Counts.Counts(ctx, backend.CountsParams{Table: ref})
	if err != nil {
		t.Fatalf("%s: Counts: %v", what, err)
	}
	if !got.Counted {
		t.Fatalf("%s: figures unknown (Counted false): %+v", what, got.Stats)
	}
	full, err := b.TableStats(ctx, backend.TableStatsParams{Table: ref})
	if err != nil {
		t.Fatalf("%s: TableStats: %v", what, err)
	}
	if !sameStats(&got.Stats, full) {
		t.Fatalf("%s: maintained %s, counted %s", what, fmtStats(&got.Stats), fmtStats(full))
	}
	if want != nil && !sameStats(&got.Stats, want) {
		t.Fatalf("%s: maintained %s, want %s", what, fmtStats(&got.Stats), fmtStats(want))
	}
}

func sameStats(a, b *backend.TableStatsResult) bool {
	if a.ItemCount != b.ItemCount || a.SizeBytes != b.SizeBytes || len(a.Indexes) != len(b.Indexes) {
		return false
	}
	return len(a.Indexes) == 0 || reflect.DeepEqual(a.Indexes, b.Indexes)
}

func fmtStats(s *backend.TableStatsResult) string {
	return fmt.Sprintf("%d items, %d bytes, indexes %v", s.ItemCount, s.SizeBytes, s.Indexes)
}

func st(items, bytes int64, ix map[string]backend.IndexStats) *backend.TableStatsResult {
	return &backend.TableStatsResult{ItemCount: items, SizeBytes: bytes, Indexes: ix}
}

// testCounts: puts (creating, overwriting, blind), deletes (of present
// and absent items), keeps, failed conditions, moved and rewritten index
// entries, transactions (applied and canceled), DropIndex, and a table
// deleted and created again under its name.
func testCounts(e *env) {
	t, b, ctx := e.t, e.b, e.ctx
	e.counter()
	ref := e.createTable("counts")
	other := e.createTable("countsother")
	check := func(what string, want *backend.TableStatsResult) {
		t.Helper()
		wantCounts(ctx, t, b, what, ref, want)
	}
	check("new table", st(0, 0, nil))

	// 10 items "item0".."item9" (5 bytes); the even ones in "a" (entry
	// "ax", 2 bytes), every one in "b" ("bxyz", 4 bytes).
	for i := range 10 {
		pk := strKey(fmt.Sprintf("k%d", i))
		entries := []backend.IndexEntry{ixe("b", strKey("g"), pk, "bxyz")}
		if i%2 == 0 {
			entries = append(entries, ixe("a", strKey(fmt.Sprintf("g%d", i)), nil, "ax"))
		}
		e.write(ref, pk, nil, backend.Change{Op: backend.Put, Item: []byte(fmt.Sprintf("item%d", i)), PutIndex: entries})
	}
	e.write(other, strKey("k0"), nil, backend.Change{Op: backend.Put, Item: []byte("elsewhere"),
		PutIndex: []backend.IndexEntry{ixe("a", strKey("g"), nil, "zz")}})
	a5b10 := map[string]backend.IndexStats{"a": {ItemCount: 5, SizeBytes: 10}, "b": {ItemCount: 10, SizeBytes: 40}}
	check("after puts", st(10, 50, a5b10))
	wantCounts(ctx, t, b, "the other table", other, st(1, 9, map[string]backend.IndexStats{"a": {ItemCount: 1, SizeBytes: 2}}))

	// A failed condition, a Keep and a delete of an absent item change
	// nothing.
	k0, k1 := strKey("k0"), strKey("k1")
	_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: k0, Fn: func([]byte) (backend.Change, error) { return backend.Change{}, errCond }})
	if !errors.Is(err, errCond) {
		t.Fatalf("failed condition: %v", err)
	}
	e.write(ref, k0, nil, backend.Change{Op: backend.Keep})
	e.write(ref, strKey("absent"), nil, backend.Change{Op: backend.Delete})
	check("after a failed condition, a keep, a delete of an absent item", st(10, 50, a5b10))

	// Overwrite k0 with a longer item whose "a" entry moves and whose "b"
	// entry is rewritten longer; delete k1 and its "b" entry.
	e.write(ref, k0, nil, backend.Change{Op: backend.Put, Item: []byte("item0-longer"),
		DeleteIndex: []backend.IndexKey{{Index: "a", PK: strKey("g0")}, {Index: "b", PK: strKey("g"), SK: k0}},
		PutIndex:    []backend.IndexEntry{ixe("a", strKey("moved"), nil, "axx"), ixe("b", strKey("g"), k0, "bxyzw")}})
	e.write(ref, k1, nil, backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "b", PK: strKey("g"), SK: k1}}})
	check("after overwrite and delete", st(9, 52, map[string]backend.IndexStats{
		"a": {ItemCount: 5, SizeBytes: 11}, "b": {ItemCount: 9, SizeBytes: 37}}))

	// Blind puts: one creating an item, one replacing one.
	for _, k := range []string{"blind", "k2"} {
		_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: strKey(k), Blind: true,
			Fn: func([]byte) (backend.Change, error) {
				return backend.Change{Op: backend.Put, Item: []byte("b123")}, nil
			}})
		if err != nil {
			t.Fatalf("blind put %s: %v", k, err)
		}
	}
	check("after blind puts", st(10, 52+4+4-5, map[string]backend.IndexStats{
		"a": {ItemCount: 5, SizeBytes: 11}, "b": {ItemCount: 9, SizeBytes: 37}}))

	// A transaction: applied (a put, a delete, an update of the same
	// table, and a put in the other table), then canceled.
	_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ref, PK: strKey("t1"), Fn: putFn([]byte("tx-1"))},
		{Table: ref, PK: strKey("k3"), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "b", PK: strKey("g"), SK: strKey("k3")}}}, nil
		}},
		{Table: ref, PK: strKey("k4"), Fn: putFn([]byte("item4++"))},
		{Table: other, PK: strKey("t2"), Fn: putFn([]byte("tx-2"))},
	}})
	if err != nil {
		t.Fatalf("TransactWrite: %v", err)
	}
	after := st(10, 55+4-5+2, map[string]backend.IndexStats{"a": {ItemCount: 5, SizeBytes: 11}, "b": {ItemCount: 8, SizeBytes: 33}})
	check("after a transaction", after)
	wantCounts(ctx, t, b, "the other table after a transaction", other, st(2, 13, map[string]backend.IndexStats{"a": {ItemCount: 1, SizeBytes: 2}}))
	_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ref, PK: strKey("t3"), Fn: putFn([]byte("tx-3"), ixe("b", strKey("g"), strKey("t3"), "b"))},
		{Table: ref, PK: strKey("k5"), Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Delete}, nil }},
		{Table: ref, PK: strKey("k6"), Fn: func([]byte) (backend.Change, error) { return backend.Change{}, errCond }},
	}})
	wantKind(t, "canceled transaction", err, backend.KindTransactionCanceled)
	check("after a canceled transaction", after)

	// Recount (the repair) finds the same figures.
	rc, err := e.counter().Recount(ctx, backend.CountsParams{Table: ref})
	if err != nil {
		t.Fatalf("Recount: %v", err)
	}
	if !rc.Counted || !sameStats(&rc.Stats, after) {
		t.Fatalf("Recount answered %v %s, want %s", rc.Counted, fmtStats(&rc.Stats), fmtStats(after))
	}
	check("after Recount", after)

	if _, err := b.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: "b"}); err != nil {
		t.Fatal(err)
	}
	check("after DropIndex", st(10, 56, map[string]backend.IndexStats{"a": {ItemCount: 5, SizeBytes: 11}}))

	// The same name deleted and created again starts from zero; the old
	// incarnation is gone.
	if _, err := b.DeleteTable(ctx, backend.DeleteTableParams{Account: ref.Account, Name: ref.Name}); err != nil {
		t.Fatal(err)
	}
	_, err = e.counter().Counts(ctx, backend.CountsParams{Table: ref})
	wantKind(t, "Counts of a deleted table", err, backend.KindTableNotFound)
	again := e.createTable("counts")
	wantCounts(ctx, t, b, "the table created again", again, st(0, 0, nil))
	e.write(again, k0, nil, backend.Change{Op: backend.Put, Item: []byte("new"), PutIndex: []backend.IndexEntry{ixe("b", strKey("g"), k0, "b")}})
	wantCounts(ctx, t, b, "the table created again, one put", again, st(1, 3, map[string]backend.IndexStats{"b": {ItemCount: 1, SizeBytes: 1}}))
}

// testCountsConcurrent: writers racing on overlapping keys (puts of
// varying sizes with index entries, deletes, transactions, failed
// conditions) leave figures equal to a full count.
func testCountsConcurrent(e *env) {
	e.counter()
	ref := e.createTable("countsrace")
	CountsRace(e.ctx, e.t, []backend.Backend{e.b}, ref, 200)
	wantCounts(e.ctx, e.t, e.b, "after concurrent writers", ref, nil)
}

// CountsRace runs 4 writers per backend handle on ref, n operations each,
// over 40 keys.
func CountsRace(ctx context.Context, t *testing.T, handles []backend.Backend, ref backend.TableRef, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(handles))
	for hi, b := range handles {
		for w := range 4 {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 7))
				for range n {
					k := strKey(fmt.Sprintf("r%02d", r.IntN(40)))
					g := strKey(fmt.Sprintf("g%d", r.IntN(3)))
					size := 1 + r.IntN(30)
					var err error
					switch x := r.IntN(10); {
					case x < 5:
						item := make([]byte, size)
						for i := range item {
							item[i] = 'a' + byte(i%26)
						}
						_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: k, Fn: func(old []byte) (backend.Change, error) {
							ch := backend.Change{Op: backend.Put, Item: item, PutIndex: []backend.IndexEntry{
								{IndexKey: backend.IndexKey{Index: "x", PK: g, SK: k}, Item: item[:1+size/2]}}}
							if old != nil {
								ch.DeleteIndex = oldKeys(old, k)
							}
							return ch, nil
						}})
					case x < 7:
						_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: k, Fn: func(old []byte) (backend.Change, error) {
							return backend.Change{Op: backend.Delete, DeleteIndex: oldKeys(old, k)}, nil
						}})
					case x < 8:
						_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: k, Fn: func([]byte) (backend.Change, error) {
							return backend.Change{}, errCond
						}})
						if errors.Is(err, errCond) {
							err = nil
						}
					default:
						k2 := strKey(fmt.Sprintf("r%02d", 40+r.IntN(10)))
						_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
							{Table: ref, PK: k, Fn: func(old []byte) (backend.Change, error) {
								return backend.Change{Op: backend.Delete, DeleteIndex: oldKeys(old, k)}, nil
							}},
							{Table: ref, PK: k2, Fn: putFn([]byte("tx"))},
						}})
						if backend.IsKind(err, backend.KindTransactionCanceled) || backend.IsKind(err, backend.KindTransactionConflict) {
							err = nil // lost a race: nothing written
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}(uint64(hi*10 + w))
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent writer: %v", err)
	}
}

// oldKeys are the index keys of an item CountsRace wrote: its "x" entry
// in the partition its size chose is not known from the bytes, so every
// partition's key is deleted (deleting an absent entry changes nothing).
func oldKeys(old, k []byte) []backend.IndexKey {
	if old == nil {
		return nil
	}
	out := make([]backend.IndexKey, 3)
	for i := range out {
		out[i] = backend.IndexKey{Index: "x", PK: strKey(fmt.Sprintf("g%d", i)), SK: k}
	}
	return out
}

// testCountsBulk: a bulk load leaves the figures unknown; a recount makes
// them exact again.
func testCountsBulk(e *env) {
	tc := e.counter()
	bl := e.bulkLoader()
	ref := e.createTable("countsbulk")
	e.put(ref, strKey("before"), nil, []byte("before"))
	if err := bl.BulkLoad(e.ctx, backend.BulkLoadParams{Table: ref, Items: bulkItems(0, 20, "t")}); err != nil {
		e.t.Fatal(err)
	}
	res, err := tc.Counts(e.ctx, backend.CountsParams{Table: ref})
	if err != nil {
		e.t.Fatal(err)
	}
	if res.Counted {
		e.t.Fatalf("figures known after a bulk load: %s", fmtStats(&res.Stats))
	}
	if _, err := tc.Recount(e.ctx, backend.CountsParams{Table: ref}); err != nil {
		e.t.Fatal(err)
	}
	wantCounts(e.ctx, e.t, e.b, "after a bulk load and a recount", ref, nil)
	e.put(ref, strKey("after"), nil, []byte("after"))
	wantCounts(e.ctx, e.t, e.b, "after a bulk load, a recount and a put", ref, nil)
}

// testRecountBesideWrites: a recount while writers run leaves exact
// figures (the writes committed after its snapshot keep their deltas).
func testRecountBesideWrites(e *env) {
	tc := e.counter()
	ref := e.createTable("recountrace")
	done := make(chan struct{})
	go func() {
		defer close(done)
		CountsRace(e.ctx, e.t, []backend.Backend{e.b}, ref, 150)
	}()
	for range 5 {
		if _, err := tc.Recount(e.ctx, backend.CountsParams{Table: ref}); err != nil {
			e.t.Errorf("Recount: %v", err)
		}
	}
	<-done
	wantCounts(e.ctx, e.t, e.b, "after recounts beside writers", ref, nil)
}

// CountsHandles: two handles on one database (open returns a new one on
// each call) write the same table concurrently; the figures are exact
// through either handle, and through a third handle opened after the
// first two were closed (a restart). For backends whose handles can
// share a database at once (not SQLite, which one process holds).
func CountsHandles(t *testing.T, open func(t *testing.T) backend.Backend) {
	ctx := t.Context()
	b1 := backend.Checked(open(t), func(err error) { t.Errorf("%v", err) })
	b2 := backend.Checked(open(t), func(err error) { t.Errorf("%v", err) })
	if b1.Capabilities().Counts == nil {
		t.Fatalf("backend %s does not implement backend.TableCounter", b1.Name())
	}
	e := newEnv(t, b1)
	ref := e.createTable("handles")
	CountsRace(ctx, t, []backend.Backend{b1, b2}, ref, 150)
	wantCounts(ctx, t, b1, "through the first handle", ref, nil)
	wantCounts(ctx, t, b2, "through the second handle", ref, nil)
	b1.Close()
	b2.Close()
	b3 := backend.Checked(open(t), func(err error) { t.Errorf("%v", err) })
	wantCounts(ctx, t, b3, "after a restart", ref, nil)
}

// CountsAfter writes a table through b (concurrent writers), then calls
// stop (a close, or a crash the caller simulates) and checks the figures
// through the backend reopen returns.
func CountsAfter(t *testing.T, b backend.Backend, stop func(), reopen func() backend.Backend) {
	ctx := t.Context()
	b = backend.Checked(b, func(err error) { t.Errorf("%v", err) })
	if b.Capabilities().Counts == nil {
		t.Fatalf("backend %s does not implement backend.TableCounter", b.Name())
	}
	e := newEnv(t, b)
	ref := e.createTable("restart")
	CountsRace(ctx, t, []backend.Backend{b}, ref, 150)
	wantCounts(ctx, t, b, "before", ref, nil)
	full, err := b.TableStats(ctx, backend.TableStatsParams{Table: ref})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b2 := backend.Checked(reopen(), func(err error) { t.Errorf("%v", err) })
	wantCounts(ctx, t, b2, "after", ref, full)
}
