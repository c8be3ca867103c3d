package backup

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/postgres"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// bulkCounts counts a restore's batch writes by path: BulkLoad (when the
// backend has it) and TransactWrite. sqliteCounting and pgCounting embed
// the concrete backends (so the backup catalog stays visible) and sit
// under the server's Checked wrapper.
type bulkCounts struct{ bulk, transacts atomic.Int64 }

type sqliteCounting struct {
	*sqlite.Backend
	*bulkCounts
}

// Capabilities: SQLite's, with the counting bulk loader.
func (c sqliteCounting) Capabilities() backend.Capabilities {
	caps := c.Backend.Capabilities()
	caps.Bulk = c
	return caps
}

func (c sqliteCounting) BulkLoad(ctx context.Context, p backend.BulkLoadParams) error {
	c.bulk.Add(1)
	return c.Backend.BulkLoad(ctx, p)
}

func (c sqliteCounting) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	c.transacts.Add(1)
	return c.Backend.TransactWrite(ctx, p)
}

type pgCounting struct {
	*postgres.Backend
	*bulkCounts
}

// Capabilities: PostgreSQL's, with the counting bulk loader.
func (c pgCounting) Capabilities() backend.Capabilities {
	caps := c.Backend.Capabilities()
	caps.Bulk = c
	return caps
}

func (c pgCounting) BulkLoad(ctx context.Context, p backend.BulkLoadParams) error {
	c.bulk.Add(1)
	return c.Backend.BulkLoad(ctx, p)
}

func (c pgCounting) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	c.transacts.Add(1)
	return c.Backend.TransactWrite(ctx, p)
}

// TestRestoreUsesBulkLoad: on SQLite and PostgreSQL (which implement
// backend.BulkLoader, ADR 0032) a restore loads every batch with
// BulkLoad, found through the Checked wrapper, and no TransactWrite; the
// target holds every item.
func TestRestoreUsesBulkLoad(t *testing.T) {
	forEach(t, func(t *testing.T, raw backend.Backend) {
		cnt := &bulkCounts{}
		var counting backend.Backend
		switch r := raw.(type) {
		case *sqlite.Backend:
			counting = sqliteCounting{r, cnt}
		case *postgres.Backend:
			counting = pgCounting{r, cnt}
		default:
			t.Fatalf("backend %T", raw)
		}
		b := backend.Checked(counting, func(err error) { t.Errorf("%v", err) })
		if b.Capabilities().Bulk == nil {
			t.Fatalf("backend %s has no bulk loader through Checked", raw.Name())
		}
		ref := createTable(t, b, "src")
		for i := range 1100 {
			put(t, b, ref, i, "v")
		}
		m := newManager(t, b, memstore.New(), func(c *Config) {
			c.Restorer = testRestorer{}
			c.SpoolDir = t.TempDir()
			c.Logger = slog.New(slog.NewTextHandler(tlog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		rec, err := m.CreateBackup(t.Context(), account, "src", "bulk")
		if err != nil {
			t.Fatal(err)
		}
		bk := *waitStatus(t, m, rec.ARN, backend.BackupAvailable)
		if err := restoreInto(t.Context(), m, b, bk, "dst"); err != nil {
			t.Fatal(err)
		}
		// The job's metric counts its end a moment after RestoringFrom
		// turns false: wait for both.
		deadline := time.Now().Add(20 * time.Second)
		for m.RestoringFrom(bk.ARN) || finished(t, m, "ok") < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("restore does not end: %v jobs ended ok, want 2 (the restore failed?)", finished(t, m, "ok"))
			}
			time.Sleep(10 * time.Millisecond)
		}
		res, err := b.Scan(t.Context(), backend.ScanParams{Table: mustTable(t, b, "dst").Ref(), Limit: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Rows) != 1100 {
			t.Fatalf("restored %d items, want 1100", len(res.Rows))
		}
		// A first batch of restoreBatch (100), then batches of the
		// backend's bulk size (500 on PostgreSQL: 100, 500, 500; 100 on
		// SQLite: eleven of 100).
		bs := int64(restoreBatchFor(b))
		want := 1 + (1100-restoreBatch+bs-1)/bs
		if n, tw := cnt.bulk.Load(), cnt.transacts.Load(); n != want || tw != 0 {
			t.Fatalf("%d BulkLoad and %d TransactWrite calls, want %d and 0", n, tw, want)
		}
	})
}

// tlog writes a manager's log lines to the test's log.
type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
