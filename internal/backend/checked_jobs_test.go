package backend

import (
	"context"
	"testing"
)

// fakeJobs answers what it is given.
type fakeJobs struct {
	rows  []JobRecord
	row   *JobRecord
	write *JobWriteResult
	err   error
}

func (f *fakeJobs) InsertJob(context.Context, JobRecord) (*JobWriteResult, error) {
	return f.write, f.err
}
func (f *fakeJobs) GetJob(context.Context, string, string) (*JobRecord, error) { return f.row, f.err }
func (f *fakeJobs) ListJobs(context.Context, ListJobsParams) ([]JobRecord, error) {
	return f.rows, f.err
}
func (f *fakeJobs) UpdateJob(context.Context, UpdateJobParams) (*JobWriteResult, error) {
	return f.write, f.err
}
func (f *fakeJobs) HeartbeatJob(context.Context, HeartbeatJobParams) (*JobWriteResult, error) {
	return f.write, f.err
}
func (f *fakeJobs) ClaimJob(context.Context, ClaimJobParams) (*JobWriteResult, error) {
	return f.write, f.err
}
func (f *fakeJobs) RemoveJob(context.Context, RemoveJobParams) (*JobWriteResult, error) {
	return f.write, f.err
}

// TestCheckedJobCatalog: Checked wraps a backend's job catalog once; its
// listings are of one kind, ascending by ID, selected and within the
// limit; rows answered for their own kind and ID; inserts answer a
// claimed row; matched writes not behind their generation; only
// KindInternal and KindUnavailable.
func TestCheckedJobCatalog(t *testing.T) {
	ctx := context.Background()
	inner := &fakeJobs{}
	f := &fakeBackend{caps: Capabilities{Jobs: inner}}
	for _, b := range []Backend{Checked(f, nil), Checked(Checked(f, nil), nil)} {
		if c, ok := b.Capabilities().Jobs.(*checkedJobs); !ok || c.jc != JobCatalog(inner) {
			t.Errorf("Jobs %T is not the backend's under one check", b.Capabilities().Jobs)
		}
	}
	rec := func(kind, id, status string) JobRecord {
		return JobRecord{Kind: kind, ID: id, Account: "a", Status: status, Generation: 2}
	}
	cat := func(f *fakeJobs) (JobCatalog, *[]error) {
		b, got := checkedFake(t, &fakeBackend{caps: Capabilities{Jobs: f}})
		return b.Capabilities().Jobs, got
	}

	c, got := cat(&fakeJobs{rows: []JobRecord{rec("export", "j1", "A"), rec("export", "j2", "B")}})
	if rows, err := c.ListJobs(ctx, ListJobsParams{Kind: "export", Account: "a", StartAfter: "j0", Limit: 2}); err != nil || len(rows) != 2 || len(*got) != 0 {
		t.Fatalf("a good listing: %d rows, %v, violations %v", len(rows), err, *got)
	}
	for _, tc := range []struct {
		name, want string
		rows       []JobRecord
		p          ListJobsParams
	}{
		{"unordered", "ascending ID order", []JobRecord{rec("export", "j2", "A"), rec("export", "j1", "A")}, ListJobsParams{Kind: "export"}},
		{"twice", "ascending ID order", []JobRecord{rec("export", "j1", "A"), rec("export", "j1", "A")}, ListJobsParams{Kind: "export"}},
		{"over the limit", "for a limit of 1", []JobRecord{rec("export", "j1", "A"), rec("export", "j2", "A")}, ListJobsParams{Kind: "export", Limit: 1}},
		{"another kind", "not selected", []JobRecord{rec("import", "j1", "A")}, ListJobsParams{Kind: "export"}},
		{"another account", "not selected", []JobRecord{rec("export", "j1", "A")}, ListJobsParams{Kind: "export", Account: "b"}},
		{"another status", "not selected", []JobRecord{rec("export", "j1", "A")}, ListJobsParams{Kind: "export", Statuses: []string{"B"}}},
		{"not after StartAfter", "not selected", []JobRecord{rec("export", "j1", "A")}, ListJobsParams{Kind: "export", StartAfter: "j1"}},
	} {
		c, got := cat(&fakeJobs{rows: tc.rows})
		_, err := c.ListJobs(ctx, tc.p)
		wantViolation(t, tc.name, err, got, tc.want)
	}

	r := rec("export", "j1", "A")
	c, got = cat(&fakeJobs{row: &r})
	_, err := c.GetJob(ctx, "export", "j2")
	wantViolation(t, "GetJob of another id", err, got, "answered the row of j1")
	_, err = c.GetJob(ctx, "import", "j1")
	wantViolation(t, "GetJob of another kind", err, got, "answered a export job")
	c, got = cat(&fakeJobs{})
	if r, err := c.GetJob(ctx, "export", "j1"); r != nil || err != nil || len(*got) != 0 {
		t.Errorf("an absent row: %v, %v, violations %v", r, err, *got)
	}
	_, err = c.UpdateJob(ctx, UpdateJobParams{Kind: "export", ID: "j1"})
	wantViolation(t, "no result", err, got, "no result and no error")
	c, got = cat(&fakeJobs{write: &JobWriteResult{}})
	_, err = c.InsertJob(ctx, rec("export", "j1", "A"))
	wantViolation(t, "InsertJob without a row", err, got, "without a claim")
	unclaimed := rec("export", "j1", "A")
	unclaimed.Generation = 0
	c, got = cat(&fakeJobs{write: &JobWriteResult{Matched: true, Record: &unclaimed}})
	_, err = c.InsertJob(ctx, rec("export", "j1", "A"))
	wantViolation(t, "InsertJob of an unclaimed row", err, got, "without a claim")

	c, got = cat(&fakeJobs{write: &JobWriteResult{Matched: true, Record: &r}})
	if _, err := c.ClaimJob(ctx, ClaimJobParams{Kind: "export", ID: "j1", Generation: 1}); err != nil || len(*got) != 0 {
		t.Errorf("a claim from generation 1 to 2: %v, violations %v", err, *got)
	}
	if res, err := c.InsertJob(ctx, rec("export", "j1", "A")); err != nil || res.Record != &r || len(*got) != 0 {
		t.Errorf("an insert answering its row: %v, %v, violations %v", res, err, *got)
	}
	_, err = c.ClaimJob(ctx, ClaimJobParams{Kind: "export", ID: "j1", Generation: 2})
	wantViolation(t, "a claim answering its old generation", err, got, "matched at generation 3")
	_, err = c.UpdateJob(ctx, UpdateJobParams{Kind: "export", ID: "j1", Generation: 5})
	wantViolation(t, "an update behind its generation", err, got, "matched at generation 5")
	_, err = c.HeartbeatJob(ctx, HeartbeatJobParams{Kind: "export", ID: "j2", Generation: 2})
	wantViolation(t, "a heartbeat answering another row", err, got, "answered the row of j1")
	_, err = c.RemoveJob(ctx, RemoveJobParams{Kind: "import", ID: "j1", Generation: 2})
	wantViolation(t, "a removal answering another kind", err, got, "answered a export job")

	c, got = cat(&fakeJobs{err: Errorf(KindTableNotFound, "no")})
	_, err = c.ListJobs(ctx, ListJobsParams{Kind: "export"})
	wantViolation(t, "an undeclared kind", err, got, "does not declare")
	c, got = cat(&fakeJobs{err: Errorf(KindUnavailable, "down")})
	if _, err := c.InsertJob(ctx, rec("export", "j1", "A")); !IsKind(err, KindUnavailable) || len(*got) != 0 {
		t.Errorf("KindUnavailable: %v, violations %v", err, *got)
	}
}
