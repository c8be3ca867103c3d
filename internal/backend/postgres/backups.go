package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/backend"
)

var _ backend.BackupCatalog = (*Backend)(nil)

// The claim's times come from the database's clock (now()), so servers
// whose clocks disagree still agree on staleness.

const backupCols = `arn, account, table_name, table_id, backup_id, name, type, status, created_at,
	size_bytes, item_count, table_desc, store_id, prefix, message, owner, generation, heartbeat, expires_at, plan`

func scanBackup(r pgx.Row) (*backend.BackupRecord, error) {
	var rec backend.BackupRecord
	var expires int64
	if err := r.Scan(&rec.ARN, &rec.Account, &rec.TableName, &rec.TableID, &rec.BackupID, &rec.Name, &rec.Type,
		&rec.Status, &rec.CreatedAt, &rec.SizeBytes, &rec.ItemCount, &rec.TableDesc, &rec.StoreID, &rec.Prefix,
		&rec.Message, &rec.Owner, &rec.Generation, &rec.Heartbeat, &expires, &rec.Plan); err != nil {
		return nil, err
	}
	if expires != 0 {
		rec.ExpiresAt = time.UnixMilli(expires).UTC()
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.Heartbeat = rec.Heartbeat.UTC()
	return &rec, nil
}

// exec runs one statement returning at most one backup row (no retry: a
// conditional write must not be re-run blindly after an unknown outcome).
func (b *Backend) backupRow(ctx context.Context, msg, q string, args ...any) (*backend.BackupRecord, error) {
	c, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	rec, err := scanBackup(c.QueryRow(ctx, q, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err, msg)
	}
	return rec, nil
}

// InsertBackup implements backend.BackupCatalog.
func (b *Backend) InsertBackup(ctx context.Context, p backend.InsertBackupParams) (*backend.BackupRecord, error) {
	r := p.Record
	desc := r.TableDesc
	if desc == nil {
		desc = empty
	}
	return b.backupRow(ctx, "postgres: insert backup", `INSERT INTO backups(`+backupCols+`) VALUES
		($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 1, now(), $17, $18) RETURNING `+backupCols,
		r.ARN, r.Account, r.TableName, r.TableID, r.BackupID, r.Name, r.Type, r.Status, r.CreatedAt,
		r.SizeBytes, r.ItemCount, desc, r.StoreID, r.Prefix, r.Message, r.Owner, backend.ExpiryMillis(r.ExpiresAt), r.Plan)
}

// GetBackup implements backend.BackupCatalog.
func (b *Backend) GetBackup(ctx context.Context, p backend.GetBackupParams) (*backend.BackupRecord, error) {
	return b.backupRow(ctx, "postgres: get backup", `SELECT `+backupCols+` FROM backups WHERE arn = $1`, p.ARN)
}

// ListBackups implements backend.BackupCatalog.
func (b *Backend) ListBackups(ctx context.Context, p backend.ListBackupsParams) ([]backend.BackupRecord, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if p.Account != "" {
		add("account = ?", p.Account)
	}
	if p.TableName != "" {
		add("table_name = ?", p.TableName)
	}
	if len(p.Statuses) > 0 {
		add("status = ANY(?)", p.Statuses)
	}
	if len(p.Types) > 0 {
		add("type = ANY(?)", p.Types)
	}
	if !p.CreatedFrom.IsZero() {
		add("created_at >= ?", p.CreatedFrom)
	}
	if !p.CreatedTo.IsZero() {
		add("created_at <= ?", p.CreatedTo)
	}
	if p.StartAfter != "" {
		add("arn > ?", p.StartAfter)
	}
	q := `SELECT ` + backupCols + ` FROM backups`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY arn"
	if p.Limit > 0 {
		args = append(args, p.Limit)
		q += " LIMIT $" + strconv.Itoa(len(args))
	}
	var out []backend.BackupRecord
	err := b.read(ctx, "postgres: list backups", func(c *pgxpool.Conn) error {
		out = out[:0]
		rs, err := c.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			rec, err := scanBackup(rs)
			if err != nil {
				return err
			}
			out = append(out, *rec)
		}
		return rs.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// condWrite runs a conditional UPDATE ... RETURNING; when it matches no
// row, the current row is read for the result.
func (b *Backend) condWrite(ctx context.Context, arn, msg, q string, args ...any) (*backend.BackupWriteResult, error) {
	rec, err := b.backupRow(ctx, msg, q, args...)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		return &backend.BackupWriteResult{Matched: true, Record: rec}, nil
	}
	cur, err := b.GetBackup(ctx, backend.GetBackupParams{ARN: arn})
	if err != nil {
		return nil, err
	}
	return &backend.BackupWriteResult{Record: cur}, nil
}

// UpdateBackup implements backend.BackupCatalog.
func (b *Backend) UpdateBackup(ctx context.Context, p backend.UpdateBackupParams) (*backend.BackupWriteResult, error) {
	args := []any{p.ARN, p.Generation, p.Status, p.NewStatus}
	set := []string{"status = $4", "heartbeat = now()"}
	opt := func(col string, v any) {
		args = append(args, v)
		set = append(set, col+" = $"+strconv.Itoa(len(args)))
	}
	if p.SizeBytes != nil {
		opt("size_bytes", *p.SizeBytes)
	}
	if p.ItemCount != nil {
		opt("item_count", *p.ItemCount)
	}
	if p.Message != nil {
		opt("message", *p.Message)
	}
	if p.StoreID != nil {
		opt("store_id", *p.StoreID)
	}
	return b.condWrite(ctx, p.ARN, "postgres: update backup",
		`UPDATE backups SET `+strings.Join(set, ", ")+` WHERE arn = $1 AND generation = $2 AND status = $3 RETURNING `+backupCols, args...)
}

// RemoveBackup implements backend.BackupCatalog.
func (b *Backend) RemoveBackup(ctx context.Context, p backend.RemoveBackupParams) (*backend.BackupWriteResult, error) {
	res, err := b.condWrite(ctx, p.ARN, "postgres: remove backup",
		`DELETE FROM backups WHERE arn = $1 AND generation = $2 AND status = $3 RETURNING `+backupCols, p.ARN, p.Generation, p.Status)
	if err == nil && res.Matched {
		res.Record = nil // the row after the write: none
	}
	return res, err
}

// HeartbeatBackup implements backend.BackupCatalog.
func (b *Backend) HeartbeatBackup(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.BackupWriteResult, error) {
	return b.condWrite(ctx, p.ARN, "postgres: heartbeat backup",
		`UPDATE backups SET heartbeat = now() WHERE arn = $1 AND owner = $2 AND generation = $3 RETURNING `+backupCols,
		p.ARN, p.Owner, p.Generation)
}

// ClaimBackup implements backend.BackupCatalog.
func (b *Backend) ClaimBackup(ctx context.Context, p backend.ClaimBackupParams) (*backend.BackupWriteResult, error) {
	newStatus := p.NewStatus
	if newStatus == "" {
		newStatus = p.Status
	}
	return b.condWrite(ctx, p.ARN, "postgres: claim backup",
		`UPDATE backups SET owner = $2, generation = generation + 1, status = $3, heartbeat = now()
		 WHERE arn = $1 AND generation = $4 AND status = $5 AND heartbeat <= now() - $6 * interval '1 millisecond'
		 RETURNING `+backupCols,
		p.ARN, p.Owner, newStatus, p.Generation, p.Status, p.StaleAfter.Milliseconds())
}

// CatalogID implements backend.BackupCatalog.
func (b *Backend) CatalogID(ctx context.Context, newID string) (string, error) {
	c, err := b.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer c.Release()
	if _, err := c.Exec(ctx, `INSERT INTO backup_catalog(one, id) VALUES (1, $1) ON CONFLICT DO NOTHING`, newID); err != nil {
		return "", mapErr(err, "postgres: catalog id")
	}
	var id string
	if err := c.QueryRow(ctx, `SELECT id FROM backup_catalog WHERE one = 1`).Scan(&id); err != nil {
		return "", mapErr(err, "postgres: catalog id")
	}
	return id, nil
}

// ---- restore jobs ----

var _ backend.RestoreCatalog = (*Backend)(nil)

const restoreCols = `id, account, table_name, table_id, backup_arn, status, message, loaded, owner, generation, heartbeat`

func scanRestore(r pgx.Row) (*backend.RestoreRecord, error) {
	var rec backend.RestoreRecord
	if err := r.Scan(&rec.ID, &rec.Account, &rec.TableName, &rec.TableID, &rec.BackupARN, &rec.Status, &rec.Message,
		&rec.Loaded, &rec.Owner, &rec.Generation, &rec.Heartbeat); err != nil {
		return nil, err
	}
	rec.Heartbeat = rec.Heartbeat.UTC()
	return &rec, nil
}

func (b *Backend) restoreRow(ctx context.Context, msg, q string, args ...any) (*backend.RestoreRecord, error) {
	c, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	rec, err := scanRestore(c.QueryRow(ctx, q, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err, msg)
	}
	return rec, nil
}

// restoreWrite runs a conditional UPDATE ... RETURNING; when it matches
// nothing the current row is read.
func (b *Backend) restoreWrite(ctx context.Context, id, msg, q string, args ...any) (*backend.RestoreWriteResult, error) {
	rec, err := b.restoreRow(ctx, msg, q, args...)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		return &backend.RestoreWriteResult{Matched: true, Record: rec}, nil
	}
	cur, err := b.restoreRow(ctx, msg, `SELECT `+restoreCols+` FROM restores WHERE id = $1`, id)
	if err != nil {
		return nil, err
	}
	return &backend.RestoreWriteResult{Record: cur}, nil
}

// InsertRestore implements backend.RestoreCatalog.
func (b *Backend) InsertRestore(ctx context.Context, r backend.RestoreRecord) (*backend.RestoreRecord, error) {
	return b.restoreRow(ctx, "postgres: insert restore", `INSERT INTO restores(`+restoreCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, 1, now()) RETURNING `+restoreCols,
		r.ID, r.Account, r.TableName, r.TableID, r.BackupARN, backend.RestoreRunning, r.Message, r.Owner)
}

// ListRestores implements backend.RestoreCatalog.
func (b *Backend) ListRestores(ctx context.Context, statuses []string) ([]backend.RestoreRecord, error) {
	q, args := `SELECT `+restoreCols+` FROM restores`, []any{}
	if len(statuses) > 0 {
		q, args = q+` WHERE status = ANY($1)`, append(args, statuses)
	}
	var out []backend.RestoreRecord
	err := b.read(ctx, "postgres: list restores", func(c *pgxpool.Conn) error {
		out = out[:0]
		rs, err := c.Query(ctx, q+" ORDER BY id", args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		for rs.Next() {
			r, err := scanRestore(rs)
			if err != nil {
				return err
			}
			out = append(out, *r)
		}
		return rs.Err()
	})
	return out, err
}

// UpdateRestore implements backend.RestoreCatalog.
func (b *Backend) UpdateRestore(ctx context.Context, p backend.UpdateBackupParams) (*backend.RestoreWriteResult, error) {
	msg := ""
	if p.Message != nil {
		msg = *p.Message
	}
	return b.restoreWrite(ctx, p.ARN, "postgres: update restore",
		`UPDATE restores SET status = $4, message = $5, heartbeat = now() WHERE id = $1 AND generation = $2 AND status = $3 RETURNING `+restoreCols,
		p.ARN, p.Generation, p.Status, p.NewStatus, msg)
}

// HeartbeatRestore implements backend.RestoreCatalog.
func (b *Backend) HeartbeatRestore(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.RestoreWriteResult, error) {
	return b.restoreWrite(ctx, p.ARN, "postgres: heartbeat restore",
		`UPDATE restores SET heartbeat = now() WHERE id = $1 AND owner = $2 AND generation = $3 RETURNING `+restoreCols,
		p.ARN, p.Owner, p.Generation)
}

// ClaimRestore implements backend.RestoreCatalog.
func (b *Backend) ClaimRestore(ctx context.Context, p backend.ClaimBackupParams) (*backend.RestoreWriteResult, error) {
	ns := p.NewStatus
	if ns == "" {
		ns = p.Status
	}
	return b.restoreWrite(ctx, p.ARN, "postgres: claim restore",
		`UPDATE restores SET owner = $2, generation = generation + 1, status = $3, heartbeat = now()
		 WHERE id = $1 AND generation = $4 AND status = $5 AND heartbeat <= now() - $6 * interval '1 millisecond'
		 RETURNING `+restoreCols,
		p.ARN, p.Owner, ns, p.Generation, p.Status, p.StaleAfter.Milliseconds())
}

// RecordRestoreProgress implements backend.RestoreCatalog.
func (b *Backend) RecordRestoreProgress(ctx context.Context, p backend.RestoreProgressParams) (*backend.RestoreWriteResult, error) {
	return b.restoreWrite(ctx, p.ID, "postgres: record restore progress",
		`UPDATE restores SET loaded = $5 WHERE id = $1 AND owner = $2 AND generation = $3 AND status = $4 AND loaded <= $5 RETURNING `+restoreCols,
		p.ID, p.Owner, p.Generation, backend.RestoreRunning, p.Loaded)
}
