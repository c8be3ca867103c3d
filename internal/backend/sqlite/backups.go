package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

var _ backend.BackupCatalog = (*Backend)(nil)

// nowMS is the database's clock in Unix milliseconds. For an embedded
// database it is the server's clock; it is still taken in SQL so that the
// conditions below compare times of one clock.
const nowMS = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`

const backupCols = `arn, account, table_name, table_id, backup_id, name, type, status, created_at,
	size_bytes, item_count, table_desc, store_id, prefix, message, owner, generation, heartbeat, expires_at, plan`

type rowScanner interface{ Scan(dest ...any) error }

func scanBackup(r rowScanner) (*backend.BackupRecord, error) {
	var rec backend.BackupRecord
	var created, hb, expires int64
	if err := r.Scan(&rec.ARN, &rec.Account, &rec.TableName, &rec.TableID, &rec.BackupID, &rec.Name, &rec.Type,
		&rec.Status, &created, &rec.SizeBytes, &rec.ItemCount, &rec.TableDesc, &rec.StoreID, &rec.Prefix,
		&rec.Message, &rec.Owner, &rec.Generation, &hb, &expires, &rec.Plan); err != nil {
		return nil, err
	}
	if expires != 0 {
		rec.ExpiresAt = time.UnixMilli(expires).UTC()
	}
	rec.CreatedAt = time.UnixMilli(created).UTC()
	rec.Heartbeat = time.UnixMilli(hb).UTC()
	return &rec, nil
}

// InsertBackup implements backend.BackupCatalog.
func (b *Backend) InsertBackup(ctx context.Context, p backend.InsertBackupParams) (*backend.BackupRecord, error) {
	r := p.Record
	err := b.submit(ctx, func(w *writer) error {
		_, err := w.conn.ExecContext(bg, `INSERT INTO backups(`+backupCols+`) VALUES
			(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, `+nowMS+`, ?, ?)`,
			r.ARN, r.Account, r.TableName, r.TableID, r.BackupID, r.Name, r.Type, r.Status, r.CreatedAt.UnixMilli(),
			r.SizeBytes, r.ItemCount, nz(r.TableDesc), r.StoreID, r.Prefix, r.Message, r.Owner, backend.ExpiryMillis(r.ExpiresAt), r.Plan)
		if err != nil {
			return fail(err, "sqlite: insert backup")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b.GetBackup(ctx, backend.GetBackupParams{ARN: r.ARN})
}

// GetBackup implements backend.BackupCatalog.
func (b *Backend) GetBackup(ctx context.Context, p backend.GetBackupParams) (*backend.BackupRecord, error) {
	rec, err := scanBackup(b.rdb.QueryRowContext(ctx, `SELECT `+backupCols+` FROM backups WHERE arn = ?`, p.ARN))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err, "sqlite: get backup")
	}
	return rec, nil
}

// ListBackups implements backend.BackupCatalog.
func (b *Backend) ListBackups(ctx context.Context, p backend.ListBackupsParams) ([]backend.BackupRecord, error) {
	var where []string
	var args []any
	if p.Account != "" {
		where, args = append(where, "account = ?"), append(args, p.Account)
	}
	if p.TableName != "" {
		where, args = append(where, "table_name = ?"), append(args, p.TableName)
	}
	if len(p.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(p.Statuses)-1)+")")
		for _, s := range p.Statuses {
			args = append(args, s)
		}
	}
	if len(p.Types) > 0 {
		where = append(where, "type IN (?"+strings.Repeat(", ?", len(p.Types)-1)+")")
		for _, s := range p.Types {
			args = append(args, s)
		}
	}
	if !p.CreatedFrom.IsZero() {
		where, args = append(where, "created_at >= ?"), append(args, p.CreatedFrom.UnixMilli())
	}
	if !p.CreatedTo.IsZero() {
		where, args = append(where, "created_at <= ?"), append(args, p.CreatedTo.UnixMilli())
	}
	if p.StartAfter != "" {
		where, args = append(where, "arn > ?"), append(args, p.StartAfter)
	}
	q := `SELECT ` + backupCols + ` FROM backups`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY arn"
	if p.Limit > 0 {
		q, args = q+" LIMIT ?", append(args, p.Limit)
	}
	rs, err := b.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, "sqlite: list backups")
	}
	defer rs.Close()
	var out []backend.BackupRecord
	for rs.Next() {
		rec, err := scanBackup(rs)
		if err != nil {
			return nil, mapErr(err, "sqlite: list backups")
		}
		out = append(out, *rec)
	}
	if err := rs.Err(); err != nil {
		return nil, mapErr(err, "sqlite: list backups")
	}
	return out, nil
}

// condWrite runs one conditional UPDATE of a backup row in the writer and
// reports whether it matched, with the row as it is afterwards.
func (b *Backend) condWrite(ctx context.Context, arn, msg, q string, args ...any) (*backend.BackupWriteResult, error) {
	matched, rec, err := condExec(b, ctx, msg, q, args, func(w *writer) (*backend.BackupRecord, error) {
		return scanBackup(w.conn.QueryRowContext(bg, `SELECT `+backupCols+` FROM backups WHERE arn = ?`, arn))
	})
	if err != nil {
		return nil, err
	}
	return &backend.BackupWriteResult{Matched: matched, Record: rec}, nil
}

// condExec runs a conditional UPDATE in the writer, then reads the row
// back (nil when it is gone) in the same transaction.
func condExec[R any](b *Backend, ctx context.Context, msg, q string, args []any, reread func(w *writer) (*R, error)) (bool, *R, error) {
	var matched bool
	var rec *R
	err := b.submit(ctx, func(w *writer) error {
		r, err := w.conn.ExecContext(bg, q, args...)
		if err != nil {
			return fail(err, msg)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fail(err, msg)
		}
		matched = n == 1
		if rec, err = reread(w); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fail(err, msg)
		}
		return nil
	})
	return matched, rec, err
}

// UpdateBackup implements backend.BackupCatalog.
func (b *Backend) UpdateBackup(ctx context.Context, p backend.UpdateBackupParams) (*backend.BackupWriteResult, error) {
	set := []string{"status = ?", "heartbeat = " + nowMS}
	args := []any{p.NewStatus}
	if p.SizeBytes != nil {
		set, args = append(set, "size_bytes = ?"), append(args, *p.SizeBytes)
	}
	if p.ItemCount != nil {
		set, args = append(set, "item_count = ?"), append(args, *p.ItemCount)
	}
	if p.Message != nil {
		set, args = append(set, "message = ?"), append(args, *p.Message)
	}
	if p.StoreID != nil {
		set, args = append(set, "store_id = ?"), append(args, *p.StoreID)
	}
	args = append(args, p.ARN, p.Generation, p.Status)
	return b.condWrite(ctx, p.ARN, "sqlite: update backup",
		`UPDATE backups SET `+strings.Join(set, ", ")+` WHERE arn = ? AND generation = ? AND status = ?`, args...)
}

// RemoveBackup implements backend.BackupCatalog.
func (b *Backend) RemoveBackup(ctx context.Context, p backend.RemoveBackupParams) (*backend.BackupWriteResult, error) {
	return b.condWrite(ctx, p.ARN, "sqlite: remove backup",
		`DELETE FROM backups WHERE arn = ? AND generation = ? AND status = ?`, p.ARN, p.Generation, p.Status)
}

// HeartbeatBackup implements backend.BackupCatalog.
func (b *Backend) HeartbeatBackup(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.BackupWriteResult, error) {
	return b.condWrite(ctx, p.ARN, "sqlite: heartbeat backup",
		`UPDATE backups SET heartbeat = `+nowMS+` WHERE arn = ? AND owner = ? AND generation = ?`,
		p.ARN, p.Owner, p.Generation)
}

// ClaimBackup implements backend.BackupCatalog.
func (b *Backend) ClaimBackup(ctx context.Context, p backend.ClaimBackupParams) (*backend.BackupWriteResult, error) {
	newStatus := p.NewStatus
	if newStatus == "" {
		newStatus = p.Status
	}
	return b.condWrite(ctx, p.ARN, "sqlite: claim backup",
		`UPDATE backups SET owner = ?, generation = generation + 1, status = ?, heartbeat = `+nowMS+`
		 WHERE arn = ? AND generation = ? AND status = ? AND heartbeat <= `+nowMS+` - ?`,
		p.Owner, newStatus, p.ARN, p.Generation, p.Status, p.StaleAfter.Milliseconds())
}

// CatalogID implements backend.BackupCatalog.
func (b *Backend) CatalogID(ctx context.Context, newID string) (string, error) {
	var id string
	err := b.submit(ctx, func(w *writer) error {
		if _, err := w.conn.ExecContext(bg, `INSERT INTO backup_catalog(one, id) VALUES (1, ?) ON CONFLICT DO NOTHING`, newID); err != nil {
			return fail(err, "sqlite: catalog id")
		}
		if err := w.conn.QueryRowContext(bg, `SELECT id FROM backup_catalog WHERE one = 1`).Scan(&id); err != nil {
			return fail(err, "sqlite: catalog id")
		}
		return nil
	})
	return id, err
}

// ---- restore jobs ----

var _ backend.RestoreCatalog = (*Backend)(nil)

const restoreCols = `id, account, table_name, table_id, backup_arn, status, message, loaded, owner, generation, heartbeat`

func scanRestore(r rowScanner) (*backend.RestoreRecord, error) {
	var rec backend.RestoreRecord
	var hb int64
	if err := r.Scan(&rec.ID, &rec.Account, &rec.TableName, &rec.TableID, &rec.BackupARN, &rec.Status, &rec.Message,
		&rec.Loaded, &rec.Owner, &rec.Generation, &hb); err != nil {
		return nil, err
	}
	rec.Heartbeat = time.UnixMilli(hb).UTC()
	return &rec, nil
}

// InsertRestore implements backend.RestoreCatalog.
func (b *Backend) InsertRestore(ctx context.Context, r backend.RestoreRecord) (*backend.RestoreRecord, error) {
	res, err := b.restoreWrite(ctx, r.ID, "sqlite: insert restore", `INSERT INTO restores(`+restoreCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, 1, `+nowMS+`)`,
		r.ID, r.Account, r.TableName, r.TableID, r.BackupARN, backend.RestoreRunning, r.Message, r.Owner)
	if err != nil {
		return nil, err
	}
	return res.Record, nil
}

// ListRestores implements backend.RestoreCatalog.
func (b *Backend) ListRestores(ctx context.Context, statuses []string) ([]backend.RestoreRecord, error) {
	q := `SELECT ` + restoreCols + ` FROM restores`
	var args []any
	if len(statuses) > 0 {
		q += " WHERE status IN (?" + strings.Repeat(", ?", len(statuses)-1) + ")"
		for _, s := range statuses {
			args = append(args, s)
		}
	}
	rs, err := b.rdb.QueryContext(ctx, q+" ORDER BY id", args...)
	if err != nil {
		return nil, mapErr(err, "sqlite: list restores")
	}
	defer rs.Close()
	var out []backend.RestoreRecord
	for rs.Next() {
		r, err := scanRestore(rs)
		if err != nil {
			return nil, mapErr(err, "sqlite: list restores")
		}
		out = append(out, *r)
	}
	return out, mapErr(rs.Err(), "sqlite: list restores")
}

func (b *Backend) restoreWrite(ctx context.Context, id, msg, q string, args ...any) (*backend.RestoreWriteResult, error) {
	matched, rec, err := condExec(b, ctx, msg, q, args, func(w *writer) (*backend.RestoreRecord, error) {
		return scanRestore(w.conn.QueryRowContext(bg, `SELECT `+restoreCols+` FROM restores WHERE id = ?`, id))
	})
	if err != nil {
		return nil, err
	}
	return &backend.RestoreWriteResult{Matched: matched, Record: rec}, nil
}

// UpdateRestore implements backend.RestoreCatalog.
func (b *Backend) UpdateRestore(ctx context.Context, p backend.UpdateBackupParams) (*backend.RestoreWriteResult, error) {
	msg := ""
	if p.Message != nil {
		msg = *p.Message
	}
	return b.restoreWrite(ctx, p.ARN, "sqlite: update restore",
		`UPDATE restores SET status = ?, message = ?, heartbeat = `+nowMS+` WHERE id = ? AND generation = ? AND status = ?`,
		p.NewStatus, msg, p.ARN, p.Generation, p.Status)
}

// HeartbeatRestore implements backend.RestoreCatalog.
func (b *Backend) HeartbeatRestore(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.RestoreWriteResult, error) {
	return b.restoreWrite(ctx, p.ARN, "sqlite: heartbeat restore",
		`UPDATE restores SET heartbeat = `+nowMS+` WHERE id = ? AND owner = ? AND generation = ?`, p.ARN, p.Owner, p.Generation)
}

// ClaimRestore implements backend.RestoreCatalog.
func (b *Backend) ClaimRestore(ctx context.Context, p backend.ClaimBackupParams) (*backend.RestoreWriteResult, error) {
	ns := p.NewStatus
	if ns == "" {
		ns = p.Status
	}
	return b.restoreWrite(ctx, p.ARN, "sqlite: claim restore",
		`UPDATE restores SET owner = ?, generation = generation + 1, status = ?, heartbeat = `+nowMS+`
		 WHERE id = ? AND generation = ? AND status = ? AND heartbeat <= `+nowMS+` - ?`,
		p.Owner, ns, p.ARN, p.Generation, p.Status, p.StaleAfter.Milliseconds())
}

// RecordRestoreProgress implements backend.RestoreCatalog.
func (b *Backend) RecordRestoreProgress(ctx context.Context, p backend.RestoreProgressParams) (*backend.RestoreWriteResult, error) {
	return b.restoreWrite(ctx, p.ID, "sqlite: record restore progress",
		`UPDATE restores SET loaded = ? WHERE id = ? AND owner = ? AND generation = ? AND status = ? AND loaded <= ?`,
		p.Loaded, p.ID, p.Owner, p.Generation, backend.RestoreRunning, p.Loaded)
}
