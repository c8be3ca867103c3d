package memory

import (
	"context"
	"slices"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The job catalog (backend.JobCatalog) of the memory backend: rows in the
// backup catalog's maps, under its mutex and clock.

var _ backend.JobCatalog = (*Backend)(nil)

func jobKey(kind, id string) string { return kind + "\x00" + id }

func copyJob(r *backend.JobRecord) *backend.JobRecord {
	if r == nil {
		return nil
	}
	x := *r
	x.Payload = slices.Clone(r.Payload)
	return &x
}

func jobFields(r *backend.JobRecord) claimFields {
	return claimFields{&r.Status, &r.Owner, &r.Generation, &r.Heartbeat}
}

func (c *jobCatalog) otherRows() jobRows[backend.JobRecord] {
	return jobRows[backend.JobRecord]{c.others, jobFields, copyJob}
}

// InsertJob implements backend.JobCatalog.
func (b *Backend) InsertJob(ctx context.Context, p backend.JobRecord) (*backend.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	k := jobKey(p.Kind, p.ID)
	if cur, ok := c.others[k]; ok {
		return &backend.JobWriteResult{Record: copyJob(cur)}, nil
	}
	r := copyJob(&p)
	r.Generation, r.Heartbeat = 1, c.now()
	if r.CreatedAt.IsZero() {
		r.CreatedAt = r.Heartbeat
	}
	r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Millisecond)
	c.others[k] = r
	return &backend.JobWriteResult{Matched: true, Record: copyJob(r)}, nil
}

// GetJob implements backend.JobCatalog.
func (b *Backend) GetJob(ctx context.Context, kind, id string) (*backend.JobRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	return copyJob(c.others[jobKey(kind, id)]), nil
}

// ListJobs implements backend.JobCatalog.
func (b *Backend) ListJobs(ctx context.Context, p backend.ListJobsParams) ([]backend.JobRecord, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	var out []backend.JobRecord
	for _, r := range c.others {
		if p.Selects(r) {
			out = append(out, *copyJob(r))
		}
	}
	return backend.FilterJobs(out, p), nil
}

// UpdateJob implements backend.JobCatalog.
func (b *Backend) UpdateJob(ctx context.Context, p backend.UpdateJobParams) (*backend.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := updateRow(c, c.otherRows(), backend.UpdateBackupParams{ARN: jobKey(p.Kind, p.ID), Generation: p.Generation,
		Status: p.Status, NewStatus: p.NewStatus}, func(r *backend.JobRecord) {
		if p.Payload != nil {
			r.Payload = slices.Clone(p.Payload)
		}
		if p.Message != nil {
			r.Message = *p.Message
		}
	})
	return &backend.JobWriteResult{Matched: ok, Record: r}, nil
}

// HeartbeatJob implements backend.JobCatalog.
func (b *Backend) HeartbeatJob(ctx context.Context, p backend.HeartbeatJobParams) (*backend.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := heartbeatRow(c, c.otherRows(), backend.HeartbeatBackupParams{ARN: jobKey(p.Kind, p.ID), Owner: p.Owner, Generation: p.Generation})
	return &backend.JobWriteResult{Matched: ok, Record: r}, nil
}

// ClaimJob implements backend.JobCatalog.
func (b *Backend) ClaimJob(ctx context.Context, p backend.ClaimJobParams) (*backend.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	ok, r := claimRow(c, c.otherRows(), backend.ClaimBackupParams{ARN: jobKey(p.Kind, p.ID), Owner: p.Owner, Generation: p.Generation,
		Status: p.Status, StaleAfter: p.StaleAfter, NewStatus: p.NewStatus})
	return &backend.JobWriteResult{Matched: ok, Record: r}, nil
}

// RemoveJob implements backend.JobCatalog.
func (b *Backend) RemoveJob(ctx context.Context, p backend.RemoveJobParams) (*backend.JobWriteResult, error) {
	c := b.lockJobs()
	defer c.mu.Unlock()
	k := jobKey(p.Kind, p.ID)
	r := c.others[k]
	if r == nil || r.Generation != p.Generation || r.Status != p.Status {
		return &backend.JobWriteResult{Record: copyJob(r)}, nil
	}
	delete(c.others, k)
	return &backend.JobWriteResult{Matched: true}, nil
}
