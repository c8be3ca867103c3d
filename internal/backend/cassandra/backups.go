package cassandra

import (
	"context"
	"errors"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
)

// The backup and restore job catalogs (backend.BackupCatalog,
// backend.RestoreCatalog; migration 0004). One row per backup (per
// restore job), its own partition, so every conditional write is an LWT
// on that row alone:
//
//   - status writes, removals and heartbeats are single LWTs conditioned
//     on the generation and the expected status (or owner): a job that
//     lost its claim can no longer write (fencing), whatever its clock;
//   - the database's clock is the Cassandra coordinators' clock: every
//     heartbeat is written as toUnixTimestamp(now()) (milliseconds), and
//     Cassandra has no clock function usable in an LWT condition, so a
//     claim reads the row with SERIAL consistency together with the
//     coordinator's toUnixTimestamp(now()), judges "heartbeat older than
//     StaleAfter" from those two values, and then claims with an LWT
//     conditioned on the generation, the status AND the heartbeat as
//     read. A heartbeat renewed between the read and the LWT makes the
//     claim fail; among concurrent claimers exactly one LWT applies (the
//     others read the new generation and lose). Extenddb servers' clocks
//     play no part; the Cassandra nodes' clocks must agree (NTP) to well
//     within StaleAfter, which the coordinator chosen for a read may vary.

var (
	_ backend.BackupCatalog  = (*Backend)(nil)
	_ backend.RestoreCatalog = (*Backend)(nil)
)

const backupCols = `arn, account, table_name, table_id, backup_id, name, type, status, created_at, size_bytes, item_count, table_desc, store_id, prefix, message, owner, generation, hb, expires_at, plan`

// readBackup reads a row with SERIAL consistency (linearizable with the
// LWTs) and the coordinator's clock; nil when absent.
func (b *Backend) readBackup(ctx context.Context, arn string) (*backend.BackupRecord, int64, error) {
	var r backend.BackupRecord
	var hb, now, expires int64
	err := b.serial(ctx, `SELECT `+backupCols+`, toUnixTimestamp(now()) FROM backups WHERE arn = ?`, arn).Scan(
		&r.ARN, &r.Account, &r.TableName, &r.TableID, &r.BackupID, &r.Name, &r.Type, &r.Status, &r.CreatedAt,
		&r.SizeBytes, &r.ItemCount, &r.TableDesc, &r.StoreID, &r.Prefix, &r.Message, &r.Owner, &r.Generation, &hb, &expires, &r.Plan, &now)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, now, nil
	}
	if err != nil {
		return nil, 0, mapErr(err, "read backup")
	}
	r.CreatedAt = r.CreatedAt.UTC()
	r.Heartbeat = time.UnixMilli(hb).UTC()
	r.ExpiresAt = backend.ExpiryTime(expires)
	return &r, now, nil
}

// InsertBackup implements backend.BackupCatalog.
func (b *Backend) InsertBackup(ctx context.Context, p backend.InsertBackupParams) (*backend.BackupRecord, error) {
	r := p.Record
	applied, err := b.query(ctx, `INSERT INTO backups (`+backupCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, toUnixTimestamp(now()), ?, ?) IF NOT EXISTS`,
		r.ARN, r.Account, r.TableName, r.TableID, r.BackupID, r.Name, r.Type, r.Status, r.CreatedAt.UTC().Truncate(time.Millisecond),
		r.SizeBytes, r.ItemCount, r.TableDesc, r.StoreID, r.Prefix, r.Message, r.Owner, backend.ExpiryMillis(r.ExpiresAt), r.Plan).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, "insert backup")
	}
	if !applied {
		return nil, backend.Errorf(backend.KindInternal, "cassandra: backup %s exists", r.ARN)
	}
	got, _, err := b.readBackup(ctx, r.ARN)
	if err == nil && got == nil {
		err = backend.Errorf(backend.KindInternal, "cassandra: backup %s vanished after its insert", r.ARN)
	}
	return got, err
}

// GetBackup implements backend.BackupCatalog.
func (b *Backend) GetBackup(ctx context.Context, p backend.GetBackupParams) (*backend.BackupRecord, error) {
	r, _, err := b.readBackup(ctx, p.ARN)
	return r, err
}

// ListBackups implements backend.BackupCatalog. The rows are read whole
// (one table scan) and filtered here: the catalog holds backups, not
// items, and the reconciler lists every account anyway.
func (b *Backend) ListBackups(ctx context.Context, p backend.ListBackupsParams) ([]backend.BackupRecord, error) {
	iter := b.quorum(ctx, `SELECT `+backupCols+` FROM backups`).PageSize(500).Iter()
	var out []backend.BackupRecord
	for {
		var r backend.BackupRecord
		var hb, expires int64
		if !iter.Scan(&r.ARN, &r.Account, &r.TableName, &r.TableID, &r.BackupID, &r.Name, &r.Type, &r.Status, &r.CreatedAt,
			&r.SizeBytes, &r.ItemCount, &r.TableDesc, &r.StoreID, &r.Prefix, &r.Message, &r.Owner, &r.Generation, &hb, &expires, &r.Plan) {
			break
		}
		r.ExpiresAt = backend.ExpiryTime(expires)
		r.CreatedAt = r.CreatedAt.UTC()
		r.Heartbeat = time.UnixMilli(hb).UTC()
		if p.Selects(&r) {
			out = append(out, r)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, mapErr(err, "list backups")
	}
	return backend.FilterBackups(out, p), nil
}

// backupCAS runs one conditional write and answers the row after it.
func (b *Backend) backupCAS(ctx context.Context, arn, what, stmt string, args ...any) (*backend.BackupWriteResult, error) {
	applied, err := b.query(ctx, stmt, args...).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, what)
	}
	r, _, err := b.readBackup(ctx, arn)
	if err != nil {
		return nil, err
	}
	return &backend.BackupWriteResult{Matched: applied, Record: r}, nil
}

// UpdateBackup implements backend.BackupCatalog.
func (b *Backend) UpdateBackup(ctx context.Context, p backend.UpdateBackupParams) (*backend.BackupWriteResult, error) {
	stmt := `UPDATE backups SET status = ?, hb = toUnixTimestamp(now())`
	args := []any{p.NewStatus}
	if p.SizeBytes != nil {
		stmt += `, size_bytes = ?`
		args = append(args, *p.SizeBytes)
	}
	if p.ItemCount != nil {
		stmt += `, item_count = ?`
		args = append(args, *p.ItemCount)
	}
	if p.Message != nil {
		stmt += `, message = ?`
		args = append(args, *p.Message)
	}
	if p.StoreID != nil {
		stmt += `, store_id = ?`
		args = append(args, *p.StoreID)
	}
	stmt += ` WHERE arn = ? IF generation = ? AND status = ?`
	args = append(args, p.ARN, p.Generation, p.Status)
	return b.backupCAS(ctx, p.ARN, "update backup", stmt, args...)
}

// RemoveBackup implements backend.BackupCatalog.
func (b *Backend) RemoveBackup(ctx context.Context, p backend.RemoveBackupParams) (*backend.BackupWriteResult, error) {
	return b.backupCAS(ctx, p.ARN, "remove backup", `DELETE FROM backups WHERE arn = ? IF generation = ? AND status = ?`, p.ARN, p.Generation, p.Status)
}

// HeartbeatBackup implements backend.BackupCatalog.
func (b *Backend) HeartbeatBackup(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.BackupWriteResult, error) {
	return b.backupCAS(ctx, p.ARN, "backup heartbeat", `UPDATE backups SET hb = toUnixTimestamp(now()) WHERE arn = ? IF owner = ? AND generation = ?`,
		p.ARN, p.Owner, p.Generation)
}

// ClaimBackup implements backend.BackupCatalog (staleness: see above).
func (b *Backend) ClaimBackup(ctx context.Context, p backend.ClaimBackupParams) (*backend.BackupWriteResult, error) {
	for {
		r, now, err := b.readBackup(ctx, p.ARN)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Generation != p.Generation || r.Status != p.Status || now-r.Heartbeat.UnixMilli() < p.StaleAfter.Milliseconds() {
			return &backend.BackupWriteResult{Record: r}, nil
		}
		status := p.Status
		if p.NewStatus != "" {
			status = p.NewStatus
		}
		applied, err := b.query(ctx, `UPDATE backups SET owner = ?, generation = ?, status = ?, hb = toUnixTimestamp(now()) WHERE arn = ? IF generation = ? AND status = ? AND hb = ?`,
			p.Owner, p.Generation+1, status, p.ARN, p.Generation, p.Status, r.Heartbeat.UnixMilli()).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, mapErr(err, "claim backup")
		}
		if applied {
			r, _, err := b.readBackup(ctx, p.ARN)
			if err != nil {
				return nil, err
			}
			return &backend.BackupWriteResult{Matched: true, Record: r}, nil
		}
		// The row moved on (a heartbeat, a status write, another claim):
		// judge it again.
	}
}

// CatalogID implements backend.BackupCatalog.
func (b *Backend) CatalogID(ctx context.Context, newID string) (string, error) {
	m := map[string]any{}
	applied, err := b.query(ctx, `INSERT INTO backup_meta (k, v) VALUES ('catalog', ?) IF NOT EXISTS`, newID).MapScanCAS(m)
	if err != nil {
		return "", mapErr(err, "catalog id")
	}
	if applied {
		return newID, nil
	}
	var id string
	if err := b.serial(ctx, `SELECT v FROM backup_meta WHERE k = 'catalog'`).Scan(&id); err != nil {
		return "", mapErr(err, "catalog id")
	}
	return id, nil
}

// ---- restore jobs ----

const restoreCols = `id, account, table_name, table_id, backup_arn, status, message, owner, generation, hb, loaded`

func (b *Backend) readRestore(ctx context.Context, id string) (*backend.RestoreRecord, int64, error) {
	var r backend.RestoreRecord
	var hb, now int64
	err := b.serial(ctx, `SELECT `+restoreCols+`, toUnixTimestamp(now()) FROM restores WHERE id = ?`, id).Scan(
		&r.ID, &r.Account, &r.TableName, &r.TableID, &r.BackupARN, &r.Status, &r.Message, &r.Owner, &r.Generation, &hb, &r.Loaded, &now)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, now, nil
	}
	if err != nil {
		return nil, 0, mapErr(err, "read restore job")
	}
	r.Heartbeat = time.UnixMilli(hb).UTC()
	return &r, now, nil
}

// InsertRestore implements backend.RestoreCatalog.
func (b *Backend) InsertRestore(ctx context.Context, r backend.RestoreRecord) (*backend.RestoreRecord, error) {
	applied, err := b.query(ctx, `INSERT INTO restores (`+restoreCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, toUnixTimestamp(now()), 0) IF NOT EXISTS`,
		r.ID, r.Account, r.TableName, r.TableID, r.BackupARN, backend.RestoreRunning, r.Message, r.Owner).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, "insert restore job")
	}
	if !applied {
		return nil, backend.Errorf(backend.KindInternal, "cassandra: restore job %s exists", r.ID)
	}
	got, _, err := b.readRestore(ctx, r.ID)
	if err == nil && got == nil {
		err = backend.Errorf(backend.KindInternal, "cassandra: restore job %s vanished after its insert", r.ID)
	}
	return got, err
}

// ListRestores implements backend.RestoreCatalog.
func (b *Backend) ListRestores(ctx context.Context, statuses []string) ([]backend.RestoreRecord, error) {
	iter := b.quorum(ctx, `SELECT `+restoreCols+` FROM restores`).PageSize(500).Iter()
	var out []backend.RestoreRecord
	for {
		var r backend.RestoreRecord
		var hb int64
		if !iter.Scan(&r.ID, &r.Account, &r.TableName, &r.TableID, &r.BackupARN, &r.Status, &r.Message, &r.Owner, &r.Generation, &hb, &r.Loaded) {
			break
		}
		r.Heartbeat = time.UnixMilli(hb).UTC()
		out = append(out, r)
	}
	if err := iter.Close(); err != nil {
		return nil, mapErr(err, "list restore jobs")
	}
	return backend.FilterRestores(out, statuses), nil
}

func (b *Backend) restoreCAS(ctx context.Context, id, what, stmt string, args ...any) (*backend.RestoreWriteResult, error) {
	applied, err := b.query(ctx, stmt, args...).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, what)
	}
	r, _, err := b.readRestore(ctx, id)
	if err != nil {
		return nil, err
	}
	return &backend.RestoreWriteResult{Matched: applied, Record: r}, nil
}

// UpdateRestore implements backend.RestoreCatalog.
func (b *Backend) UpdateRestore(ctx context.Context, p backend.UpdateBackupParams) (*backend.RestoreWriteResult, error) {
	msg := ""
	if p.Message != nil {
		msg = *p.Message
	}
	return b.restoreCAS(ctx, p.ARN, "update restore job", `UPDATE restores SET status = ?, message = ?, hb = toUnixTimestamp(now()) WHERE id = ? IF generation = ? AND status = ?`,
		p.NewStatus, msg, p.ARN, p.Generation, p.Status)
}

// HeartbeatRestore implements backend.RestoreCatalog.
func (b *Backend) HeartbeatRestore(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.RestoreWriteResult, error) {
	return b.restoreCAS(ctx, p.ARN, "restore heartbeat", `UPDATE restores SET hb = toUnixTimestamp(now()) WHERE id = ? IF owner = ? AND generation = ?`,
		p.ARN, p.Owner, p.Generation)
}

// RecordRestoreProgress implements backend.RestoreCatalog: one LWT
// conditioned on the claim, the status and the progress read just before
// (so that it never moves back); a lost race reads again.
func (b *Backend) RecordRestoreProgress(ctx context.Context, p backend.RestoreProgressParams) (*backend.RestoreWriteResult, error) {
	for {
		r, _, err := b.readRestore(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Owner != p.Owner || r.Generation != p.Generation || r.Status != backend.RestoreRunning || r.Loaded > p.Loaded {
			return &backend.RestoreWriteResult{Record: r}, nil
		}
		applied, err := b.query(ctx, `UPDATE restores SET loaded = ? WHERE id = ? IF owner = ? AND generation = ? AND status = ? AND loaded = ?`,
			p.Loaded, p.ID, p.Owner, p.Generation, backend.RestoreRunning, r.Loaded).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, mapErr(err, "record restore progress")
		}
		if applied {
			r, _, err := b.readRestore(ctx, p.ID)
			if err != nil {
				return nil, err
			}
			return &backend.RestoreWriteResult{Matched: true, Record: r}, nil
		}
	}
}

// ClaimRestore implements backend.RestoreCatalog.
func (b *Backend) ClaimRestore(ctx context.Context, p backend.ClaimBackupParams) (*backend.RestoreWriteResult, error) {
	for {
		r, now, err := b.readRestore(ctx, p.ARN)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Generation != p.Generation || r.Status != p.Status || now-r.Heartbeat.UnixMilli() < p.StaleAfter.Milliseconds() {
			return &backend.RestoreWriteResult{Record: r}, nil
		}
		status := p.Status
		if p.NewStatus != "" {
			status = p.NewStatus
		}
		applied, err := b.query(ctx, `UPDATE restores SET owner = ?, generation = ?, status = ?, hb = toUnixTimestamp(now()) WHERE id = ? IF generation = ? AND status = ? AND hb = ?`,
			p.Owner, p.Generation+1, status, p.ARN, p.Generation, p.Status, r.Heartbeat.UnixMilli()).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, mapErr(err, "claim restore job")
		}
		if applied {
			r, _, err := b.readRestore(ctx, p.ARN)
			if err != nil {
				return nil, err
			}
			return &backend.RestoreWriteResult{Matched: true, Record: r}, nil
		}
	}
}
