package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlutil"
)

var _ backend.Snapshotter = (*Backend)(nil)

// SnapshotKind names the SQLite snapshot mechanism in backup manifests.
const SnapshotKind = "sqlite_wal_read_txn"

const (
	sqlSnapshotTable = `SELECT id, desc, version, created_at FROM tables WHERE account = ? AND name = ?`
	// The table's items in Scan order, (h, pk, sk): the items_key index,
	// and a lookup of each item in the table's B-tree by rowid. One
	// statement for the whole snapshot (ADR 0034).
	sqlSnapshotItems = `SELECT pk, sk, item FROM items WHERE t = ? ORDER BY h, pk, sk`
)

// OpenTableSnapshot implements backend.Snapshotter with a read
// transaction on a reader connection: in WAL mode a read transaction sees
// the database as of its first read, which here is the read of the table's
// catalog row, so the description and every page of items come from that
// one instant. While it is open, checkpoints cannot pass its mark, so the
// WAL grows with the writes made meanwhile (docs/backup-design.md section 3).
func (b *Backend) OpenTableSnapshot(ctx context.Context, p backend.OpenSnapshotParams) (*backend.TableSnapshot, error) {
	b.snapOnce.Do(func() {
		// Never every reader connection: reads go on beside snapshots.
		n := b.opts.MaxSnapshots
		if n <= 0 {
			n = backend.DefaultMaxSnapshots
		}
		b.snaps = backend.NewSnapshotLimiter(max(1, min(n, b.opts.Readers-1)))
	})
	release, err := b.snaps.Acquire()
	if err != nil {
		return nil, err
	}
	// A connection of its own, below database/sql (rawread.go): items
	// are copied once, from SQLite's memory into the page.
	c, err := b.openRaw()
	if err != nil {
		release()
		return nil, mapErr(err, "sqlite: snapshot connection")
	}
	r := &snapshotReader{c: c, release: release}
	if err := c.exec("BEGIN"); err != nil {
		c.close()
		release()
		return nil, mapErr(err, "sqlite: snapshot begin")
	}
	// The transaction's first read, the table's catalog row, pins the
	// instant.
	t, err := rawTable(c, p.Account, p.Name)
	if err != nil {
		r.end()
		if errors.Is(err, sql.ErrNoRows) {
			return nil, backend.Errorf(backend.KindTableNotFound, "table %q of account %q not found", p.Name, p.Account)
		}
		return nil, mapErr(err, "sqlite: snapshot table")
	}
	at := time.Now().UTC()
	if p.AfterPin != nil {
		p.AfterPin()
	}
	r.id = t.ID
	return &backend.TableSnapshot{
		Table:      t,
		At:         at,
		Descriptor: backend.SnapshotDescriptor{Kind: SnapshotKind},
		KeyOrder:   false, // (KeyHash(pk), pk, sk) order, the order of Scan
		Items:      backend.NewSnapshotStream(r.fetch, p.PageSize, r.end),
	}, nil
}

// snapshotReader reads a snapshot's items on its connection, inside the
// read transaction that pins the snapshot's instant. One statement is
// kept open from the first page to the last: pages are fetched in
// sequence, never from a cursor of the caller's. Scan order, not rowid
// order, although a pass over the table's B-tree would read less: a
// restore loads in the backup's order, and keys in Scan order append to
// the key index (ADR 0034).
type snapshotReader struct {
	c       *rawConn
	release func()
	id      int64 // the table's id

	// mu serializes the connection's users: fetch, run by the stream's
	// reader, and end, which may run beside it (Close from another
	// goroutine).
	mu     sync.Mutex
	items  *rawStmt
	pages  sqlutil.SnapshotPages
	closed bool
	done   bool
}

// end finalizes the statement, ends the read transaction and closes the
// connection, once.
func (r *snapshotReader) end() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.items != nil {
		r.items.finalize()
	}
	err := r.c.exec("ROLLBACK")
	r.c.close()
	r.release()
	return mapErr(err, "sqlite: snapshot end")
}

// fetch reads the next page of up to limit items.
func (r *snapshotReader) fetch(ctx context.Context, _ *backend.Cursor, limit int) ([]backend.Row, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return nil, false, nil
	}
	if r.closed {
		return nil, false, backend.Errorf(backend.KindInternal, "sqlite: snapshot read after close")
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if r.items == nil {
		s, err := r.c.prepare(sqlSnapshotItems)
		if err == nil {
			err = s.bindInt64(1, r.id)
			if err != nil {
				s.finalize()
			}
		}
		if err != nil {
			return nil, false, mapErr(err, "sqlite: snapshot read")
		}
		r.items = s
	}
	// In the previous page's memory (SnapshotPages).
	rb := r.pages.Next()
	for rb.Len() < limit {
		row, err := r.items.step()
		if err != nil {
			return nil, false, mapErr(err, "sqlite: snapshot read")
		}
		if !row {
			r.done = true
			r.items.finalize()
			r.items = nil
			break
		}
		// Views of SQLite's memory until the next step: copied here.
		rb.Add(r.items.blob(0))
		rb.Add(r.items.blob(1))
		rb.Add(r.items.blob(2))
	}
	return r.pages.Rows(rb), !r.done, nil
}

// rawTable reads the catalog row of table (account, name) on c;
// sql.ErrNoRows when there is none.
func rawTable(c *rawConn, account, name string) (*backend.Table, error) {
	s, err := c.prepare(sqlSnapshotTable)
	if err != nil {
		return nil, err
	}
	defer s.finalize()
	if err := s.bindText(1, account); err != nil {
		return nil, err
	}
	if err := s.bindText(2, name); err != nil {
		return nil, err
	}
	row, err := s.step()
	if err != nil {
		return nil, err
	}
	if !row {
		return nil, sql.ErrNoRows
	}
	t := &backend.Table{Account: account, Name: name, ID: s.int64(0), Version: s.int64(2)}
	t.Desc = append([]byte(nil), s.blob(1)...)
	t.CreatedAt = time.Unix(0, s.int64(3)).UTC()
	return t, nil
}
