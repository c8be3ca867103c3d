package backup

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// flakyWrites is SQLite whose item batches fail with KindUnavailable
// (a write that timed out on a loaded server) while fail > 0, through
// TransactWrite or BulkLoad.
type flakyWrites struct {
	*sqlite.Backend
	fail, calls atomic.Int64
}

// Capabilities: SQLite's, with the flaky bulk loader.
func (f *flakyWrites) Capabilities() backend.Capabilities {
	caps := f.Backend.Capabilities()
	caps.Bulk = f
	return caps
}

func (f *flakyWrites) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	f.calls.Add(1)
	if f.fail.Add(-1) >= 0 {
		return nil, backend.Errorf(backend.KindUnavailable, "flaky: client timed out waiting for server response")
	}
	return f.Backend.TransactWrite(ctx, p)
}

func (f *flakyWrites) BulkLoad(ctx context.Context, p backend.BulkLoadParams) error {
	f.calls.Add(1)
	if f.fail.Add(-1) >= 0 {
		return backend.Errorf(backend.KindUnavailable, "flaky: client timed out waiting for server response")
	}
	return f.Backend.BulkLoad(ctx, p)
}

// TestRestoreRetriesUnavailableWrites: a batch write that fails with a
// transient error (KindUnavailable) is written again; the restore ends
// ACTIVE with every item instead of failing and dropping its target.
func TestRestoreRetriesUnavailableWrites(t *testing.T) {
	defer func(p time.Duration) { restoreRetryPause = p }(restoreRetryPause)
	restoreRetryPause = 10 * time.Millisecond
	f := &flakyWrites{Backend: backends(t)[0].open(t).(*sqlite.Backend)}
	ref := createTable(t, f, "src")
	for i := range 450 {
		put(t, f, ref, i, "v")
	}
	m := newManager(t, f, memstore.New(), func(c *Config) { c.Restorer = testRestorer{}; c.SpoolDir = t.TempDir() })
	rec, err := m.CreateBackup(t.Context(), account, "src", "flaky")
	if err != nil {
		t.Fatal(err)
	}
	bk := *waitStatus(t, m, rec.ARN, backend.BackupAvailable)
	f.fail.Store(3) // the first three batch writes fail
	if err := restoreInto(t.Context(), m, f, bk, "dst"); err != nil {
		t.Fatal(err)
	}
	// The job's row says DONE (RestoringFrom false) a moment before its
	// metric counts its end: wait for both.
	deadline := time.Now().Add(20 * time.Second)
	for m.RestoringFrom(bk.ARN) || finished(t, m, "ok") < 2 { // the backup and the restore
		if time.Now().After(deadline) {
			t.Fatalf("restore does not end: %v jobs ended ok, want 2 (the restore failed?)", finished(t, m, "ok"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := f.Scan(t.Context(), backend.ScanParams{Table: mustTable(t, f, "dst").Ref(), Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 450 {
		t.Fatalf("restored %d items, want 450", len(res.Rows))
	}
	if want := restoreBatches(f, 450) + 3; f.calls.Load() < want { // the batches + 3 failures
		t.Fatalf("%d batch writes", f.calls.Load())
	}
}
