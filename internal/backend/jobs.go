package backend

import (
	"context"
	"slices"
	"strings"
	"time"
)

// JobCatalog is the optional capability of keeping the rows of long jobs
// that are neither backups nor restores (exports, imports, backup-plan
// runs; docs/adr/0048-job-catalog.md), with the same claims and fencing
// as the backup catalog: a row's status and payload change only at the
// generation and in the status the writer expects, so a job that lost its
// claim can no longer write.
//
// A row is keyed by Kind and ID. InsertJob never overwrites: a second
// insert of a key answers the row already there, which is how a client
// token is made idempotent and how servers sharing a catalog agree that
// exactly one of them runs a job.
type JobCatalog interface {
	// InsertJob inserts Record claimed by Record.Owner (generation 1,
	// heartbeat now on the database's clock, CreatedAt as given or now).
	// When a row of that Kind and ID exists, nothing is written: Matched
	// is false and Record is the existing row.
	InsertJob(ctx context.Context, r JobRecord) (*JobWriteResult, error)
	// GetJob reads one row; nil (no error) when absent.
	GetJob(ctx context.Context, kind, id string) (*JobRecord, error)
	// ListJobs lists rows of one kind in ascending ID byte order, filtered
	// as the params say.
	ListJobs(ctx context.Context, p ListJobsParams) ([]JobRecord, error)
	// UpdateJob writes NewStatus (and Payload and Message when not nil)
	// if and only if the row is at Generation and in Status; the
	// heartbeat is renewed with it. Matched false otherwise.
	UpdateJob(ctx context.Context, p UpdateJobParams) (*JobWriteResult, error)
	// HeartbeatJob renews the claim of Owner at Generation; Matched is
	// false when the claim is no longer theirs.
	HeartbeatJob(ctx context.Context, p HeartbeatJobParams) (*JobWriteResult, error)
	// ClaimJob takes the row over for Owner under generation+1 if and
	// only if it is at Generation and in Status and its heartbeat is
	// older than StaleAfter on the database's clock (0: any heartbeat).
	// Among concurrent claimers of one generation exactly one matches.
	ClaimJob(ctx context.Context, p ClaimJobParams) (*JobWriteResult, error)
	// RemoveJob deletes the row if and only if it is at Generation and in
	// Status; Matched false otherwise.
	RemoveJob(ctx context.Context, p RemoveJobParams) (*JobWriteResult, error)
}

// JobRecord is one job's row.
type JobRecord struct {
	Kind    string
	ID      string
	Account string
	Status  string
	// CreatedAt is when the job was created (millisecond precision).
	CreatedAt time.Time
	// Payload is the job's parameters, counters and progress, owned by
	// its kind (opaque here).
	Payload []byte
	// Message is why a job failed ("" otherwise).
	Message string
	// The claim.
	Owner      string
	Generation int64
	Heartbeat  time.Time
}

// ListJobsParams select rows of one kind.
type ListJobsParams struct {
	Kind string
	// Account limits to one account ("" = every account).
	Account string
	// Statuses limits to these statuses (empty = all).
	Statuses []string
	// StartAfter resumes strictly after this ID.
	StartAfter string
	// Limit bounds the rows (0 = all).
	Limit int
}

// UpdateJobParams name a row, the state it must be in, and what to write.
type UpdateJobParams struct {
	Kind, ID   string
	Generation int64
	Status     string
	NewStatus  string
	Payload    []byte // nil: unchanged
	Message    *string
}

// HeartbeatJobParams name a claim to renew.
type HeartbeatJobParams struct {
	Kind, ID   string
	Owner      string
	Generation int64
}

// ClaimJobParams describe a takeover.
type ClaimJobParams struct {
	Kind, ID   string
	Owner      string
	Generation int64
	Status     string
	StaleAfter time.Duration
	// NewStatus, when not "", is written with the claim.
	NewStatus string
}

// RemoveJobParams name the row RemoveJob deletes and its expected state.
type RemoveJobParams struct {
	Kind, ID   string
	Generation int64
	Status     string
}

// JobWriteResult tells whether a conditional write matched, and the row
// after it (nil when the row does not exist).
type JobWriteResult struct {
	Matched bool
	Record  *JobRecord
}

// Selects tells whether the filters of p select r.
func (p ListJobsParams) Selects(r *JobRecord) bool {
	switch {
	case r.Kind != p.Kind,
		p.Account != "" && r.Account != p.Account,
		len(p.Statuses) > 0 && !slices.Contains(p.Statuses, r.Status),
		p.StartAfter != "" && r.ID <= p.StartAfter:
		return false
	}
	return true
}

// FilterJobs answers ListJobs from every row of a catalog: the rows p
// selects, in ascending ID order, at most p.Limit.
func FilterJobs(rows []JobRecord, p ListJobsParams) []JobRecord {
	out := slices.DeleteFunc(rows, func(r JobRecord) bool { return !p.Selects(&r) })
	slices.SortFunc(out, func(a, b JobRecord) int { return strings.Compare(a.ID, b.ID) })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out
}
