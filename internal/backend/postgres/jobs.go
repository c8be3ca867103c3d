package postgres

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/extenddb/extenddb/internal/backend"
)

// The job catalog (backend.JobCatalog; migration 0005_jobs): one row per
// (kind, id). An insert is INSERT ... ON CONFLICT DO NOTHING RETURNING,
// so of racing inserters one creates the row and the others read it;
// conditional writes are single UPDATE/DELETE ... RETURNING statements
// on the database's clock, as for backups.

var _ backend.JobCatalog = (*Backend)(nil)

const jobCols = `kind, id, account, status, created_at, payload, message, owner, generation, heartbeat`

func scanJob(r pgx.Row) (*backend.JobRecord, error) {
	var rec backend.JobRecord
	if err := r.Scan(&rec.Kind, &rec.ID, &rec.Account, &rec.Status, &rec.CreatedAt, &rec.Payload, &rec.Message,
		&rec.Owner, &rec.Generation, &rec.Heartbeat); err != nil {
		return nil, err
	}
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.Heartbeat = rec.Heartbeat.UTC()
	return &rec, nil
}

// jobRow runs one statement returning at most one job row (no retry: a
// conditional write must not be re-run blindly after an unknown outcome).
func (b *Backend) jobRow(ctx context.Context, msg, q string, args ...any) (*backend.JobRecord, error) {
	c, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	rec, err := scanJob(c.QueryRow(ctx, q, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err, msg)
	}
	return rec, nil
}

// jobWrite runs a conditional statement ... RETURNING; when it matches
// no row, the current row is read for the result.
func (b *Backend) jobWrite(ctx context.Context, kind, id, msg, q string, args ...any) (*backend.JobWriteResult, error) {
	rec, err := b.jobRow(ctx, msg, q, args...)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		return &backend.JobWriteResult{Matched: true, Record: rec}, nil
	}
	cur, err := b.GetJob(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	return &backend.JobWriteResult{Record: cur}, nil
}

// InsertJob implements backend.JobCatalog.
func (b *Backend) InsertJob(ctx context.Context, r backend.JobRecord) (*backend.JobWriteResult, error) {
	payload := r.Payload
	if payload == nil {
		payload = empty
	}
	var created any = r.CreatedAt.UTC().Truncate(time.Millisecond)
	if r.CreatedAt.IsZero() {
		created = nil
	}
	return b.jobWrite(ctx, r.Kind, r.ID, "postgres: insert job", `INSERT INTO jobs(`+jobCols+`)
		VALUES ($1, $2, $3, $4, COALESCE($5::timestamptz, date_trunc('milliseconds', now())), $6, $7, $8, 1, now())
		ON CONFLICT (kind, id) DO NOTHING RETURNING `+jobCols,
		r.Kind, r.ID, r.Account, r.Status, created, payload, r.Message, r.Owner)
}

// GetJob implements backend.JobCatalog.
func (b *Backend) GetJob(ctx context.Context, kind, id string) (*backend.JobRecord, error) {
	return b.jobRow(ctx, "postgres: get job", `SELECT `+jobCols+` FROM jobs WHERE kind = $1 AND id = $2`, kind, id)
}

// ListJobs implements backend.JobCatalog.
func (b *Backend) ListJobs(ctx context.Context, p backend.ListJobsParams) ([]backend.JobRecord, error) {
	args := []any{p.Kind}
	where := []string{"kind = $1"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "$?", "$"+strconv.Itoa(len(args))))
	}
	if p.Account != "" {
		add("account = $?", p.Account)
	}
	if len(p.Statuses) > 0 {
		add("status = ANY($?)", p.Statuses)
	}
	if p.StartAfter != "" {
		add("id > $?", p.StartAfter)
	}
	q := `SELECT ` + jobCols + ` FROM jobs WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id`
	if p.Limit > 0 {
		args = append(args, p.Limit)
		q += " LIMIT $" + strconv.Itoa(len(args))
	}
	c, err := b.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	rows, err := c.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, "postgres: list jobs")
	}
	defer rows.Close()
	var out []backend.JobRecord
	for rows.Next() {
		rec, err := scanJob(rows)
		if err != nil {
			return nil, mapErr(err, "postgres: list jobs")
		}
		out = append(out, *rec)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "postgres: list jobs")
	}
	return out, nil
}

// UpdateJob implements backend.JobCatalog.
func (b *Backend) UpdateJob(ctx context.Context, p backend.UpdateJobParams) (*backend.JobWriteResult, error) {
	args := []any{p.Kind, p.ID, p.Generation, p.Status, p.NewStatus}
	set := []string{"status = $5", "heartbeat = now()"}
	if p.Payload != nil {
		args = append(args, p.Payload)
		set = append(set, "payload = $"+strconv.Itoa(len(args)))
	}
	if p.Message != nil {
		args = append(args, *p.Message)
		set = append(set, "message = $"+strconv.Itoa(len(args)))
	}
	return b.jobWrite(ctx, p.Kind, p.ID, "postgres: update job",
		`UPDATE jobs SET `+strings.Join(set, ", ")+` WHERE kind = $1 AND id = $2 AND generation = $3 AND status = $4 RETURNING `+jobCols, args...)
}

// HeartbeatJob implements backend.JobCatalog.
func (b *Backend) HeartbeatJob(ctx context.Context, p backend.HeartbeatJobParams) (*backend.JobWriteResult, error) {
	return b.jobWrite(ctx, p.Kind, p.ID, "postgres: heartbeat job",
		`UPDATE jobs SET heartbeat = now() WHERE kind = $1 AND id = $2 AND owner = $3 AND generation = $4 RETURNING `+jobCols,
		p.Kind, p.ID, p.Owner, p.Generation)
}

// ClaimJob implements backend.JobCatalog.
func (b *Backend) ClaimJob(ctx context.Context, p backend.ClaimJobParams) (*backend.JobWriteResult, error) {
	newStatus := p.NewStatus
	if newStatus == "" {
		newStatus = p.Status
	}
	return b.jobWrite(ctx, p.Kind, p.ID, "postgres: claim job",
		`UPDATE jobs SET owner = $3, generation = generation + 1, status = $4, heartbeat = now()
		 WHERE kind = $1 AND id = $2 AND generation = $5 AND status = $6 AND heartbeat <= now() - $7 * interval '1 millisecond'
		 RETURNING `+jobCols,
		p.Kind, p.ID, p.Owner, newStatus, p.Generation, p.Status, p.StaleAfter.Milliseconds())
}

// RemoveJob implements backend.JobCatalog.
func (b *Backend) RemoveJob(ctx context.Context, p backend.RemoveJobParams) (*backend.JobWriteResult, error) {
	res, err := b.jobWrite(ctx, p.Kind, p.ID, "postgres: remove job",
		`DELETE FROM jobs WHERE kind = $1 AND id = $2 AND generation = $3 AND status = $4 RETURNING `+jobCols,
		p.Kind, p.ID, p.Generation, p.Status)
	if err == nil && res.Matched {
		res.Record = nil // the row after the write: none
	}
	return res, err
}
