package cassandra

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// The table statistics (counts.go) beyond the conformance suite's
// sections: several handles, folds that run while writers write, deltas
// whose copy was lost, a dropped and re-created index, and a table from
// before the statistics.

// exact checks that b's figures are known and equal a full count.
func exact(ctx context.Context, t *testing.T, b *Backend, what string, ref backend.TableRef) *backend.TableStatsResult {
	t.Helper()
	got, err := b.Counts(ctx, backend.CountsParams{Table: ref})
	if err != nil {
		t.Fatalf("%s: Counts: %v", what, err)
	}
	full, err := b.TableStats(ctx, backend.TableStatsParams{Table: ref})
	if err != nil {
		t.Fatalf("%s: TableStats: %v", what, err)
	}
	if !got.Counted || got.Stats.ItemCount != full.ItemCount || got.Stats.SizeBytes != full.SizeBytes || !sameIndexes(got.Stats.Indexes, full.Indexes) {
		t.Fatalf("%s: maintained %v %+v, counted %+v", what, got.Counted, got.Stats, *full)
	}
	return full
}

func sameIndexes(a, b map[string]backend.IndexStats) bool {
	return (len(a) == 0 && len(b) == 0) || reflect.DeepEqual(a, b)
}

func newTable(t *testing.T, b *Backend, name string) backend.TableRef {
	t.Helper()
	cr, err := b.CreateTable(t.Context(), backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: name, Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	return cr.Table.Ref()
}

// pendingRows counts the table's kind-4 rows and the copies in its slots
// at or above lo.
func pendingRows(t *testing.T, b *Backend, ref backend.TableRef) (rows, copies int) {
	t.Helper()
	ctx := t.Context()
	err := b.eachPartition(ctx, ref.ID, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		var n int
		if err := b.query(ctx, `SELECT count(*) FROM items WHERE t = ? AND pk = ? AND kind = 4`, ref.ID, pk).Scan(&n); err != nil {
			return false, err
		}
		rows += n
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.readStats(ctx, ref.ID)
	if err != nil || st == nil {
		t.Fatalf("statistics row: %v %v", st, err)
	}
	cs, err := b.readSlots(ctx, ref.ID, st.lo, slotOf(time.Now())+slotAhead+1)
	if err != nil {
		t.Fatal(err)
	}
	return rows, len(cs)
}

// noneLeft checks that every delta of the table is folded and removed:
// no kind-4 row, no copy in a slot not folded.
func noneLeft(t *testing.T, b *Backend, ref backend.TableRef, what string) {
	t.Helper()
	if rows, copies := pendingRows(t, b, ref); rows != 0 || copies != 0 {
		t.Fatalf("%s: %d kind-4 rows, %d copies left", what, rows, copies)
	}
}

// settle folds the table until every slot with deltas is folded and
// cleaned (two folds past the last write's slot).
func settle(t *testing.T, b *Backend, ref backend.TableRef) {
	t.Helper()
	ctx := t.Context()
	until := slotOf(time.Now()) + 1
	deadline := time.Now().Add(b.stats.closeAfter + 30*time.Second)
	for {
		if err := b.fold(ctx, ref.ID); err != nil {
			t.Fatal(err)
		}
		st, err := b.readStats(ctx, ref.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.plo > until {
			// [plo, lo) may still be uncleaned after a crash; this
			// process cleaned it in its own fold.
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("folds did not reach slot %d: lo %d plo %d", until, st.lo, st.plo)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestCountsHandles: two handles write one table; either answers exact
// figures, so does a third opened after both closed.
func TestCountsHandles(t *testing.T) {
	need(t)
	backendtest.CountsHandles(t, func(t *testing.T) backend.Backend {
		b, err := Open(context.Background(), Options{Hosts: hosts, Keyspace: keyspace, OutboxSweep: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	})
}

// TestCountsFoldsBesideWriters: with slots folded soon after they end,
// folds, recounts and the sweep's moves run while two handles write;
// the figures stay exact, and once folded no delta is left behind.
func TestCountsFoldsBesideWriters(t *testing.T) {
	need(t)
	t.Parallel()
	ctx := t.Context()
	var hs []*Backend
	for range 2 {
		b := openT(t, keyspace)
		// Slots folded 4 s after their end (not 10): a write's slot is
		// chosen just before its LWT, so its copy lands well before.
		b.stats.closeAfter, b.stats.orphanAge, b.stats.cleanGrace = 4*time.Second, 0, 0
		hs = append(hs, b)
	}
	b := hs[0]
	ref := newTable(t, b, "folds")
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		// Recounts and sweeps (which move deltas whose copy came after
		// their slot was folded) while the writers run.
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var err error
			if i%2 == 0 {
				_, err = hs[1].Recount(ctx, backend.CountsParams{Table: ref})
			} else {
				_, err = hs[1].drainTable(ctx, ref.ID, true)
			}
			if err != nil {
				done <- err
				return
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	start := time.Now()
	for time.Since(start) < 9*time.Second {
		backendtest.CountsRace(ctx, t, []backend.Backend{hs[0], hs[1]}, ref, 40)
		exact(ctx, t, b, "between rounds", ref)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("recount or sweep beside writers: %v", err)
	}
	exact(ctx, t, hs[1], "after the writers", ref)
	// Every delta is folded once its slot is: moves of the late ones,
	// then folds past them.
	if _, err := b.drainTable(ctx, ref.ID, true); err != nil {
		t.Fatal(err)
	}
	settle(t, b, ref)
	if _, err := b.drainTable(ctx, ref.ID, true); err != nil {
		t.Fatal(err)
	}
	settle(t, b, ref)
	noneLeft(t, b, ref, "after the folds")
	exact(ctx, t, b, "folded", ref)
}

// TestCountsCopyLost: a writer that died between its LWT and its copy
// leaves a kind-4 row no slot has; once its slot is folded, the sweep
// moves it and the figures are exact again.
func TestCountsCopyLost(t *testing.T) {
	need(t)
	t.Parallel()
	ctx := t.Context()
	b := openT(t, keyspace)
	// Folds only when the test folds (a background one could fold a
	// slot between a write's choice of it and its copy).
	b.stats.closeAfter, b.stats.orphanAge, b.stats.manual = 0, 0, true
	ref := newTable(t, b, "lost")
	putG(t, b, ref, "a", "1")
	b.stats.skipCopy = true
	putG(t, b, ref, "b", "22")
	b.stats.skipCopy = false
	got, err := b.Counts(ctx, backend.CountsParams{Table: ref})
	if err != nil {
		t.Fatal(err)
	}
	if got.Stats.ItemCount != 1 {
		t.Fatalf("before the sweep: %+v (the lost copy should not be counted yet)", got.Stats)
	}
	settle(t, b, ref)
	settle(t, b, ref) // the lost delta's slot is now below plo
	if _, err := b.drainTable(ctx, ref.ID, true); err != nil {
		t.Fatal(err)
	}
	exact(ctx, t, b, "after the sweep", ref)
	settle(t, b, ref)
	noneLeft(t, b, ref, "after the folds")
	full := exact(ctx, t, b, "folded", ref)
	if full.ItemCount != 2 || full.SizeBytes != 3 || full.Indexes["g"].ItemCount != 2 {
		t.Fatalf("figures %+v", *full)
	}
}

// TestCountsIndexDroppedAndCreatedAgain: entries of an index dropped at
// one description version do not count for an index of the same name
// created at a later one, in the writes' deltas and in a recount.
func TestCountsIndexDroppedAndCreatedAgain(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	ref := newTable(t, b, "redo")
	put := func(ref backend.TableRef, k, v string, ix bool) {
		t.Helper()
		ch := backend.Change{Op: backend.Put, Item: []byte(v)}
		if ix {
			ch.PutIndex = []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("g"), SK: []byte(k)}, Item: []byte(v)}}
		}
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func(old []byte) (backend.Change, error) {
			if old != nil {
				ch.DeleteIndex = []backend.IndexKey{{Index: "g", PK: []byte("g"), SK: []byte(k)}}
			}
			return ch, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	bump := func(ref backend.TableRef) backend.TableRef {
		t.Helper()
		ur, err := b.UpdateTable(ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name, Fn: func(tb *backend.Table) ([]byte, error) { return tb.Desc, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return ur.Table.Ref()
	}
	for _, k := range []string{"a", "b", "c"} {
		put(ref, k, "v-"+k, true)
	}
	exact(ctx, t, b, "three entries", ref)
	ref = bump(ref)
	if _, err := b.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: "g"}); err != nil {
		t.Fatal(err)
	}
	exact(ctx, t, b, "dropped", ref)
	ref = bump(ref)
	// Created again: a rewrite of a puts its new entry (its old one, of
	// the dropped index, is not replaced but gone); b is rewritten
	// without one.
	put(ref, "a", "v-a2", true)
	put(ref, "b", "v-b2", false)
	full := exact(ctx, t, b, "created again", ref)
	if full.Indexes["g"].ItemCount != 1 {
		t.Fatalf("entries %+v", full.Indexes)
	}
	if _, err := b.Recount(ctx, backend.CountsParams{Table: ref}); err != nil {
		t.Fatal(err)
	}
	exact(ctx, t, b, "recounted", ref)
}

// TestCountsTableFromBefore: a table written before the statistics (no
// statistics row, items without entry sizes) has unknown figures until a
// recount; writes of its old items then keep them exact.
func TestCountsTableFromBefore(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	ref := newTable(t, b, "before")
	for i := range 6 {
		k := fmt.Sprintf("k%d", i)
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("old-" + k), PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("g"), SK: []byte(k)}, Item: []byte("e-" + k)}}}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	// What an older server left: no statistics, no entry sizes, no deltas.
	if err := b.forgetFigures(ctx, ref.ID); err != nil {
		t.Fatal(err)
	}
	err := b.eachPartition(ctx, ref.ID, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		if err := b.query(ctx, `DELETE FROM items WHERE t = ? AND pk = ? AND kind = 4`, ref.ID, pk).Exec(); err != nil {
			return false, err
		}
		return true, b.query(ctx, `UPDATE items SET isz = null WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0`, ref.ID, pk, []byte{}).Exec()
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Counts(ctx, backend.CountsParams{Table: ref})
	if err != nil {
		t.Fatal(err)
	}
	if got.Counted {
		t.Fatalf("figures known for a table from before: %+v", got.Stats)
	}
	if _, err := b.Recount(ctx, backend.CountsParams{Table: ref}); err != nil {
		t.Fatal(err)
	}
	exact(ctx, t, b, "recounted", ref)
	// Writes of old items: an overwrite moving the entry, a delete.
	if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k0"), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: []byte("new-k0-longer"),
			DeleteIndex: []backend.IndexKey{{Index: "g", PK: []byte("g"), SK: []byte("k0")}},
			PutIndex:    []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("h"), SK: []byte("k0")}, Item: []byte("entry-k0")}}}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k1"), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{{Index: "g", PK: []byte("g"), SK: []byte("k1")}}}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	full := exact(ctx, t, b, "old items written", ref)
	if full.ItemCount != 5 || full.Indexes["g"].ItemCount != 5 {
		t.Fatalf("figures %+v", *full)
	}
}

// putG writes item k with value v and its entry in index "g".
func putG(t *testing.T, b *Backend, ref backend.TableRef, k, v string) {
	t.Helper()
	if _, err := b.WriteItem(t.Context(), backend.WriteItemParams{Table: ref, PK: []byte(k), Fn: func(old []byte) (backend.Change, error) {
		ch := backend.Change{Op: backend.Put, Item: []byte(v), PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte("g"), SK: []byte(k)}, Item: []byte(v)}}}
		if old != nil {
			ch.DeleteIndex = []backend.IndexKey{{Index: "g", PK: []byte("g"), SK: []byte(k)}}
		}
		return ch, nil
	}}); err != nil {
		t.Fatal(err)
	}
}

// waitSlotClosed waits until the current slot is closed for b's folds.
func waitSlotClosed(b *Backend) {
	s := slotOf(time.Now())
	for slotOf(time.Now().Add(-b.stats.closeAfter)) <= s {
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCountsFoldDiedAfterCommit: a fold that committed and died before
// removing its deltas' kind-4 rows leaves them in [plo, lo): Counts, a
// recount and the sweep know them as folded, and the next fold removes
// them.
func TestCountsFoldDiedAfterCommit(t *testing.T) {
	b := openT(t, keyspace)
	b.stats.closeAfter, b.stats.orphanAge, b.stats.manual = 0, 0, true
	ctx := t.Context()
	ref := newTable(t, b, "died")
	putG(t, b, ref, "a", "1")
	putG(t, b, ref, "b", "22")
	waitSlotClosed(b)
	b.stats.skipClean = true
	if err := b.fold(ctx, ref.ID); err != nil {
		t.Fatal(err)
	}
	b.stats.skipClean = false
	if rows, copies := pendingRows(t, b, ref); rows != 2 || copies != 0 {
		t.Fatalf("after the fold that died: %d kind-4 rows (want 2), %d copies not folded (want 0)", rows, copies)
	}
	exact(ctx, t, b, "after the fold that died", ref)
	if _, err := b.Recount(ctx, backend.CountsParams{Table: ref}); err != nil {
		t.Fatal(err)
	}
	exact(ctx, t, b, "recounted", ref)
	if _, err := b.drainTable(ctx, ref.ID, true); err != nil {
		t.Fatal(err)
	}
	exact(ctx, t, b, "swept", ref)
	putG(t, b, ref, "c", "333")
	waitSlotClosed(b)
	// A folder that does not know the removals done waits cleanGrace
	// (the last folder may be removing them), then does them itself.
	st1, err := b.readStats(ctx, ref.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.fold(ctx, ref.ID); err != nil {
		t.Fatal(err)
	}
	if st2, err := b.readStats(ctx, ref.ID); err != nil || st2.n != st1.n {
		t.Fatalf("a fold committed within the grace of the last one's removals: n %d -> %d (%v)", st1.n, st2.n, err)
	}
	b.stats.cleanGrace = 0
	if err := b.fold(ctx, ref.ID); err != nil {
		t.Fatal(err)
	}
	noneLeft(t, b, ref, "after the next fold")
	full := exact(ctx, t, b, "folded", ref)
	if full.ItemCount != 3 || full.SizeBytes != 6 || full.Indexes["g"].SizeBytes != 6 {
		t.Fatalf("figures %+v", *full)
	}
}

// TestCountsLeaseStopsFolds: while a recount holds the lease no fold
// commits (the recount's reads assume lo, plo and the folded figures
// stay); Counts stays exact; a lease whose holder died ends.
func TestCountsLeaseStopsFolds(t *testing.T) {
	b := openT(t, keyspace)
	b.stats.closeAfter, b.stats.manual = 0, true
	ctx := t.Context()
	ref := newTable(t, b, "lease")
	putG(t, b, ref, "a", "1")
	st0, err := b.takeLease(ctx, ref.ID, gocql.TimeUUID())
	if err != nil {
		t.Fatal(err)
	}
	waitSlotClosed(b)
	if err := b.fold(ctx, ref.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := b.readStats(ctx, ref.ID); err != nil || st.n != st0.n || st.lo != st0.lo {
		t.Fatalf("a fold committed under the lease: %+v -> %+v (%v)", st0, st, err)
	}
	exact(ctx, t, b, "under the lease", ref)
	// The holder died: once its lease is old, folds go on.
	if err := b.query(ctx, `UPDATE table_stats SET rc_at = ? WHERE t = ?`, time.Now().Add(-2*recountLease).UnixMilli(), ref.ID).Exec(); err != nil {
		t.Fatal(err)
	}
	if err := b.fold(ctx, ref.ID); err != nil {
		t.Fatal(err)
	}
	st, err := b.readStats(ctx, ref.ID)
	if err != nil || st.n == st0.n || st.rc != nil {
		t.Fatalf("no fold after the lease ended: %+v (%v)", st, err)
	}
	exact(ctx, t, b, "after the lease", ref)
}

// TestStatsEncodings: deltas, figures and entry sizes round-trip;
// truncated values are refused; entries and deltas of a dropped index
// are left out.
func TestStatsEncodings(t *testing.T) {
	d := &delta{items: -1, size: 300, v: 7, idx: map[string][2]int64{"a": {1, 20}, "bb": {-1, -5}}}
	got, err := decodeDelta(d.encode())
	if err != nil || !reflect.DeepEqual(got, d) {
		t.Fatalf("delta: %+v %v", got, err)
	}
	f := &figures{items: 10, size: 1000, idx: map[string]ixFig{"a": {3, 60, 7}}}
	gf, err := decodeFigures(f.encode())
	if err != nil || !reflect.DeepEqual(gf, f) {
		t.Fatalf("figures: %+v %v", gf, err)
	}
	m := map[string]entrySize{"a": {20, 7}, "bb": {5, 3}}
	gm, err := decodeIsz(encodeIsz(m), nil)
	if err != nil || !reflect.DeepEqual(gm, m) {
		t.Fatalf("entry sizes: %+v %v", gm, err)
	}
	if gm, err := decodeIsz(encodeIsz(m), map[string]int64{"bb": 3}); err != nil || len(gm) != 1 || gm["a"] != m["a"] {
		t.Fatalf("entry sizes of a dropped index: %+v %v", gm, err)
	}
	for _, b := range [][]byte{d.encode(), f.encode(), encodeIsz(m)} {
		short := b[:len(b)-1]
		_, e1 := decodeDelta(short)
		_, e2 := decodeFigures(short)
		_, e3 := decodeIsz(short, nil)
		if e1 == nil && e2 == nil && e3 == nil {
			t.Fatalf("a truncated value %x decoded", short)
		}
	}
	// A drop at version 7: the delta stamped 7 no longer counts, the
	// figures of "a" (folded up to 7) are gone, a later delta starts them
	// again from zero.
	dropped := map[string]int64{"a": 7}
	f.add(d, 1, dropped)
	if r := f.result(dropped); r.ItemCount != 9 || r.SizeBytes != 1300 || len(r.Indexes) != 0 {
		t.Fatalf("after a drop: %+v", r)
	}
	f.add(&delta{v: 8, idx: map[string][2]int64{"a": {1, 4}}}, 1, dropped)
	if r := f.result(dropped); !reflect.DeepEqual(r.Indexes, map[string]backend.IndexStats{"a": {ItemCount: 1, SizeBytes: 4}}) {
		t.Fatalf("created again: %+v", r)
	}
}

// TestCountsBigEntries: index entries too large for one multi-partition
// batch (Cassandra refuses one over 50 KiB) are applied by the writer
// all the same, with the delta's copy: the index and the figures are
// right as soon as the write returns.
func TestCountsBigEntries(t *testing.T) {
	b := openT(t, keyspace)
	ctx := t.Context()
	ref := newTable(t, b, "big")
	big := func(c byte) []byte {
		v := make([]byte, 60<<10)
		for i := range v {
			v[i] = c
		}
		return v
	}
	for i, gk := range []string{"g1", "g2", "g3"} {
		item := big(byte('a' + i))
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("k"), Fn: func(old []byte) (backend.Change, error) {
			ch := backend.Change{Op: backend.Put, Item: item, PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte(gk), SK: []byte("k")}, Item: item}}}
			if old != nil {
				ch.DeleteIndex = []backend.IndexKey{{Index: "g", PK: []byte(fmt.Sprintf("g%d", i)), SK: []byte("k")}}
			}
			return ch, nil
		}}); err != nil {
			t.Fatal(err)
		}
		for j, g := range []string{"g1", "g2", "g3"} {
			q, err := b.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: []byte(g), Forward: true, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[j == i]; len(q.Rows) != want {
				t.Fatalf("write %d: %d entries under %s, want %d", i, len(q.Rows), g, want)
			}
		}
		full := exact(ctx, t, b, fmt.Sprintf("write %d", i), ref)
		if full.ItemCount != 1 || full.Indexes["g"].ItemCount != 1 {
			t.Fatalf("figures %+v", *full)
		}
	}
}
