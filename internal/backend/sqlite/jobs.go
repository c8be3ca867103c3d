package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The job catalog (backend.JobCatalog; migration 0006_jobs): one row per
// (kind, id), written by the writer like the backup catalog; an insert is
// INSERT ... ON CONFLICT DO NOTHING, so of racing inserters one creates
// the row and the others read it.

var _ backend.JobCatalog = (*Backend)(nil)

const jobCols = `kind, id, account, status, created_at, payload, message, owner, generation, heartbeat`

func scanJob(r rowScanner) (*backend.JobRecord, error) {
	var rec backend.JobRecord
	var created, hb int64
	if err := r.Scan(&rec.Kind, &rec.ID, &rec.Account, &rec.Status, &created, &rec.Payload, &rec.Message,
		&rec.Owner, &rec.Generation, &hb); err != nil {
		return nil, err
	}
	rec.CreatedAt = time.UnixMilli(created).UTC()
	rec.Heartbeat = time.UnixMilli(hb).UTC()
	return &rec, nil
}

func readJob(q func(string, ...any) *sql.Row, kind, id string) (*backend.JobRecord, error) {
	rec, err := scanJob(q(`SELECT `+jobCols+` FROM jobs WHERE kind = ? AND id = ?`, kind, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return rec, err
}

// InsertJob implements backend.JobCatalog.
func (b *Backend) InsertJob(ctx context.Context, r backend.JobRecord) (*backend.JobWriteResult, error) {
	var res backend.JobWriteResult
	err := b.submit(ctx, func(w *writer) error {
		q := `INSERT INTO jobs(` + jobCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ` + nowMS + `) ON CONFLICT DO NOTHING`
		args := []any{r.Kind, r.ID, r.Account, r.Status, r.CreatedAt.UnixMilli(), nz(r.Payload), r.Message, r.Owner}
		if r.CreatedAt.IsZero() {
			q = `INSERT INTO jobs(` + jobCols + `) VALUES (?, ?, ?, ?, ` + nowMS + `, ?, ?, ?, 1, ` + nowMS + `) ON CONFLICT DO NOTHING`
			args = []any{r.Kind, r.ID, r.Account, r.Status, nz(r.Payload), r.Message, r.Owner}
		}
		x, err := w.conn.ExecContext(bg, q, args...)
		if err != nil {
			return fail(err, "sqlite: insert job")
		}
		n, err := x.RowsAffected()
		if err != nil {
			return fail(err, "sqlite: insert job")
		}
		res.Matched = n == 1
		if res.Record, err = readJob(func(q string, a ...any) *sql.Row { return w.conn.QueryRowContext(bg, q, a...) }, r.Kind, r.ID); err != nil {
			return fail(err, "sqlite: insert job")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// GetJob implements backend.JobCatalog.
func (b *Backend) GetJob(ctx context.Context, kind, id string) (*backend.JobRecord, error) {
	rec, err := readJob(func(q string, a ...any) *sql.Row { return b.rdb.QueryRowContext(ctx, q, a...) }, kind, id)
	if err != nil {
		return nil, mapErr(err, "sqlite: get job")
	}
	return rec, nil
}

// ListJobs implements backend.JobCatalog.
func (b *Backend) ListJobs(ctx context.Context, p backend.ListJobsParams) ([]backend.JobRecord, error) {
	where, args := []string{"kind = ?"}, []any{p.Kind}
	if p.Account != "" {
		where, args = append(where, "account = ?"), append(args, p.Account)
	}
	if len(p.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(p.Statuses)-1)+")")
		for _, s := range p.Statuses {
			args = append(args, s)
		}
	}
	if p.StartAfter != "" {
		where, args = append(where, "id > ?"), append(args, p.StartAfter)
	}
	q := `SELECT ` + jobCols + ` FROM jobs WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id`
	if p.Limit > 0 {
		q, args = q+" LIMIT ?", append(args, p.Limit)
	}
	rs, err := b.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err, "sqlite: list jobs")
	}
	defer rs.Close()
	var out []backend.JobRecord
	for rs.Next() {
		rec, err := scanJob(rs)
		if err != nil {
			return nil, mapErr(err, "sqlite: list jobs")
		}
		out = append(out, *rec)
	}
	if err := rs.Err(); err != nil {
		return nil, mapErr(err, "sqlite: list jobs")
	}
	return out, nil
}

// jobWrite runs one conditional statement on a job row in the writer.
func (b *Backend) jobWrite(ctx context.Context, kind, id, msg, q string, args ...any) (*backend.JobWriteResult, error) {
	matched, rec, err := condExec(b, ctx, msg, q, args, func(w *writer) (*backend.JobRecord, error) {
		return readJob(func(q string, a ...any) *sql.Row { return w.conn.QueryRowContext(bg, q, a...) }, kind, id)
	})
	if err != nil {
		return nil, err
	}
	return &backend.JobWriteResult{Matched: matched, Record: rec}, nil
}

// UpdateJob implements backend.JobCatalog.
func (b *Backend) UpdateJob(ctx context.Context, p backend.UpdateJobParams) (*backend.JobWriteResult, error) {
	set := []string{"status = ?", "heartbeat = " + nowMS}
	args := []any{p.NewStatus}
	if p.Payload != nil {
		set, args = append(set, "payload = ?"), append(args, p.Payload)
	}
	if p.Message != nil {
		set, args = append(set, "message = ?"), append(args, *p.Message)
	}
	args = append(args, p.Kind, p.ID, p.Generation, p.Status)
	return b.jobWrite(ctx, p.Kind, p.ID, "sqlite: update job",
		`UPDATE jobs SET `+strings.Join(set, ", ")+` WHERE kind = ? AND id = ? AND generation = ? AND status = ?`, args...)
}

// HeartbeatJob implements backend.JobCatalog.
func (b *Backend) HeartbeatJob(ctx context.Context, p backend.HeartbeatJobParams) (*backend.JobWriteResult, error) {
	return b.jobWrite(ctx, p.Kind, p.ID, "sqlite: heartbeat job",
		`UPDATE jobs SET heartbeat = `+nowMS+` WHERE kind = ? AND id = ? AND owner = ? AND generation = ?`,
		p.Kind, p.ID, p.Owner, p.Generation)
}

// ClaimJob implements backend.JobCatalog.
func (b *Backend) ClaimJob(ctx context.Context, p backend.ClaimJobParams) (*backend.JobWriteResult, error) {
	newStatus := p.NewStatus
	if newStatus == "" {
		newStatus = p.Status
	}
	return b.jobWrite(ctx, p.Kind, p.ID, "sqlite: claim job",
		`UPDATE jobs SET owner = ?, generation = generation + 1, status = ?, heartbeat = `+nowMS+`
		 WHERE kind = ? AND id = ? AND generation = ? AND status = ? AND heartbeat <= `+nowMS+` - ?`,
		p.Owner, newStatus, p.Kind, p.ID, p.Generation, p.Status, p.StaleAfter.Milliseconds())
}

// RemoveJob implements backend.JobCatalog.
func (b *Backend) RemoveJob(ctx context.Context, p backend.RemoveJobParams) (*backend.JobWriteResult, error) {
	return b.jobWrite(ctx, p.Kind, p.ID, "sqlite: remove job",
		`DELETE FROM jobs WHERE kind = ? AND id = ? AND generation = ? AND status = ?`, p.Kind, p.ID, p.Generation, p.Status)
}
