package backend

import (
	"context"
	"slices"
)

// checkedBackups and checkedRestores are the job catalogs under the
// Checked contract checks. Every method answers only KindInternal and
// KindUnavailable. What one answer shows is checked: a listing is in
// strictly ascending key order, after StartAfter, within Limit and only of
// rows the filters select; a row answered for a key is that key's row; a
// matched conditional write answers a row at least at the generation it
// was conditioned on (a backend may read the row back after its write, so
// a later claim may already show: generations only grow); recorded
// restore progress never shows less than was recorded.
type checkedBackups struct {
	c  *checked
	bc BackupCatalog
}

type checkedRestores struct {
	c  *checked
	rc RestoreCatalog
}

// jobRow checks the row (kind "backup" or "restore job") a catalog method
// answered for key: it is that key's row, and after a matched write (when
// matched) at generation gen or later.
func (c *checked) jobRow(method, kind, key string, matched bool, gen int64, rowKey string, rowGen int64) error {
	if rowKey != key {
		return c.violation(method, "asked for %s %s, answered the row of %s", kind, key, rowKey)
	}
	if matched && rowGen < gen {
		return c.violation(method, "matched at generation %d but answered a row at generation %d", gen, rowGen)
	}
	return nil
}

// backupRow checks the row a backup catalog method answered for arn (nil:
// none).
func (b *checkedBackups) backupRow(method, arn string, matched bool, gen int64, r *BackupRecord) error {
	if r == nil {
		return nil
	}
	return b.c.jobRow(method, "backup", arn, matched, gen, r.ARN, r.Generation)
}

// written checks a conditional write's answer: when it matched, the row
// (if answered) is at generation gen or later.
func (b *checkedBackups) written(method, arn string, gen int64, r *BackupWriteResult, err error) (*BackupWriteResult, error) {
	if err != nil {
		return nil, b.c.checkErr(method, err, kindsNone, nil)
	}
	if r == nil {
		return nil, b.c.violation(method, "answered no result and no error")
	}
	if err := b.backupRow(method, arn, r.Matched, gen, r.Record); err != nil {
		return nil, err
	}
	return r, nil
}

func (b *checkedBackups) InsertBackup(ctx context.Context, p InsertBackupParams) (*BackupRecord, error) {
	r, err := b.bc.InsertBackup(ctx, p)
	if err != nil {
		return nil, b.c.checkErr("InsertBackup", err, kindsNone, nil)
	}
	if r == nil || r.Generation < 1 {
		return nil, b.c.violation("InsertBackup", "answered no row, or a row without a claim: %+v", r)
	}
	return r, b.backupRow("InsertBackup", p.Record.ARN, false, 0, r)
}

func (b *checkedBackups) GetBackup(ctx context.Context, p GetBackupParams) (*BackupRecord, error) {
	r, err := b.bc.GetBackup(ctx, p)
	if err != nil {
		return nil, b.c.checkErr("GetBackup", err, kindsNone, nil)
	}
	return r, b.backupRow("GetBackup", p.ARN, false, 0, r)
}

func (b *checkedBackups) ListBackups(ctx context.Context, p ListBackupsParams) ([]BackupRecord, error) {
	rows, err := b.bc.ListBackups(ctx, p)
	if err != nil {
		return nil, b.c.checkErr("ListBackups", err, kindsNone, nil)
	}
	if p.Limit > 0 && len(rows) > p.Limit {
		return nil, b.c.violation("ListBackups", "%d rows for a limit of %d", len(rows), p.Limit)
	}
	for i := range rows {
		r := &rows[i]
		if i > 0 && rows[i-1].ARN >= r.ARN {
			return nil, b.c.violation("ListBackups", "rows not in ascending ARN order: %s then %s", rows[i-1].ARN, r.ARN)
		}
		if !p.Selects(r) {
			return nil, b.c.violation("ListBackups", "row %s (account %q, table %q, status %s, created %v) is not selected by %+v",
				r.ARN, r.Account, r.TableName, r.Status, r.CreatedAt, p)
		}
	}
	return rows, nil
}

func (b *checkedBackups) UpdateBackup(ctx context.Context, p UpdateBackupParams) (*BackupWriteResult, error) {
	r, err := b.bc.UpdateBackup(ctx, p)
	return b.written("UpdateBackup", p.ARN, p.Generation, r, err)
}

func (b *checkedBackups) RemoveBackup(ctx context.Context, p RemoveBackupParams) (*BackupWriteResult, error) {
	r, err := b.bc.RemoveBackup(ctx, p)
	return b.written("RemoveBackup", p.ARN, p.Generation, r, err)
}

func (b *checkedBackups) HeartbeatBackup(ctx context.Context, p HeartbeatBackupParams) (*BackupWriteResult, error) {
	r, err := b.bc.HeartbeatBackup(ctx, p)
	return b.written("HeartbeatBackup", p.ARN, p.Generation, r, err)
}

func (b *checkedBackups) ClaimBackup(ctx context.Context, p ClaimBackupParams) (*BackupWriteResult, error) {
	r, err := b.bc.ClaimBackup(ctx, p)
	return b.written("ClaimBackup", p.ARN, p.Generation+1, r, err)
}

func (b *checkedBackups) CatalogID(ctx context.Context, newID string) (string, error) {
	id, err := b.bc.CatalogID(ctx, newID)
	if err != nil {
		return "", b.c.checkErr("CatalogID", err, kindsNone, nil)
	}
	if id == "" {
		return "", b.c.violation("CatalogID", "answered an empty id")
	}
	return id, nil
}

// written checks a conditional write's answer like checkedBackups.written.
func (rc *checkedRestores) written(method, id string, gen int64, r *RestoreWriteResult, err error) (*RestoreWriteResult, error) {
	if err != nil {
		return nil, rc.c.checkErr(method, err, kindsNone, nil)
	}
	if r == nil {
		return nil, rc.c.violation(method, "answered no result and no error")
	}
	if r.Record != nil {
		if err := rc.c.jobRow(method, "restore job", id, r.Matched, gen, r.Record.ID, r.Record.Generation); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (rc *checkedRestores) InsertRestore(ctx context.Context, r RestoreRecord) (*RestoreRecord, error) {
	got, err := rc.rc.InsertRestore(ctx, r)
	if err != nil {
		return nil, rc.c.checkErr("InsertRestore", err, kindsNone, nil)
	}
	if got == nil || got.Generation < 1 {
		return nil, rc.c.violation("InsertRestore", "answered no row, or a row without a claim: %+v", got)
	}
	return got, rc.c.jobRow("InsertRestore", "restore job", r.ID, false, 0, got.ID, got.Generation)
}

func (rc *checkedRestores) ListRestores(ctx context.Context, statuses []string) ([]RestoreRecord, error) {
	rows, err := rc.rc.ListRestores(ctx, statuses)
	if err != nil {
		return nil, rc.c.checkErr("ListRestores", err, kindsNone, nil)
	}
	for i, r := range rows {
		if i > 0 && rows[i-1].ID >= r.ID {
			return nil, rc.c.violation("ListRestores", "rows not in ascending id order: %s then %s", rows[i-1].ID, r.ID)
		}
		if len(statuses) > 0 && !slices.Contains(statuses, r.Status) {
			return nil, rc.c.violation("ListRestores", "row %s in status %s, not one of %v", r.ID, r.Status, statuses)
		}
	}
	return rows, nil
}

func (rc *checkedRestores) UpdateRestore(ctx context.Context, p UpdateBackupParams) (*RestoreWriteResult, error) {
	r, err := rc.rc.UpdateRestore(ctx, p)
	return rc.written("UpdateRestore", p.ARN, p.Generation, r, err)
}

func (rc *checkedRestores) HeartbeatRestore(ctx context.Context, p HeartbeatBackupParams) (*RestoreWriteResult, error) {
	r, err := rc.rc.HeartbeatRestore(ctx, p)
	return rc.written("HeartbeatRestore", p.ARN, p.Generation, r, err)
}

func (rc *checkedRestores) ClaimRestore(ctx context.Context, p ClaimBackupParams) (*RestoreWriteResult, error) {
	r, err := rc.rc.ClaimRestore(ctx, p)
	return rc.written("ClaimRestore", p.ARN, p.Generation+1, r, err)
}

func (rc *checkedRestores) RecordRestoreProgress(ctx context.Context, p RestoreProgressParams) (*RestoreWriteResult, error) {
	r, err := rc.rc.RecordRestoreProgress(ctx, p)
	r, err = rc.written("RecordRestoreProgress", p.ID, p.Generation, r, err)
	if err == nil && r.Matched && r.Record != nil && r.Record.Loaded < p.Loaded {
		return nil, rc.c.violation("RecordRestoreProgress", "recorded %d loaded items but answered a row with %d", p.Loaded, r.Record.Loaded)
	}
	return r, err
}
