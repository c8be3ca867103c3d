package backup

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backup/plan"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// TestPlans runs a plan on an injected clock over two managers sharing a
// catalog (two servers): a new plan waits for its first slot; each due
// slot runs once across both, backing up every covered table under the
// plan's name; a downtime of several slots runs once; keep_last deletes
// the oldest; a table whose backup fails makes the run FAILED and the
// table's previous backups stay.
func TestPlans(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		for _, name := range []string{"orders", "users-1", "other"} {
			ref := createTable(t, b, name)
			for i := range 20 {
				put(t, b, ref, i, "v")
			}
		}
		jobs := b.Capabilities().Jobs
		st := memstore.New()
		var clock atomic.Int64
		clock.Store(time.Date(2026, 12, 5, 10, 30, 0, 0, time.UTC).UnixMilli())
		now := func() time.Time { return time.UnixMilli(clock.Load()).UTC() }
		pl, err := plan.Compile(plan.Spec{Name: "hourly", Account: account, Tables: []string{"orders", "users-*", "ghost*"},
			Cron: "0 * * * *", KeepLast: 2})
		if err != nil {
			t.Fatal(err)
		}
		var ghost atomic.Bool
		tables := func(ctx context.Context, acct string) ([]string, error) {
			res, err := b.ListTables(ctx, backend.ListTablesParams{Account: acct})
			if err != nil {
				return nil, err
			}
			if ghost.Load() {
				return append(res.Names, "ghost"), nil
			}
			return res.Names, nil
		}
		var runners []*Plans
		for range 2 {
			m := newManager(t, b, st, nil)
			runners = append(runners, NewPlans(m, PlansConfig{Plans: []*plan.Plan{pl}, Jobs: jobs, Tables: tables, Now: now}, nil))
		}
		tickAll := func() {
			t.Helper()
			var wg sync.WaitGroup
			for _, r := range runners {
				wg.Add(1)
				go func() { defer wg.Done(); r.Tick(t.Context()) }()
			}
			wg.Wait()
			for _, r := range runners {
				r.Wait()
			}
		}
		planBackups := func() map[string][]backend.BackupRecord {
			t.Helper()
			rows, err := runners[0].m.ListBackups(t.Context(), backend.ListBackupsParams{Account: account, Types: []string{"AWS_BACKUP"},
				Statuses: []string{backend.BackupCreating, backend.BackupAvailable}})
			if err != nil {
				t.Fatal(err)
			}
			out := map[string][]backend.BackupRecord{}
			for _, r := range rows {
				out[r.TableName] = append(out[r.TableName], r)
			}
			return out
		}
		tickAll()
		if got := planBackups(); len(got) != 0 {
			t.Fatalf("a new plan ran before its first slot: %v", got)
		}
		clock.Store(time.Date(2026, 12, 5, 11, 0, 5, 0, time.UTC).UnixMilli())
		tickAll()
		tickAll() // the slot is done: nothing more
		got := planBackups()
		if len(got) != 2 || len(got["orders"]) != 1 || len(got["users-1"]) != 1 {
			t.Fatalf("after the first slot: %v", got)
		}
		if r := got["orders"][0]; r.Name != "hourly-orders-20261205T110000Z" || r.Plan != "hourly" || r.Type != "AWS_BACKUP" {
			t.Fatalf("the plan's backup: %+v", r)
		}
		st0, err := runners[1].Status(t.Context(), pl)
		if err != nil || st0.LastStatus != RunSucceeded || !st0.LastSuccess.Equal(time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC)) || st0.LastRun.Tables != 2 {
			t.Fatalf("status after the first run: %+v, %v", st0, err)
		}

		// Three slots missed: one run, for the latest.
		clock.Store(time.Date(2026, 12, 5, 14, 10, 0, 0, time.UTC).UnixMilli())
		tickAll()
		got = planBackups()
		if len(got["orders"]) != 2 || !strings.HasSuffix(got["orders"][1].Name, "T140000Z") && !strings.HasSuffix(got["orders"][0].Name, "T140000Z") {
			t.Fatalf("after a downtime: %v", got["orders"])
		}

		// A third run: keep_last 2 deletes the oldest.
		clock.Store(time.Date(2026, 12, 5, 15, 0, 1, 0, time.UTC).UnixMilli())
		tickAll()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got = planBackups()
			if len(got["orders"]) == 2 && len(got["users-1"]) == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("retention kept %d and %d backups", len(got["orders"]), len(got["users-1"]))
			}
			time.Sleep(50 * time.Millisecond)
		}
		for _, r := range got["orders"] {
			if strings.HasSuffix(r.Name, "T110000Z") {
				t.Fatalf("the oldest backup was kept: %v", got["orders"])
			}
		}

		// A failing table: the run is FAILED, names it, keeps the rest.
		ghost.Store(true)
		clock.Store(time.Date(2026, 12, 5, 16, 0, 1, 0, time.UTC).UnixMilli())
		tickAll()
		st1, err := runners[0].Status(t.Context(), pl)
		if err != nil || st1.LastStatus != RunFailed || len(st1.LastRun.Failures) != 1 || st1.LastRun.Failures[0].Table != "ghost" ||
			!st1.LastSuccess.Equal(time.Date(2026, 12, 5, 15, 0, 0, 0, time.UTC)) {
			t.Fatalf("status after a failure: %+v, %v", st1, err)
		}
		if !strings.Contains(st1.LastMessage, "ghost") {
			t.Fatalf("the failure message does not name the table: %q", st1.LastMessage)
		}
		if got := planBackups(); len(got["orders"]) != 2 {
			t.Fatalf("after the failed run: %v", got["orders"])
		}
		// Every slot ran exactly once across the two servers.
		runs, err := jobs.ListJobs(t.Context(), backend.ListJobsParams{Kind: kindPlanRun})
		if err != nil || len(runs) != 4 {
			t.Fatalf("run rows: %d, %v", len(runs), err)
		}
	})
}

// TestPlanManyTables runs a plan covering 1,000 tables (250 under the
// race detector, which slows every job several times): every table is
// backed up once, none fails for want of a job slot, and no more than
// max_concurrent_jobs backups run at once (while several do).
func TestPlanManyTables(t *testing.T) {
	const limit = 3
	n := 1000
	if raceEnabled {
		n = 250
	}
	forEach(t, func(t *testing.T, b backend.Backend) {
		for i := range n {
			ref := createTable(t, b, fmt.Sprintf("t%04d", i))
			if i%100 == 0 {
				put(t, b, ref, i, "v")
			}
		}
		var inflight, peak atomic.Int64
		m := newManager(t, b, memstore.New(), func(c *Config) {
			c.MaxConcurrentJobs = limit
			c.Hook = func(point string) {
				switch point {
				case PointSnapshotOpen:
					v := inflight.Add(1)
					for p := peak.Load(); v > p && !peak.CompareAndSwap(p, v); p = peak.Load() {
					}
					time.Sleep(2 * time.Millisecond) // let the others overlap
				case PointBeforeAvailable:
					inflight.Add(-1)
				}
			}
		})
		clock := time.Date(2026, 12, 5, 2, 0, 0, 0, time.UTC)
		now := func() time.Time { return clock }
		pl, err := plan.Compile(plan.Spec{Name: "all", Account: account, Tables: []string{"t*"}, Cron: "0 3 * * *", KeepLast: 1})
		if err != nil {
			t.Fatal(err)
		}
		tables := func(ctx context.Context, acct string) ([]string, error) {
			res, err := b.ListTables(ctx, backend.ListTablesParams{Account: acct})
			if err != nil {
				return nil, err
			}
			return res.Names, nil
		}
		r := NewPlans(m, PlansConfig{Plans: []*plan.Plan{pl}, Jobs: b.Capabilities().Jobs, Tables: tables, Now: now}, nil)
		r.Tick(t.Context()) // first seen before its slot
		r.Wait()
		clock = time.Date(2026, 12, 5, 3, 0, 1, 0, time.UTC)
		start := time.Now()
		r.Tick(t.Context())
		r.Wait()
		t.Logf("%d tables in %v, at most %d at once", n, time.Since(start).Round(time.Millisecond), peak.Load())
		st, err := r.Status(t.Context(), pl)
		if err != nil || st.LastStatus != RunSucceeded || st.LastRun == nil || st.LastRun.Tables != n || len(st.LastRun.Backups) != n ||
			len(st.LastRun.Failures) != 0 {
			t.Fatalf("status: %+v, %v", st, err)
		}
		rows, err := m.ListBackups(t.Context(), backend.ListBackupsParams{Account: account, Types: []string{"AWS_BACKUP"},
			Statuses: []string{backend.BackupAvailable}})
		if err != nil || len(rows) != n {
			t.Fatalf("%d AVAILABLE plan backups, want %d (%v)", len(rows), n, err)
		}
		seen := map[string]bool{}
		for _, row := range rows {
			if seen[row.TableName] || row.Name != "all-"+row.TableName+"-20261205T030000Z" {
				t.Fatalf("backup %s of %s (twice: %v)", row.Name, row.TableName, seen[row.TableName])
			}
			seen[row.TableName] = true
		}
		if p := peak.Load(); p > limit || p < 2 {
			t.Fatalf("at most %d backups ran at once, want between 2 and %d", p, limit)
		}
	})
}
