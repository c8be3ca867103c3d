package backendtest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The write fence (backend.TableRef.Version): an item write computed from
// a description version that is no longer current is refused with
// KindTableVersion, atomically with the write, and changes nothing.

// bumpVersion runs an UpdateTable that only rewrites the description and
// returns the table at its new version.
func (e *env) bumpVersion(ref backend.TableRef, desc string) backend.TableRef {
	e.t.Helper()
	res, err := e.b.UpdateTable(e.ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name,
		Fn: func(*backend.Table) ([]byte, error) { return []byte(desc), nil }})
	if err != nil {
		e.t.Fatalf("UpdateTable: %v", err)
	}
	if res.Table.Version <= ref.Version {
		e.t.Fatalf("UpdateTable: version %d after %d", res.Table.Version, ref.Version)
	}
	return res.Table.Ref()
}

// testFenceStaleWrite: writes (and DropIndex) with an old (or a future)
// version are refused with KindTableVersion, without running their
// function, and leave items and index entries as they were; the same
// calls with the current version pass.
func testFenceStaleWrite(e *env) {
	t := e.t
	v1 := e.createTable("fence")
	pk1, pk2, sk := strKey("one"), strKey("two"), strKey("s")
	e.write(v1, pk1, sk, backend.Change{Op: backend.Put, Item: numItem(1),
		PutIndex: []backend.IndexEntry{ixe("g", strKey("a"), sk, "1")}})
	v2 := e.bumpVersion(v1, "with index h")
	if v2.ID != v1.ID {
		t.Fatalf("UpdateTable changed the table id: %d -> %d", v1.ID, v2.ID)
	}

	called := false
	move := func(old []byte) (backend.Change, error) {
		called = true
		return backend.Change{Op: backend.Put, Item: numItem(2),
			DeleteIndex: []backend.IndexKey{{Index: "g", PK: strKey("a"), SK: sk}},
			PutIndex:    []backend.IndexEntry{ixe("g", strKey("b"), sk, "2"), ixe("h", strKey("b"), sk, "2")}}, nil
	}
	del := func(old []byte) (backend.Change, error) {
		called = true
		return backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "g", PK: strKey("a"), SK: sk}}}, nil
	}
	future := v2
	future.Version++
	for _, c := range []struct {
		what string
		ref  backend.TableRef
		pk   []byte
		fn   backend.WriteFunc
		bl   bool
	}{
		{"stale put", v1, pk1, move, false},
		{"stale blind put", v1, pk2, putFn(numItem(9), ixe("g", strKey("a"), pk2, "9")), true},
		{"stale delete", v1, pk1, del, false},
		{"future put", future, pk1, move, false},
		{"unversioned put", backend.TableRef{Account: v2.Account, Name: v2.Name, ID: v2.ID}, pk1, move, false},
	} {
		called = false
		_, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: c.ref, PK: c.pk, SK: sk, Fn: c.fn, Blind: c.bl})
		wantKind(t, "WriteItem "+c.what, err, backend.KindTableVersion)
		if called {
			t.Fatalf("WriteItem %s: the write function ran", c.what)
		}
	}
	// A transaction with one current and one stale operation.
	_, err := e.b.TransactWrite(e.ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: v2, PK: pk2, SK: sk, Fn: putFn(numItem(5), ixe("g", strKey("c"), sk, "5"))},
		{Table: v1, PK: pk1, SK: sk, Fn: move},
	}})
	wantKind(t, "TransactWrite with a stale operation", err, backend.KindTableVersion)

	// Nothing changed: items and index entries.
	if got := e.get(v2, pk1, sk); !bytes.Equal(got, numItem(1)) {
		t.Fatalf("item one after refused writes: %s", got)
	}
	if got := e.get(v2, pk2, sk); got != nil {
		t.Fatalf("item two after refused writes: %s", got)
	}
	for _, ix := range []struct {
		name, pk string
		n        int
	}{{"g", "a", 1}, {"g", "b", 0}, {"g", "c", 0}, {"h", "b", 0}} {
		rows := e.queryAll(backend.QueryParams{Table: v2, Index: ix.name, PK: strKey(ix.pk), Forward: true}, 10)
		if len(rows) != ix.n {
			t.Fatalf("index %s partition %s after refused writes: %d entries, want %d", ix.name, ix.pk, len(rows), ix.n)
		}
	}

	// The current version passes; reads never look at Version.
	if _, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: v2, PK: pk1, SK: sk, Fn: move}); err != nil {
		t.Fatalf("WriteItem with the current version: %v", err)
	}
	if got := e.get(v1, pk1, sk); !bytes.Equal(got, numItem(2)) {
		t.Fatalf("item one after the current write (read with the old ref): %s", got)
	}
	if rows := e.queryAll(backend.QueryParams{Table: v2, Index: "h", PK: strKey("b"), Forward: true}, 10); len(rows) != 1 {
		t.Fatalf("index h after the current write: %d entries", len(rows))
	}
	// DropIndex is fenced too: decided on v1, it removes nothing.
	_, err = e.b.DropIndex(e.ctx, backend.DropIndexParams{Table: v1, Index: "h"})
	wantKind(t, "DropIndex with a stale version", err, backend.KindTableVersion)
	if rows := e.queryAll(backend.QueryParams{Table: v2, Index: "h", PK: strKey("b"), Forward: true}, 10); len(rows) != 1 {
		t.Fatalf("index h after a refused DropIndex: %d entries, want 1", len(rows))
	}
	if _, err := e.b.DropIndex(e.ctx, backend.DropIndexParams{Table: v2, Index: "h"}); err != nil {
		t.Fatalf("DropIndex with the current version: %v", err)
	}
	if rows := e.queryAll(backend.QueryParams{Table: v2, Index: "h", PK: strKey("b"), Forward: true}, 10); len(rows) != 0 {
		t.Fatalf("index h after DropIndex: %d entries", len(rows))
	}
	// A deleted table is KindTableNotFound whatever the version.
	if _, err := e.b.DeleteTable(e.ctx, backend.DeleteTableParams{Account: v2.Account, Name: v2.Name}); err != nil {
		t.Fatal(err)
	}
	_, err = e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: v1, PK: pk1, SK: sk, Fn: move})
	wantKind(t, "WriteItem stale version on a deleted table", err, backend.KindTableNotFound)
}

// testFenceConcurrentUpdateTable models what the engine does: the
// description names how many indexes the table has; writers keep the
// description they last read (a cache), compute index entries from it and
// reload only when refused; an updater adds an index (UpdateTable) and
// then backfills it by rewriting every item with its entry. A stale write
// let through after the backfill rewrote its item would leave the old
// value's entry in the new index, so at the end every index must hold
// exactly one entry per item, at the item's current value.
func testFenceConcurrentUpdateTable(e *env) {
	t := e.t
	ref := e.createTable("fencerace")
	const keys, writers, indexes = 6, 4, 6
	key := func(i int) []byte { return strKey("k" + strconv.Itoa(i)) }
	entries := fenceEntries
	parse := func(tb *backend.Table) (backend.TableRef, int) {
		n, err := strconv.Atoi(string(bytes.TrimPrefix(tb.Desc, []byte("indexes="))))
		if err != nil {
			n = 0
		}
		return tb.Ref(), n
	}
	if _, err := e.b.UpdateTable(e.ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name,
		Fn: func(*backend.Table) ([]byte, error) { return []byte("indexes=0"), nil }}); err != nil {
		t.Fatal(err)
	}
	load := func() (backend.TableRef, int, error) {
		gt, err := e.b.GetTable(e.ctx, backend.GetTableParams{Account: ref.Account, Name: ref.Name})
		if err != nil {
			return backend.TableRef{}, 0, err
		}
		r, n := parse(gt.Table)
		return r, n, nil
	}

	var stop atomic.Bool
	var refused, written atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers+1)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 11))
			cur, n, err := load()
			if err != nil {
				errs <- err
				return
			}
			for !stop.Load() {
				i := r.IntN(keys)
				val := r.IntN(1 << 20)
				pk := key(i)
				del := r.IntN(8) == 0
				myN := n
				_, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: cur, PK: pk, Fn: func(old []byte) (backend.Change, error) {
					dk, _ := entries(myN, pk, old)
					if del {
						return backend.Change{Op: backend.Delete, DeleteIndex: dk}, nil
					}
					item := numItem(val)
					_, pe := entries(myN, pk, item)
					return backend.Change{Op: backend.Put, Item: item, DeleteIndex: dk, PutIndex: pe}, nil
				}})
				switch {
				case err == nil:
					written.Add(1)
				case backend.IsKind(err, backend.KindTableVersion):
					refused.Add(1)
					if cur, n, err = load(); err != nil {
						errs <- err
						return
					}
				default:
					errs <- fmt.Errorf("write: %w", err)
					return
				}
			}
		}()
	}

	// waitWrites lets the writers make n writes in all.
	waitWrites := func(n int64) {
		for written.Load() < n {
			select {
			case err := <-errs:
				stop.Store(true)
				wg.Wait()
				t.Fatal(err)
			default:
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The updater: add an index, then backfill it, while the writers run.
	for j := 0; j < indexes; j++ {
		waitWrites(int64(j+1) * 30)
		fenceAddIndex(e, ref, j)
	}
	// Let the writers run a while on the final description too.
	waitWrites(written.Load() + 60)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	final, _, err := load()
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for i := range keys {
		if item := e.get(final, key(i), nil); item != nil {
			want = append(want, append(append([]byte{}, item...), key(i)...))
		}
	}
	slices.SortFunc(want, bytes.Compare)
	fenceCheckIndexes(e, final, indexes, want, written.Load(), refused.Load())
}

// fenceEntries are an item's entries in the first n indexes of the fence
// scenario (keyed by the item's value), as keys to delete and entries to
// put; none for an absent item.
func fenceEntries(n int, pk, item []byte) (del []backend.IndexKey, put []backend.IndexEntry) {
	if item == nil {
		return nil, nil
	}
	for j := 0; j < n; j++ {
		en := ixe("ix"+strconv.Itoa(j), strKey("p"), append(append([]byte{}, item...), pk...), "")
		del = append(del, en.IndexKey)
		put = append(put, en)
	}
	return del, put
}

// fenceAddIndex is the fence scenario's updater adding index j: an
// UpdateTable, then a backfill that rewrites every item with its entry.
func fenceAddIndex(e *env, ref backend.TableRef, j int) {
	t := e.t
	res, err := e.b.UpdateTable(e.ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name,
		Fn: func(*backend.Table) ([]byte, error) { return []byte("indexes=" + strconv.Itoa(j+1)), nil }})
	if err != nil {
		t.Fatal(err)
	}
	cur := res.Table.Ref()
	rows := e.scanAll(backend.ScanParams{Table: cur}, 100)
	ixName := "ix" + strconv.Itoa(j)
	for _, row := range rows {
		pk := row.PK
		_, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: cur, PK: pk, SK: row.SK, Fn: func(old []byte) (backend.Change, error) {
			if old == nil {
				return backend.Change{Op: backend.Keep}, nil
			}
			en := ixe(ixName, strKey("p"), append(append([]byte{}, old...), pk...), "")
			return backend.Change{Op: backend.Put, Item: old, DeleteIndex: []backend.IndexKey{en.IndexKey}, PutIndex: []backend.IndexEntry{en}}, nil
		}})
		if err != nil {
			t.Fatalf("backfill of %s: %v", ixName, err)
		}
	}
}

// fenceCheckIndexes: every index of the fence scenario holds exactly one
// entry per item, at the item's current value (want, sorted).
func fenceCheckIndexes(e *env, final backend.TableRef, indexes int, want [][]byte, written, refused int64) {
	t := e.t
	for j := 0; j < indexes; j++ {
		rows := e.queryAll(backend.QueryParams{Table: final, Index: "ix" + strconv.Itoa(j), PK: strKey("p"), Forward: true}, 100)
		var got [][]byte
		for _, r := range rows {
			got = append(got, r.SK)
		}
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Fatalf("index ix%d: %d entries, want %d (one per item at its current value); %d writes, %d refused as stale",
				j, len(got), len(want), written, refused)
		}
	}
	if refused == 0 {
		t.Logf("no write was refused as stale (%d writes): the race was not exercised this run", written)
	}
}

// testDeleteAbsentRemovesIndexKeys: a Delete of an absent item applies
// its DeleteIndex (the TTL sweeper removes orphan entries this way).
func testDeleteAbsentRemovesIndexKeys(e *env) {
	ref := e.createTable("orphan")
	pk, sk := strKey("gone"), strKey("s")
	e.write(ref, pk, sk, backend.Change{Op: backend.Put, Item: numItem(1), PutIndex: []backend.IndexEntry{ixe("g", strKey("a"), sk, "1")}})
	// Remove the item but leave its entry behind (as a write computed
	// without the index would have).
	e.write(ref, pk, sk, backend.Change{Op: backend.Delete})
	if rows := e.queryAll(backend.QueryParams{Table: ref, Index: "g", PK: strKey("a"), Forward: true}, 10); len(rows) != 1 {
		e.t.Fatalf("orphan entry: %d entries, want 1", len(rows))
	}
	res, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func(old []byte) (backend.Change, error) {
		if old != nil {
			e.t.Errorf("deleted item read back: %s", old)
		}
		return backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "g", PK: strKey("a"), SK: sk}}}, nil
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	if res.Old != nil || res.Change.Op != backend.Delete {
		e.t.Fatalf("result %+v", res)
	}
	if rows := e.queryAll(backend.QueryParams{Table: ref, Index: "g", PK: strKey("a"), Forward: true}, 10); len(rows) != 0 {
		e.t.Fatalf("orphan entry after Delete of the absent item: %d entries", len(rows))
	}
	if e.get(ref, pk, sk) != nil {
		e.t.Fatal("item came back")
	}
}
