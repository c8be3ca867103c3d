package backendtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// testJobCatalogEdges: what testJobCatalog leaves out. Listings of
// every account and of several statuses; a message kept when not
// written; a heartbeat that is renewed and never goes back; a takeover
// after a real StaleAfter on the database's clock (exactly one of racing
// claimers, the payload kept); a claim without NewStatus keeping the
// status; removal answering the row it refused and nothing after it, and
// a removed key inserted anew at generation 1.
//
// Long: one scenario on one catalog, its cases in order: each step reads
// the rows the steps before it wrote.
func testJobCatalogEdges(e *env) {
	jc := e.b.Capabilities().Jobs
	if jc == nil {
		e.t.Fatalf("backend %s has no job catalog (backend.JobCatalog)", e.b.Name())
	}
	t, ctx := e.t, e.ctx
	// A kind of this test's own, so that listings of every account see
	// only its rows.
	kind := "test-" + e.suffix
	other := e.account + "-other"

	ins := func(id, account, status string, payload string) *backend.JobWriteResult {
		t.Helper()
		res, err := jc.InsertJob(ctx, backend.JobRecord{Kind: kind, ID: id, Account: account, Status: status,
			Payload: []byte(payload), Owner: "owner-a"})
		if err != nil {
			t.Fatalf("InsertJob %s: %v", id, err)
		}
		return res
	}
	for i := range 5 {
		acct := e.account
		if i == 3 {
			acct = other
		}
		status := "IN_PROGRESS"
		if i%2 == 1 {
			status = "COMPLETED"
		}
		res := ins(fmt.Sprintf("j%d", i), acct, status, fmt.Sprintf(`{"n":%d}`, i))
		r := res.Record
		if !res.Matched || r == nil || r.Kind != kind || r.ID != fmt.Sprintf("j%d", i) || r.Account != acct || r.Status != status ||
			r.Generation != 1 || r.Owner != "owner-a" || string(r.Payload) != fmt.Sprintf(`{"n":%d}`, i) || r.Message != "" {
			t.Fatalf("InsertJob returned %+v", res)
		}
		for what, at := range map[string]time.Time{"created": r.CreatedAt, "heartbeat": r.Heartbeat} {
			if d := time.Since(at); d > time.Minute || d < -time.Minute {
				t.Fatalf("%s %v is not now", what, at)
			}
		}
	}
	// A second insert of one key writes nothing and answers the row.
	first, _ := jc.GetJob(ctx, kind, "j0")
	if res := ins("j0", other, "QUEUED", `{"n":99}`); res.Matched || res.Record == nil || res.Record.Account != e.account ||
		res.Record.Status != "IN_PROGRESS" || string(res.Record.Payload) != `{"n":0}` || !res.Record.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("duplicate InsertJob = %+v", res)
	}
	// The same ID under another kind is another row.
	if res, err := jc.InsertJob(ctx, backend.JobRecord{Kind: kind + "-b", ID: "j0", Account: e.account, Status: "X", Owner: "o"}); err != nil || !res.Matched {
		t.Fatalf("InsertJob of one ID under another kind = %+v, %v", res, err)
	}

	got, err := jc.GetJob(ctx, kind, "j2")
	if err != nil || got == nil || got.ID != "j2" || string(got.Payload) != `{"n":2}` || got.Generation != 1 {
		t.Fatalf("GetJob = %+v, %v", got, err)
	}
	if got, err := jc.GetJob(ctx, kind, "nope"); err != nil || got != nil {
		t.Fatalf("GetJob of a missing row = %+v, %v", got, err)
	}
	if got, err := jc.GetJob(ctx, kind+"-c", "j2"); err != nil || got != nil {
		t.Fatalf("GetJob under another kind = %+v, %v", got, err)
	}

	// Listing: filters, order and paging.
	list := func(p backend.ListJobsParams) string {
		t.Helper()
		p.Kind = kind
		rs, err := jc.ListJobs(ctx, p)
		if err != nil {
			t.Fatalf("ListJobs: %v", err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return fmt.Sprint(out)
	}
	for _, c := range []struct {
		p    backend.ListJobsParams
		want string
	}{
		{backend.ListJobsParams{}, "[j0 j1 j2 j3 j4]"},
		{backend.ListJobsParams{Account: e.account}, "[j0 j1 j2 j4]"},
		{backend.ListJobsParams{Account: other}, "[j3]"},
		{backend.ListJobsParams{Statuses: []string{"COMPLETED"}}, "[j1 j3]"},
		{backend.ListJobsParams{Account: e.account, Statuses: []string{"COMPLETED", "NONE"}}, "[j1]"},
		{backend.ListJobsParams{StartAfter: "j1", Limit: 2}, "[j2 j3]"},
		{backend.ListJobsParams{Account: e.account, StartAfter: "j2", Limit: 2}, "[j4]"},
		{backend.ListJobsParams{StartAfter: "j4"}, "[]"},
		{backend.ListJobsParams{Account: e.account + "x"}, "[]"},
	} {
		if got := list(c.p); got != c.want {
			t.Fatalf("ListJobs %+v = %s, want %s", c.p, got, c.want)
		}
	}

	// Fenced updates.
	upd := func(id string, gen int64, from, to string, payload []byte, msg *string) *backend.JobWriteResult {
		t.Helper()
		res, err := jc.UpdateJob(ctx, backend.UpdateJobParams{Kind: kind, ID: id, Generation: gen, Status: from, NewStatus: to,
			Payload: payload, Message: msg})
		if err != nil {
			t.Fatalf("UpdateJob: %v", err)
		}
		return res
	}
	if res := upd("j0", 2, "IN_PROGRESS", "COMPLETED", nil, nil); res.Matched || res.Record.Status != "IN_PROGRESS" {
		t.Fatalf("update at a wrong generation matched: %+v", res)
	}
	if res := upd("j0", 1, "COMPLETED", "FAILED", nil, nil); res.Matched || res.Record.Status != "IN_PROGRESS" {
		t.Fatalf("update from a wrong status matched: %+v", res)
	}
	if res := upd("j0", 1, "IN_PROGRESS", "IN_PROGRESS", []byte(`{"n":10}`), nil); !res.Matched ||
		string(res.Record.Payload) != `{"n":10}` || res.Record.Message != "" || res.Record.Generation != 1 {
		t.Fatalf("payload update = %+v", res)
	}
	boom := "boom"
	if res := upd("j0", 1, "IN_PROGRESS", "FAILED", nil, &boom); !res.Matched || res.Record.Status != "FAILED" ||
		res.Record.Message != "boom" || string(res.Record.Payload) != `{"n":10}` {
		t.Fatalf("status update keeping the payload = %+v", res)
	}
	if res := upd("nope", 1, "IN_PROGRESS", "FAILED", nil, nil); res.Matched || res.Record != nil {
		t.Fatalf("update of a missing row = %+v", res)
	}

	// Heartbeats confirm only the current claim.
	hb := func(id, owner string, gen int64) bool {
		t.Helper()
		res, err := jc.HeartbeatJob(ctx, backend.HeartbeatJobParams{Kind: kind, ID: id, Owner: owner, Generation: gen})
		if err != nil {
			t.Fatalf("HeartbeatJob: %v", err)
		}
		return res.Matched
	}
	before, _ := jc.GetJob(ctx, kind, "j2")
	time.Sleep(5 * time.Millisecond)
	if !hb("j2", "owner-a", 1) || hb("j2", "owner-b", 1) || hb("j2", "owner-a", 2) || hb("nope", "owner-a", 1) {
		t.Fatalf("heartbeat confirmed a claim that is not the row's, or refused the row's")
	}
	if after, _ := jc.GetJob(ctx, kind, "j2"); after.Heartbeat.Before(before.Heartbeat) {
		t.Fatalf("heartbeat went back: %v then %v", before.Heartbeat, after.Heartbeat)
	}

	// A fresh claim cannot be taken over; a stale one is, exactly once
	// among racing claimers.
	if res, err := jc.ClaimJob(ctx, backend.ClaimJobParams{Kind: kind, ID: "j2", Owner: "owner-b", Generation: 1,
		Status: "IN_PROGRESS", StaleAfter: time.Hour}); err != nil || res.Matched || res.Record.Owner != "owner-a" {
		t.Fatalf("a fresh claim was taken over: %+v, %v", res, err)
	}
	time.Sleep(400 * time.Millisecond)
	var wins atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("owner-%d", k)
			res, err := jc.ClaimJob(ctx, backend.ClaimJobParams{Kind: kind, ID: "j2", Owner: owner, Generation: 1,
				Status: "IN_PROGRESS", StaleAfter: 300 * time.Millisecond, NewStatus: "RESUMED"})
			if err != nil {
				t.Errorf("ClaimJob: %v", err)
				return
			}
			if res.Matched {
				wins.Add(1)
				winner.Store(owner)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("a stale claim was taken over %d times, want exactly once", wins.Load())
	}
	got, _ = jc.GetJob(ctx, kind, "j2")
	if got.Generation != 2 || got.Owner != winner.Load().(string) || got.Status != "RESUMED" || string(got.Payload) != `{"n":2}` {
		t.Fatalf("after takeover: %+v", got)
	}
	// The stale owner is fenced.
	if hb("j2", "owner-a", 1) {
		t.Fatalf("the stale owner's heartbeat was confirmed after a takeover")
	}
	if res := upd("j2", 1, "IN_PROGRESS", "COMPLETED", nil, nil); res.Matched {
		t.Fatalf("the stale owner's update matched after a takeover")
	}
	// StaleAfter 0 takes an idle row at once; without NewStatus the status
	// is kept.
	if res, err := jc.ClaimJob(ctx, backend.ClaimJobParams{Kind: kind, ID: "j1", Owner: "sweeper", Generation: 1,
		Status: "COMPLETED"}); err != nil || !res.Matched || res.Record.Generation != 2 || res.Record.Status != "COMPLETED" ||
		res.Record.Owner != "sweeper" {
		t.Fatalf("claim of an idle row = %+v, %v", res, err)
	}

	// Remove: only at the generation and status.
	rm := func(id string, gen int64, status string) *backend.JobWriteResult {
		t.Helper()
		res, err := jc.RemoveJob(ctx, backend.RemoveJobParams{Kind: kind, ID: id, Generation: gen, Status: status})
		if err != nil {
			t.Fatalf("RemoveJob: %v", err)
		}
		return res
	}
	if res := rm("j1", 1, "COMPLETED"); res.Matched || res.Record == nil {
		t.Fatalf("remove at a wrong generation matched: %+v", res)
	}
	if res := rm("j1", 2, "FAILED"); res.Matched || res.Record == nil {
		t.Fatalf("remove from a wrong status matched: %+v", res)
	}
	if res := rm("j1", 2, "COMPLETED"); !res.Matched || res.Record != nil {
		t.Fatalf("remove = %+v", res)
	}
	if got, err := jc.GetJob(ctx, kind, "j1"); err != nil || got != nil {
		t.Fatalf("a removed row is still there: %+v, %v", got, err)
	}
	if res := rm("j1", 2, "COMPLETED"); res.Matched || res.Record != nil {
		t.Fatalf("second remove = %+v", res)
	}
	if got := list(backend.ListJobsParams{}); got != "[j0 j2 j3 j4]" {
		t.Fatalf("after remove, ListJobs = %s", got)
	}
	// The key can be inserted again, as a new row at generation 1.
	if res := ins("j1", e.account, "QUEUED", `{}`); !res.Matched || res.Record.Generation != 1 || res.Record.Status != "QUEUED" {
		t.Fatalf("InsertJob after RemoveJob = %+v", res)
	}
}

// testJobInsertRace: of racing inserts of one key exactly one writes its
// row, and every other answers that row (the winner's owner and payload),
// not its own: a client token's duplicate request describes the job that
// runs.
func testJobInsertRace(e *env) {
	jc := e.b.Capabilities().Jobs
	if jc == nil {
		e.t.Fatalf("backend %s has no job catalog (backend.JobCatalog)", e.b.Name())
	}
	t, ctx := e.t, e.ctx
	kind := "race-" + e.suffix
	for round := range 3 {
		id := fmt.Sprintf("token-%d", round)
		const n = 8
		res := make([]*backend.JobWriteResult, n)
		var wg sync.WaitGroup
		for k := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := jc.InsertJob(ctx, backend.JobRecord{Kind: kind, ID: id, Account: e.account, Status: "QUEUED",
					Payload: []byte(fmt.Sprintf(`{"by":%d}`, k)), Owner: fmt.Sprintf("server-%d", k)})
				if err != nil {
					t.Errorf("InsertJob: %v", err)
					return
				}
				res[k] = r
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		wins, winner := 0, -1
		for k, r := range res {
			if r.Matched {
				wins, winner = wins+1, k
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d of %d racing inserts matched, want exactly one", round, wins, n)
		}
		want := fmt.Sprintf(`{"by":%d}`, winner)
		for k, r := range res {
			if r.Record == nil || string(r.Record.Payload) != want || r.Record.Owner != fmt.Sprintf("server-%d", winner) || r.Record.Generation != 1 {
				t.Fatalf("round %d: insert %d answered %+v, want the row of insert %d", round, k, r.Record, winner)
			}
		}
	}
}
