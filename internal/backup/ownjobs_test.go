package backup

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// TestReconcilerLeavesItsOwnRunningJobs: a job whose heartbeat lags past
// stale_after (a slow or loaded backend: on FerretDB a heartbeat is four
// round trips queued behind the restore's writes) is not taken over by
// its own server's reconciler while the job runs there: before, the
// server claimed its own restore, fenced it and loaded the target again
// from the start, over and over. Another server still takes it over.
func TestReconcilerLeavesItsOwnRunningJobs(t *testing.T) {
	forEach(t, testOwnJobs)
	// A backend that writes item by item (backend.Capabilities.PerItemAtomic, as
	// MongoDB and Cassandra): the restore loads with WriteItem, never a
	// multi-item TransactWrite, and the stale owner is fenced all the same.
	t.Run("sqlite-per-item", func(t *testing.T) {
		b := &perItemBackend{Backend: backends(t)[0].open(t).(*sqlite.Backend)}
		testOwnJobs(t, b)
		if n := b.transacts.Load(); n != 0 {
			t.Fatalf("%d TransactWrite calls on a per-item backend", n)
		}
		if n := b.fenced.Load(); n == 0 {
			t.Fatal("no item write of the stale owner was refused by the fence")
		}
	})
}

// perItemBackend is SQLite declaring per-item atomicity
// (backend.Capabilities.PerItemAtomic), counting TransactWrite calls and
// WriteItems refused by the table version fence.
type perItemBackend struct {
	*sqlite.Backend
	transacts, fenced atomic.Int64
}

func (p *perItemBackend) Capabilities() backend.Capabilities {
	caps := p.Backend.Capabilities()
	caps.PerItemAtomic = true
	return caps
}

func (p *perItemBackend) TransactWrite(ctx context.Context, tp backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	p.transacts.Add(1)
	return p.Backend.TransactWrite(ctx, tp)
}

func (p *perItemBackend) WriteItem(ctx context.Context, wp backend.WriteItemParams) (*backend.WriteItemResult, error) {
	r, err := p.Backend.WriteItem(ctx, wp)
	if backend.IsKind(err, backend.KindTableVersion) {
		p.fenced.Add(1)
	}
	return r, err
}

func testOwnJobs(t *testing.T, b backend.Backend) {
	{
		// Several batches, bulk (500, ADR 0032) or not (100): the stale
		// owner still has batches to write after the takeover.
		const items = 1250
		ref := createTable(t, b, "src")
		for i := range items {
			put(t, b, ref, i, "v")
		}
		st := memstore.New()
		var mu sync.Mutex
		gates := map[string]chan struct{}{}
		reached := map[string]chan struct{}{}
		held := map[string]bool{}
		for _, p := range []string{PointMidData, PointRestoreMidLoad} {
			gates[p], reached[p] = make(chan struct{}), make(chan struct{})
		}
		m := newManager(t, b, st, func(c *Config) {
			c.HeartbeatInterval = time.Hour // its heartbeat never comes in time
			c.StaleAfter = 100 * time.Millisecond
			c.Restorer = testRestorer{}
			c.SpoolDir = t.TempDir()
			c.Hook = func(p string) {
				mu.Lock()
				g, r, first := gates[p], reached[p], !held[p]
				held[p] = true
				mu.Unlock()
				if g != nil && first {
					close(r)
					<-g
				}
			}
		})
		opened := map[string]bool{}
		open := func(p string) {
			mu.Lock()
			defer mu.Unlock()
			if !opened[p] {
				opened[p] = true
				close(gates[p])
			}
		}
		// Hooks may still wait when the test fails: open them before m.Close.
		t.Cleanup(func() {
			open(PointMidData)
			open(PointRestoreMidLoad)
		})
		rec, err := m.CreateBackup(t.Context(), account, "src", "own")
		if err != nil {
			t.Fatal(err)
		}
		<-reached[PointMidData]
		time.Sleep(300 * time.Millisecond) // the claim is stale by its heartbeat
		if err := m.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got, _ := m.GetBackup(t.Context(), rec.ARN); got.Status != backend.BackupCreating || got.Generation != 1 {
			t.Fatalf("the server took its own running backup over: %+v", got)
		}
		open(PointMidData)
		bk := *waitStatus(t, m, rec.ARN, backend.BackupAvailable)

		if err := restoreInto(t.Context(), m, b, bk, "dst"); err != nil {
			t.Fatal(err)
		}
		<-reached[PointRestoreMidLoad]
		time.Sleep(300 * time.Millisecond)
		if err := m.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := counter(t, m, "resumed_restore"); n != 0 {
			t.Fatalf("the server took its own running restore over (%v times)", n)
		}
		rows, err := m.rcat.ListRestores(t.Context(), []string{backend.RestoreRunning})
		if err != nil || len(rows) != 1 || rows[0].Generation != 1 || rows[0].Owner != m.Owner() {
			t.Fatalf("restore job after the reconciler: %+v, %v", rows, err)
		}
		// Another server judges by the heartbeat: it takes the job over.
		other := newManager(t, otherServer(b), st, func(c *Config) {
			c.StaleAfter = 100 * time.Millisecond
			c.Restorer = testRestorer{}
			c.SpoolDir = t.TempDir()
		})
		if err := other.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := counter(t, other, "resumed_restore"); n != 1 {
			t.Fatalf("another server took the stale job over %v times, want 1", n)
		}
		open(PointRestoreMidLoad)
		deadline := time.Now().Add(30 * time.Second)
		for m.RestoringFrom(bk.ARN) || other.RestoringFrom(bk.ARN) {
			if time.Now().After(deadline) {
				t.Fatal("the restore does not end")
			}
			time.Sleep(20 * time.Millisecond)
		}
		res, err := b.Scan(t.Context(), backend.ScanParams{Table: mustTable(t, b, "dst").Ref(), Limit: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) != items {
			t.Fatalf("restored %d items, want %d", len(res.Rows), items)
		}
		// The stale owner resumed after the takeover: fenced, not done.
		// (RestoringFrom reads the job's row, which the new owner ends:
		// the stale job's end may be counted a moment later.)
		for finished(t, m, "ok")+finished(t, m, causeFenced) < 2 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if ok, fenced := finished(t, m, "ok"), finished(t, m, causeFenced); ok != 1 || fenced != 1 {
			t.Fatalf("the first server's restores: ok %v (its backup only), fenced %v; want 1 and 1", ok, fenced)
		}
	}
}

func finished(t *testing.T, m *Manager, result string) float64 {
	t.Helper()
	var pm dto.Metric
	if err := m.met.finished.WithLabelValues(kindRestore, result).Write(&pm); err != nil {
		t.Fatal(err)
	}
	v := pm.GetCounter().GetValue()
	if result == "ok" {
		var bm dto.Metric
		if err := m.met.finished.WithLabelValues(kindBackup, result).Write(&bm); err != nil {
			t.Fatal(err)
		}
		v += bm.GetCounter().GetValue()
	}
	return v
}

func mustTable(t *testing.T, b backend.Backend, name string) *backend.Table {
	t.Helper()
	res, err := b.GetTable(t.Context(), backend.GetTableParams{Account: account, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return res.Table
}

func counter(t *testing.T, m *Manager, action string) float64 {
	t.Helper()
	var pm dto.Metric
	if err := m.met.reconciled.WithLabelValues(action).Write(&pm); err != nil {
		t.Fatal(err)
	}
	return pm.GetCounter().GetValue()
}
