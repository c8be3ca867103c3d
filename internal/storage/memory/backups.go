package memory

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

// The backup and restore job catalogs (storage.BackupCatalog,
// storage.RestoreCatalog) of the memory backend: rows in maps under one
// mutex; the "database clock" is the process clock.

var (
	_ storage.BackupCatalog  = (*Backend)(nil)
	_ storage.RestoreCatalog = (*Backend)(nil)
)

type jobCatalog struct {
	mu        sync.Mutex
	id        string
	backups   map[string]*storage.BackupRecord
	restores  map[string]*storage.RestoreRecord
	lastClock time.Time
}

func (b *Backend) jobs() *jobCatalog {
	b.jobsOnce.Do(func() {
		b.jobsCat = &jobCatalog{backups: map[string]*storage.BackupRecord{}, restores: map[string]*storage.RestoreRecord{}}
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

func copyBackup(r *storage.BackupRecord) *storage.BackupRecord {
	if r == nil {
		return nil
	}
	x := *r
	x.TableDesc = slices.Clone(r.TableDesc)
	return &x
}

func copyRestore(r *storage.RestoreRecord) *storage.RestoreRecord {
	if r == nil {
		return nil
	}
	x := *r
	return &x
}

// CatalogID implements storage.BackupCatalog.
func (b *Backend) CatalogID(ctx context.Context, newID string) (string, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.id == "" {
		c.id = newID
	}
	return c.id, nil
}

// InsertBackup implements storage.BackupCatalog.
func (b *Backend) InsertBackup(ctx context.Context, p storage.InsertBackupParams) (*storage.BackupRecord, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.backups[p.Record.ARN]; ok {
		return nil, storage.Errorf(storage.KindInternal, "memory: backup %s exists", p.Record.ARN)
	}
	r := copyBackup(&p.Record)
	r.Generation, r.Heartbeat = 1, c.now()
	r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Millisecond)
	c.backups[r.ARN] = r
	return copyBackup(r), nil
}

// GetBackup implements storage.BackupCatalog.
func (b *Backend) GetBackup(ctx context.Context, p storage.GetBackupParams) (*storage.BackupRecord, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	return copyBackup(c.backups[p.ARN]), nil
}

// ListBackups implements storage.BackupCatalog.
func (b *Backend) ListBackups(ctx context.Context, p storage.ListBackupsParams) ([]storage.BackupRecord, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []storage.BackupRecord
	for _, r := range c.backups {
		switch {
		case p.Account != "" && r.Account != p.Account,
			p.TableName != "" && r.TableName != p.TableName,
			len(p.Statuses) > 0 && !slices.Contains(p.Statuses, r.Status),
			!p.CreatedFrom.IsZero() && r.CreatedAt.Before(p.CreatedFrom.Truncate(time.Millisecond)),
			!p.CreatedTo.IsZero() && r.CreatedAt.After(p.CreatedTo),
			p.StartAfter != "" && r.ARN <= p.StartAfter:
			continue
		}
		out = append(out, *copyBackup(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ARN < out[j].ARN })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out, nil
}

// UpdateBackup implements storage.BackupCatalog.
func (b *Backend) UpdateBackup(ctx context.Context, p storage.UpdateBackupParams) (*storage.BackupWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.backups[p.ARN]
	if r == nil || r.Generation != p.Generation || r.Status != p.Status {
		return &storage.BackupWriteResult{Record: copyBackup(r)}, nil
	}
	r.Status, r.Heartbeat = p.NewStatus, c.now()
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
	return &storage.BackupWriteResult{Matched: true, Record: copyBackup(r)}, nil
}

// RemoveBackup implements storage.BackupCatalog.
func (b *Backend) RemoveBackup(ctx context.Context, p storage.RemoveBackupParams) (*storage.BackupWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.backups[p.ARN]
	if r == nil || r.Generation != p.Generation || r.Status != p.Status {
		return &storage.BackupWriteResult{Record: copyBackup(r)}, nil
	}
	delete(c.backups, p.ARN)
	return &storage.BackupWriteResult{Matched: true}, nil
}

// HeartbeatBackup implements storage.BackupCatalog.
func (b *Backend) HeartbeatBackup(ctx context.Context, p storage.HeartbeatBackupParams) (*storage.BackupWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.backups[p.ARN]
	if r == nil || r.Owner != p.Owner || r.Generation != p.Generation {
		return &storage.BackupWriteResult{Record: copyBackup(r)}, nil
	}
	r.Heartbeat = c.now()
	return &storage.BackupWriteResult{Matched: true, Record: copyBackup(r)}, nil
}

// ClaimBackup implements storage.BackupCatalog.
func (b *Backend) ClaimBackup(ctx context.Context, p storage.ClaimBackupParams) (*storage.BackupWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.backups[p.ARN]
	now := c.now()
	if r == nil || r.Generation != p.Generation || r.Status != p.Status || r.Heartbeat.After(now.Add(-p.StaleAfter)) {
		return &storage.BackupWriteResult{Record: copyBackup(r)}, nil
	}
	r.Owner, r.Generation, r.Heartbeat = p.Owner, r.Generation+1, now
	if p.NewStatus != "" {
		r.Status = p.NewStatus
	}
	return &storage.BackupWriteResult{Matched: true, Record: copyBackup(r)}, nil
}

// InsertRestore implements storage.RestoreCatalog.
func (b *Backend) InsertRestore(ctx context.Context, p storage.RestoreRecord) (*storage.RestoreRecord, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.restores[p.ID]; ok {
		return nil, storage.Errorf(storage.KindInternal, "memory: restore job %s exists", p.ID)
	}
	r := copyRestore(&p)
	r.Status, r.Generation, r.Heartbeat, r.Loaded = storage.RestoreRunning, 1, c.now(), 0
	c.restores[r.ID] = r
	return copyRestore(r), nil
}

// ListRestores implements storage.RestoreCatalog.
func (b *Backend) ListRestores(ctx context.Context, statuses []string) ([]storage.RestoreRecord, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []storage.RestoreRecord
	for _, r := range c.restores {
		if len(statuses) == 0 || slices.Contains(statuses, r.Status) {
			out = append(out, *r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// UpdateRestore implements storage.RestoreCatalog.
func (b *Backend) UpdateRestore(ctx context.Context, p storage.UpdateBackupParams) (*storage.RestoreWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.restores[p.ARN]
	if r == nil || r.Generation != p.Generation || r.Status != p.Status {
		return &storage.RestoreWriteResult{Record: copyRestore(r)}, nil
	}
	r.Status, r.Heartbeat, r.Message = p.NewStatus, c.now(), ""
	if p.Message != nil {
		r.Message = *p.Message
	}
	return &storage.RestoreWriteResult{Matched: true, Record: copyRestore(r)}, nil
}

// HeartbeatRestore implements storage.RestoreCatalog.
func (b *Backend) HeartbeatRestore(ctx context.Context, p storage.HeartbeatBackupParams) (*storage.RestoreWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.restores[p.ARN]
	if r == nil || r.Owner != p.Owner || r.Generation != p.Generation {
		return &storage.RestoreWriteResult{Record: copyRestore(r)}, nil
	}
	r.Heartbeat = c.now()
	return &storage.RestoreWriteResult{Matched: true, Record: copyRestore(r)}, nil
}

// ClaimRestore implements storage.RestoreCatalog.
func (b *Backend) ClaimRestore(ctx context.Context, p storage.ClaimBackupParams) (*storage.RestoreWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.restores[p.ARN]
	now := c.now()
	if r == nil || r.Generation != p.Generation || r.Status != p.Status || r.Heartbeat.After(now.Add(-p.StaleAfter)) {
		return &storage.RestoreWriteResult{Record: copyRestore(r)}, nil
	}
	r.Owner, r.Generation, r.Heartbeat = p.Owner, r.Generation+1, now
	if p.NewStatus != "" {
		r.Status = p.NewStatus
	}
	return &storage.RestoreWriteResult{Matched: true, Record: copyRestore(r)}, nil
}

// RecordRestoreProgress implements storage.RestoreCatalog.
func (b *Backend) RecordRestoreProgress(ctx context.Context, p storage.RestoreProgressParams) (*storage.RestoreWriteResult, error) {
	c := b.jobs()
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.restores[p.ID]
	if r == nil || r.Owner != p.Owner || r.Generation != p.Generation || r.Status != storage.RestoreRunning || r.Loaded > p.Loaded {
		return &storage.RestoreWriteResult{Record: copyRestore(r)}, nil
	}
	r.Loaded = p.Loaded
	return &storage.RestoreWriteResult{Matched: true, Record: copyRestore(r)}, nil
}
