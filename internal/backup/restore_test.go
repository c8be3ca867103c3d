package backup

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// testRestorer stands in for the engine's index rules in these tests:
// items are put by their key, without index entries.
type testRestorer struct{ descJSON }

func (testRestorer) ItemLoader(t *backend.Table) (func(item []byte) (pk, sk []byte, ch backend.Change, err error), error) {
	return func(item []byte) ([]byte, []byte, backend.Change, error) {
		it, err := attr.DecodeItem(item)
		if err != nil {
			return nil, nil, backend.Change{}, err
		}
		pk, _ := attr.KeyBytes(it["pk"])
		sk, _ := attr.KeyBytes(it["sk"])
		return pk, sk, backend.Change{Op: backend.Put, Item: item}, nil
	}, nil
}

func (testRestorer) IsRestoreTarget(t *backend.Table, arn string) bool { return true }

func (testRestorer) FinishRestore(t *backend.Table) ([]byte, error) {
	return append([]byte(nil), t.Desc...), nil
}

// countingBackend counts the item batches written (TransactWrite and
// BulkLoad).
type countingBackend struct {
	*sqlite.Backend
	writes atomic.Int64
}

// Capabilities: SQLite's, with the counting bulk loader.
func (c *countingBackend) Capabilities() backend.Capabilities {
	caps := c.Backend.Capabilities()
	caps.Bulk = c
	return caps
}

func (c *countingBackend) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	c.writes.Add(1)
	return c.Backend.TransactWrite(ctx, p)
}

func (c *countingBackend) BulkLoad(ctx context.Context, p backend.BulkLoadParams) error {
	c.writes.Add(1)
	return c.Backend.BulkLoad(ctx, p)
}

// TestRestoreRefusesAnyFlippedByte: a flipped byte in any object of the
// backup (sidecar, manifest, AWS export manifests, data files) fails the
// restore before its first write, and
// the target is removed; the intact backup restores every item.
func TestRestoreRefusesAnyFlippedByte(t *testing.T) {
	raw, err := sqlite.Open(context.Background(), sqlite.Options{Path: t.TempDir() + "/db.sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	b := &countingBackend{Backend: raw}
	ref := createTable(t, b, "src")
	for i := range 500 {
		put(t, b, ref, i, "v")
	}
	st := memstore.New()
	m := newManager(t, b, st, func(c *Config) { c.Restorer = testRestorer{}; c.SpoolDir = t.TempDir() })
	rec, err := m.CreateBackup(t.Context(), account, "src", "flip")
	if err != nil {
		t.Fatal(err)
	}
	bk := *waitStatus(t, m, rec.ARN, backend.BackupAvailable)
	objs, err := st.List(t.Context(), bk.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	restore := func(name string) (*backend.Table, error) {
		if err := restoreInto(t.Context(), m, b, bk, name); err != nil {
			return nil, err
		}
		deadline := time.Now().Add(20 * time.Second)
		for m.restoresRunning(bk.ARN) {
			if time.Now().After(deadline) {
				t.Fatal("restore does not end")
			}
			time.Sleep(10 * time.Millisecond)
		}
		cur, err := b.GetTable(t.Context(), backend.GetTableParams{Account: account, Name: name})
		if err != nil {
			return nil, err
		}
		return cur.Table, nil
	}
	checked := 0
	for i, o := range objs {
		rc, err := st.Get(t.Context(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		orig, _ := io.ReadAll(rc)
		rc.Close()
		bad := append([]byte(nil), orig...)
		bad[len(bad)/2] ^= 0x01
		if err := st.Put(t.Context(), o.Key, strings.NewReader(string(bad))); err != nil {
			t.Fatal(err)
		}
		before := b.writes.Load()
		name := "dst" + string(rune('a'+i))
		_, err = restore(name)
		// A failed job stops counting as using the backup just before it
		// removes its target (so a backend that deletes slowly does not
		// hold the backup): the removal may still be under way.
		for wait := time.Now().Add(10 * time.Second); err == nil && time.Now().Before(wait); {
			time.Sleep(10 * time.Millisecond)
			_, err = b.GetTable(t.Context(), backend.GetTableParams{Account: account, Name: name})
		}
		if !backend.IsKind(err, backend.KindTableNotFound) {
			t.Fatalf("flipped byte in %s: the target is still there (%v)", o.Key, err)
		}
		if b.writes.Load() != before {
			t.Fatalf("flipped byte in %s: %d batches were written before the failure", o.Key, b.writes.Load()-before)
		}
		if err := st.Put(t.Context(), o.Key, strings.NewReader(string(orig))); err != nil {
			t.Fatal(err)
		}
		checked++
	}
	if checked < 5 { // data, manifest-files.json, manifest-summary.json, manifest, sidecar
		t.Fatalf("only %d objects checked", checked)
	}
	tbl, err := restore("good")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var after *backend.Cursor
	for {
		res, err := b.Scan(t.Context(), backend.ScanParams{Table: tbl.Ref(), After: after, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n += len(res.Rows)
		if !res.More || len(res.Rows) == 0 {
			break
		}
		last := res.Rows[len(res.Rows)-1]
		after = &backend.Cursor{PK: last.PK, SK: last.SK, BasePK: last.BasePK, BaseSK: last.BaseSK}
	}
	if n != 500 {
		t.Fatalf("restored %d items, want 500", n)
	}
}

// TestRestoreResumesAfterRecordedProgress: a restore stopped after its
// first batch (its owner shut down at the mid-load step) is taken over by
// another owner, which re-verifies the backup and loads only the items
// after the recorded progress: the skipped items are counted, the batches
// written are exactly the rest, and the target holds every item once
// (scan and statistics exact).
func TestRestoreResumesAfterRecordedProgress(t *testing.T) {
	raw, err := sqlite.Open(context.Background(), sqlite.Options{Path: t.TempDir() + "/db.sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	b := &countingBackend{Backend: raw}
	const items = 1000
	ref := createTable(t, b, "src")
	for i := range items {
		put(t, b, ref, i, "v")
	}
	st := memstore.New()
	spool := t.TempDir()
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	a := newManager(t, b, st, func(c *Config) {
		c.Restorer, c.SpoolDir, c.Owner = testRestorer{}, spool, "owner-a"
		c.Hook = func(p string) {
			if p == PointRestoreMidLoad {
				once.Do(func() { close(reached) })
				<-release
			}
		}
	})
	rec, err := a.CreateBackup(t.Context(), account, "src", "resume")
	if err != nil {
		t.Fatal(err)
	}
	bk := *waitStatus(t, a, rec.ARN, backend.BackupAvailable)
	if err := restoreInto(t.Context(), a, b, bk, "dst"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the restore never reached the mid-load step")
	}
	// The owner stops (as a shutdown would) while held after its first batch.
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	for a.ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	close(release)
	<-closed
	rc := b.Capabilities().Restores
	rows, err := rc.ListRestores(t.Context(), []string{backend.RestoreRunning})
	if err != nil || len(rows) != 1 {
		t.Fatalf("restore rows = %+v, %v", rows, err)
	}
	recorded := rows[0].Loaded
	if recorded < restoreBatch || !wholeBatches(b, recorded) || recorded >= items {
		t.Fatalf("recorded progress %d, want a whole number of batches, at least the first", recorded)
	}
	before := b.writes.Load()
	bm := newManager(t, b, st, func(c *Config) {
		c.Restorer, c.SpoolDir, c.Owner, c.StaleAfter = testRestorer{}, spool, "owner-b", 300*time.Millisecond
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		rows, err := rc.ListRestores(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if rows[0].Status == backend.RestoreDone {
			break
		}
		if rows[0].Status != backend.RestoreRunning || time.Now().After(deadline) {
			t.Fatalf("restore row %+v", rows[0])
		}
		if err := bm.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for bm.restoresRunning(bk.ARN) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := counterValue(bm.met.skipped); got != float64(recorded) {
		t.Fatalf("the resumed restore skipped %v items, want the recorded %d", got, recorded)
	}
	if got := counterValue(bm.met.items.WithLabelValues(kindRestore)); got != float64(items-recorded) {
		t.Fatalf("the resumed restore loaded %v items, want %d", got, items-recorded)
	}
	if got, want := b.writes.Load()-before, restoreBatches(b, items-recorded); got != want {
		t.Fatalf("the resumed restore wrote %d batches, want %d", got, want)
	}
	cur, err := b.GetTable(t.Context(), backend.GetTableParams{Account: account, Name: "dst"})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := b.TableStats(t.Context(), backend.TableStatsParams{Table: cur.Table.Ref()})
	if err != nil || stats.ItemCount != items {
		t.Fatalf("TableStats = %+v, %v; want %d items", stats, err, items)
	}
	seen := map[string]bool{}
	var after *backend.Cursor
	for {
		res, err := b.Scan(t.Context(), backend.ScanParams{Table: cur.Table.Ref(), After: after, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Rows {
			k := string(r.PK) + "\x00" + string(r.SK)
			if seen[k] {
				t.Fatalf("item %q twice", k)
			}
			seen[k] = true
		}
		if !res.More || len(res.Rows) == 0 {
			break
		}
		last := res.Rows[len(res.Rows)-1]
		after = &backend.Cursor{PK: last.PK, SK: last.SK, BasePK: last.BasePK, BaseSK: last.BaseSK}
	}
	if len(seen) != items {
		t.Fatalf("restored %d items, want %d", len(seen), items)
	}
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// restoresRunning tells whether a restore job from the backup still runs
// in this process (its goroutine has not returned).
func (m *Manager) restoresRunning(arn string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restoring[arn] > 0
}

// TestBackupFreeOnceTargetActive: once a restore's target is ACTIVE the
// backup is no longer in use, although the job's row says RUNNING until
// its final write lands: a client that saw the table ACTIVE, deleted it,
// and then deletes the backup is not refused (DeleteBackup asks
// RestoringFrom).
func TestBackupFreeOnceTargetActive(t *testing.T) {
	raw, err := sqlite.Open(context.Background(), sqlite.Options{Path: t.TempDir() + "/db.sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	ref := createTable(t, raw, "src")
	for i := range 10 {
		put(t, raw, ref, i, "v")
	}
	reached, release := make(chan struct{}), make(chan struct{})
	a := newManager(t, raw, memstore.New(), func(c *Config) {
		c.Restorer, c.SpoolDir, c.Owner = testRestorer{}, t.TempDir(), "owner-a"
		c.Hook = func(p string) {
			if p == PointRestoreAfterActive {
				close(reached)
				<-release
			}
		}
	})
	defer close(release)
	rec, err := a.CreateBackup(t.Context(), account, "src", "free")
	if err != nil {
		t.Fatal(err)
	}
	bk := *waitStatus(t, a, rec.ARN, backend.BackupAvailable)
	if err := restoreInto(t.Context(), a, raw, bk, "dst"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the restore never flipped its target ACTIVE")
	}
	rc := raw.Capabilities().Restores
	if rows, err := rc.ListRestores(t.Context(), []string{backend.RestoreRunning}); err != nil || len(rows) != 1 {
		t.Fatalf("running restore rows = %+v, %v (want the job's, not yet DONE)", rows, err)
	}
	if _, err := raw.DeleteTable(t.Context(), backend.DeleteTableParams{Account: account, Name: "dst"}); err != nil {
		t.Fatal(err)
	}
	if a.RestoringFrom(rec.ARN) {
		t.Fatal("the backup is in use after its restore's target went ACTIVE (and was deleted)")
	}
}

// restoreBatches is the number of batches a restore run on b writes for n
// items: a first batch of restoreBatch, then batches of restoreBatchFor(b)
// (ADR 0032).
func restoreBatches(b backend.Backend, n int64) int64 {
	if n <= restoreBatch {
		return min(n, 1)
	}
	bs := int64(restoreBatchFor(b))
	return 1 + (n-restoreBatch+bs-1)/bs
}

// wholeBatches tells whether the first n items of a run end a batch.
func wholeBatches(b backend.Backend, n int64) bool {
	return n >= restoreBatch && (n-restoreBatch)%int64(restoreBatchFor(b)) == 0
}
