package memory

import (
	"context"
	"slices"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

// The job catalog (storage.JobCatalog) of the memory backend: rows in the
// backup catalog's maps, under its mutex and clock.

var _ storage.JobCatalog = (*Backend)(nil)

func jobKey(kind, id string) string { return kind + "\x00" + id }

func copyJob(r *storage.JobRecord) *storage.JobRecord {
	if r == nil {
		return nil
	}
	x := *r
	x.Payload = slices.Clone(r.Payload)
	return &x
}

func jobFields(r *storage.JobRecord) claimFields {
	return claimFields{&r.Status, &r.Owner, &r.Generation, &r.Heartbeat}
}

func (c *jobCatalog) otherRows() jobRows[storage.JobRecord] {
	return jobRows[storage.JobRecord]{c.others, jobFields, copyJob}
}

// InsertJob implements storage.JobCatalog.
func (b *Backend) InsertJob(ctx context.Context, p storage.JobRecord) (*storage.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	k := jobKey(p.Kind, p.ID)
	if cur, ok := c.others[k]; ok {
		return &storage.JobWriteResult{Record: copyJob(cur)}, nil
	}
	r := copyJob(&p)
	r.Generation, r.Heartbeat = 1, c.now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = r.Heartbeat
	}
	r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Millisecond)
	c.others[k] = r
	return &storage.JobWriteResult{Matched: true, Record: copyJob(r)}, nil
}

// GetJob implements storage.JobCatalog.
func (b *Backend) GetJob(ctx context.Context, kind, id string) (*storage.JobRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	return copyJob(c.others[jobKey(kind, id)]), nil
}

// ListJobs implements storage.JobCatalog.
func (b *Backend) ListJobs(ctx context.Context, p storage.ListJobsParams) ([]storage.JobRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	var out []storage.JobRecord
	for _, r := range c.others {
		if p.Selects(r) {
			out = append(out, *copyJob(r))
		}
	}
	return storage.FilterJobs(out, p), nil
}

// UpdateJob implements storage.JobCatalog.
func (b *Backend) UpdateJob(ctx context.Context, p storage.UpdateJobParams) (*storage.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := updateRow(c, c.otherRows(), storage.UpdateBackupParams{ARN: jobKey(p.Kind, p.ID), Generation: p.Generation,
		Status: p.Status, NewStatus: p.NewStatus}, func(r *storage.JobRecord) {
		if p.Payload != nil {
			r.Payload = slices.Clone(p.Payload)
		}
		if p.Message != nil {
			r.Message = *p.Message
		}
	})
	return &storage.JobWriteResult{Matched: ok, Record: r}, nil
}

// HeartbeatJob implements storage.JobCatalog.
func (b *Backend) HeartbeatJob(ctx context.Context, p storage.HeartbeatJobParams) (*storage.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := heartbeatRow(c, c.otherRows(), storage.HeartbeatBackupParams{ARN: jobKey(p.Kind, p.ID), Owner: p.Owner, Generation: p.Generation})
	return &storage.JobWriteResult{Matched: ok, Record: r}, nil
}

// ClaimJob implements storage.JobCatalog.
func (b *Backend) ClaimJob(ctx context.Context, p storage.ClaimJobParams) (*storage.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := claimRow(c, c.otherRows(), storage.ClaimBackupParams{ARN: jobKey(p.Kind, p.ID), Owner: p.Owner, Generation: p.Generation,
		Status: p.Status, StaleAfter: p.StaleAfter, NewStatus: p.NewStatus})
	return &storage.JobWriteResult{Matched: ok, Record: r}, nil
}

// RemoveJob implements storage.JobCatalog.
func (b *Backend) RemoveJob(ctx context.Context, p storage.RemoveJobParams) (*storage.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	k := jobKey(p.Kind, p.ID)
	r := c.others[k]
	if r == nil || r.Generation != p.Generation || r.Status != p.Status {
		return &storage.JobWriteResult{Record: copyJob(r)}, nil
	}
	delete(c.others, k)
	return &storage.JobWriteResult{Matched: true}, nil
}
