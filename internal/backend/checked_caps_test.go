package backend

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// fakeSnapshots answers OpenTableSnapshot with a snapshot of the rows a
// test sets, a page of at most the asked size at a time, in the order
// given (whatever the cursor says).
type fakeSnapshots struct {
	err      error
	table    *Table
	keyOrder bool
	rows     []Row
	fetchErr error
	released bool
}

func (f *fakeSnapshots) OpenTableSnapshot(_ context.Context, p OpenSnapshotParams) (*TableSnapshot, error) {
	if f.err != nil {
		return nil, f.err
	}
	pos := 0
	fetch := func(_ context.Context, _ *Cursor, limit int) ([]Row, bool, error) {
		if f.fetchErr != nil {
			return nil, false, f.fetchErr
		}
		end := min(pos+limit, len(f.rows))
		page := f.rows[pos:end]
		pos = end
		return page, pos < len(f.rows), nil
	}
	return &TableSnapshot{Table: f.table, At: time.Now(), Descriptor: SnapshotDescriptor{Kind: "fake"}, KeyOrder: f.keyOrder,
		Items: NewSnapshotStream(fetch, p.PageSize, func() error { f.released = true; return nil })}, nil
}

// fakeCatalog is both job catalogs, answering what a test sets.
type fakeCatalog struct {
	err      error
	backup   *BackupRecord
	backups  []BackupRecord
	write    *BackupWriteResult
	id       string
	restore  *RestoreRecord
	restores []RestoreRecord
	rwrite   *RestoreWriteResult
}

func (f *fakeCatalog) InsertBackup(context.Context, InsertBackupParams) (*BackupRecord, error) {
	return f.backup, f.err
}
func (f *fakeCatalog) GetBackup(context.Context, GetBackupParams) (*BackupRecord, error) {
	return f.backup, f.err
}
func (f *fakeCatalog) ListBackups(context.Context, ListBackupsParams) ([]BackupRecord, error) {
	return f.backups, f.err
}
func (f *fakeCatalog) UpdateBackup(context.Context, UpdateBackupParams) (*BackupWriteResult, error) {
	return f.write, f.err
}
func (f *fakeCatalog) RemoveBackup(context.Context, RemoveBackupParams) (*BackupWriteResult, error) {
	return f.write, f.err
}
func (f *fakeCatalog) HeartbeatBackup(context.Context, HeartbeatBackupParams) (*BackupWriteResult, error) {
	return f.write, f.err
}
func (f *fakeCatalog) ClaimBackup(context.Context, ClaimBackupParams) (*BackupWriteResult, error) {
	return f.write, f.err
}
func (f *fakeCatalog) CatalogID(context.Context, string) (string, error) { return f.id, f.err }
func (f *fakeCatalog) InsertRestore(context.Context, RestoreRecord) (*RestoreRecord, error) {
	return f.restore, f.err
}
func (f *fakeCatalog) ListRestores(context.Context, []string) ([]RestoreRecord, error) {
	return f.restores, f.err
}
func (f *fakeCatalog) UpdateRestore(context.Context, UpdateBackupParams) (*RestoreWriteResult, error) {
	return f.rwrite, f.err
}
func (f *fakeCatalog) HeartbeatRestore(context.Context, HeartbeatBackupParams) (*RestoreWriteResult, error) {
	return f.rwrite, f.err
}
func (f *fakeCatalog) ClaimRestore(context.Context, ClaimBackupParams) (*RestoreWriteResult, error) {
	return f.rwrite, f.err
}
func (f *fakeCatalog) RecordRestoreProgress(context.Context, RestoreProgressParams) (*RestoreWriteResult, error) {
	return f.rwrite, f.err
}

type fakeStats struct{ s Stats }

func (f fakeStats) Stats() Stats { return f.s }

type fakeBulk struct{}

func (fakeBulk) BulkLoad(context.Context, BulkLoadParams) error { return nil }

// TestCheckedCapabilities: Checked keeps every capability a backend
// states, each wrapped once (a second Checked wraps the backend, not the
// wrapper), the plain members as they are; a backend without any has
// none under Checked either.
func TestCheckedCapabilities(t *testing.T) {
	if got := Checked(&fakeBackend{}, nil).Capabilities(); got != (Capabilities{}) {
		t.Fatalf("a backend without capabilities has %+v under Checked", got)
	}
	cat := &fakeCatalog{}
	f := &fakeBackend{caps: Capabilities{Snapshots: &fakeSnapshots{}, Backups: cat, Restores: cat,
		ChangeLog: &fakeLogBackend{}, Bulk: fakeBulk{}, BulkBatchItems: 7, PerItemAtomic: true, Stats: fakeStats{}}}
	for _, b := range []Backend{Checked(f, nil), Checked(Checked(f, nil), nil)} {
		caps := b.Capabilities()
		if s, ok := caps.Snapshots.(*checkedSnapshots); !ok || s.se != f.caps.Snapshots {
			t.Errorf("Snapshots %T is not the backend's under one check", caps.Snapshots)
		}
		if c, ok := caps.Backups.(*checkedBackups); !ok || c.bc != BackupCatalog(cat) {
			t.Errorf("Backups %T is not the backend's under one check", caps.Backups)
		}
		if c, ok := caps.Restores.(*checkedRestores); !ok || c.rc != RestoreCatalog(cat) {
			t.Errorf("Restores %T is not the backend's under one check", caps.Restores)
		}
		if l, ok := caps.ChangeLog.(*checkedLog); !ok || l.cl != f.caps.ChangeLog {
			t.Errorf("ChangeLog %T is not the backend's under one check", caps.ChangeLog)
		}
		if l, ok := caps.Bulk.(checkedBulk); !ok || l.bl != f.caps.Bulk {
			t.Errorf("Bulk %T is not the backend's under one check", caps.Bulk)
		}
		if s, ok := caps.Stats.(checkedStats); !ok || s.sr != f.caps.Stats {
			t.Errorf("Stats %T is not the backend's under one check", caps.Stats)
		}
		if caps.BulkBatchItems != 7 || !caps.PerItemAtomic {
			t.Errorf("plain members changed: %d items, per item %v", caps.BulkBatchItems, caps.PerItemAtomic)
		}
	}
}

// TestCheckedCapabilitiesIncoherent: one job catalog without the other,
// or a negative bulk size, is a violation; the backend is served without
// the lone catalog and without a preferred size.
func TestCheckedCapabilitiesIncoherent(t *testing.T) {
	cat := &fakeCatalog{}
	for _, caps := range []Capabilities{{Backups: cat}, {Restores: cat}} {
		b, got := checkedFake(t, &fakeBackend{caps: caps})
		c := b.Capabilities()
		if c.Backups != nil || c.Restores != nil {
			t.Errorf("%+v: a lone catalog is served", caps)
		}
		if len(*got) != 1 || !strings.Contains((*got)[0].Error(), "restore catalog") {
			t.Errorf("%+v: violations %v", caps, *got)
		}
	}
	b, got := checkedFake(t, &fakeBackend{caps: Capabilities{BulkBatchItems: -1}})
	if b.Capabilities().BulkBatchItems != 0 || len(*got) != 1 {
		t.Errorf("negative bulk size: %d served, violations %v", b.Capabilities().BulkBatchItems, *got)
	}
}

func drain(s *SnapshotStream) error {
	for {
		if _, err := s.Next(context.Background()); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// TestCheckedSnapshots: an open snapshot must be of the table asked for,
// with an instant, a descriptor and a stream (a broken one is closed);
// each page it streams is within the page size, with base keys equal to
// the keys, and strictly ascending when it claims key order; errors are
// of the declared kinds.
func TestCheckedSnapshots(t *testing.T) {
	ctx := context.Background()
	table := &Table{Account: "a", Name: "t"}
	row := func(pk, sk string) Row {
		return Row{PK: []byte(pk), SK: []byte(sk), BasePK: []byte(pk), BaseSK: []byte(sk), Item: []byte("{}")}
	}
	good := []Row{row("a", "1"), row("a", "2"), row("b", "")}
	open := func(fs *fakeSnapshots) (*TableSnapshot, *[]error, error) {
		b, got := checkedFake(t, &fakeBackend{caps: Capabilities{Snapshots: fs}})
		snap, err := b.Capabilities().Snapshots.OpenTableSnapshot(ctx, OpenSnapshotParams{Account: "a", Name: "t", PageSize: 2})
		return snap, got, err
	}

	for _, keyOrder := range []bool{false, true} {
		snap, got, err := open(&fakeSnapshots{table: table, rows: good, keyOrder: keyOrder})
		if err != nil {
			t.Fatal(err)
		}
		if err := drain(snap.Items); err != nil || len(*got) != 0 {
			t.Fatalf("a good snapshot (key order %v): %v, violations %v", keyOrder, err, *got)
		}
	}

	fs := &fakeSnapshots{table: &Table{Account: "a", Name: "other"}, rows: good}
	_, got, err := open(fs)
	wantViolation(t, "another table", err, got, "asked for table a/t")
	if !fs.released {
		t.Error("a refused snapshot was not closed")
	}
	_, got, err = open(&fakeSnapshots{err: Errorf(KindTableExists, "no")})
	wantViolation(t, "an undeclared open error", err, got, "does not declare")
	for _, k := range []Kind{KindTableNotFound, KindLimitExceeded} {
		if _, got, err := open(&fakeSnapshots{err: Errorf(k, "no")}); !IsKind(err, k) || len(*got) != 0 {
			t.Errorf("declared kind %v: %v, violations %v", k, err, *got)
		}
	}

	pages := []struct {
		name, want string
		fs         *fakeSnapshots
	}{
		{"descending under key order", "claims key order", &fakeSnapshots{table: table, keyOrder: true, rows: []Row{row("b", ""), row("a", "1")}}},
		{"a key twice under key order", "claims key order", &fakeSnapshots{table: table, keyOrder: true, rows: []Row{row("a", "1"), row("a", "1")}}},
		{"base keys", "base keys", &fakeSnapshots{table: table, rows: []Row{{PK: []byte("a"), BasePK: []byte("b"), Item: []byte("{}")}}}},
		{"no item", "without a partition key or an item", &fakeSnapshots{table: table, rows: []Row{{PK: []byte("a"), BasePK: []byte("a")}}}},
		{"undeclared fetch error", "does not declare", &fakeSnapshots{table: table, rows: good, fetchErr: Errorf(KindTableVersion, "moved")}},
	}
	for _, tc := range pages {
		snap, got, err := open(tc.fs)
		if err != nil {
			t.Fatalf("%s: open: %v", tc.name, err)
		}
		wantViolation(t, tc.name, drain(snap.Items), got, tc.want)
	}
	snap, got, _ := open(&fakeSnapshots{table: table, fetchErr: Errorf(KindSnapshotExpired, "gone")})
	if err := drain(snap.Items); !IsKind(err, KindSnapshotExpired) || len(*got) != 0 {
		t.Errorf("an expired snapshot: %v, violations %v", err, *got)
	}
}

// TestCheckedBackupCatalog: listings ascending, selected and within the
// limit; rows answered for their own key; matched writes not behind their
// generation; a catalog id; only KindInternal and KindUnavailable.
func TestCheckedBackupCatalog(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(arn, status string) BackupRecord {
		return BackupRecord{ARN: arn, Account: "a", TableName: "t", Status: status, CreatedAt: at, Generation: 2}
	}
	cat := func(f *fakeCatalog) (BackupCatalog, *[]error) {
		b, got := checkedFake(t, &fakeBackend{caps: Capabilities{Backups: f, Restores: f}})
		return b.Capabilities().Backups, got
	}

	c, got := cat(&fakeCatalog{backups: []BackupRecord{rec("x1", BackupAvailable), rec("x2", BackupCreating)}})
	if rows, err := c.ListBackups(ctx, ListBackupsParams{Account: "a", StartAfter: "x0", Limit: 2}); err != nil || len(rows) != 2 || len(*got) != 0 {
		t.Fatalf("a good listing: %d rows, %v, violations %v", len(rows), err, *got)
	}
	lists := []struct {
		name, want string
		rows       []BackupRecord
		p          ListBackupsParams
	}{
		{"unordered", "ascending ARN order", []BackupRecord{rec("x2", BackupAvailable), rec("x1", BackupAvailable)}, ListBackupsParams{}},
		{"twice", "ascending ARN order", []BackupRecord{rec("x1", BackupAvailable), rec("x1", BackupAvailable)}, ListBackupsParams{}},
		{"over the limit", "for a limit of 1", []BackupRecord{rec("x1", BackupAvailable), rec("x2", BackupAvailable)}, ListBackupsParams{Limit: 1}},
		{"another account", "not selected", []BackupRecord{rec("x1", BackupAvailable)}, ListBackupsParams{Account: "b"}},
		{"another table", "not selected", []BackupRecord{rec("x1", BackupAvailable)}, ListBackupsParams{TableName: "u"}},
		{"another status", "not selected", []BackupRecord{rec("x1", BackupAvailable)}, ListBackupsParams{Statuses: []string{BackupDeleting}}},
		{"not after StartAfter", "not selected", []BackupRecord{rec("x1", BackupAvailable)}, ListBackupsParams{StartAfter: "x1"}},
		{"created before", "not selected", []BackupRecord{rec("x1", BackupAvailable)}, ListBackupsParams{CreatedFrom: at.Add(time.Millisecond)}},
		{"created after", "not selected", []BackupRecord{rec("x1", BackupAvailable)}, ListBackupsParams{CreatedTo: at.Add(-time.Millisecond)}},
	}
	for _, tc := range lists {
		c, got := cat(&fakeCatalog{backups: tc.rows})
		_, err := c.ListBackups(ctx, tc.p)
		wantViolation(t, tc.name, err, got, tc.want)
	}

	r := rec("x1", BackupAvailable)
	c, got = cat(&fakeCatalog{backup: &r})
	_, err := c.GetBackup(ctx, GetBackupParams{ARN: "x2"})
	wantViolation(t, "GetBackup of another row", err, got, "answered the row of x1")
	c, got = cat(&fakeCatalog{})
	if r, err := c.GetBackup(ctx, GetBackupParams{ARN: "x2"}); r != nil || err != nil || len(*got) != 0 {
		t.Errorf("an absent row: %v, %v, violations %v", r, err, *got)
	}
	_, err = c.InsertBackup(ctx, InsertBackupParams{Record: rec("x1", BackupCreating)})
	wantViolation(t, "InsertBackup without a row", err, got, "without a claim")
	_, err = c.CatalogID(ctx, "new")
	wantViolation(t, "an empty catalog id", err, got, "empty id")

	c, got = cat(&fakeCatalog{write: &BackupWriteResult{Matched: true, Record: &r}})
	if _, err := c.ClaimBackup(ctx, ClaimBackupParams{ARN: "x1", Generation: 1}); err != nil || len(*got) != 0 {
		t.Errorf("a claim from generation 1 to 2: %v, violations %v", err, *got)
	}
	_, err = c.ClaimBackup(ctx, ClaimBackupParams{ARN: "x1", Generation: 2})
	wantViolation(t, "a claim answering its old generation", err, got, "matched at generation 3")
	_, err = c.UpdateBackup(ctx, UpdateBackupParams{ARN: "x1", Generation: 5})
	wantViolation(t, "an update behind its generation", err, got, "matched at generation 5")
	_, err = c.HeartbeatBackup(ctx, HeartbeatBackupParams{ARN: "x2", Generation: 2})
	wantViolation(t, "a heartbeat answering another row", err, got, "answered the row of x1")
	c, got = cat(&fakeCatalog{})
	_, err = c.RemoveBackup(ctx, RemoveBackupParams{ARN: "x1"})
	wantViolation(t, "no result", err, got, "no result and no error")

	c, got = cat(&fakeCatalog{err: Errorf(KindTableNotFound, "no")})
	_, err = c.ListBackups(ctx, ListBackupsParams{})
	wantViolation(t, "an undeclared kind", err, got, "does not declare")
	c, got = cat(&fakeCatalog{err: Errorf(KindUnavailable, "down")})
	if _, err := c.GetBackup(ctx, GetBackupParams{ARN: "x1"}); !IsKind(err, KindUnavailable) || len(*got) != 0 {
		t.Errorf("KindUnavailable: %v, violations %v", err, *got)
	}
}

// TestCheckedRestoreCatalog: listings ascending by id and of the statuses
// asked; rows for their own id; recorded progress not behind.
func TestCheckedRestoreCatalog(t *testing.T) {
	ctx := context.Background()
	job := func(id, status string) RestoreRecord {
		return RestoreRecord{ID: id, Status: status, Generation: 1, Loaded: 10}
	}
	cat := func(f *fakeCatalog) (RestoreCatalog, *[]error) {
		b, got := checkedFake(t, &fakeBackend{caps: Capabilities{Backups: f, Restores: f}})
		return b.Capabilities().Restores, got
	}
	c, got := cat(&fakeCatalog{restores: []RestoreRecord{job("r1", RestoreRunning), job("r2", RestoreDone)}})
	if rows, err := c.ListRestores(ctx, nil); err != nil || len(rows) != 2 || len(*got) != 0 {
		t.Fatalf("a good listing: %d rows, %v, violations %v", len(rows), err, *got)
	}
	_, err := c.ListRestores(ctx, []string{RestoreRunning})
	wantViolation(t, "another status", err, got, "not one of")
	c, got = cat(&fakeCatalog{restores: []RestoreRecord{job("r2", RestoreRunning), job("r1", RestoreRunning)}})
	_, err = c.ListRestores(ctx, nil)
	wantViolation(t, "unordered", err, got, "ascending id order")

	j := job("r1", RestoreRunning)
	c, got = cat(&fakeCatalog{restore: &j, rwrite: &RestoreWriteResult{Matched: true, Record: &j}})
	if _, err := c.InsertRestore(ctx, job("r1", RestoreRunning)); err != nil || len(*got) != 0 {
		t.Errorf("a good insert: %v, violations %v", err, *got)
	}
	_, err = c.InsertRestore(ctx, job("r2", RestoreRunning))
	wantViolation(t, "an insert answering another row", err, got, "answered the row of r1")
	if _, err := c.RecordRestoreProgress(ctx, RestoreProgressParams{ID: "r1", Generation: 1, Loaded: 10}); err != nil || len(*got) != 0 {
		t.Errorf("progress recorded: %v, violations %v", err, *got)
	}
	_, err = c.RecordRestoreProgress(ctx, RestoreProgressParams{ID: "r1", Generation: 1, Loaded: 11})
	wantViolation(t, "progress behind", err, got, "recorded 11 loaded items")
	_, err = c.ClaimRestore(ctx, ClaimBackupParams{ARN: "r1", Generation: 1})
	wantViolation(t, "a claim answering its old generation", err, got, "matched at generation 2")
	if _, err := c.UpdateRestore(ctx, UpdateBackupParams{ARN: "r1", Generation: 1}); err != nil || len(*got) != 0 {
		t.Errorf("an update: %v, violations %v", err, *got)
	}
	if _, err := c.HeartbeatRestore(ctx, HeartbeatBackupParams{ARN: "r1", Generation: 1}); err != nil || len(*got) != 0 {
		t.Errorf("a heartbeat: %v, violations %v", err, *got)
	}
}

// TestCheckedStats: a negative figure or a pool over its bound is
// reported; the figures are still answered.
func TestCheckedStats(t *testing.T) {
	for _, tc := range []struct {
		s    Stats
		want string
	}{
		{Stats{Retries: -1, PoolMax: 4, PoolInUse: 4, HasPool: true}, ""},
		{Stats{Retries: -2}, "negative figure"},
		{Stats{CacheBytes: -1}, "negative figure"},
		{Stats{HasPool: true, PoolMax: 2, PoolInUse: 3}, "3 connections in use for a pool of 2"},
	} {
		b, got := checkedFake(t, &fakeBackend{caps: Capabilities{Stats: fakeStats{tc.s}}})
		if s := b.Capabilities().Stats.Stats(); s != tc.s {
			t.Errorf("%+v answered as %+v", tc.s, s)
		}
		switch {
		case tc.want == "" && len(*got) != 0:
			t.Errorf("%+v: violations %v", tc.s, *got)
		case tc.want != "" && (len(*got) != 1 || !strings.Contains((*got)[0].Error(), tc.want)):
			t.Errorf("%+v: violations %v, want one with %q", tc.s, *got, tc.want)
		}
	}
}

// TestFilterJobs: the shared ListBackups and ListRestores of the backends
// that read their catalog whole select, order and limit like the
// contract says (and like the checks expect).
func TestFilterJobs(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := []BackupRecord{
		{ARN: "c", Account: "a", TableName: "t", Status: BackupAvailable, CreatedAt: at},
		{ARN: "a", Account: "a", TableName: "t", Status: BackupAvailable, CreatedAt: at.Add(time.Second)},
		{ARN: "b", Account: "b", TableName: "t", Status: BackupAvailable, CreatedAt: at},
		{ARN: "d", Account: "a", TableName: "u", Status: BackupDeleted, CreatedAt: at},
	}
	arns := func(rs []BackupRecord) string {
		var s []string
		for _, r := range rs {
			s = append(s, r.ARN)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		p    ListBackupsParams
		want string
	}{
		{ListBackupsParams{}, "a,b,c,d"},
		{ListBackupsParams{Account: "a"}, "a,c,d"},
		{ListBackupsParams{Account: "a", Limit: 2}, "a,c"},
		{ListBackupsParams{Account: "a", StartAfter: "a"}, "c,d"},
		{ListBackupsParams{TableName: "t", Statuses: []string{BackupAvailable}}, "a,b,c"},
		{ListBackupsParams{CreatedFrom: at.Add(500 * time.Millisecond)}, "a"},
		{ListBackupsParams{CreatedFrom: at.Add(500 * time.Microsecond), CreatedTo: at}, "b,c,d"},
		{ListBackupsParams{Statuses: []string{BackupDeleted, BackupCreating}}, "d"},
	} {
		if got := arns(FilterBackups(append([]BackupRecord(nil), rows...), tc.p)); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.p, got, tc.want)
		}
	}
	jobs := []RestoreRecord{{ID: "2", Status: RestoreDone}, {ID: "1", Status: RestoreRunning}, {ID: "3", Status: RestoreRunning}}
	ids := func(rs []RestoreRecord) string {
		var s []string
		for _, r := range rs {
			s = append(s, r.ID)
		}
		return strings.Join(s, ",")
	}
	if got := ids(FilterRestores(append([]RestoreRecord(nil), jobs...), nil)); got != "1,2,3" {
		t.Errorf("all jobs: %s", got)
	}
	if got := ids(FilterRestores(append([]RestoreRecord(nil), jobs...), []string{RestoreRunning})); got != "1,3" {
		t.Errorf("running jobs: %s", got)
	}
}
