package memory

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The backup and restore job catalogs (backend.BackupCatalog,
// backend.RestoreCatalog) of the memory backend: rows in maps under one
// mutex; the "database clock" is the process clock.

var (
	_ backend.BackupCatalog  = (*Backend)(nil)
	_ backend.RestoreCatalog = (*Backend)(nil)
)

type jobCatalog struct {
	mu        sync.Mutex
	id        string
	backups   map[string]*backend.BackupRecord
	restores  map[string]*backend.RestoreRecord
	others    map[string]*backend.JobRecord // by jobKey
	lastClock time.Time
}

func (b *Backend) jobs() *jobCatalog {
	b.jobsOnce.Do(func() {
		b.jobsCat = &jobCatalog{backups: map[string]*backend.BackupRecord{}, restores: map[string]*backend.RestoreRecord{},
			others: map[string]*backend.JobRecord{}}
	})
	return b.jobsCat
}

// now is the catalog's clock (monotonic non-decreasing, millisecond
// precision like the SQL backends).
func (c *jobCatalog) now() time.Time {
	t := time.Now().UTC().Truncate(time.Millisecond)
	if t.Before(c.lastClock) {
		t = c.lastClock
	}
	c.lastClock = t
	return t
}

func copyBackup(r *backend.BackupRecord) *backend.BackupRecord {
	if r == nil {
		return nil
	}
	x := *r
	x.TableDesc = slices.Clone(r.TableDesc)
	return &x
}

func copyRestore(r *backend.RestoreRecord) *backend.RestoreRecord {
	if r == nil {
		return nil
	}
	x := *r
	return &x
}

// CatalogID implements backend.BackupCatalog.
func (b *Backend) CatalogID(ctx context.Context, newID string) (string, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	if c.id == "" {
		c.id = newID
	}
	return c.id, nil
}

// InsertBackup implements backend.BackupCatalog.
func (b *Backend) InsertBackup(ctx context.Context, p backend.InsertBackupParams) (*backend.BackupRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	if _, ok := c.backups[p.Record.ARN]; ok {
		return nil, backend.Errorf(backend.KindInternal, "memory: backup %s exists", p.Record.ARN)
	}
	r := copyBackup(&p.Record)
	r.Generation, r.Heartbeat = 1, c.now()
	r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Millisecond)
	c.backups[r.ARN] = r
	return copyBackup(r), nil
}

// GetBackup implements backend.BackupCatalog.
func (b *Backend) GetBackup(ctx context.Context, p backend.GetBackupParams) (*backend.BackupRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	return copyBackup(c.backups[p.ARN]), nil
}

// ListBackups implements backend.BackupCatalog.
func (b *Backend) ListBackups(ctx context.Context, p backend.ListBackupsParams) ([]backend.BackupRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	var out []backend.BackupRecord
	for _, r := range c.backups {
		if p.Selects(r) {
			out = append(out, *copyBackup(r))
		}
	}
	return backend.FilterBackups(out, p), nil
}

// claimFields points at the status and claim of a row, the fields that
// backup rows and restore job rows share, so that the conditional writes
// (update, heartbeat, claim) of both kinds are one code.
type claimFields struct {
	status, owner *string
	generation    *int64
	heartbeat     *time.Time
}

func backupFields(r *backend.BackupRecord) claimFields {
	return claimFields{&r.Status, &r.Owner, &r.Generation, &r.Heartbeat}
}

func restoreFields(r *backend.RestoreRecord) claimFields {
	return claimFields{&r.Status, &r.Owner, &r.Generation, &r.Heartbeat}
}

// jobRows are the rows of one kind (backups or restore jobs) with their
// accessors.
type jobRows[R any] struct {
	rows   map[string]*R
	fields func(*R) claimFields
	copy   func(*R) *R
}

func (c *jobCatalog) backupRows() jobRows[backend.BackupRecord] {
	return jobRows[backend.BackupRecord]{c.backups, backupFields, copyBackup}
}

func (c *jobCatalog) restoreRows() jobRows[backend.RestoreRecord] {
	return jobRows[backend.RestoreRecord]{c.restores, restoreFields, copyRestore}
}

// lockJobs returns the job catalog locked; the caller unlocks c.mu.
func (b *Backend) lockJobs() *jobCatalog {
	c := b.jobs()
	c.mu.Lock()
	return c
}

// updateRow writes p.NewStatus (renewing the heartbeat) and then set's
// fields if and only if the row is at p.Generation and in p.Status. It
// answers whether it matched and a copy of the row (nil when absent).
// The caller holds c.mu.
func updateRow[R any](c *jobCatalog, k jobRows[R], p backend.UpdateBackupParams, set func(*R)) (bool, *R) {
	r := k.rows[p.ARN]
	if r == nil {
		return false, nil
	}
	f := k.fields(r)
	if *f.generation != p.Generation || *f.status != p.Status {
		return false, k.copy(r)
	}
	*f.status, *f.heartbeat = p.NewStatus, c.now()
	set(r)
	return true, k.copy(r)
}

// heartbeatRow renews the claim of p.Owner at p.Generation.
func heartbeatRow[R any](c *jobCatalog, k jobRows[R], p backend.HeartbeatBackupParams) (bool, *R) {
	r := k.rows[p.ARN]
	if r == nil {
		return false, nil
	}
	f := k.fields(r)
	if *f.owner != p.Owner || *f.generation != p.Generation {
		return false, k.copy(r)
	}
	*f.heartbeat = c.now()
	return true, k.copy(r)
}

// claimRow takes the row over for p.Owner under generation+1 if and only
// if it is at p.Generation and in p.Status with a heartbeat older than
// p.StaleAfter (backend.BackupCatalog.ClaimBackup).
func claimRow[R any](c *jobCatalog, k jobRows[R], p backend.ClaimBackupParams) (bool, *R) {
	r := k.rows[p.ARN]
	now := c.now()
	if r == nil {
		return false, nil
	}
	f := k.fields(r)
	if *f.generation != p.Generation || *f.status != p.Status || f.heartbeat.After(now.Add(-p.StaleAfter)) {
		return false, k.copy(r)
	}
	*f.owner, *f.generation, *f.heartbeat = p.Owner, *f.generation+1, now
	if p.NewStatus != "" {
		*f.status = p.NewStatus
	}
	return true, k.copy(r)
}

// UpdateBackup implements backend.BackupCatalog.
func (b *Backend) UpdateBackup(ctx context.Context, p backend.UpdateBackupParams) (*backend.BackupWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := updateRow(c, c.backupRows(), p, func(r *backend.BackupRecord) {
		if p.SizeBytes != nil {
			r.SizeBytes = *p.SizeBytes
		}
		if p.ItemCount != nil {
			r.ItemCount = *p.ItemCount
		}
		if p.Message != nil {
			r.Message = *p.Message
		}
		if p.StoreID != nil {
			r.StoreID = *p.StoreID
		}
	})
	return &backend.BackupWriteResult{Matched: ok, Record: r}, nil
}

// RemoveBackup implements backend.BackupCatalog.
func (b *Backend) RemoveBackup(ctx context.Context, p backend.RemoveBackupParams) (*backend.BackupWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	r := c.backups[p.ARN]
	if r == nil || r.Generation != p.Generation || r.Status != p.Status {
		return &backend.BackupWriteResult{Record: copyBackup(r)}, nil
	}
	delete(c.backups, p.ARN)
	return &backend.BackupWriteResult{Matched: true}, nil
}

// HeartbeatBackup implements backend.BackupCatalog.
func (b *Backend) HeartbeatBackup(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.BackupWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := heartbeatRow(c, c.backupRows(), p)
	return &backend.BackupWriteResult{Matched: ok, Record: r}, nil
}

// ClaimBackup implements backend.BackupCatalog.
func (b *Backend) ClaimBackup(ctx context.Context, p backend.ClaimBackupParams) (*backend.BackupWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := claimRow(c, c.backupRows(), p)
	return &backend.BackupWriteResult{Matched: ok, Record: r}, nil
}

// InsertRestore implements backend.RestoreCatalog.
func (b *Backend) InsertRestore(ctx context.Context, p backend.RestoreRecord) (*backend.RestoreRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	if _, ok := c.restores[p.ID]; ok {
		return nil, backend.Errorf(backend.KindInternal, "memory: restore job %s exists", p.ID)
	}
	r := copyRestore(&p)
	r.Status, r.Generation, r.Heartbeat, r.Loaded = backend.RestoreRunning, 1, c.now(), 0
	c.restores[r.ID] = r
	return copyRestore(r), nil
}

// ListRestores implements backend.RestoreCatalog.
func (b *Backend) ListRestores(ctx context.Context, statuses []string) ([]backend.RestoreRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	var out []backend.RestoreRecord
	for _, r := range c.restores {
		out = append(out, *r)
	}
	return backend.FilterRestores(out, statuses), nil
}

// UpdateRestore implements backend.RestoreCatalog.
func (b *Backend) UpdateRestore(ctx context.Context, p backend.UpdateBackupParams) (*backend.RestoreWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := updateRow(c, c.restoreRows(), p, func(r *backend.RestoreRecord) {
		r.Message = ""
		if p.Message != nil {
			r.Message = *p.Message
		}
	})
	return &backend.RestoreWriteResult{Matched: ok, Record: r}, nil
}

// HeartbeatRestore implements backend.RestoreCatalog.
func (b *Backend) HeartbeatRestore(ctx context.Context, p backend.HeartbeatBackupParams) (*backend.RestoreWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := heartbeatRow(c, c.restoreRows(), p)
	return &backend.RestoreWriteResult{Matched: ok, Record: r}, nil
}

// ClaimRestore implements backend.RestoreCatalog.
func (b *Backend) ClaimRestore(ctx context.Context, p backend.ClaimBackupParams) (*backend.RestoreWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := claimRow(c, c.restoreRows(), p)
	return &backend.RestoreWriteResult{Matched: ok, Record: r}, nil
}

// RecordRestoreProgress implements backend.RestoreCatalog.
func (b *Backend) RecordRestoreProgress(ctx context.Context, p backend.RestoreProgressParams) (*backend.RestoreWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.restores[p.ID]
	if r == nil || r.Owner != p.Owner || r.Generation != p.Generation || r.Status != backend.RestoreRunning || r.Loaded > p.Loaded {
		return &backend.RestoreWriteResult{Record: copyRestore(r)}, nil
	}
	r.Loaded = p.Loaded
	return &backend.RestoreWriteResult{Matched: true, Record: copyRestore(r)}, nil
}
