package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// ClientToken idempotency of ExportTableToPointInTime and ImportTable
// (ADR 0049, ADR 0050). A token is a job-catalog row of the call's token
// kind, keyed by account and token, inserted with the catalog's
// insert-if-absent, whose payload is a tokenRow: the hash of the request's
// other parameters and the job the token names. As on the service a
// token names its job for ClientTokenTTL (8 hours); after that it may
// name a new one.

// ClientTokenTTL is how long a ClientToken names its export or import.
const ClientTokenTTL = 8 * time.Hour

// tokenRow is a token row's payload.
type tokenRow struct {
	// ParamsHash identifies the request's parameters, so that a replay
	// is told apart from a conflicting request.
	ParamsHash string `json:"ParamsHash"`
	// Target is the job the token names (an ExportArn, an import id);
	// empty while the request that took the token is starting it.
	Target string `json:"Target,omitempty"`
	// Initial is what a replay answers while Target's row is not
	// written yet (exports: the ExportDescription of the first answer).
	Initial json.RawMessage `json:"Initial,omitempty"`

	// The members rows written before this shape had.
	ExportArn string `json:"ExportArn,omitempty"`
	OldHash   string `json:"hash,omitempty"`
	OldImport string `json:"import,omitempty"`
}

func (r *tokenRow) normalize() {
	if r.ParamsHash == "" {
		r.ParamsHash = r.OldHash
	}
	if r.Target == "" {
		r.Target = r.ExportArn
		if r.Target == "" {
			r.Target = r.OldImport
		}
	}
	r.ExportArn, r.OldHash, r.OldImport = "", "", ""
}

// clientToken is a token claimed by this request: a row it inserted.
type clientToken struct {
	jobs backend.JobCatalog
	rec  backend.JobRecord
	row  tokenRow
}

// claimClientToken takes token for a new request whose parameters hash
// to row.ParamsHash. It answers the claimed token (the caller starts its
// job, then bind or release it), or, when the token already names a
// request within ClientTokenTTL, that request's row (same parameters; the
// caller answers its job) or conflict() (other parameters).
func claimClientToken(ctx context.Context, jobs backend.JobCatalog, kind, owner, account, token string, row tokenRow, now time.Time,
	conflict func() error) (*clientToken, *tokenRow, error) {
	raw, err := json.Marshal(&row)
	if err != nil {
		return nil, nil, err
	}
	id := account + "/" + token
	for attempt := 0; ; attempt++ {
		res, err := jobs.InsertJob(ctx, backend.JobRecord{Kind: kind, ID: id, Account: account, Status: "ACTIVE",
			CreatedAt: now, Payload: raw, Owner: owner})
		if err != nil {
			return nil, nil, err
		}
		if res.Matched {
			return &clientToken{jobs: jobs, rec: *res.Record, row: row}, nil, nil
		}
		old := res.Record
		if now.Sub(old.CreatedAt) >= ClientTokenTTL && attempt == 0 {
			// An expired token: it may name a new request.
			if _, err := jobs.RemoveJob(ctx, backend.RemoveJobParams{Kind: kind, ID: id,
				Generation: old.Generation, Status: old.Status}); err != nil {
				return nil, nil, err
			}
			continue
		}
		var prev tokenRow
		if err := json.Unmarshal(old.Payload, &prev); err != nil {
			return nil, nil, fmt.Errorf("client token %s: %w", id, err)
		}
		prev.normalize()
		if prev.ParamsHash != row.ParamsHash {
			return nil, nil, conflict()
		}
		return nil, &prev, nil
	}
}

// bind records the job the token names, once the request started it.
func (t *clientToken) bind(ctx context.Context, target string) error {
	t.row.Target = target
	raw, err := json.Marshal(&t.row)
	if err != nil {
		return err
	}
	_, err = t.jobs.UpdateJob(ctx, backend.UpdateJobParams{Kind: t.rec.Kind, ID: t.rec.ID, Generation: t.rec.Generation,
		Status: t.rec.Status, NewStatus: t.rec.Status, Payload: raw})
	return err
}

// release gives the token up: the request it was taken for failed.
func (t *clientToken) release(ctx context.Context) {
	_, _ = t.jobs.RemoveJob(context.WithoutCancel(ctx), backend.RemoveJobParams{Kind: t.rec.Kind, ID: t.rec.ID,
		Generation: t.rec.Generation, Status: t.rec.Status})
}
