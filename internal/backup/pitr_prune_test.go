package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
	"github.com/extenddb/extenddb/internal/format"
)

// pruneFixture is a history with three bases (B1 before any record, B2
// after the first 60 records, B3 after 90) and its segments, a
// recovery period of one day, and a clock the test moves.
type pruneFixture struct {
	b       backend.Backend
	st      blobstore.Store
	clock   *atomic.Int64
	src     *testPITR
	ref     backend.TableRef
	prefix  string
	m       *Manager
	s       *Shipper
	bases   []format.PITRBase // oldest first
	baseAt  []time.Time
	between time.Time // after B2, before B3
}

func (f *pruneFixture) now() time.Time {
	if c := f.clock.Load(); c != 0 {
		return time.Unix(0, c)
	}
	return time.Now()
}

// newServer is another server on the fixture's database and store.
func (f *pruneFixture) newServer(t *testing.T, b backend.Backend, hook func(string)) (*Manager, *Shipper) {
	t.Helper()
	m := newManager(t, b, f.st, func(c *Config) {
		c.Now = f.now
		c.Restorer = testRestorer{}
		c.SpoolDir = t.TempDir()
		c.Hook = hook
	})
	s, err := NewShipper(m, f.src, PITRConfig{SegmentMaxBytes: 2 << 10, BaseAfterBytes: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

func newPruneFixture(t *testing.T, b backend.Backend, name string, hook func(string)) *pruneFixture {
	t.Helper()
	ctx := context.Background()
	f := &pruneFixture{b: b, st: memstore.New(), clock: &atomic.Int64{}}
	f.ref = createTable(t, b, name)
	tbl := pitrTable(f.ref)
	tbl.Days = 1
	f.src = &testPITR{tables: []PITRTable{tbl}}
	f.prefix = format.PITRPrefix(account, name, tbl.Incarnation())
	f.m, f.s = f.newServer(t, b, hook)
	f.s.ShipOnce(ctx) // head, B1
	for round := 0; round < 3; round++ {
		time.Sleep(20 * time.Millisecond)
		if round == 2 {
			f.between = time.Now()
			time.Sleep(20 * time.Millisecond)
		}
		for i := 0; i < 30; i++ {
			logWrite(t, b, f.ref, round*30+i, "v", "", 0)
		}
		f.s.ShipOnce(ctx) // B2 in round 1 and B3 in round 2 (a base when records were shipped since the last)
	}
	bases, err := listBases(ctx, f.st, f.prefix)
	if err != nil || len(bases) != 3 {
		t.Fatalf("bases %v, %v", bases, err)
	}
	for _, b := range bases {
		at, _ := format.ParsePITRTime(b.SnapshotAt)
		f.baseAt = append(f.baseAt, at)
	}
	f.bases = bases
	return f
}

// keys lists the objects of the history.
func (f *pruneFixture) keys(t *testing.T) []string {
	t.Helper()
	objs, err := f.st.List(context.Background(), f.prefix)
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// restorable checks that every instant from B2 on plans, with the state
// the writes left.
func (f *pruneFixture) restorable(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		at    time.Time
		items int
	}{{f.baseAt[1], 60}, {f.between, 60}, {time.Now(), 90}} {
		p, err := PlanPITRRestore(ctx, f.st, f.prefix, c.at, t.TempDir())
		if err != nil {
			t.Fatalf("at %v: %v", c.at, err)
		}
		if got := restored(t, p); len(got) != c.items {
			t.Fatalf("at %v: %d items, want %d", c.at, len(got), c.items)
		}
	}
	if err := ReadHistory(ctx, f.st, f.prefix, func([]format.PITRRecord) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// pruneAt sets the clock so that the window (one day, plus the grace)
// starts between B2 and B3.
func (f *pruneFixture) pruneAt() {
	f.clock.Store(f.between.Add(24*time.Hour + pruneGrace).UnixNano())
}

func hasKey(keys []string, sub string) bool {
	for _, k := range keys {
		if strings.Contains(k, sub) {
			return true
		}
	}
	return false
}

// TestPITRPrune: the reconciler's pruning keeps the newest base at or
// before the window's start and every segment after its position, and
// deletes the older bases and segments (a prune mark restarting the
// chain); every instant in the window restores as before; shipping goes
// on after it; a second pass deletes nothing; nothing is pruned while
// the window still holds everything.
func TestPITRPrune(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		f := newPruneFixture(t, b, "prune1", nil)
		before := f.keys(t)
		if res, err := f.s.Prune(ctx); err != nil || res != (PruneResult{}) {
			t.Fatalf("inside the window: %+v, %v", res, err)
		}
		if got := f.keys(t); len(got) != len(before) {
			t.Fatalf("inside the window, %d objects became %d", len(before), len(got))
		}
		f.pruneAt()
		res, err := f.s.Prune(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Bases != 1 || res.Segments == 0 || res.Histories != 0 {
			t.Fatalf("pruned %+v, want B1 and some segments", res)
		}
		keys := f.keys(t)
		if hasKey(keys, f.bases[0].BackupID) || !hasKey(keys, f.bases[1].BackupID) || !hasKey(keys, f.bases[2].BackupID) {
			t.Fatalf("bases left: %v", keys)
		}
		mark, _, err := pruneMark(ctx, f.st, f.prefix)
		if err != nil || mark == nil || mark.After > f.bases[1].Position {
			t.Fatalf("mark %+v, %v (B2 at %d)", mark, err, f.bases[1].Position)
		}
		firsts, _, _, _ := segmentObjects(ctx, f.st, f.prefix)
		if len(firsts) == 0 || firsts[0] != mark.First {
			t.Fatalf("segments from %v, mark at %d", firsts, mark.First)
		}
		f.restorable(t)
		if _, err := PlanPITRRestore(ctx, f.st, f.prefix, f.baseAt[0].Add(time.Millisecond), t.TempDir()); !errors.Is(err, ErrRestoreTime) {
			t.Fatalf("an instant before B2 (pruned): %v", err)
		}
		if res, err := f.s.Prune(ctx); err != nil || res != (PruneResult{}) {
			t.Fatalf("a second pass: %+v, %v", res, err)
		}
		// Shipping goes on, chained to the kept segments.
		for i := 0; i < 10; i++ {
			logWrite(t, b, f.ref, 100+i, "w", "", 0)
		}
		f.s.ShipOnce(ctx)
		p, err := PlanPITRRestore(ctx, f.st, f.prefix, time.Now(), t.TempDir())
		if err != nil || len(restored(t, p)) != 100 {
			t.Fatalf("after shipping on: %v", err)
		}
		// A restore job of the pruned history.
		row := (&pitrFixture{b: b, st: f.st, m: f.m, s: f.s, prefix: f.prefix}).restore(t, time.Now(), "dst")
		if row.Status != backend.RestoreDone {
			t.Fatalf("restore after pruning: %s %q", row.Status, row.Message)
		}
	})
}

// TestPITRPruneCrashAndRace: a prune that stops after its mark, or after
// its first deleted segment, leaves every instant of the window
// restorable, and the next pass finishes it; two servers pruning at
// once leave the same history.
func TestPITRPruneCrashAndRace(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ref := newPruneFixture(t, b, "prune0", nil)
		ref.pruneAt()
		if _, err := ref.s.Prune(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := len(ref.keys(t))
		for i, point := range []string{PointPITRPruneMarked, PointPITRPruneMid} {
			ctx, cancel := context.WithCancel(context.Background())
			var stop atomic.Bool
			f := newPruneFixture(t, b, "prune"+string(rune('a'+i)), func(p string) {
				if p == point && stop.Load() {
					cancel()
				}
			})
			f.pruneAt()
			stop.Store(true)
			if _, err := f.s.Prune(ctx); err == nil {
				t.Fatalf("%s: the interrupted prune answered no error", point)
			}
			stop.Store(false)
			f.restorable(t)
			if _, err := f.s.Prune(context.Background()); err != nil {
				t.Fatal(err)
			}
			f.restorable(t)
			if got := len(f.keys(t)); got != want {
				t.Fatalf("%s: %d objects after the next pass, want %d", point, got, want)
			}
			cancel()
		}
		// Two servers at once.
		f := newPruneFixture(t, b, "prune2", nil)
		_, s2 := f.newServer(t, otherServer(b), nil)
		f.pruneAt()
		var wg sync.WaitGroup
		for _, s := range []*Shipper{f.s, s2} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.Prune(context.Background()) // one may meet what the other deleted: the next pass
			}()
		}
		wg.Wait()
		f.restorable(t)
		if _, err := s2.Prune(context.Background()); err != nil {
			t.Fatal(err)
		}
		f.restorable(t)
		if got := len(f.keys(t)); got != want {
			t.Fatalf("two servers: %d objects, want %d", got, want)
		}
	})
}

// TestPITRPruneEndedHistory: the history of a table no longer shipped
// (deleted, or its PITR turned off) stays while its last instant is in
// the window, and is deleted whole after; a restore job reading a
// history keeps the pruner away from it.
func TestPITRPruneEndedHistory(t *testing.T) {
	ctx := context.Background()
	f := newPruneFixture(t, backends(t)[0].open(t), "prune3", nil)
	f.src.mu.Lock()
	f.src.tables = nil // the table was deleted
	f.src.mu.Unlock()
	last := time.Now()
	f.clock.Store(last.Add(12 * time.Hour).UnixNano())
	if res, err := f.s.Prune(ctx); err != nil || res != (PruneResult{}) {
		t.Fatalf("inside its window: %+v, %v", res, err)
	}
	f.restorable(t)
	f.clock.Store(last.Add(24*time.Hour + pruneGrace + time.Minute).UnixNano())
	// A restore job running from it: left alone.
	job, err := f.m.rcat.InsertRestore(ctx, backend.RestoreRecord{ID: "acct/dst/x", Account: account, TableName: "dst",
		BackupARN: PITRJobKey(f.prefix, last, f.bases[2].BackupID, 0), Status: backend.RestoreRunning, Owner: "other", Generation: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := f.s.Prune(ctx); err != nil || res != (PruneResult{}) || len(f.keys(t)) == 0 {
		t.Fatalf("while a restore reads it: %+v, %v", res, err)
	}
	if _, err := f.m.rcat.UpdateRestore(ctx, backend.UpdateBackupParams{ARN: job.ID, Generation: job.Generation,
		Status: backend.RestoreRunning, NewStatus: backend.RestoreDone}); err != nil {
		t.Fatal(err)
	}
	res, err := f.s.Prune(ctx)
	if err != nil || res.Histories != 1 {
		t.Fatalf("past its window: %+v, %v", res, err)
	}
	if keys := f.keys(t); len(keys) != 0 {
		t.Fatalf("left: %v", keys)
	}
	if h, err := f.m.FindHistory(ctx, account, "prune3", pitrTable(f.ref).TableArn); err != nil || h != nil {
		t.Fatalf("FindHistory after: %+v, %v", h, err)
	}
}

// TestPITRRestoreAfterTheDatabaseIsLost: a server ships a table's
// history, then its SQLite database is deleted; a new server on a fresh
// database adopts the store, lists the history with its window
// (ListHistories, what `backup pitr-tables` prints) and restores the
// table from the store alone, by its ARN, to the latest instant and to
// one before the last writes.
func TestPITRRestoreAfterTheDatabaseIsLost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := blobstore.NewFS(dir + "/store")
	if err != nil {
		t.Fatal(err)
	}
	b1, err := sqlite.Open(ctx, sqlite.Options{Path: dir + "/a.sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	ref := createTable(t, b1, "lost")
	tbl := pitrTable(ref)
	m1 := newManager(t, b1, st, nil)
	s1 := newShipper(t, m1, &testPITR{tables: []PITRTable{tbl}})
	s1.ShipOnce(ctx)
	for i := 0; i < 50; i++ {
		logWrite(t, b1, ref, i, "one", "", 0)
	}
	time.Sleep(30 * time.Millisecond)
	mid := time.Now()
	time.Sleep(30 * time.Millisecond)
	for i := 0; i < 20; i++ {
		logWrite(t, b1, ref, i, "two", "", 0)
	}
	logWrite(t, b1, ref, 49, "", "", 0)
	s1.ShipOnce(ctx)
	m1.Close()
	b1.Close()
	matches, _ := filepath.Glob(dir + "/a.sqlite*")
	for _, p := range matches {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}

	b2, err := sqlite.Open(ctx, sqlite.Options{Path: dir + "/b.sqlite"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	if _, err := Sync(ctx, b2, st, descJSON{}, SyncOptions{AdoptStore: true, Force: true}); err != nil {
		t.Fatal(err)
	}
	m2 := newManager(t, b2, st, func(c *Config) { c.Restorer = testRestorer{}; c.SpoolDir = t.TempDir() })
	hs, err := ListHistories(ctx, st)
	if err != nil || len(hs) != 1 {
		t.Fatalf("histories %+v, %v", hs, err)
	}
	h := hs[0]
	if h.Head.TableArn != tbl.TableArn || h.Head.TableName != "lost" || h.Earliest.IsZero() || h.Earliest.After(mid) || h.Latest.Before(mid) {
		t.Fatalf("listed %+v (mid %v)", h, mid)
	}
	found, err := m2.FindHistory(ctx, account, "lost", tbl.TableArn)
	if err != nil || found == nil || found.Prefix != h.Prefix || !found.Latest.Equal(h.Latest) {
		t.Fatalf("FindHistory %+v, %v", found, err)
	}
	f := &pitrFixture{b: b2, st: st, m: m2, prefix: h.Prefix}
	for _, c := range []struct {
		name    string
		at      time.Time
		items   int
		k0, k49 string
	}{{"latest", h.Latest, 49, "two", "absent"}, {"mid", mid, 50, "one", "one"}} {
		if row := f.restore(t, c.at, "copy-"+c.name); row.Status != backend.RestoreDone {
			t.Fatalf("%s: %s %q", c.name, row.Status, row.Message)
		}
		res, err := b2.Scan(ctx, backend.ScanParams{Table: mustTable(t, b2, "copy-"+c.name).Ref(), Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range res.Rows {
			got[keysOf(t, r.Item)] = string(r.Item)
		}
		if len(got) != c.items || value(t, got, 0) != c.k0 || value(t, got, 49) != c.k49 {
			t.Fatalf("%s: %d items, item 0 %s, item 49 %s", c.name, len(got), value(t, got, 0), value(t, got, 49))
		}
	}
}
