package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

var _ storage.SnapshotEngine = (*Backend)(nil)

// SnapshotKind names the SQLite snapshot mechanism in backup manifests.
const SnapshotKind = "sqlite_wal_read_txn"

const (
	sqlSnapshotTable = `SELECT id, desc, version, created_at FROM tables WHERE account = ? AND name = ?`
	// Items in primary key order after a cursor: the row value comparison
	// is a seek on the primary key (t, h, pk, sk), so every page costs the
	// same wherever it starts.
	sqlSnapshotFirst = `SELECT h, pk, sk, item FROM items WHERE t = ? ORDER BY h, pk, sk LIMIT ?`
	sqlSnapshotAfter = `SELECT h, pk, sk, item FROM items WHERE t = ? AND (h, pk, sk) > (?, ?, ?) ORDER BY h, pk, sk LIMIT ?`
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
	id := t.ID
	lastPage := 0
	fetch := func(ctx context.Context, after *storage.Cursor, limit int) ([]storage.Row, bool, error) {
		var rs *sql.Rows
		var err error
		if after == nil {
			rs, err = tx.QueryContext(ctx, sqlSnapshotFirst, id, limit+1)
		} else {
			pk := nz(after.PK)
			rs, err = tx.QueryContext(ctx, sqlSnapshotAfter, id, int64(storage.KeyHash(pk)), pk, nz(after.SK), limit+1)
		}
		if err != nil {
			return nil, false, mapErr(err, "sqlite: snapshot read")
		}
		defer rs.Close()
		rb := storage.NewRowBuffer(nil, false, limit)
		// Pages are of like size: reserve the last one's size plus an
		// eighth at once instead of growing the buffer by doubling.
		rb.Reserve(lastPage + lastPage/8)
		var h int64
		var pk, sk, item sql.RawBytes
		more := false
		for rs.Next() {
			if rb.Len() == limit {
				more = true
				break
			}
			if err := rs.Scan(&h, &pk, &sk, &item); err != nil {
				return nil, false, mapErr(err, "sqlite: snapshot read")
			}
			rb.Add(pk)
			rb.Add(sk)
			rb.Add(item)
		}
		if err := rs.Err(); err != nil {
			return nil, false, mapErr(err, "sqlite: snapshot read")
		}
		lastPage = rb.Size()
		return rb.Rows(), more, nil
	}
	return &storage.TableSnapshot{
		Table:      t,
		At:         at,
		Descriptor: storage.SnapshotDescriptor{Kind: SnapshotKind},
		KeyOrder:   false, // (KeyHash(pk), pk, sk) order, the order of Scan
		Items:      storage.NewSnapshotStream(fetch, p.PageSize, end),
	}, nil
}
