package backendtest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The backup catalog section (docs/backup-design.md section 4): rows of
// backups with job claims; every status write conditioned on generation
// and expected status; heartbeats and stale takeovers on the database's
// clock, exactly once among racing claimers.

func (e *env) backupRecord(table string, i int, created time.Time) backend.BackupRecord {
	id := fmt.Sprintf("%014d-%08x", created.UnixMilli(), i)
	return backend.BackupRecord{
		ARN:     "arn:aws:dynamodb:ddblocal:" + e.account + ":table/" + table + "/backup/" + id,
		Account: e.account, TableName: table, TableID: int64(i + 1), BackupID: id,
		Name: fmt.Sprintf("b%d", i), Type: "USER", Status: backend.BackupCreating,
		CreatedAt: created, TableDesc: []byte("desc"), StoreID: "store-1",
		Prefix: e.account + "/" + table + "/" + id, Owner: "owner-a",
	}
}

// testBackupCatalog runs the backup catalog section on e's backend.
//
// Long: one scenario on one catalog, its cases in order: each step reads
// the rows the steps before it wrote.
func testBackupCatalog(e *env) {
	bc := e.b.Capabilities().Backups
	if bc == nil {
		msg := fmt.Sprintf("storage backup catalog NOT exercised: backend %s declares it absent (no backend.BackupCatalog)", e.b.Name())
		fmt.Println(msg)
		e.t.Log(msg)
		return
	}
	t, ctx := e.t, e.ctx
	base := time.UnixMilli(1732908000123).UTC()

	// Insert and read back.
	tbl := e.tableName("bk")
	var recs []backend.BackupRecord
	for i := range 5 {
		r := e.backupRecord(tbl, i, base.Add(time.Duration(i)*time.Minute))
		got, err := bc.InsertBackup(ctx, backend.InsertBackupParams{Record: r})
		if err != nil {
			t.Fatalf("InsertBackup: %v", err)
		}
		if got.Generation != 1 || got.Owner != "owner-a" || got.Status != backend.BackupCreating ||
			!got.CreatedAt.Equal(r.CreatedAt) || string(got.TableDesc) != "desc" || got.Heartbeat.IsZero() {
			t.Fatalf("InsertBackup returned %+v", got)
		}
		if d := time.Since(got.Heartbeat); d > time.Minute || d < -time.Minute {
			t.Fatalf("heartbeat %v is not now", got.Heartbeat)
		}
		recs = append(recs, *got)
	}
	if _, err := bc.InsertBackup(ctx, backend.InsertBackupParams{Record: recs[0]}); err == nil {
		t.Fatalf("second InsertBackup of one ARN succeeded")
	}
	got, err := bc.GetBackup(ctx, backend.GetBackupParams{ARN: recs[2].ARN})
	if err != nil || got == nil || got.Name != "b2" || got.BackupID != recs[2].BackupID || got.TableID != 3 {
		t.Fatalf("GetBackup = %+v, %v", got, err)
	}
	if got, err := bc.GetBackup(ctx, backend.GetBackupParams{ARN: recs[2].ARN + "x"}); err != nil || got != nil {
		t.Fatalf("GetBackup of a missing ARN = %+v, %v", got, err)
	}

	// Conditional status writes.
	n := int64(42)
	upd := func(i int, gen int64, from, to string) *backend.BackupWriteResult {
		t.Helper()
		res, err := bc.UpdateBackup(ctx, backend.UpdateBackupParams{ARN: recs[i].ARN, Generation: gen, Status: from, NewStatus: to, ItemCount: &n, SizeBytes: &n})
		if err != nil {
			t.Fatalf("UpdateBackup: %v", err)
		}
		return res
	}
	if res := upd(0, 2, backend.BackupCreating, backend.BackupAvailable); res.Matched || res.Record.Status != backend.BackupCreating {
		t.Fatalf("update at a wrong generation matched: %+v", res)
	}
	if res := upd(0, 1, backend.BackupAvailable, backend.BackupDeleting); res.Matched || res.Record.Status != backend.BackupCreating {
		t.Fatalf("update from a wrong status matched: %+v", res)
	}
	if res := upd(0, 1, backend.BackupCreating, backend.BackupAvailable); !res.Matched || res.Record.Status != backend.BackupAvailable ||
		res.Record.ItemCount != 42 || res.Record.SizeBytes != 42 {
		t.Fatalf("update did not match: %+v", res)
	}
	msg := "boom"
	if res, err := bc.UpdateBackup(ctx, backend.UpdateBackupParams{ARN: recs[1].ARN, Generation: 1, Status: backend.BackupCreating,
		NewStatus: backend.BackupFailed, Message: &msg}); err != nil || !res.Matched || res.Record.Message != "boom" || res.Record.ItemCount != 0 {
		t.Fatalf("update to FAILED = %+v, %v", res, err)
	}
	if res, err := bc.UpdateBackup(ctx, backend.UpdateBackupParams{ARN: "nope", Generation: 1, Status: backend.BackupCreating,
		NewStatus: backend.BackupFailed}); err != nil || res.Matched || res.Record != nil {
		t.Fatalf("update of a missing row = %+v, %v", res, err)
	}

	// Listing: filters, order and paging.
	list := func(p backend.ListBackupsParams) []string {
		t.Helper()
		rs, err := bc.ListBackups(ctx, p)
		if err != nil {
			t.Fatalf("ListBackups: %v", err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	eq := func(got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("ListBackups = %v, want %v", got, want)
		}
	}
	eq(list(backend.ListBackupsParams{Account: e.account}), "b0", "b1", "b2", "b3", "b4")
	eq(list(backend.ListBackupsParams{Account: e.account, Limit: 2, StartAfter: recs[1].ARN}), "b2", "b3")
	eq(list(backend.ListBackupsParams{Account: e.account, Statuses: []string{backend.BackupAvailable, backend.BackupCreating}}), "b0", "b2", "b3", "b4")
	eq(list(backend.ListBackupsParams{Account: e.account, CreatedFrom: recs[1].CreatedAt, CreatedTo: recs[3].CreatedAt}), "b1", "b2", "b3")
	eq(list(backend.ListBackupsParams{Account: e.account, TableName: tbl + "x"}))
	eq(list(backend.ListBackupsParams{Account: e.account + "x"}))

	// Heartbeats confirm only the current claim.
	hb := func(i int, owner string, gen int64) bool {
		t.Helper()
		res, err := bc.HeartbeatBackup(ctx, backend.HeartbeatBackupParams{ARN: recs[i].ARN, Owner: owner, Generation: gen})
		if err != nil {
			t.Fatalf("HeartbeatBackup: %v", err)
		}
		return res.Matched
	}
	if !hb(2, "owner-a", 1) || hb(2, "owner-b", 1) || hb(2, "owner-a", 2) {
		t.Fatalf("heartbeat confirmed a claim that is not the row's, or refused the row's")
	}

	// A fresh claim cannot be taken over.
	claim := func(i int, owner string, gen int64, stale time.Duration) *backend.BackupWriteResult {
		t.Helper()
		res, err := bc.ClaimBackup(ctx, backend.ClaimBackupParams{ARN: recs[i].ARN, Owner: owner, Generation: gen,
			Status: backend.BackupCreating, StaleAfter: stale})
		if err != nil {
			t.Fatalf("ClaimBackup: %v", err)
		}
		return res
	}
	if res := claim(2, "owner-b", 1, time.Hour); res.Matched || res.Record.Owner != "owner-a" {
		t.Fatalf("a fresh claim was taken over: %+v", res)
	}
	// Stale after 300 ms on the database's clock: racing claimers, exactly
	// one wins.
	time.Sleep(400 * time.Millisecond)
	var wins atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("owner-%d", k)
			res, err := bc.ClaimBackup(ctx, backend.ClaimBackupParams{ARN: recs[2].ARN, Owner: owner, Generation: 1,
				Status: backend.BackupCreating, StaleAfter: 300 * time.Millisecond, NewStatus: backend.BackupFailed})
			if err != nil {
				t.Errorf("ClaimBackup: %v", err)
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
	got, _ = bc.GetBackup(ctx, backend.GetBackupParams{ARN: recs[2].ARN})
	if got.Generation != 2 || got.Owner != winner.Load().(string) || got.Status != backend.BackupFailed {
		t.Fatalf("after takeover: %+v", got)
	}
	// The stale owner is fenced: no heartbeat, no status write.
	if hb(2, "owner-a", 1) {
		t.Fatalf("the stale owner's heartbeat was confirmed after a takeover")
	}
	if res := upd(2, 1, backend.BackupCreating, backend.BackupAvailable); res.Matched {
		t.Fatalf("the stale owner's status write matched after a takeover")
	}
	// A claim with StaleAfter 0 takes an idle row at once (a delete).
	if res, err := bc.ClaimBackup(ctx, backend.ClaimBackupParams{ARN: recs[0].ARN, Owner: "deleter", Generation: 1,
		Status: backend.BackupAvailable, NewStatus: backend.BackupDeleting}); err != nil || !res.Matched ||
		res.Record.Generation != 2 || res.Record.Status != backend.BackupDeleting || res.Record.Owner != "deleter" {
		t.Fatalf("claim of an idle row = %+v, %v", res, err)
	}
}

// testBackupRemoveRepoint: RemoveBackup deletes a row for good (it is
// not listed in any status, DELETED included) only at its generation and
// status; UpdateBackup with StoreID re-points a row under the same
// conditions (backup sync --forget-*, --move-store).
func testBackupRemoveRepoint(e *env) {
	bc := e.b.Capabilities().Backups
	if bc == nil {
		return
	}
	t, ctx := e.t, e.ctx
	tbl := e.tableName("bkrm")
	base := time.UnixMilli(1732908000123).UTC()
	var recs []backend.BackupRecord
	for i := range 3 {
		r, err := bc.InsertBackup(ctx, backend.InsertBackupParams{Record: e.backupRecord(tbl, i, base.Add(time.Duration(i)*time.Second))})
		if err != nil {
			t.Fatalf("InsertBackup: %v", err)
		}
		recs = append(recs, *r)
	}
	rm := func(i int, gen int64, status string) *backend.BackupWriteResult {
		t.Helper()
		res, err := bc.RemoveBackup(ctx, backend.RemoveBackupParams{ARN: recs[i].ARN, Generation: gen, Status: status})
		if err != nil {
			t.Fatalf("RemoveBackup: %v", err)
		}
		return res
	}
	if res := rm(0, 2, backend.BackupCreating); res.Matched || res.Record == nil {
		t.Fatalf("remove at a wrong generation matched: %+v", res)
	}
	if res := rm(0, 1, backend.BackupAvailable); res.Matched || res.Record == nil {
		t.Fatalf("remove from a wrong status matched: %+v", res)
	}
	if res := rm(0, 1, backend.BackupCreating); !res.Matched || res.Record != nil {
		t.Fatalf("remove did not match: %+v", res)
	}
	if got, err := bc.GetBackup(ctx, backend.GetBackupParams{ARN: recs[0].ARN}); err != nil || got != nil {
		t.Fatalf("a removed row is still there: %+v, %v", got, err)
	}
	if res := rm(0, 1, backend.BackupCreating); res.Matched || res.Record != nil {
		t.Fatalf("second remove = %+v", res)
	}
	rows, err := bc.ListBackups(ctx, backend.ListBackupsParams{Account: e.account, TableName: tbl})
	if err != nil || len(rows) != 2 || rows[0].ARN != recs[1].ARN {
		t.Fatalf("after remove, ListBackups = %+v, %v", rows, err)
	}
	// The ARN can be inserted again (sync adopting it later).
	if _, err := bc.InsertBackup(ctx, backend.InsertBackupParams{Record: e.backupRecord(tbl, 0, base)}); err != nil {
		t.Fatalf("InsertBackup after RemoveBackup: %v", err)
	}

	// Re-pointing: conditional like every status write; the rest of the
	// row is kept.
	other := "store-2"
	if res, err := bc.UpdateBackup(ctx, backend.UpdateBackupParams{ARN: recs[1].ARN, Generation: 1, Status: backend.BackupAvailable,
		NewStatus: backend.BackupAvailable, StoreID: &other}); err != nil || res.Matched || res.Record.StoreID != "store-1" {
		t.Fatalf("re-point from a wrong status = %+v, %v", res, err)
	}
	res, err := bc.UpdateBackup(ctx, backend.UpdateBackupParams{ARN: recs[1].ARN, Generation: 1, Status: backend.BackupCreating,
		NewStatus: backend.BackupCreating, StoreID: &other})
	if err != nil || !res.Matched || res.Record.StoreID != "store-2" || res.Record.Prefix != recs[1].Prefix ||
		res.Record.Status != backend.BackupCreating || res.Record.Name != recs[1].Name {
		t.Fatalf("re-point = %+v, %v", res, err)
	}
	if got, _ := bc.GetBackup(ctx, backend.GetBackupParams{ARN: recs[2].ARN}); got.StoreID != "store-1" {
		t.Fatalf("re-pointing one row moved another: %+v", got)
	}
}

func testCatalogID(e *env) {
	bc := e.b.Capabilities().Backups
	if bc == nil {
		return
	}
	a, err := bc.CatalogID(e.ctx, "cat-"+e.suffix)
	if err != nil || a == "" {
		e.t.Fatalf("CatalogID = %q, %v", a, err)
	}
	b, err := bc.CatalogID(e.ctx, "other-"+e.suffix)
	if err != nil || b != a {
		e.t.Fatalf("second CatalogID = %q, %v; want the first %q", b, err, a)
	}
}

// testRestoreCatalog: restore job rows have the same claim rules.
func testRestoreCatalog(e *env) {
	rc := e.b.Capabilities().Restores
	if rc == nil {
		if e.b.Capabilities().Backups != nil {
			e.t.Fatalf("backend %s has a backup catalog but no restore catalog", e.b.Name())
		}
		return
	}
	t, ctx := e.t, e.ctx
	id := e.account + "/target/7"
	rec, err := rc.InsertRestore(ctx, backend.RestoreRecord{ID: id, Account: e.account, TableName: "target", TableID: 7,
		BackupARN: "arn:b", Owner: "owner-a"})
	if err != nil || rec.Generation != 1 || rec.Status != backend.RestoreRunning || rec.Owner != "owner-a" || rec.TableID != 7 {
		t.Fatalf("InsertRestore = %+v, %v", rec, err)
	}
	if res, err := rc.ClaimRestore(ctx, backend.ClaimBackupParams{ARN: id, Owner: "owner-b", Generation: 1,
		Status: backend.RestoreRunning, StaleAfter: time.Hour}); err != nil || res.Matched {
		t.Fatalf("a fresh restore claim was taken over: %+v, %v", res, err)
	}
	if res, err := rc.HeartbeatRestore(ctx, backend.HeartbeatBackupParams{ARN: id, Owner: "owner-a", Generation: 1}); err != nil || !res.Matched {
		t.Fatalf("HeartbeatRestore = %+v, %v", res, err)
	}
	// Progress (ADR 0027): only the owner at its generation records it,
	// and it never moves back.
	if rec.Loaded != 0 {
		t.Fatalf("a new restore job has progress %d", rec.Loaded)
	}
	progress := func(owner string, gen, loaded int64) *backend.RestoreWriteResult {
		t.Helper()
		res, err := rc.RecordRestoreProgress(ctx, backend.RestoreProgressParams{ID: id, Owner: owner, Generation: gen, Loaded: loaded})
		if err != nil || res.Record == nil {
			t.Fatalf("RecordRestoreProgress(%s, %d, %d) = %+v, %v", owner, gen, loaded, res, err)
		}
		return res
	}
	if res := progress("owner-a", 1, 200); !res.Matched || res.Record.Loaded != 200 {
		t.Fatalf("RecordRestoreProgress = %+v", res.Record)
	}
	if res := progress("owner-a", 1, 100); res.Matched || res.Record.Loaded != 200 {
		t.Fatalf("progress moved back: %+v %+v", res, res.Record)
	}
	if res := progress("owner-x", 1, 300); res.Matched || res.Record.Loaded != 200 {
		t.Fatalf("another owner recorded progress: %+v %+v", res, res.Record)
	}
	if res := progress("owner-a", 2, 300); res.Matched || res.Record.Loaded != 200 {
		t.Fatalf("progress at another generation was recorded: %+v %+v", res, res.Record)
	}
	time.Sleep(400 * time.Millisecond)
	var wins atomic.Int32
	var winner atomic.Value
	var wg sync.WaitGroup
	for k := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := rc.ClaimRestore(ctx, backend.ClaimBackupParams{ARN: id, Owner: fmt.Sprintf("o%d", k), Generation: 1,
				Status: backend.RestoreRunning, StaleAfter: 300 * time.Millisecond})
			if err != nil {
				t.Errorf("ClaimRestore: %v", err)
			} else if res.Matched {
				wins.Add(1)
				winner.Store(res.Record)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("a stale restore claim was taken over %d times, want exactly once", wins.Load())
	}
	won := winner.Load().(*backend.RestoreRecord)
	if won.Loaded != 200 {
		t.Fatalf("the claim lost the recorded progress: %+v", won)
	}
	if res := progress("owner-a", 1, 300); res.Matched || res.Record.Loaded != 200 {
		t.Fatalf("the stale restore owner recorded progress: %+v %+v", res, res.Record)
	}
	if res := progress(won.Owner, 2, 300); !res.Matched || res.Record.Loaded != 300 {
		t.Fatalf("the new owner's progress: %+v %+v", res, res.Record)
	}
	if res, _ := rc.HeartbeatRestore(ctx, backend.HeartbeatBackupParams{ARN: id, Owner: "owner-a", Generation: 1}); res.Matched {
		t.Fatalf("the stale restore owner's heartbeat was confirmed")
	}
	if res, _ := rc.UpdateRestore(ctx, backend.UpdateBackupParams{ARN: id, Generation: 1, Status: backend.RestoreRunning, NewStatus: backend.RestoreDone}); res.Matched {
		t.Fatalf("the stale restore owner's status write matched")
	}
	msg := "done"
	if res, err := rc.UpdateRestore(ctx, backend.UpdateBackupParams{ARN: id, Generation: 2, Status: backend.RestoreRunning,
		NewStatus: backend.RestoreDone, Message: &msg}); err != nil || !res.Matched || res.Record.Status != backend.RestoreDone {
		t.Fatalf("UpdateRestore = %+v, %v", res, err)
	}
	if res := progress(won.Owner, 2, 400); res.Matched || res.Record.Loaded != 300 {
		t.Fatalf("progress recorded on a finished job: %+v %+v", res, res.Record)
	}
	all, err := rc.ListRestores(ctx, []string{backend.RestoreDone})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range all {
		found = found || r.ID == id
	}
	if !found {
		t.Fatalf("ListRestores(DONE) misses %s", id)
	}
}
