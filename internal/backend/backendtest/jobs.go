package backendtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The job catalog section (ADR 0048): rows of exports, imports and plan
// runs keyed by kind and id; an insert never overwrites (a duplicate
// answers the row already there, atomically, so that among racing
// inserters exactly one creates the job); every write conditioned on the
// generation and the expected status; heartbeats and stale takeovers on
// the database's clock.
//
// Long: one scenario on one catalog, its cases in order: each step reads
// the rows the steps before it wrote.
func testJobCatalog(e *env) {
	jc := e.b.Capabilities().Jobs
	if jc == nil {
		e.t.Fatalf("backend %s has no job catalog (backend.JobCatalog)", e.b.Name())
	}
	t, ctx := e.t, e.ctx
	kind := "export"
	created := time.UnixMilli(1732908000123).UTC()

	// Insert and read back; a duplicate insert answers the first row.
	var ids []string
	for i := range 4 {
		id := fmt.Sprintf("%s-%02d", e.suffix, i)
		res, err := jc.InsertJob(ctx, backend.JobRecord{Kind: kind, ID: id, Account: e.account, Status: "IN_PROGRESS",
			CreatedAt: created, Payload: []byte(fmt.Sprintf(`{"n":%d}`, i)), Owner: "owner-a"})
		if err != nil {
			t.Fatalf("InsertJob: %v", err)
		}
		r := res.Record
		if !res.Matched || r.Generation != 1 || r.Owner != "owner-a" || r.Status != "IN_PROGRESS" || r.Account != e.account ||
			!r.CreatedAt.Equal(created) || string(r.Payload) != fmt.Sprintf(`{"n":%d}`, i) || r.Heartbeat.IsZero() {
			t.Fatalf("InsertJob returned %+v", res)
		}
		if d := time.Since(r.Heartbeat); d > time.Minute || d < -time.Minute {
			t.Fatalf("heartbeat %v is not now", r.Heartbeat)
		}
		ids = append(ids, id)
	}
	dup, err := jc.InsertJob(ctx, backend.JobRecord{Kind: kind, ID: ids[1], Account: e.account, Status: "OTHER", Payload: []byte(`{}`), Owner: "owner-b"})
	if err != nil || dup.Matched || dup.Record == nil || dup.Record.Owner != "owner-a" || string(dup.Record.Payload) != `{"n":1}` {
		t.Fatalf("duplicate InsertJob = %+v, %v", dup, err)
	}
	// The same id under another kind is another row; no CreatedAt: now.
	other, err := jc.InsertJob(ctx, backend.JobRecord{Kind: "import", ID: ids[1], Account: e.account, Status: "IN_PROGRESS", Owner: "owner-b"})
	if err != nil || !other.Matched || other.Record.Kind != "import" || other.Record.CreatedAt.IsZero() {
		t.Fatalf("InsertJob of another kind = %+v, %v", other, err)
	}
	if got, err := jc.GetJob(ctx, kind, ids[2]); err != nil || got == nil || got.ID != ids[2] || string(got.Payload) != `{"n":2}` {
		t.Fatalf("GetJob = %+v, %v", got, err)
	}
	if got, err := jc.GetJob(ctx, kind, ids[2]+"x"); err != nil || got != nil {
		t.Fatalf("GetJob of a missing id = %+v, %v", got, err)
	}

	// Listing: one kind, one account, in id order, paged.
	list := func(p backend.ListJobsParams) []string {
		t.Helper()
		rows, err := jc.ListJobs(ctx, p)
		if err != nil {
			t.Fatalf("ListJobs(%+v): %v", p, err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}
	if got := list(backend.ListJobsParams{Kind: kind, Account: e.account}); fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("ListJobs = %v, want %v", got, ids)
	}
	if got := list(backend.ListJobsParams{Kind: kind, Account: e.account, StartAfter: ids[0], Limit: 2}); fmt.Sprint(got) != fmt.Sprint(ids[1:3]) {
		t.Fatalf("ListJobs paged = %v, want %v", got, ids[1:3])
	}
	if got := list(backend.ListJobsParams{Kind: "import", Account: e.account}); fmt.Sprint(got) != fmt.Sprint(ids[1:2]) {
		t.Fatalf("ListJobs of imports = %v", got)
	}

	// Fenced writes.
	upd := func(id string, gen int64, from, to string, payload string) *backend.JobWriteResult {
		t.Helper()
		msg := "why"
		res, err := jc.UpdateJob(ctx, backend.UpdateJobParams{Kind: kind, ID: id, Generation: gen, Status: from, NewStatus: to,
			Payload: []byte(payload), Message: &msg})
		if err != nil {
			t.Fatalf("UpdateJob: %v", err)
		}
		return res
	}
	if res := upd(ids[0], 2, "IN_PROGRESS", "COMPLETED", `{"x":1}`); res.Matched || res.Record.Status != "IN_PROGRESS" || string(res.Record.Payload) != `{"n":0}` {
		t.Fatalf("update at a wrong generation matched: %+v", res)
	}
	if res := upd(ids[0], 1, "FAILED", "COMPLETED", `{"x":1}`); res.Matched {
		t.Fatalf("update from a wrong status matched: %+v", res)
	}
	if res := upd(ids[0], 1, "IN_PROGRESS", "COMPLETED", `{"x":1}`); !res.Matched || res.Record.Status != "COMPLETED" ||
		string(res.Record.Payload) != `{"x":1}` || res.Record.Message != "why" {
		t.Fatalf("update = %+v", res)
	}
	if got := list(backend.ListJobsParams{Kind: kind, Account: e.account, Statuses: []string{"COMPLETED"}}); fmt.Sprint(got) != fmt.Sprint(ids[:1]) {
		t.Fatalf("ListJobs by status = %v", got)
	}
	// A nil payload leaves it alone.
	res, err := jc.UpdateJob(ctx, backend.UpdateJobParams{Kind: kind, ID: ids[0], Generation: 1, Status: "COMPLETED", NewStatus: "COMPLETED"})
	if err != nil || !res.Matched || string(res.Record.Payload) != `{"x":1}` {
		t.Fatalf("update without payload = %+v, %v", res, err)
	}

	// Heartbeats belong to the owner at the generation.
	hb := func(owner string, gen int64) bool {
		t.Helper()
		res, err := jc.HeartbeatJob(ctx, backend.HeartbeatJobParams{Kind: kind, ID: ids[1], Owner: owner, Generation: gen})
		if err != nil {
			t.Fatalf("HeartbeatJob: %v", err)
		}
		return res.Matched
	}
	if !hb("owner-a", 1) || hb("owner-b", 1) || hb("owner-a", 2) {
		t.Fatalf("heartbeat matched the wrong claims")
	}

	// A fresh heartbeat is not stale; StaleAfter 0 takes any.
	claim := func(owner string, stale time.Duration) *backend.JobWriteResult {
		t.Helper()
		res, err := jc.ClaimJob(ctx, backend.ClaimJobParams{Kind: kind, ID: ids[1], Owner: owner, Generation: 1, Status: "IN_PROGRESS", StaleAfter: stale})
		if err != nil {
			t.Fatalf("ClaimJob: %v", err)
		}
		return res
	}
	if res := claim("owner-b", time.Hour); res.Matched {
		t.Fatalf("claim of a live job matched: %+v", res)
	}
	if res := claim("owner-b", 0); !res.Matched || res.Record.Generation != 2 || res.Record.Owner != "owner-b" {
		t.Fatalf("claim = %+v", res)
	}
	if hb("owner-a", 1) {
		t.Fatalf("the old owner's heartbeat matched after a takeover")
	}
	if res := upd(ids[1], 1, "IN_PROGRESS", "COMPLETED", `{}`); res.Matched {
		t.Fatalf("the old owner's update matched after a takeover")
	}

	// Exactly one of racing claimers wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := jc.ClaimJob(ctx, backend.ClaimJobParams{Kind: kind, ID: ids[2], Owner: fmt.Sprintf("racer-%d", i), Generation: 1,
				Status: "IN_PROGRESS", NewStatus: "CLAIMED"})
			if err != nil {
				t.Errorf("ClaimJob: %v", err)
				return
			}
			if res.Matched {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d racing claimers won", n)
	}
	if got, _ := jc.GetJob(ctx, kind, ids[2]); got == nil || got.Status != "CLAIMED" || got.Generation != 2 {
		t.Fatalf("after the race: %+v", got)
	}

	// Exactly one of racing inserters creates a job.
	var inserted atomic.Int32
	raceID := e.suffix + "-race"
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := jc.InsertJob(ctx, backend.JobRecord{Kind: kind, ID: raceID, Account: e.account, Status: "IN_PROGRESS",
				Owner: fmt.Sprintf("racer-%d", i)})
			if err != nil {
				t.Errorf("InsertJob: %v", err)
				return
			}
			if res.Matched {
				inserted.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := inserted.Load(); n != 1 {
		t.Fatalf("%d racing inserters created the job", n)
	}

	// Removal is fenced too.
	rm := func(gen int64, status string) bool {
		t.Helper()
		res, err := jc.RemoveJob(ctx, backend.RemoveJobParams{Kind: kind, ID: ids[3], Generation: gen, Status: status})
		if err != nil {
			t.Fatalf("RemoveJob: %v", err)
		}
		return res.Matched
	}
	if rm(2, "IN_PROGRESS") || rm(1, "COMPLETED") || !rm(1, "IN_PROGRESS") {
		t.Fatalf("RemoveJob matched the wrong state")
	}
	if got, err := jc.GetJob(ctx, kind, ids[3]); err != nil || got != nil {
		t.Fatalf("GetJob after RemoveJob = %+v, %v", got, err)
	}
}
