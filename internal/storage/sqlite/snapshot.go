package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

var _ storage.SnapshotEngine = (*Backend)(nil)

// SnapshotKind names the SQLite snapshot mechanism in backup manifests.
const SnapshotKind = "sqlite_wal_read_txn"

const (
	sqlSnapshotTable = `SELECT id, desc, version, created_at FROM tables WHERE account = ? AND name = ?`
	// The table's items in Scan order, (h, pk, sk): the items_key index,
	// and a lookup of each item in the table's B-tree by rowid. One
	// statement for the whole snapshot (ADR 0034).
	sqlSnapshotItems = `SELECT pk, sk, item FROM items WHERE t = ? ORDER BY h, pk, sk`
)

// OpenTableSnapshot implements storage.SnapshotEngine with a read
// transaction on a reader connection: in WAL mode a read transaction sees
// the database as of its first read, which here is the read of the table's
// catalog row, so the description and every page of items come from that
// one instant. While it is open, checkpoints cannot pass its mark, so the
// WAL grows with the writes made meanwhile (docs/backup-design.md section 3).
func (b *Backend) OpenTableSnapshot(ctx context.Context, p storage.OpenSnapshotParams) (*storage.TableSnapshot, error) {
	b.snapOnce.Do(func() {
		// Never every reader connection: reads go on beside snapshots.
		n := b.opts.MaxSnapshots
		if n <= 0 {
			n = storage.DefaultMaxSnapshots
		}
		b.snaps = storage.NewSnapshotLimiter(max(1, min(n, b.opts.Readers-1)))
	})
	release, err := b.snaps.Acquire()
	if err != nil {
		return nil, err
	}
	conn, err := b.rdb.Conn(ctx)
	if err != nil {
		release()
		return nil, mapErr(err, "sqlite: snapshot connection")
	}
	// The transaction outlives the request that opened it: it ends on
	// Close, not when ctx is done.
	tx, err := conn.BeginTx(context.WithoutCancel(ctx), &sql.TxOptions{ReadOnly: true})
	if err != nil {
		conn.Close()
		release()
		return nil, mapErr(err, "sqlite: snapshot begin")
	}
	end := func() error {
		err := tx.Rollback()
		conn.Close()
		release()
		if err != nil && !errors.Is(err, sql.ErrTxDone) {
			return mapErr(err, "sqlite: snapshot end")
		}
		return nil
	}
	t, err := scanTable(tx.QueryRowContext(ctx, sqlSnapshotTable, p.Account, p.Name), p.Account, p.Name)
	if err != nil {
		end()
		if errors.Is(err, sql.ErrNoRows) {
			return nil, storage.Errorf(storage.KindTableNotFound, "table %q of account %q not found", p.Name, p.Account)
		}
		return nil, mapErr(err, "sqlite: snapshot table")
	}
	at := time.Now().UTC()
	if p.AfterPin != nil {
		p.AfterPin()
	}
	// One statement kept open from the first page to the last: pages are
	// fetched in sequence, never from a cursor of the caller's. Scan
	// order, not rowid order, although a pass over the table's B-tree
	// would read less: a restore loads in the backup's order, and keys in
	// Scan order append to the key index (ADR 0034).
	id := t.ID
	lastPage := 0
	var spare []byte
	var rs *sql.Rows
	var rsMu sync.Mutex // rs is set by fetch and read by end, which may run beside it
	done := false
	fetch := func(ctx context.Context, _ *storage.Cursor, limit int) ([]storage.Row, bool, error) {
		if done {
			return nil, false, nil
		}
		if rs == nil {
			// The statement outlives this call's context: it ends with
			// the snapshot (end) or at its last row.
			r, err := tx.QueryContext(context.WithoutCancel(ctx), sqlSnapshotItems, id)
			if err != nil {
				return nil, false, mapErr(err, "sqlite: snapshot read")
			}
			rsMu.Lock()
			rs = r
			rsMu.Unlock()
		}
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		rb := storage.NewRowBuffer(nil, false, limit)
		// The previous page's memory (its rows are dead: a stream's row
		// is valid until the next call); pages are of like size: reserve
		// the last one's size plus an eighth at once instead of growing
		// the buffer by doubling.
		rb.Recycle(spare)
		rb.Reserve(lastPage + lastPage/8)
		var pk, sk, item sql.RawBytes
		for rb.Len() < limit {
			if !rs.Next() {
				done = true
				break
			}
			if err := rs.Scan(&pk, &sk, &item); err != nil {
				return nil, false, mapErr(err, "sqlite: snapshot read")
			}
			rb.Add(pk)
			rb.Add(sk)
			rb.Add(item)
		}
		if done {
			err := rs.Err()
			rs.Close()
			if err != nil {
				return nil, false, mapErr(err, "sqlite: snapshot read")
			}
		}
		lastPage, spare = rb.Size(), rb.Buffer()
		return rb.Rows(), !done, nil
	}
	endTx := end
	end = func() error {
		rsMu.Lock()
		r := rs
		rsMu.Unlock()
		if r != nil {
			r.Close()
		}
		return endTx()
	}
	return &storage.TableSnapshot{
		Table:      t,
		At:         at,
		Descriptor: storage.SnapshotDescriptor{Kind: SnapshotKind},
		KeyOrder:   false, // (KeyHash(pk), pk, sk) order, the order of Scan
		Items:      storage.NewSnapshotStream(fetch, p.PageSize, end),
	}, nil
}
