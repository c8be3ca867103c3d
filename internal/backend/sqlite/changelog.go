package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The change log (backend.ChangeLog; migration 0003_changelog): the writer
// inserts a record into `changelog` in the transaction of the item write
// it describes, so the record commits, rolls back (a canceled
// transaction's savepoint, a failed batch) and survives a crash exactly
// like the item. There is one writer, so Seq is assigned in commit order:
// the writer keeps, per table, the last Seq it assigned and gives the next
// record the next one. After a rollback (of the batch or of a
// transaction's savepoint) it forgets its counters and reloads them from
// the database, so Seqs stay consecutive per table, which lets LogInfo
// count the records from the first and last Seq. A reader reads one WAL
// snapshot, in which every record of a later commit has a higher Seq than
// every record it sees: there are no late gaps without a separate
// publishing step.
//
// At is the writer's clock when it inserts the record (just before the
// batch commits), kept non-decreasing per table. TrimLog removes a prefix
// and remembers the highest Seq it removed in `changelog_last`, so Last
// survives trimming everything and Seq never goes back. DeleteTable
// removes the mark; the records go with the table's other rows, in the
// purger's steps (purge.go).

// logPos is the last Seq assigned in a table and the At of that record.
type logPos struct {
	seq int64
	at  int64
}

// logPos returns a table's last assigned Seq and At, loading them on
// first use (the writer's transaction is open).
func (w *writer) logPos(t int64) (logPos, error) {
	if pos, ok := w.logs[t]; ok {
		return pos, nil
	}
	var pos logPos
	if err := w.lastLog.QueryRowContext(bg, t).Scan(&pos.seq, &pos.at); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return pos, fail(err, "sqlite: read change log position")
	}
	var trimmed int64
	if err := w.lastTrimmed.QueryRowContext(bg, t).Scan(&trimmed); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return pos, fail(err, "sqlite: read change log position")
	}
	pos.seq = max(pos.seq, trimmed)
	w.logs[t] = pos
	return pos, nil
}

// appendLog inserts one record of table t (writer transaction).
func (w *writer) appendLog(t int64, data []byte) error {
	pos, err := w.logPos(t)
	if err != nil {
		return err
	}
	pos.seq++
	pos.at = max(pos.at, time.Now().UnixNano())
	if _, err := w.putLog.ExecContext(bg, t, pos.seq, pos.at, nz(data)); err != nil {
		return fail(err, "sqlite: append change record")
	}
	w.logs[t] = pos
	return nil
}

// forgetLogs drops the counters after a rollback: they are loaded again
// from what the database holds.
func (w *writer) forgetLogs() { clear(w.logs) }

// ReadLog implements backend.ChangeLog.
func (b *Backend) ReadLog(ctx context.Context, p backend.ReadLogParams) (*backend.ReadLogResult, error) {
	if p.Limit <= 0 {
		return nil, backend.Errorf(backend.KindInternal, "sqlite: ReadLog limit %d", p.Limit)
	}
	if err := b.checkTable(ctx, p.Table); err != nil {
		return nil, err
	}
	rows, err := b.readLog.QueryContext(ctx, p.Table.ID, p.After, p.Limit)
	if err != nil {
		return nil, mapErr(err, "sqlite: read change log")
	}
	defer rows.Close()
	res := &backend.ReadLogResult{}
	size := 0
	for rows.Next() {
		var r backend.LogRecord
		var at int64
		if err := rows.Scan(&r.Seq, &at, &r.Data); err != nil {
			return nil, mapErr(err, "sqlite: read change log")
		}
		size += len(r.Data)
		if p.MaxBytes > 0 && size > p.MaxBytes && len(res.Records) > 0 {
			break
		}
		r.At = time.Unix(0, at).UTC()
		res.Records = append(res.Records, r)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "sqlite: read change log")
	}
	return res, nil
}

// LogInfo implements backend.ChangeLog. Seqs are consecutive per table
// (see above), so Count is Last present - First + 1: three index lookups,
// however long the log.
func (b *Backend) LogInfo(ctx context.Context, p backend.LogInfoParams) (*backend.LogInfoResult, error) {
	if err := b.checkTable(ctx, p.Table); err != nil {
		return nil, err
	}
	res := &backend.LogInfoResult{}
	var last, trimmed int64
	if err := b.logInfo.QueryRowContext(ctx, p.Table.ID).Scan(&res.First, &last, &trimmed); err != nil {
		return nil, mapErr(err, "sqlite: change log info")
	}
	if res.First > 0 {
		res.Count = last - res.First + 1
	}
	res.Last = max(last, trimmed)
	return res, nil
}

// TrimLog implements backend.ChangeLog: one write operation that removes
// the prefix of records before p.Before.
func (b *Backend) TrimLog(ctx context.Context, p backend.TrimLogParams) (*backend.TrimLogResult, error) {
	res := &backend.TrimLogResult{}
	err := b.submit(ctx, func(w *writer) error {
		n, err := w.trimLog(p)
		res.Removed = n
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (w *writer) trimLog(p backend.TrimLogParams) (int64, error) {
	if !w.exists(p.Table.ID) {
		return 0, tableNotFound(p.Table)
	}
	t, before := p.Table.ID, p.Before.UnixNano()
	// At is non-decreasing in Seq: the records to remove are those before
	// the first one at or after Before (found by a walk of the removed
	// prefix only).
	var cut, last int64
	err := w.conn.QueryRowContext(bg, `SELECT seq FROM changelog WHERE t = ? AND at >= ? ORDER BY seq LIMIT 1`, t, before).Scan(&cut)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		cut = 1<<63 - 1
	case err != nil:
		return 0, fail(err, "sqlite: trim change log")
	}
	if err := w.conn.QueryRowContext(bg, `SELECT coalesce(max(seq), 0) FROM changelog WHERE t = ? AND seq < ?`, t, cut).Scan(&last); err != nil {
		return 0, fail(err, "sqlite: trim change log")
	}
	if last == 0 {
		return 0, nil
	}
	r, err := w.conn.ExecContext(bg, `DELETE FROM changelog WHERE t = ? AND seq < ?`, t, cut)
	if err != nil {
		return 0, fail(err, "sqlite: trim change log")
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fail(err, "sqlite: trim change log")
	}
	if _, err := w.conn.ExecContext(bg, `INSERT INTO changelog_last(t, seq) VALUES (?, ?)
		ON CONFLICT(t) DO UPDATE SET seq = max(seq, excluded.seq)`, t, last); err != nil {
		return 0, fail(err, "sqlite: trim change log")
	}
	return n, nil
}
