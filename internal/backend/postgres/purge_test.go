package postgres

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// purgeFill creates a table and writes n items, each with an index entry
// and a change record.
func purgeFill(t testing.TB, b *Backend, name string, n int) backend.TableRef {
	t.Helper()
	ctx := context.Background()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "acct", Name: name, Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	for i := range n {
		pk := []byte(fmt.Sprintf("k%05d", i))
		ch := backend.Change{Op: backend.Put, Item: []byte("item-" + string(pk)), Log: []byte("rec"),
			PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "gsi", PK: []byte("g"), SK: pk}, Item: []byte("p")}}}
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk,
			Fn: func([]byte) (backend.Change, error) { return ch, nil }}); err != nil {
			t.Fatal(err)
		}
	}
	return ref
}

// purgeRows counts a table id's rows in items, idx, changelog_pending and
// changelog, and the purge list's rows.
func purgeRows(t testing.TB, b *Backend, id int64) (rows, listed int) {
	t.Helper()
	err := b.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM items WHERE t = $1) + (SELECT count(*) FROM idx WHERE t = $1)
		+ (SELECT count(*) FROM changelog_pending WHERE t = $1) + (SELECT count(*) FROM changelog WHERE t = $1),
		(SELECT count(*) FROM purge)`, id).Scan(&rows, &listed)
	if err != nil {
		t.Fatal(err)
	}
	return rows, listed
}

func waitPurged(t testing.TB, b *Backend, id int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		rows, listed := purgeRows(t, b, id)
		if rows == 0 && listed == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("table %d: %d rows and %d purge rows left after 60 s", id, rows, listed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDeleteTableLeavesRowsToThePurger: DeleteTable commits without
// deleting the table's rows (they are left to the purger, held here);
// the old incarnation answers KindTableNotFound and a new table of the
// same name sees none of them. Opened again with the purger running (as
// after a crash), the backend finishes the purge in steps of purgeBatch
// rows, while another table takes writes.
func TestDeleteTableLeavesRowsToThePurger(t *testing.T) {
	dsn := ownDatabase(t)
	old := purgeBatch
	purgeBatch = 100
	testHoldPurge = true
	t.Cleanup(func() { purgeBatch, testHoldPurge = old, false })
	b, err := Open(t.Context(), Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	const n = 400
	ref := purgeFill(t, b, "gone", n)
	if _, err := b.DeleteTable(t.Context(), backend.DeleteTableParams{Account: "acct", Name: "gone"}); err != nil {
		t.Fatal(err)
	}
	if rows, listed := purgeRows(t, b, ref.ID); rows != 3*n || listed != 1 {
		t.Fatalf("after DeleteTable with the purger held: %d rows, %d purge rows; want %d and 1", rows, listed, 3*n)
	}
	pk := []byte("k00001")
	_, err = b.GetItem(t.Context(), backend.GetItemParams{Table: ref, PK: pk})
	if !backend.IsKind(err, backend.KindTableNotFound) {
		t.Fatalf("GetItem of the deleted table: %v", err)
	}
	_, err = b.Scan(t.Context(), backend.ScanParams{Table: ref, Limit: 10})
	if !backend.IsKind(err, backend.KindTableNotFound) {
		t.Fatalf("Scan of the deleted table: %v", err)
	}
	again, err := b.CreateTable(t.Context(), backend.CreateTableParams{Account: "acct", Name: "gone", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	nref := again.Table.Ref()
	if g, err := b.GetItem(t.Context(), backend.GetItemParams{Table: nref, PK: pk}); err != nil || g.Item != nil {
		t.Fatalf("GetItem of the new table: %+v, %v", g, err)
	}
	if s, err := b.Scan(t.Context(), backend.ScanParams{Table: nref, Limit: 10}); err != nil || len(s.Rows) != 0 {
		t.Fatalf("Scan of the new table: %+v, %v", s, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	testHoldPurge = false
	b = openT(t, Options{DSN: dsn})
	other := purgeFill(t, b, "other", 50)
	waitPurged(t, b, ref.ID)
	if rows, _ := purgeRows(t, b, other.ID); rows != 150 {
		t.Fatalf("the other table has %d rows, want 150", rows)
	}
	// Deleted with the purger running: gone in the background, and the
	// new incarnation of "gone" keeps its own items.
	if _, err := b.WriteItem(t.Context(), backend.WriteItemParams{Table: nref, PK: pk,
		Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: []byte("new")}, nil }}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DeleteTable(t.Context(), backend.DeleteTableParams{Account: "acct", Name: "other"}); err != nil {
		t.Fatal(err)
	}
	waitPurged(t, b, other.ID)
	if g, err := b.GetItem(t.Context(), backend.GetItemParams{Table: nref, PK: pk}); err != nil || string(g.Item) != "new" {
		t.Fatalf("GetItem of the new table after the purges: %+v, %v", g, err)
	}
}

// TestPurgeSteps: a step deletes at most purgeBatch rows of one relation
// after its cursor, in key order; the purge row goes with a statement
// that finds nothing left; and two backends (two servers) purging the
// same table at once leave no row and no purge row behind.
func TestPurgeSteps(t *testing.T) {
	dsn := ownDatabase(t)
	old := purgeBatch
	purgeBatch = 40
	testHoldPurge = true
	t.Cleanup(func() { purgeBatch, testHoldPurge = old, false })
	b := openT(t, Options{DSN: dsn})
	ref := purgeFill(t, b, "steps", 30) // 90 rows: 30 items, entries and pending records
	if _, err := b.DeleteTable(t.Context(), backend.DeleteTableParams{Account: "acct", Name: "steps"}); err != nil {
		t.Fatal(err)
	}
	var st *purgeState
	step := func() bool {
		more, err := b.purgeStep(t.Context(), &st)
		if err != nil {
			t.Fatal(err)
		}
		return more
	}
	// 30 rows per relation, fewer than the batch: one step each (the
	// published log is empty), then the step that removes the purge row.
	for i, want := range []struct{ rows, listed int }{{60, 1}, {30, 1}, {0, 1}, {0, 1}, {0, 0}} {
		if !step() {
			t.Fatalf("step %d: nothing to do", i)
		}
		if rows, listed := purgeRows(t, b, ref.ID); rows != want.rows || listed != want.listed {
			t.Fatalf("after step %d: %d rows, %d purge rows; want %+v", i, rows, listed, want)
		}
	}
	if step() {
		t.Fatal("a step with an empty purge list reported more work")
	}

	// A batch smaller than a relation: the cursor carries on.
	purgeBatch = 7
	ref = purgeFill(t, b, "cursor", 30)
	if _, err := b.DeleteTable(t.Context(), backend.DeleteTableParams{Account: "acct", Name: "cursor"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		step()
	}
	if rows, _ := purgeRows(t, b, ref.ID); rows != 90-21 {
		t.Fatalf("after 3 steps of 7: %d rows, want 69", rows)
	}
	// The same table purged by two servers at once.
	b2 := openT(t, Options{DSN: dsn})
	done := make(chan error, 2)
	for _, be := range []*Backend{b, b2} {
		go func() {
			var st *purgeState
			for {
				more, err := be.purgeStep(context.Background(), &st)
				if err != nil || !more {
					done <- err
					return
				}
			}
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	// Each stops when its walk is done; one of them removed the purge row,
	// or, when each saw the other's deletes uncommitted, the next pass does.
	for {
		if !step() {
			break
		}
	}
	if rows, listed := purgeRows(t, b, ref.ID); rows != 0 || listed != 0 {
		t.Fatalf("after two purgers: %d rows, %d purge rows", rows, listed)
	}
}

// BenchmarkDeleteLargeTable loads a table of EXTENDDB_BENCH_DELETE_ITEMS
// (default 200,000) items of 1 KiB, each with an index entry, and
// measures DeleteTable's duration, the time until its rows are gone, and
// the longest PutItem of another table taken meanwhile by a writer that
// writes one item after another.
func BenchmarkDeleteLargeTable(b *testing.B) {
	n := 200_000
	if v := os.Getenv("EXTENDDB_BENCH_DELETE_ITEMS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	be := openT(b, Options{DSN: ownDatabase(b)})
	payload := make([]byte, 1024)
	const batch = 1000
	for i := range b.N {
		name := fmt.Sprintf("big%d", i)
		cr, err := be.CreateTable(ctx, backend.CreateTableParams{Account: "acct", Name: name, Desc: []byte("d")})
		if err != nil {
			b.Fatal(err)
		}
		ref := cr.Table.Ref()
		for lo := 0; lo < n; lo += batch {
			items := make([]backend.BulkItem, 0, batch)
			for j := lo; j < min(lo+batch, n); j++ {
				pk := []byte(fmt.Sprintf("k%09d", j))
				items = append(items, backend.BulkItem{PK: pk, Change: backend.Change{Op: backend.Put, Item: payload,
					PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "gsi", PK: pk[:4], SK: pk}, Item: pk}}}})
			}
			if err := be.BulkLoad(ctx, backend.BulkLoadParams{Table: ref, Items: items}); err != nil {
				b.Fatal(err)
			}
		}
		ocr, err := be.CreateTable(ctx, backend.CreateTableParams{Account: "acct", Name: name + "-other", Desc: []byte("d")})
		if err != nil {
			b.Fatal(err)
		}
		other := ocr.Table.Ref()
		stop := make(chan struct{})
		worst := make(chan time.Duration)
		go func() {
			var w time.Duration
			for k := 0; ; k++ {
				select {
				case <-stop:
					worst <- w
					return
				default:
				}
				t0 := time.Now()
				if _, err := be.WriteItem(ctx, backend.WriteItemParams{Table: other, PK: []byte(fmt.Sprint(k % 100)),
					Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: payload}, nil }}); err != nil {
					panic(err)
				}
				w = max(w, time.Since(t0))
			}
		}()
		time.Sleep(100 * time.Millisecond)
		b.ResetTimer()
		t0 := time.Now()
		if _, err := be.DeleteTable(ctx, backend.DeleteTableParams{Account: "acct", Name: name}); err != nil {
			b.Fatal(err)
		}
		del := time.Since(t0)
		for {
			var left int
			if err := be.pool.QueryRow(ctx, `SELECT count(*) FROM purge`).Scan(&left); err != nil {
				b.Fatal(err)
			}
			if left == 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		gone := time.Since(t0)
		b.StopTimer()
		close(stop)
		w := <-worst
		b.ReportMetric(del.Seconds()*1000, "deletetable-ms")
		b.ReportMetric(gone.Seconds()*1000, "rows-gone-ms")
		b.ReportMetric(w.Seconds()*1000, "worst-other-put-ms")
	}
}
