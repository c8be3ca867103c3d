package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlutil"
)

var _ backend.Snapshotter = (*Backend)(nil)

// SnapshotKind names the PostgreSQL snapshot mechanism in backup manifests.
const SnapshotKind = "postgres_repeatable_read"

const (
	// The first statement of a REPEATABLE READ transaction takes its
	// snapshot; exporting it names the instant (the marker).
	sqlSnapshotPin = `SELECT pg_export_snapshot(), now()`
	// The table's items in Scan order, (h, pk, sk), through the primary
	// key: one server-side cursor for the whole snapshot (ADR 0034).
	sqlSnapshotDeclare = `DECLARE extenddb_snapshot NO SCROLL CURSOR FOR SELECT pk, sk, item FROM items WHERE t = %d ORDER BY h, pk, sk`
	// Set for the snapshot's transaction only (SET LOCAL): an index scan
	// of the primary key in its order, never a sort of the table (with
	// no statistics after a bulk load, or a cursor's fast-start costing,
	// the planner could pick a bitmap scan and a sort, or a sequential
	// scan and a sort).
	sqlSnapshotPlan = `SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('enable_sort', 'off', true)`
)

// OpenTableSnapshot implements backend.Snapshotter with a REPEATABLE
// READ, READ ONLY transaction on a dedicated pooled connection. Its first
// statement pins the snapshot and exports it (the marker); the table's
// catalog row and every page of items are then read in that snapshot. A
// long snapshot holds back vacuum on the whole database, so callers should
// drain it fast (docs/backup-design.md section 3).
func (b *Backend) OpenTableSnapshot(ctx context.Context, p backend.OpenSnapshotParams) (*backend.TableSnapshot, error) {
	b.snapOnce.Do(func() {
		// Never every pooled connection: requests go on beside snapshots.
		n := b.opts.MaxSnapshots
		if n <= 0 {
			n = backend.DefaultMaxSnapshots
		}
		b.snaps = backend.NewSnapshotLimiter(max(1, min(n, int(b.pool.Config().MaxConns)-1)))
	})
	release, err := b.snaps.Acquire()
	if err != nil {
		return nil, err
	}
	conn, err := b.acquire(ctx)
	if err != nil {
		release()
		return nil, err
	}
	// The transaction outlives the request that opened it.
	bg := context.WithoutCancel(ctx)
	tx, err := conn.BeginTx(bg, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		conn.Release()
		release()
		return nil, mapErr(err, "postgres: snapshot begin")
	}
	end := func() error {
		err := tx.Rollback(bg)
		conn.Release()
		release()
		if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
			return mapErr(err, "postgres: snapshot end")
		}
		return nil
	}
	var marker string
	var at time.Time
	if err := tx.QueryRow(ctx, sqlSnapshotPin).Scan(&marker, &at); err != nil {
		end()
		return nil, mapErr(err, "postgres: snapshot pin")
	}
	t, err := scanTable(tx.QueryRow(ctx, sqlGetTable, p.Account, p.Name), p.Account, p.Name)
	if err != nil {
		end()
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, notFoundByName(p.Account, p.Name)
		}
		return nil, mapErr(err, "postgres: snapshot table")
	}
	if p.AfterPin != nil {
		p.AfterPin()
	}
	// Scan order, not heap order, although a sequential scan would cost
	// the server less: a restore loads in the backup's order, and keys in
	// Scan order append to the primary key's btree (ADR 0034).
	if _, err := tx.Exec(ctx, sqlSnapshotPlan); err != nil {
		end()
		return nil, mapErr(err, "postgres: snapshot plan")
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(sqlSnapshotDeclare, t.ID)); err != nil {
		end()
		return nil, mapErr(err, "postgres: snapshot cursor")
	}
	var pages sqlutil.SnapshotPages
	done := false
	fetch := func(ctx context.Context, _ *backend.Cursor, limit int) ([]backend.Row, bool, error) {
		if done {
			return nil, false, nil
		}
		rs, err := tx.Query(ctx, fmt.Sprintf(`FETCH FORWARD %d FROM extenddb_snapshot`, limit))
		if err != nil {
			return nil, false, mapErr(err, "postgres: snapshot read")
		}
		defer rs.Close()
		// In the previous page's memory (SnapshotPages).
		rb := pages.Next()
		for rs.Next() {
			raw := rs.RawValues()
			rb.Add(raw[0], raw[1], raw[2])
		}
		if err := rs.Err(); err != nil {
			return nil, false, mapErr(err, "postgres: snapshot read")
		}
		done = rb.Len() < limit
		return pages.Rows(rb), !done, nil
	}
	return &backend.TableSnapshot{
		Table:      t,
		At:         at.UTC(),
		Descriptor: backend.SnapshotDescriptor{Kind: SnapshotKind, Marker: marker},
		KeyOrder:   false, // (KeyHash(pk), pk, sk) order, the order of Scan
		Items:      backend.NewSnapshotStream(fetch, p.PageSize, end),
	}, nil
}
