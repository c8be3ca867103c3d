package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// TestFoldVacuumsDeltas: the fold loop moves the writes' deltas into
// table_stats (none is left in table_stats_delta), and once it has folded
// vacuumAfter of them it vacuums table_stats_delta itself (a manual
// vacuum, counted apart from autovacuum's); the figures stay right.
func TestFoldVacuumsDeltas(t *testing.T) {
	dsn := ownDatabase(t)
	old := vacuumAfter
	vacuumAfter = 20
	t.Cleanup(func() { vacuumAfter = old })
	b := openT(t, Options{DSN: dsn})
	ctx := context.Background()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "acct", Name: "v", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	const n = 30
	for i := range n {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(fmt.Sprint(i)),
			Fn: func([]byte) (backend.Change, error) {
				return backend.Change{Op: backend.Put, Item: []byte("item")}, nil
			}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var vacuums int64
		if err := b.pool.QueryRow(ctx, `SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'table_stats_delta'`).Scan(&vacuums); err != nil {
			t.Fatal(err)
		}
		if vacuums > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("table_stats_delta not vacuumed 20 s after 30 deltas (vacuumAfter 20)")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var left, folded int64
	if err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM table_stats_delta WHERE t = $1),
		(SELECT coalesce(sum(items), 0) FROM table_stats WHERE t = $1 AND ix = '')`, ref.ID).Scan(&left, &folded); err != nil {
		t.Fatal(err)
	}
	if left != 0 || folded != n {
		t.Fatalf("after the fold: %d deltas left, table_stats %d items; want 0 and %d", left, folded, n)
	}
	res, err := b.Counts(ctx, backend.CountsParams{Table: ref})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Counted || res.Stats.ItemCount != n {
		t.Fatalf("counts after the vacuum: %+v, want %d items", res, n)
	}
}

// TestFoldFailuresAreCounted: a fold that fails (here the delta table is
// renamed away under it) is counted in Stats().BackgroundFailures, and the
// deltas are folded once it can run again.
func TestFoldFailuresAreCounted(t *testing.T) {
	dsn := ownDatabase(t)
	b := openT(t, Options{DSN: dsn})
	ctx := context.Background()
	if st := b.Stats(); !st.HasBackground || st.BackgroundFailures != 0 {
		t.Fatalf("a fresh backend: %+v", st)
	}
	if _, err := b.pool.Exec(ctx, `ALTER TABLE table_stats_delta RENAME TO table_stats_delta_away`); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for b.Stats().BackgroundFailures == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no background failure counted 20 s after the delta table went away")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := b.pool.Exec(ctx, `ALTER TABLE table_stats_delta_away RENAME TO table_stats_delta`); err != nil {
		t.Fatal(err)
	}
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "acct", Name: "f", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: cr.Table.Ref(), PK: []byte("k"),
		Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("item")}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	for {
		var left int64
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM table_stats_delta`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deltas left unfolded after the table came back", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
