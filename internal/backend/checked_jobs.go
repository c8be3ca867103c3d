package backend

import "context"

// checkedJobs is the job catalog under the Checked contract checks, as
// checkedBackups is for backups: only KindInternal and KindUnavailable
// errors; a row answered for a key is that key's row; an insert answers a
// claimed row; a matched write answers a row at least at the generation
// it was conditioned on; a listing is in strictly ascending ID order,
// within Limit, and of rows the filters select.
type checkedJobs struct {
	c  *checked
	jc JobCatalog
}

func (j *checkedJobs) row(method, kind, id string, matched bool, gen int64, r *JobRecord) error {
	if r == nil {
		return nil
	}
	if r.Kind != kind {
		return j.c.violation(method, "asked for a %s job, answered a %s job", kind, r.Kind)
	}
	return j.c.jobRow(method, kind+" job", id, matched, gen, r.ID, r.Generation)
}

func (j *checkedJobs) written(method, kind, id string, gen int64, r *JobWriteResult, err error) (*JobWriteResult, error) {
	if err != nil {
		return nil, j.c.checkErr(method, err, kindsNone, nil)
	}
	if r == nil {
		return nil, j.c.violation(method, "answered no result and no error")
	}
	if err := j.row(method, kind, id, r.Matched, gen, r.Record); err != nil {
		return nil, err
	}
	return r, nil
}

func (j *checkedJobs) InsertJob(ctx context.Context, p JobRecord) (*JobWriteResult, error) {
	r, err := j.jc.InsertJob(ctx, p)
	if err == nil && r != nil && (r.Record == nil || r.Record.Generation < 1) {
		return nil, j.c.violation("InsertJob", "answered no row, or a row without a claim: %+v", r.Record)
	}
	return j.written("InsertJob", p.Kind, p.ID, 1, r, err)
}

func (j *checkedJobs) GetJob(ctx context.Context, kind, id string) (*JobRecord, error) {
	r, err := j.jc.GetJob(ctx, kind, id)
	if err != nil {
		return nil, j.c.checkErr("GetJob", err, kindsNone, nil)
	}
	return r, j.row("GetJob", kind, id, false, 0, r)
}

func (j *checkedJobs) ListJobs(ctx context.Context, p ListJobsParams) ([]JobRecord, error) {
	rows, err := j.jc.ListJobs(ctx, p)
	if err != nil {
		return nil, j.c.checkErr("ListJobs", err, kindsNone, nil)
	}
	if p.Limit > 0 && len(rows) > p.Limit {
		return nil, j.c.violation("ListJobs", "%d rows for a limit of %d", len(rows), p.Limit)
	}
	for i := range rows {
		r := &rows[i]
		if i > 0 && rows[i-1].ID >= r.ID {
			return nil, j.c.violation("ListJobs", "rows not in ascending ID order: %s then %s", rows[i-1].ID, r.ID)
		}
		if !p.Selects(r) {
			return nil, j.c.violation("ListJobs", "row %s/%s (account %q, status %s) is not selected by %+v", r.Kind, r.ID, r.Account, r.Status, p)
		}
	}
	return rows, nil
}

func (j *checkedJobs) UpdateJob(ctx context.Context, p UpdateJobParams) (*JobWriteResult, error) {
	r, err := j.jc.UpdateJob(ctx, p)
	return j.written("UpdateJob", p.Kind, p.ID, p.Generation, r, err)
}

func (j *checkedJobs) HeartbeatJob(ctx context.Context, p HeartbeatJobParams) (*JobWriteResult, error) {
	r, err := j.jc.HeartbeatJob(ctx, p)
	return j.written("HeartbeatJob", p.Kind, p.ID, p.Generation, r, err)
}

func (j *checkedJobs) ClaimJob(ctx context.Context, p ClaimJobParams) (*JobWriteResult, error) {
	r, err := j.jc.ClaimJob(ctx, p)
	return j.written("ClaimJob", p.Kind, p.ID, p.Generation+1, r, err)
}

func (j *checkedJobs) RemoveJob(ctx context.Context, p RemoveJobParams) (*JobWriteResult, error) {
	r, err := j.jc.RemoveJob(ctx, p)
	return j.written("RemoveJob", p.Kind, p.ID, p.Generation, r, err)
}
