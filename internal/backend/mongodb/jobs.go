package mongodb

import (
	"context"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/extenddb/extenddb/internal/backend"
)

// The job catalog (backend.JobCatalog) on the backup catalog's discipline
// (backups.go): one document per row {_id: "<kind>:<id>", v, r}; an
// insert is a unique insert of version 1 (of racing inserters one
// succeeds, the others read its row), every conditional write a
// claim-then-replace of the next version. A row removed and inserted
// again under its key starts at version 1 anew; a claim document left by
// a crashed writer of the old row at that version delays writes to the
// new one by at most one lease.

var _ backend.JobCatalog = (*Backend)(nil)

const jobsColl = "jobs"

type jobRow struct {
	Kind       string    `bson:"kind"`
	ID         string    `bson:"id"`
	Account    string    `bson:"account"`
	Status     string    `bson:"status"`
	CreatedAt  time.Time `bson:"created_at"`
	Payload    []byte    `bson:"payload"`
	Message    string    `bson:"message"`
	Owner      string    `bson:"owner"`
	Generation int64     `bson:"generation"`
	Heartbeat  time.Time `bson:"heartbeat"`
}

func jobDocID(kind, id string) string { return kind + ":" + id }

func (r jobRow) record() *backend.JobRecord {
	p := r.Payload
	if p == nil {
		p = []byte{}
	}
	return &backend.JobRecord{Kind: r.Kind, ID: r.ID, Account: r.Account, Status: r.Status, CreatedAt: r.CreatedAt.UTC(),
		Payload: slices.Clone(p), Message: r.Message, Owner: r.Owner, Generation: r.Generation, Heartbeat: r.Heartbeat.UTC()}
}

func jobResult(matched bool, r *jobRow) *backend.JobWriteResult {
	res := &backend.JobWriteResult{Matched: matched}
	if r != nil {
		res.Record = r.record()
	}
	return res
}

// InsertJob implements backend.JobCatalog.
func (b *Backend) InsertJob(ctx context.Context, p backend.JobRecord) (*backend.JobWriteResult, error) {
	now := catalogNow()
	created := p.CreatedAt.UTC().Truncate(time.Millisecond)
	if p.CreatedAt.IsZero() {
		created = now
	}
	r := jobRow{Kind: p.Kind, ID: p.ID, Account: p.Account, Status: p.Status, CreatedAt: created, Payload: nz(p.Payload),
		Message: p.Message, Owner: p.Owner, Generation: 1, Heartbeat: now}
	coll := b.db.Collection(jobsColl)
	_, err := coll.InsertOne(ctx, rowDoc[jobRow]{ID: jobDocID(p.Kind, p.ID), V: 1, R: r})
	if isDup(err) {
		d, err := readRow[jobRow](ctx, coll, jobDocID(p.Kind, p.ID))
		if err != nil {
			return nil, err
		}
		if d == nil {
			return nil, backend.Errorf(backend.KindUnavailable, "mongodb: job %s/%s was removed during its insert; retry", p.Kind, p.ID)
		}
		return jobResult(false, &d.R), nil
	}
	if err != nil {
		return nil, translate(err, "mongodb: insert job")
	}
	return jobResult(true, &r), nil
}

// GetJob implements backend.JobCatalog.
func (b *Backend) GetJob(ctx context.Context, kind, id string) (*backend.JobRecord, error) {
	d, err := readRow[jobRow](ctx, b.db.Collection(jobsColl), jobDocID(kind, id))
	if err != nil || d == nil {
		return nil, err
	}
	return d.R.record(), nil
}

// ListJobs implements backend.JobCatalog.
func (b *Backend) ListJobs(ctx context.Context, p backend.ListJobsParams) ([]backend.JobRecord, error) {
	filter := bson.D{{Key: "r.kind", Value: p.Kind}}
	if p.Account != "" {
		filter = append(filter, bson.E{Key: "r.account", Value: p.Account})
	}
	if p.StartAfter != "" {
		filter = append(filter, bson.E{Key: "r.id", Value: bson.D{{Key: "$gt", Value: p.StartAfter}}})
	}
	cur, err := b.db.Collection(jobsColl).Find(ctx, filter)
	if err != nil {
		return nil, translate(err, "mongodb: list jobs")
	}
	var docs []rowDoc[jobRow]
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err, "mongodb: list jobs")
	}
	out := make([]backend.JobRecord, 0, len(docs))
	for _, d := range docs {
		out = append(out, *d.R.record())
	}
	return backend.FilterJobs(out, p), nil
}

// UpdateJob implements backend.JobCatalog.
func (b *Backend) UpdateJob(ctx context.Context, p backend.UpdateJobParams) (*backend.JobWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(jobsColl), jobDocID(p.Kind, p.ID),
		func(r jobRow) bool { return r.Generation == p.Generation && r.Status == p.Status },
		func(r *jobRow) {
			r.Status, r.Heartbeat = p.NewStatus, catalogNow()
			if p.Payload != nil {
				r.Payload = slices.Clone(p.Payload)
			}
			if p.Message != nil {
				r.Message = *p.Message
			}
		})
	if err != nil {
		return nil, err
	}
	return jobResult(ok, r), nil
}

// HeartbeatJob implements backend.JobCatalog.
func (b *Backend) HeartbeatJob(ctx context.Context, p backend.HeartbeatJobParams) (*backend.JobWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(jobsColl), jobDocID(p.Kind, p.ID),
		func(r jobRow) bool { return r.Owner == p.Owner && r.Generation == p.Generation },
		func(r *jobRow) { r.Heartbeat = catalogNow() })
	if err != nil {
		return nil, err
	}
	return jobResult(ok, r), nil
}

// ClaimJob implements backend.JobCatalog.
func (b *Backend) ClaimJob(ctx context.Context, p backend.ClaimJobParams) (*backend.JobWriteResult, error) {
	ok, r, err := condWrite(ctx, b, b.db.Collection(jobsColl), jobDocID(p.Kind, p.ID),
		func(r jobRow) bool {
			return r.Generation == p.Generation && r.Status == p.Status && !r.Heartbeat.After(catalogNow().Add(-p.StaleAfter))
		},
		func(r *jobRow) {
			r.Owner, r.Generation, r.Heartbeat = p.Owner, r.Generation+1, catalogNow()
			if p.NewStatus != "" {
				r.Status = p.NewStatus
			}
		})
	if err != nil {
		return nil, err
	}
	return jobResult(ok, r), nil
}

// RemoveJob implements backend.JobCatalog.
func (b *Backend) RemoveJob(ctx context.Context, p backend.RemoveJobParams) (*backend.JobWriteResult, error) {
	ok, r, err := condWriteDel(ctx, b, b.db.Collection(jobsColl), jobDocID(p.Kind, p.ID),
		func(r jobRow) bool { return r.Generation == p.Generation && r.Status == p.Status }, nil, true)
	if err != nil {
		return nil, err
	}
	return jobResult(ok, r), nil
}
