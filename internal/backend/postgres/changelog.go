package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/backend"
)

// The change log (backend.ChangeLog; migration 0003_changelog; ADR 0018).
//
// PostgreSQL commits concurrent transactions in an order no transaction
// knows while it runs, so a write cannot number its record: Seq taken from
// a sequence inside the item's transaction would let a reader see Seq 11
// committed while Seq 10 is still in flight, then see 10 appear behind it
// (a late gap). So a write inserts its record into changelog_pending, in
// the item's transaction (atomic with the item: a canceled transaction, a
// failed condition or a fence refusal writes none, a commit writes it
// durably). A publish step moves the committed pending rows of one table
// into changelog, in pending-id order, numbering them after the table's
// last Seq (changelog_last). Publishing is serialized per table by a
// transaction-scoped advisory lock, so publications commit one after the
// other, each with Seq above all earlier ones; a reader's snapshot that
// sees a publication sees every earlier one (the earlier one committed
// before the later one could take the lock). ReadLog and LogInfo publish
// first when the table has pending rows, so every record whose write was
// acknowledged before the call is readable by it.
//
// Per-item order: the second write of an item takes the item's advisory
// lock after the first committed, so its pending id (an identity with
// CACHE 1, taken at the INSERT) is higher, and a snapshot that sees it
// sees the first; the publish step numbers in id order, so the first
// write's record gets the lower Seq. Two pools or servers on one database
// share the locks and the sequence, so the same holds across them.

const (
	sqlPendLog    = `INSERT INTO changelog_pending(t, data) VALUES ($1, $2)`
	sqlDelLogLast = `DELETE FROM changelog_last WHERE t = $1`

	// The publish lock of a table: the two-int4 advisory lock space, apart
	// from the item locks' bigint space.
	sqlPublishLock = `SELECT pg_advisory_xact_lock(1397032012, ($1::bigint % 2147483647)::int4)`
	sqlLogLive     = `SELECT 1 FROM tables WHERE id = $1 FOR KEY SHARE`
	// sqlPublish moves the committed pending rows in id order and numbers
	// them; every record of one publication gets one At, the database
	// clock after the lock was taken and never before the previous one.
	sqlPublish = `WITH moved AS (
    DELETE FROM changelog_pending WHERE t = $1 RETURNING id, data
), last AS (
    SELECT coalesce(max(seq), 0) AS seq,
           greatest(clock_timestamp(), coalesce(max(at), '-infinity'::timestamptz)) AS at
    FROM changelog_last WHERE t = $1
), ins AS (
    INSERT INTO changelog(t, seq, at, data)
    SELECT $1, last.seq + row_number() OVER (ORDER BY moved.id), last.at, moved.data
    FROM moved, last
    RETURNING seq, at
)
INSERT INTO changelog_last(t, seq, at)
SELECT $1, max(seq), max(at) FROM ins HAVING count(*) > 0
ON CONFLICT (t) DO UPDATE SET seq = EXCLUDED.seq, at = EXCLUDED.at`

	sqlHasPending = `SELECT EXISTS (SELECT 1 FROM changelog_pending WHERE t = $1)`
	// sqlReadLog reads up to $3 records after $2, stopping before the one
	// that would take the data over $4 bytes (0: no bound; the first
	// always comes); no row when the table is not live, one row of NULLs
	// when it has no record to return.
	sqlReadLog = `SELECT w.seq, w.at, w.data FROM tables tb LEFT JOIN LATERAL (
    SELECT c.seq, c.at, c.data FROM (
        SELECT s.seq, s.at, s.data,
               sum(octet_length(s.data)) OVER (ORDER BY s.seq) AS cum,
               row_number() OVER (ORDER BY s.seq) AS rn
        FROM (SELECT seq, at, data FROM changelog WHERE t = tb.id AND seq > $2 ORDER BY seq LIMIT $3) s
    ) c WHERE $4::bigint = 0 OR c.cum <= $4::bigint OR c.rn = 1
) w ON true WHERE tb.id = $1 ORDER BY w.seq`
	// sqlLogInfo: the first and last Seq present and the last assigned.
	// Publications number consecutively and trimming removes a prefix, so
	// the records present are exactly first..last: three index lookups.
	sqlLogInfo = `SELECT coalesce((SELECT min(seq) FROM changelog WHERE t = $1), 0),
       coalesce((SELECT max(seq) FROM changelog WHERE t = $1), 0),
       coalesce((SELECT seq FROM changelog_last WHERE t = $1), 0)
FROM tables WHERE id = $1`
	// sqlTrimLog removes the prefix of records before $2: those before
	// the first record at or after it (At is non-decreasing in Seq, so
	// only the removed prefix is walked).
	sqlTrimLog = `DELETE FROM changelog WHERE t = $1 AND seq < coalesce(
    (SELECT seq FROM changelog WHERE t = $1 AND at >= $2 ORDER BY seq LIMIT 1), 9223372036854775807)`
)

var _ backend.ChangeLog = (*Backend)(nil)

// publishLog runs the publish step of one table (KindTableNotFound when it
// is not live). It is idempotent, so it is retried like a read.
func (b *Backend) publishLog(ctx context.Context, ref backend.TableRef) error {
	live := false
	err := b.run(ctx, "postgres: publish change log", func() *attemptErr {
		c, err := b.acquire(ctx)
		if err != nil {
			return &attemptErr{err: err, retry: retryableBeforeCommit(err)}
		}
		defer c.Release()
		x := &txn{ctx: ctx, c: c}
		live = false
		bt := &pgx.Batch{}
		bt.Queue("BEGIN")
		// FOR KEY SHARE: a DeleteTable waits for the publication (or the
		// publication finds the table gone and moves nothing).
		bt.Queue(sqlLogLive, ref.ID).QueryRow(func(row pgx.Row) error {
			err := row.Scan(new(int))
			if err == pgx.ErrNoRows {
				return nil
			}
			live = err == nil
			return err
		})
		bt.Queue(sqlPublishLock, ref.ID)
		bt.Queue(sqlPublish, ref.ID)
		bt.Queue("COMMIT")
		if err := x.send(bt); err != nil {
			return x.fail(err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !live {
		return tableNotFound(ref)
	}
	return nil
}

// ReadLog implements backend.ChangeLog: one round trip reads the records
// and whether the table has pending records; when it has, they are
// published and the records read again.
func (b *Backend) ReadLog(ctx context.Context, p backend.ReadLogParams) (*backend.ReadLogResult, error) {
	if p.Limit <= 0 {
		return nil, backend.Errorf(backend.KindInternal, "postgres: ReadLog limit %d", p.Limit)
	}
	res := &backend.ReadLogResult{}
	read := func(checkPending bool) (pending bool, err error) {
		err = b.read(ctx, "postgres: read change log", func(c *pgxpool.Conn) error {
			res.Records, pending = nil, false
			live := false
			bt := &pgx.Batch{}
			if checkPending {
				bt.Queue(sqlHasPending, p.Table.ID).QueryRow(func(row pgx.Row) error { return row.Scan(&pending) })
			}
			bt.Queue(sqlReadLog, p.Table.ID, p.After, p.Limit, int64(max(p.MaxBytes, 0))).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					live = true
					var seq *int64
					var at *time.Time
					var data []byte
					if err := rows.Scan(&seq, &at, &data); err != nil {
						return err
					}
					if seq != nil {
						res.Records = append(res.Records, backend.LogRecord{Seq: *seq, At: at.UTC(), Data: nz(data)})
					}
				}
				return rows.Err()
			})
			if err := c.SendBatch(ctx, bt).Close(); err != nil {
				return err
			}
			if !live {
				return tableNotFound(p.Table)
			}
			return nil
		})
		return pending, err
	}
	pending, err := read(true)
	if err != nil {
		return nil, err
	}
	if pending {
		if err := b.publishLog(ctx, p.Table); err != nil {
			return nil, err
		}
		if _, err := read(false); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// LogInfo implements backend.ChangeLog (publishing first). Seqs of a
// table are consecutive, so Count is last present - first + 1.
func (b *Backend) LogInfo(ctx context.Context, p backend.LogInfoParams) (*backend.LogInfoResult, error) {
	if err := b.publishLog(ctx, p.Table); err != nil {
		return nil, err
	}
	res := &backend.LogInfoResult{}
	err := b.read(ctx, "postgres: change log info", func(c *pgxpool.Conn) error {
		var present int64
		err := c.QueryRow(ctx, sqlLogInfo, p.Table.ID).Scan(&res.First, &present, &res.Last)
		if err == nil && res.First > 0 {
			res.Count = present - res.First + 1
		}
		if err == pgx.ErrNoRows {
			return tableNotFound(p.Table)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// TrimLog implements backend.ChangeLog: it publishes what is pending (so
// that the background trimmer also bounds the pending rows of a table
// nobody reads), then one transaction that holds the table's catalog row
// (FOR KEY SHARE) removes the prefix.
func (b *Backend) TrimLog(ctx context.Context, p backend.TrimLogParams) (*backend.TrimLogResult, error) {
	if err := b.publishLog(ctx, p.Table); err != nil {
		return nil, err
	}
	res := &backend.TrimLogResult{}
	live := false
	err := b.write(ctx, "postgres: trim change log", func(x *txn) error {
		live, res.Removed = false, 0
		bt := &pgx.Batch{}
		bt.Queue("BEGIN")
		bt.Queue(sqlLogLive, p.Table.ID).QueryRow(func(row pgx.Row) error {
			err := row.Scan(new(int))
			if err == pgx.ErrNoRows {
				return nil
			}
			live = err == nil
			return err
		})
		bt.Queue(sqlTrimLog, p.Table.ID, p.Before).Exec(func(ct pgconn.CommandTag) error {
			res.Removed = ct.RowsAffected()
			return nil
		})
		bt.Queue("COMMIT")
		return x.send(bt)
	})
	if err != nil {
		return nil, err
	}
	if !live {
		return nil, tableNotFound(p.Table)
	}
	return res, nil
}
