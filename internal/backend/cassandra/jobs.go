package cassandra

import (
	"context"
	"errors"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
)

// The job catalog (backend.JobCatalog; migration 0005): one row per
// (kind, id) in its own partition, under the backup catalog's discipline
// (backups.go): an insert is an LWT IF NOT EXISTS (of racing inserters
// exactly one applies), every conditional write an LWT on the generation
// and status (or owner), and a claim judges staleness from a SERIAL read
// with the coordinator's clock, then applies conditioned on the
// heartbeat it read.

var _ backend.JobCatalog = (*Backend)(nil)

const jobCols = `kind, id, account, status, created_at, payload, message, owner, generation, hb`

// readJob reads a row with SERIAL consistency and the coordinator's
// clock; nil when absent.
func (b *Backend) readJob(ctx context.Context, kind, id string) (*backend.JobRecord, int64, error) {
	var r backend.JobRecord
	var created, hb, now int64
	err := b.serial(ctx, `SELECT `+jobCols+`, toUnixTimestamp(now()) FROM jobs WHERE kind = ? AND id = ?`, kind, id).Scan(
		&r.Kind, &r.ID, &r.Account, &r.Status, &created, &r.Payload, &r.Message, &r.Owner, &r.Generation, &hb, &now)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, now, nil
	}
	if err != nil {
		return nil, 0, mapErr(err, "read job")
	}
	if r.Payload == nil {
		r.Payload = []byte{}
	}
	r.CreatedAt = time.UnixMilli(created).UTC()
	r.Heartbeat = time.UnixMilli(hb).UTC()
	return &r, now, nil
}

// jobCAS runs one LWT and answers the row after it.
func (b *Backend) jobCAS(ctx context.Context, kind, id, what, stmt string, args ...any) (*backend.JobWriteResult, error) {
	applied, err := b.query(ctx, stmt, args...).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, what)
	}
	r, _, err := b.readJob(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	return &backend.JobWriteResult{Matched: applied, Record: r}, nil
}

// InsertJob implements backend.JobCatalog.
func (b *Backend) InsertJob(ctx context.Context, r backend.JobRecord) (*backend.JobWriteResult, error) {
	payload := r.Payload
	if payload == nil {
		payload = []byte{}
	}
	if r.CreatedAt.IsZero() {
		return b.jobCAS(ctx, r.Kind, r.ID, "insert job", `INSERT INTO jobs (`+jobCols+`)
			VALUES (?, ?, ?, ?, toUnixTimestamp(now()), ?, ?, ?, 1, toUnixTimestamp(now())) IF NOT EXISTS`,
			r.Kind, r.ID, r.Account, r.Status, payload, r.Message, r.Owner)
	}
	return b.jobCAS(ctx, r.Kind, r.ID, "insert job", `INSERT INTO jobs (`+jobCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, toUnixTimestamp(now())) IF NOT EXISTS`,
		r.Kind, r.ID, r.Account, r.Status, r.CreatedAt.UnixMilli(), payload, r.Message, r.Owner)
}

// GetJob implements backend.JobCatalog.
func (b *Backend) GetJob(ctx context.Context, kind, id string) (*backend.JobRecord, error) {
	r, _, err := b.readJob(ctx, kind, id)
	return r, err
}

// ListJobs implements backend.JobCatalog. The rows are read whole (one
// table scan) and filtered here, as ListBackups does: the catalog holds
// jobs, not items.
func (b *Backend) ListJobs(ctx context.Context, p backend.ListJobsParams) ([]backend.JobRecord, error) {
	iter := b.quorum(ctx, `SELECT `+jobCols+` FROM jobs`).PageSize(500).Iter()
	var out []backend.JobRecord
	for {
		var r backend.JobRecord
		var created, hb int64
		if !iter.Scan(&r.Kind, &r.ID, &r.Account, &r.Status, &created, &r.Payload, &r.Message, &r.Owner, &r.Generation, &hb) {
			break
		}
		if r.Payload == nil {
			r.Payload = []byte{}
		}
		r.CreatedAt = time.UnixMilli(created).UTC()
		r.Heartbeat = time.UnixMilli(hb).UTC()
		if p.Selects(&r) {
			out = append(out, r)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, mapErr(err, "list jobs")
	}
	return backend.FilterJobs(out, p), nil
}

// UpdateJob implements backend.JobCatalog.
func (b *Backend) UpdateJob(ctx context.Context, p backend.UpdateJobParams) (*backend.JobWriteResult, error) {
	stmt := `UPDATE jobs SET status = ?, hb = toUnixTimestamp(now())`
	args := []any{p.NewStatus}
	if p.Payload != nil {
		stmt += `, payload = ?`
		args = append(args, p.Payload)
	}
	if p.Message != nil {
		stmt += `, message = ?`
		args = append(args, *p.Message)
	}
	stmt += ` WHERE kind = ? AND id = ? IF generation = ? AND status = ?`
	args = append(args, p.Kind, p.ID, p.Generation, p.Status)
	return b.jobCAS(ctx, p.Kind, p.ID, "update job", stmt, args...)
}

// HeartbeatJob implements backend.JobCatalog.
func (b *Backend) HeartbeatJob(ctx context.Context, p backend.HeartbeatJobParams) (*backend.JobWriteResult, error) {
	return b.jobCAS(ctx, p.Kind, p.ID, "job heartbeat",
		`UPDATE jobs SET hb = toUnixTimestamp(now()) WHERE kind = ? AND id = ? IF owner = ? AND generation = ?`,
		p.Kind, p.ID, p.Owner, p.Generation)
}

// ClaimJob implements backend.JobCatalog (staleness: see backups.go).
func (b *Backend) ClaimJob(ctx context.Context, p backend.ClaimJobParams) (*backend.JobWriteResult, error) {
	for {
		r, now, err := b.readJob(ctx, p.Kind, p.ID)
		if err != nil {
			return nil, err
		}
		if r == nil || r.Generation != p.Generation || r.Status != p.Status || now-r.Heartbeat.UnixMilli() < p.StaleAfter.Milliseconds() {
			return &backend.JobWriteResult{Record: r}, nil
		}
		status := p.Status
		if p.NewStatus != "" {
			status = p.NewStatus
		}
		applied, err := b.query(ctx, `UPDATE jobs SET owner = ?, generation = ?, status = ?, hb = toUnixTimestamp(now())
			WHERE kind = ? AND id = ? IF generation = ? AND status = ? AND hb = ?`,
			p.Owner, p.Generation+1, status, p.Kind, p.ID, p.Generation, p.Status, r.Heartbeat.UnixMilli()).MapScanCAS(map[string]any{})
		if err != nil {
			return nil, mapErr(err, "claim job")
		}
		if applied {
			r, _, err := b.readJob(ctx, p.Kind, p.ID)
			if err != nil {
				return nil, err
			}
			return &backend.JobWriteResult{Matched: true, Record: r}, nil
		}
	}
}

// RemoveJob implements backend.JobCatalog.
func (b *Backend) RemoveJob(ctx context.Context, p backend.RemoveJobParams) (*backend.JobWriteResult, error) {
	return b.jobCAS(ctx, p.Kind, p.ID, "remove job", `DELETE FROM jobs WHERE kind = ? AND id = ? IF generation = ? AND status = ?`,
		p.Kind, p.ID, p.Generation, p.Status)
}
