package backendtest

import (
	"fmt"
	"sync"

	"github.com/extenddb/extenddb/internal/backend"
)

// The bulk loader (backend.BulkLoader, ADR 0032): a restore's load path.
// All or nothing, fenced on the table's version like TransactWrite,
// idempotent upserts of items and index entries, safe when two calls load
// the same keys at once, and no stale cached value of a loaded key. A
// backend without the capability is skipped loudly.

func (e *env) bulkLoader() backend.BulkLoader {
	e.t.Helper()
	bl := e.b.Capabilities().Bulk
	if bl == nil {
		msg := fmt.Sprintf("capability absent: backend %s does not implement backend.BulkLoader; bulk load section NOT exercised", e.b.Name())
		fmt.Println(msg)
		e.t.Skip(msg)
	}
	return bl
}

// bulkItems are n items u<from+i>/s with a "gsi" entry in partition g (an
// index sort key per item) and a "lsi" entry; tag marks the bytes.
func bulkItems(from, n int, tag string) []backend.BulkItem {
	out := make([]backend.BulkItem, n)
	for i := range n {
		pk, sk := strKey(fmt.Sprintf("u%06d", from+i)), strKey("s")
		out[i] = backend.BulkItem{PK: pk, SK: sk, Change: backend.Change{Op: backend.Put, Item: itemOf(pk, sk, tag),
			PutIndex: []backend.IndexEntry{
				ixe("gsi", strKey("g"), strKey(fmt.Sprintf("i%06d", from+i)), "gsi-"+tag),
				ixe("lsi", pk, strKey("x"), "lsi-"+tag),
			}}}
	}
	return out
}

func (e *env) bulkLoad(bl backend.BulkLoader, ref backend.TableRef, items []backend.BulkItem) {
	e.t.Helper()
	if err := bl.BulkLoad(e.ctx, backend.BulkLoadParams{Table: ref, Items: items}); err != nil {
		e.t.Fatalf("BulkLoad of %d items: %v", len(items), err)
	}
}

// wantBulk checks that the table holds exactly items (by key and bytes),
// each with its two index entries and nothing else.
func (e *env) wantBulk(ref backend.TableRef, items []backend.BulkItem) {
	e.t.Helper()
	t := e.t
	for _, it := range items {
		if got := e.get(ref, it.PK, it.SK); string(got) != string(it.Change.Item) {
			t.Fatalf("GetItem %x: %q, want %q", it.PK, got, it.Change.Item)
		}
	}
	rows := e.scanAll(backend.ScanParams{Table: ref, Limit: 1000}, 1000)
	if len(rows) != len(items) {
		t.Fatalf("Scan: %d items, want %d", len(rows), len(items))
	}
	gsi := e.queryIx(ref, "gsi", strKey("g"), true, 1000)
	if len(gsi) != len(items) {
		t.Fatalf("Query gsi: %d entries, want %d", len(gsi), len(items))
	}
	want := map[string]string{}
	for _, it := range items {
		want[string(it.PK)] = string(it.Change.PutIndex[0].Item)
	}
	for _, r := range gsi {
		if w, ok := want[string(r.BasePK)]; !ok || w != string(r.Item) {
			t.Fatalf("gsi entry of %x: %q, want %q", r.BasePK, r.Item, w)
		}
	}
	for _, it := range items {
		lsi := e.queryIx(ref, "lsi", it.PK, true, 10)
		if len(lsi) != 1 || string(lsi[0].Item) != string(it.Change.PutIndex[1].Item) {
			t.Fatalf("lsi of %x: %d entries %v, want one %q", it.PK, len(lsi), lsi, it.Change.PutIndex[1].Item)
		}
	}
	st, err := e.b.TableStats(e.ctx, backend.TableStatsParams{Table: ref})
	if err != nil {
		t.Fatalf("TableStats: %v", err)
	}
	if st.ItemCount != int64(len(items)) || st.Indexes["gsi"].ItemCount != int64(len(items)) || st.Indexes["lsi"].ItemCount != int64(len(items)) {
		t.Fatalf("TableStats: %d items, gsi %d, lsi %d; want %d each", st.ItemCount, st.Indexes["gsi"].ItemCount, st.Indexes["lsi"].ItemCount, len(items))
	}
}

// testBulkLoad: loaded items and their index entries are readable
// (GetItem, Scan, Query of each index, TableStats); loading them again,
// with other bytes, replaces them in place (one row per key and per index
// entry); an item written and cached before is never answered stale after
// a load replaced it, to a read or to a write function.
func testBulkLoad(e *env) {
	t := e.t
	bl := e.bulkLoader()
	ref := e.createTable("bulk")
	// u000003 exists before (written, and read, through the item path).
	pre := bulkItems(3, 1, "before")[0]
	e.write(ref, pre.PK, pre.SK, pre.Change)
	if got := e.get(ref, pre.PK, pre.SK); string(got) != string(pre.Change.Item) {
		t.Fatalf("GetItem before: %q", got)
	}
	items := bulkItems(0, 150, "one")
	e.bulkLoad(bl, ref, items[:100])
	e.bulkLoad(bl, ref, items[100:])
	e.wantBulk(ref, items)

	// A resumed restore loads the same items again (here with other bytes
	// and other index entry contents, same index keys).
	again := bulkItems(50, 100, "two")
	e.bulkLoad(bl, ref, again)
	e.wantBulk(ref, append(append(items[:50:50], again...), items[150:]...))

	// A write function sees the loaded item, not a cached older one.
	var seen []byte
	if _, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: again[0].PK, SK: again[0].SK,
		Fn: func(old []byte) (backend.Change, error) {
			seen = old
			return backend.Change{Op: backend.Keep}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	if string(seen) != string(again[0].Change.Item) {
		t.Fatalf("write function saw %q, want the loaded %q", seen, again[0].Change.Item)
	}
	// A conditional write on the loaded item (an update of what it
	// holds) applies, and a later load replaces it again.
	upd := backend.Change{Op: backend.Put, Item: itemOf(again[1].PK, again[1].SK, "three"), PutIndex: again[1].Change.PutIndex}
	if _, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: again[1].PK, SK: again[1].SK,
		Fn: func(old []byte) (backend.Change, error) {
			if string(old) != string(again[1].Change.Item) {
				return backend.Change{}, fmt.Errorf("old %q, want %q", old, again[1].Change.Item)
			}
			return upd, nil
		}}); err != nil {
		t.Fatal(err)
	}
	e.bulkLoad(bl, ref, again[1:2])
	if got := e.get(ref, again[1].PK, again[1].SK); string(got) != string(again[1].Change.Item) {
		t.Fatalf("GetItem after a load over a write: %q", got)
	}
}

// testBulkLoadFence: a load with an old (or future) version, or into a
// deleted table, is refused (KindTableVersion, KindTableNotFound) and
// writes nothing, none of its items.
func testBulkLoadFence(e *env) {
	t := e.t
	bl := e.bulkLoader()
	v1 := e.createTable("bulkfence")
	v2 := e.bumpVersion(v1, "moved")
	items := bulkItems(0, 20, "x")
	for _, ref := range []backend.TableRef{v1, {Account: v2.Account, Name: v2.Name, ID: v2.ID, Version: v2.Version + 1}} {
		err := bl.BulkLoad(e.ctx, backend.BulkLoadParams{Table: ref, Items: items})
		wantKind(t, fmt.Sprintf("BulkLoad at version %d (current %d)", ref.Version, v2.Version), err, backend.KindTableVersion)
	}
	e.wantBulk(v2, nil)
	e.bulkLoad(bl, v2, items)
	e.wantBulk(v2, items)

	gone := e.createTable("bulkgone")
	if _, err := e.b.DeleteTable(e.ctx, backend.DeleteTableParams{Account: gone.Account, Name: gone.Name}); err != nil {
		t.Fatal(err)
	}
	err := bl.BulkLoad(e.ctx, backend.BulkLoadParams{Table: gone, Items: items})
	wantKind(t, "BulkLoad into a deleted table", err, backend.KindTableNotFound)
	again, err := e.b.CreateTable(e.ctx, backend.CreateTableParams{Account: gone.Account, Name: gone.Name, Desc: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	err = bl.BulkLoad(e.ctx, backend.BulkLoadParams{Table: gone, Items: items})
	wantKind(t, "BulkLoad into a table deleted and created again", err, backend.KindTableNotFound)
	e.wantBulk(again.Table.Ref(), nil)
}

// testBulkLoadConcurrent: a restore's writers load distinct batches at
// once, and a stale owner may load the same keys as its successor at the
// same time (both write the same bytes): every call succeeds and the
// table ends with one row per key and per index entry.
func testBulkLoadConcurrent(e *env) {
	t := e.t
	bl := e.bulkLoader()
	ref := e.createTable("bulkconc")
	items := bulkItems(0, 400, "c")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Writers 0-3 load the four quarters; 4-7 the same quarters
			// in reverse batch order (the racing owner).
			for j := range 4 {
				q := w % 4
				if w >= 4 {
					j = 3 - j
				}
				lo := q*100 + j*25
				if err := bl.BulkLoad(e.ctx, backend.BulkLoadParams{Table: ref, Items: items[lo : lo+25]}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent BulkLoad: %v", err)
	}
	e.wantBulk(ref, items)
}
