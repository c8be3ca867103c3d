package cassandra

import (
	"context"
	"errors"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/storage"
)

// The backup and restore job catalogs (storage.BackupCatalog,
// storage.RestoreCatalog; migration 0004). One row per backup (per
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
	_ storage.BackupCatalog  = (*Backend)(nil)
	_ storage.RestoreCatalog = (*Backend)(nil)
)

const backupCols = `arn, account, table_name, table_id, backup_id, name, type, status, created_at, size_bytes, item_count, table_desc, store_id, prefix, message, owner, generation, hb, expires_at, plan`

// readBackup reads a row with SERIAL consistency (linearizable with the
// LWTs) and the coordinator's clock; nil when absent.
func (b *Backend) readBackup(ctx context.Context, arn string) (*storage.BackupRecord, int64, error) {
	var r storage.BackupRecord
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
	r.ExpiresAt = storage.ExpiryTime(expires)
	return &r, now, nil
}

// InsertBackup implements storage.BackupCatalog.
func (b *Backend) InsertBackup(ctx context.Context, p storage.InsertBackupParams) (*storage.BackupRecord, error) {
	r := p.Record
	applied, err := b.query(ctx, `INSERT INTO backups (`+backupCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, toUnixTimestamp(now()), ?, ?) IF NOT EXISTS`,
		r.ARN, r.Account, r.TableName, r.TableID, r.BackupID, r.Name, r.Type, r.Status, r.CreatedAt.UTC().Truncate(time.Millisecond),
		r.SizeBytes, r.ItemCount, r.TableDesc, r.StoreID, r.Prefix, r.Message, r.Owner, storage.ExpiryMillis(r.ExpiresAt), r.Plan).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, "insert backup")
	}
	if !applied {
		return nil, storage.Errorf(storage.KindInternal, "cassandra: backup %s exists", r.ARN)
	}
	got, _, err := b.readBackup(ctx, r.ARN)
	if err == nil && got == nil {
		err = storage.Errorf(storage.KindInternal, "cassandra: backup %s vanished after its insert", r.ARN)
	}
	return got, err
}

// GetBackup implements storage.BackupCatalog.
func (b *Backend) GetBackup(ctx context.Context, p storage.GetBackupParams) (*storage.BackupRecord, error) {
	r, _, err := b.readBackup(ctx, p.ARN)
	return r, err
}

// ListBackups implements storage.BackupCatalog. The rows are read whole
// (one table scan) and filtered here: the catalog holds backups, not
// items, and the reconciler lists every account anyway.
func (b *Backend) ListBackups(ctx context.Context, p storage.ListBackupsParams) ([]storage.BackupRecord, error) {
	iter := b.quorum(ctx, `SELECT `+backupCols+` FROM backups`).PageSize(500).Iter()
	var out []storage.BackupRecord
	for {
		var r storage.BackupRecord
		var hb, expires int64
		if !iter.Scan(&r.ARN, &r.Account, &r.TableName, &r.TableID, &r.BackupID, &r.Name, &r.Type, &r.Status, &r.CreatedAt,
			&r.SizeBytes, &r.ItemCount, &r.TableDesc, &r.StoreID, &r.Prefix, &r.Message, &r.Owner, &r.Generation, &hb, &expires, &r.Plan) {
			break
		}
		r.ExpiresAt = storage.ExpiryTime(expires)
		r.CreatedAt = r.CreatedAt.UTC()
		r.Heartbeat = time.UnixMilli(hb).UTC()
		if p.Selects(&r) {
			out = append(out, r)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, mapErr(err, "list backups")
	}
	return storage.FilterBackups(out, p), nil
}

// backupCAS runs one conditional write and answers the row after it.
func (b *Backend) backupCAS(ctx context.Context, arn, what, stmt string, args ...any) (*storage.BackupWriteResult, error) {
	applied, err := b.query(ctx, stmt, args...).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, what)
	}
	r, _, err := b.readBackup(ctx, arn)
	if err != nil {
		return nil, err
	}
	return &storage.BackupWriteResult{Matched: applied, Record: r}, nil
}

// UpdateBackup implements storage.BackupCatalog.
func (b *Backend) UpdateBackup(ctx context.Context, p storage.UpdateBackupParams) (*storage.BackupWriteResult, error) {
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

// RemoveBackup implements storage.BackupCatalog.
func (b *Backend) RemoveBackup(ctx context.Context, p storage.RemoveBackupParams) (*storage.BackupWriteResult, error) {
	return b.backupCAS(ctx, p.ARN, "remove backup", `DELETE FROM backups WHERE arn = ? IF generation = ? AND status = ?`, p.ARN, p.Generation, p.Status)
}

// HeartbeatBackup implements storage.BackupCatalog.
func (b *Backend) HeartbeatBackup(ctx context.Context, p storage.HeartbeatBackupParams) (*storage.BackupWriteResult, error) {
	return b.backupCAS(ctx, p.ARN, "backup heartbeat", `UPDATE backups SET hb = toUnixTimestamp(now()) WHERE arn = ? IF owner = ? AND generation = ?`,
		p.ARN, p.Owner, p.Generation)
}

// ClaimBackup implements storage.BackupCatalog (staleness: see above).
func (b *Backend) ClaimBackup(ctx context.Context, p storage.ClaimBackupParams) (*storage.BackupWriteResult, error) {
	for {
		r, now, err := b.readBackup(ctx, p.ARN)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Generation != p.Generation || r.Status != p.Status || now-r.Heartbeat.UnixMilli() < p.StaleAfter.Milliseconds() {
			return &storage.BackupWriteResult{Record: r}, nil
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
			return &storage.BackupWriteResult{Matched: true, Record: r}, nil
		}
		// The row moved on (a heartbeat, a status write, another claim):
		// judge it again.
	}
}

// CatalogID implements storage.BackupCatalog.
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

func (b *Backend) readRestore(ctx context.Context, id string) (*storage.RestoreRecord, int64, error) {
	var r storage.RestoreRecord
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

// InsertRestore implements storage.RestoreCatalog.
func (b *Backend) InsertRestore(ctx context.Context, r storage.RestoreRecord) (*storage.RestoreRecord, error) {
	applied, err := b.query(ctx, `INSERT INTO restores (`+restoreCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, toUnixTimestamp(now()), 0) IF NOT EXISTS`,
		r.ID, r.Account, r.TableName, r.TableID, r.BackupARN, storage.RestoreRunning, r.Message, r.Owner).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, "insert restore job")
	}
	if !applied {
		return nil, storage.Errorf(storage.KindInternal, "cassandra: restore job %s exists", r.ID)
	}
	got, _, err := b.readRestore(ctx, r.ID)
	if err == nil && got == nil {
		err = storage.Errorf(storage.KindInternal, "cassandra: restore job %s vanished after its insert", r.ID)
	}
	return got, err
}

// ListRestores implements storage.RestoreCatalog.
func (b *Backend) ListRestores(ctx context.Context, statuses []string) ([]storage.RestoreRecord, error) {
	iter := b.quorum(ctx, `SELECT `+restoreCols+` FROM restores`).PageSize(500).Iter()
	var out []storage.RestoreRecord
	for {
		var r storage.RestoreRecord
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
	return storage.FilterRestores(out, statuses), nil
}

func (b *Backend) restoreCAS(ctx context.Context, id, what, stmt string, args ...any) (*storage.RestoreWriteResult, error) {
	applied, err := b.query(ctx, stmt, args...).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, what)
	}
	r, _, err := b.readRestore(ctx, id)
	if err != nil {
		return nil, err
	}
	return &storage.RestoreWriteResult{Matched: applied, Record: r}, nil
}

// UpdateRestore implements storage.RestoreCatalog.
func (b *Backend) UpdateRestore(ctx context.Context, p storage.UpdateBackupParams) (*storage.RestoreWriteResult, error) {
	msg := ""
	if p.Message != nil {
		msg = *p.Message
	}
	return b.restoreCAS(ctx, p.ARN, "update restore job", `UPDATE restores SET status = ?, message = ?, hb = toUnixTimestamp(now()) WHERE id = ? IF generation = ? AND status = ?`,
		p.NewStatus, msg, p.ARN, p.Generation, p.Status)
}

// HeartbeatRestore implements storage.RestoreCatalog.
func (b *Backend) HeartbeatRestore(ctx context.Context, p storage.HeartbeatBackupParams) (*storage.RestoreWriteResult, error) {
	return b.restoreCAS(ctx, p.ARN, "restore heartbeat", `UPDATE restores SET hb = toUnixTimestamp(now()) WHERE id = ? IF owner = ? AND generation = ?`,
		p.ARN, p.Owner, p.Generation)
}

// RecordRestoreProgress implements storage.RestoreCatalog: one LWT
// conditioned on the claim, the status and the progress read just before
// (so that it never moves back); a lost race reads again.
func (b *Backend) RecordRestoreProgress(ctx context.Context, p storage.RestoreProgressParams) (*storage.RestoreWriteResult, error) {
	for {
		r, _, err := b.readRestore(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Owner != p.Owner || r.Generation != p.Generation || r.Status != storage.RestoreRunning || r.Loaded > p.Loaded {
			return &storage.RestoreWriteResult{Record: r}, nil
		}
		applied, err := b.query(ctx, `UPDATE restores SET loaded = ? WHERE id = ? IF owner = ? AND generation = ? AND status = ? AND loaded = ?`,
			p.Loaded, p.ID, p.Owner, p.Generation, storage.RestoreRunning, r.Loaded).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, mapErr(err, "record restore progress")
		}
		if applied {
			r, _, err := b.readRestore(ctx, p.ID)
			if err != nil {
				return nil, err
			}
			return &storage.RestoreWriteResult{Matched: true, Record: r}, nil
		}
	}
}

// ClaimRestore implements storage.RestoreCatalog.
func (b *Backend) ClaimRestore(ctx context.Context, p storage.ClaimBackupParams) (*storage.RestoreWriteResult, error) {
	for {
		r, now, err := b.readRestore(ctx, p.ARN)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Generation != p.Generation || r.Status != p.Status || now-r.Heartbeat.UnixMilli() < p.StaleAfter.Milliseconds() {
			return &storage.RestoreWriteResult{Record: r}, nil
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
			return &storage.RestoreWriteResult{Matched: true, Record: r}, nil
		}
	}
}
