package backup

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backup/plan"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store/memstore"
)

// TestPlanManyTables: one run of a plan covering many tables (1,000 by
// default, 250 under the race detector; EXTENDDB_PLAN_TABLES) backs each
// up once, never more than the concurrency at a time, and finishes
// SUCCEEDED.
func TestPlanManyTables(t *testing.T) {
	n := 1000
	if raceEnabled {
		n = 250
	}
	if v, err := strconv.Atoi(os.Getenv("EXTENDDB_PLAN_TABLES")); err == nil && v > 0 {
		n = v
	}
	b := backends(t)[0].open(t) // SQLite: the scale is the scheduler's, not the backend's
	for i := range n {
		ref := createTable(t, b, fmt.Sprintf("t%04d", i))
		put(t, b, ref, i, "v")
	}
	const concurrency = 4
	var running, peak atomic.Int32
	m := newManager(t, b, memstore.New(), func(c *Config) {
		c.MaxConcurrentJobs = concurrency
		c.Hook = func(p string) {
			if p == PointSnapshotOpen {
				r := running.Add(1)
				for {
					old := peak.Load()
					if r <= old || peak.CompareAndSwap(old, r) {
						break
					}
				}
				time.Sleep(time.Millisecond)
				running.Add(-1)
			}
		}
	})
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC).UnixMilli())
	now := func() time.Time { return time.UnixMilli(clock.Load()).UTC() }
	pl, err := plan.Compile(plan.Spec{Name: "all", Account: account, Tables: []string{"t*"}, Cron: "0 3 * * *", KeepLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := NewPlans(m, PlansConfig{Plans: []*plan.Plan{pl}, Jobs: b.Capabilities().Jobs, Concurrency: concurrency, Now: now,
		Tables: func(ctx context.Context, acct string) ([]string, error) {
			res, err := b.ListTables(ctx, storage.ListTablesParams{Account: acct})
			if err != nil {
				return nil, err
			}
			return res.Names, nil
		}}, nil)
	p.Tick(t.Context())
	clock.Store(time.Date(2026, 12, 5, 3, 0, 1, 0, time.UTC).UnixMilli())
	start := time.Now()
	p.Tick(t.Context())
	p.Wait()
	st, err := p.Status(t.Context(), pl)
	if err != nil || st.LastStatus != RunSucceeded || st.LastRun.Tables != n || len(st.LastRun.Backups) != n || len(st.LastRun.Failures) != 0 {
		t.Fatalf("status: %+v %v", st, err)
	}
	rows, err := m.ListBackups(t.Context(), storage.ListBackupsParams{Account: account, Types: []string{"AWS_BACKUP"}})
	if err != nil || len(rows) != n {
		t.Fatalf("%d plan backups, want %d (%v)", len(rows), n, err)
	}
	if pk := peak.Load(); pk > concurrency {
		t.Fatalf("%d backups ran at once, the bound is %d", pk, concurrency)
	}
	t.Logf("%d tables backed up in %v, at most %d at once", n, time.Since(start).Round(time.Millisecond), peak.Load())
}
