package backup

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
	"github.com/extenddb/extenddb/internal/format"
)

// pitrFixture is a table with a shipped history in a directory store: a
// base of 40 items, then 120 records in many segments.
type pitrFixture struct {
	b      backend.Backend
	root   string
	st     blobstore.Store
	m      *Manager
	s      *Shipper
	ref    backend.TableRef
	prefix string
	hooks  *hookLog
}

// hookLog records the job steps a manager passed.
type hookLog struct {
	mu  sync.Mutex
	hit map[string]int
}

func (h *hookLog) hook(p string) {
	h.mu.Lock()
	h.hit[p]++
	h.mu.Unlock()
}

func (h *hookLog) count(p string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.hit[p]
}

func newPITRFixture(t *testing.T, b backend.Backend, name string) *pitrFixture {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := blobstore.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	f := &pitrFixture{b: b, root: root, st: st, hooks: &hookLog{hit: map[string]int{}}}
	f.ref = createTable(t, b, name)
	for i := 0; i < 40; i++ {
		logWrite(t, b, f.ref, i, "a", "", 0)
	}
	f.m = newManager(t, b, st, func(c *Config) {
		c.Restorer = testRestorer{}
		c.SpoolDir = t.TempDir()
		c.Hook = f.hooks.hook
	})
	f.s = newShipper(t, f.m, &testPITR{tables: []PITRTable{pitrTable(f.ref)}})
	f.s.ShipOnce(ctx) // head and base
	for i := 0; i < 120; i++ {
		logWrite(t, b, f.ref, i, "b", "", 0)
		if i%30 == 29 {
			f.s.ShipOnce(ctx)
		}
	}
	f.prefix = format.PITRPrefix(account, name, pitrTable(f.ref).Incarnation())
	return f
}

// segments lists the segment keys of the history, oldest first.
func (f *pitrFixture) segments(t *testing.T) []string {
	t.Helper()
	objs, err := f.st.List(context.Background(), format.SegmentsPrefix(f.prefix))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".zst") {
			out = append(out, o.Key)
		}
	}
	return out
}

func (f *pitrFixture) path(key string) string { return filepath.Join(f.root, filepath.FromSlash(key)) }

// restore runs a restore job to the instant at into dst and waits for it
// to end; it answers the job's row.
func (f *pitrFixture) restore(t *testing.T, at time.Time, dst string) backend.RestoreRecord {
	t.Helper()
	ctx := context.Background()
	var job string
	shipped := int64(0)
	if f.s != nil {
		shipped = f.s.LastSegment(f.prefix)
	}
	if err := f.m.RestorePITRUpTo(ctx, f.prefix, at, shipped, account, dst, func(ctx context.Context, key string) (*backend.Table, error) {
		job = key
		res, err := f.b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: dst, Desc: []byte(`{"restoring":true}`)})
		if err != nil {
			return nil, err
		}
		return res.Table, nil
	}); err != nil {
		t.Fatal(err)
	}
	return f.waitJob(t, job, dst)
}

// waitJob waits for the restore job with key job into dst to end, and
// for a failed job's target to be removed.
func (f *pitrFixture) waitJob(t *testing.T, job, dst string) backend.RestoreRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := f.m.rcat.ListRestores(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.BackupARN != job || r.TableName != dst || r.Status == backend.RestoreRunning {
				continue
			}
			_, gerr := f.b.GetTable(context.Background(), backend.GetTableParams{Account: account, Name: dst})
			if r.Status != backend.RestoreFailed || backend.IsKind(gerr, backend.KindTableNotFound) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restore job into %s does not end", dst)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPITRRestoreVerifiesBeforeWriting: a flipped byte in a segment, a
// missing middle segment, a missing base data file, a missing base
// position object and a flipped byte in a sidecar each make a
// point-in-time restore job fail before it writes an item, its row
// FAILED with a message naming the object's key, its target removed;
// the undamaged history restores.
func TestPITRRestoreVerifiesBeforeWriting(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		f := newPITRFixture(t, b, "verify1")
		at := time.Now()
		segs := f.segments(t)
		if len(segs) < 4 {
			t.Fatalf("%d segments, want several", len(segs))
		}
		bases, err := listBases(context.Background(), f.st, f.prefix)
		if err != nil || len(bases) != 1 {
			t.Fatalf("bases %v, %v", bases, err)
		}
		baseDir := format.BasesPrefix(f.prefix) + "/" + bases[0].BackupID
		dataFile := baseDir + "/data/000001.json.zst"
		if _, err := os.Stat(f.path(dataFile)); err != nil {
			t.Fatal(err)
		}
		flip := func(key string) func() {
			data, err := os.ReadFile(f.path(key))
			if err != nil {
				t.Fatal(err)
			}
			bad := append([]byte(nil), data...)
			bad[len(bad)/2] ^= 0x10
			if err := os.WriteFile(f.path(key), bad, 0o600); err != nil {
				t.Fatal(err)
			}
			return func() { os.WriteFile(f.path(key), data, 0o600) }
		}
		remove := func(keys ...string) func() {
			saved := map[string][]byte{}
			for _, k := range keys {
				data, err := os.ReadFile(f.path(k))
				if err != nil {
					t.Fatal(err)
				}
				saved[k] = data
				if err := os.Remove(f.path(k)); err != nil {
					t.Fatal(err)
				}
			}
			return func() {
				for k, d := range saved {
					os.WriteFile(f.path(k), d, 0o600)
				}
			}
		}
		cases := []struct {
			name   string
			damage func() func()
			named  string
		}{
			{"flipped-segment", func() func() { return flip(segs[1]) }, segs[1]},
			{"flipped-sidecar", func() func() { return flip(format.SegmentSidecarKey(segs[2])) }, format.SegmentSidecarKey(segs[2])},
			// The next segment names the gap (the missing one's name is
			// not known from what remains).
			{"missing-segment", func() func() { return remove(segs[1], format.SegmentSidecarKey(segs[1])) }, segs[2]},
			{"missing-segment-only", func() func() { return remove(segs[2]) }, segs[2]},
			{"missing-last-segment", func() func() {
				n := len(segs) - 1
				return remove(segs[n], format.SegmentSidecarKey(segs[n]))
			}, segs[len(segs)-1]},
			{"missing-data-file", func() func() { return remove(dataFile) }, dataFile},
			{"flipped-data-file", func() func() { return flip(dataFile) }, dataFile},
			{"missing-manifest", func() func() { return remove(format.ManifestKey(baseDir + "/")) }, format.ManifestKey(baseDir + "/")},
		}
		for _, c := range cases {
			// The pin is taken at the request: damage done before it and
			// damage done after it (the job's own plan) are both caught.
			repair := c.damage()
			before := f.hooks.count(PointRestoreMidLoad)
			row := f.restore(t, at, "dst-"+c.name)
			repair()
			if row.Status != backend.RestoreFailed || !strings.Contains(row.Message, c.named) {
				t.Fatalf("%s: job %s %q, want FAILED naming %s", c.name, row.Status, row.Message, c.named)
			}
			if n := f.hooks.count(PointRestoreMidLoad); n != before {
				t.Fatalf("%s: the job wrote items before failing", c.name)
			}
			if _, err := b.GetTable(context.Background(), backend.GetTableParams{Account: account, Name: "dst-" + c.name}); !backend.IsKind(err, backend.KindTableNotFound) {
				t.Fatalf("%s: the target is still there: %v", c.name, err)
			}
		}
		row := f.restore(t, at, "dst-ok")
		if row.Status != backend.RestoreDone {
			t.Fatalf("the undamaged history: %s %q", row.Status, row.Message)
		}
		res, err := b.Scan(context.Background(), backend.ScanParams{Table: mustTable(t, b, "dst-ok").Ref(), Limit: 1000})
		if err != nil || len(res.Rows) != 120 {
			t.Fatalf("restored %d items (%v), want 120", len(res.Rows), err)
		}
		// Failed or done, a restore leaves nothing in the spool
		// directory (its replay's spill file goes with its job's
		// directory).
		if es, err := os.ReadDir(f.m.cfg.SpoolDir); err != nil || len(es) != 0 {
			t.Fatalf("the spool directory holds %d entries (%v) after the restores", len(es), err)
		}
	})
}

// TestPITRPlanNeedsItsPinnedObjects: a plan pinned to a base and a last
// segment fails naming them when they are gone, although the history
// that remains would plan another restore.
func TestPITRPlanNeedsItsPinnedObjects(t *testing.T) {
	b := backends(t)[0].open(t)
	ctx := context.Background()
	f := newPITRFixture(t, b, "verify2")
	at := time.Now()
	pin, err := pinPITR(ctx, f.st, f.prefix, at)
	if err != nil {
		t.Fatal(err)
	}
	segs := f.segments(t)
	if pin.Tail == 0 || format.SegmentKey(f.prefix, pin.Tail) != segs[len(segs)-1] {
		t.Fatalf("pinned tail %d, segments %v", pin.Tail, segs)
	}
	if _, err := planPITR(ctx, f.st, f.prefix, at, pin, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	last := segs[len(segs)-1]
	os.Remove(f.path(format.SegmentSidecarKey(last)))
	if _, err := planPITR(ctx, f.st, f.prefix, at, pin, t.TempDir()); err == nil || !strings.Contains(err.Error(), format.SegmentSidecarKey(last)) {
		t.Fatalf("the pinned tail's sidecar removed: %v", err)
	}
	os.Remove(f.path(last))
	if _, err := planPITR(ctx, f.st, f.prefix, at, pin, t.TempDir()); err == nil || !strings.Contains(err.Error(), last) {
		t.Fatalf("the pinned tail removed: %v", err)
	}
	baseKey := format.BaseKey(f.prefix, pin.Base)
	os.Remove(f.path(baseKey))
	if _, err := planPITR(ctx, f.st, f.prefix, at, pin, t.TempDir()); err == nil || !strings.Contains(err.Error(), baseKey) {
		t.Fatalf("the pinned base's position object removed: %v", err)
	}
}

// TestPITRTakeoverRestoresThePinnedPlan: a restore job taken over by
// another server after its owner stopped restores the state its pin
// fixed, although by then the history holds a record decided before the
// instant but shipped after the job started (which a plan made again
// would include) and a newer base.
func TestPITRTakeoverRestoresThePinnedPlan(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st := memstore.New()
		ref := createTable(t, b, "pin1")
		for i := 0; i < 300; i++ {
			logWrite(t, b, ref, i, "a", "", 0)
		}
		gate, reached := make(chan struct{}), make(chan struct{})
		var once sync.Once
		m := newManager(t, b, st, func(c *Config) {
			c.HeartbeatInterval = time.Hour // its heartbeat never comes in time
			c.StaleAfter = 100 * time.Millisecond
			c.Restorer = testRestorer{}
			c.SpoolDir = t.TempDir()
			c.Hook = func(p string) {
				if p == PointRestoreMidLoad {
					first := false
					once.Do(func() { first = true })
					if first {
						close(reached)
						<-gate
					}
				}
			}
		})
		opened := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(opened)
		s, err := NewShipper(m, &testPITR{tables: []PITRTable{pitrTable(ref)}}, PITRConfig{SegmentMaxBytes: 4 << 10, BaseAfterBytes: 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.ShipOnce(ctx)
		time.Sleep(30 * time.Millisecond)
		for i := 0; i < 100; i++ {
			logWrite(t, b, ref, i, "b", "", 0)
		}
		time.Sleep(30 * time.Millisecond)
		at := time.Now()
		time.Sleep(30 * time.Millisecond)
		s.ShipOnce(ctx)
		prefix := format.PITRPrefix(account, "pin1", pitrTable(ref).Incarnation())
		var key string
		if err := m.RestorePITRUpTo(ctx, prefix, at, s.LastSegment(prefix), account, "dst", func(ctx context.Context, k string) (*backend.Table, error) {
			key = k
			res, err := b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: "dst", Desc: []byte(`{"restoring":true}`)})
			if err != nil {
				return nil, err
			}
			return res.Table, nil
		}); err != nil {
			t.Fatal(err)
		}
		<-reached
		// While the owner is stopped: a record decided before the instant
		// reaches the log (a backend that publishes records late), is
		// shipped, and a new base is taken.
		pk, sk, raw := item(299, "late")
		rec, _ := json.Marshal(format.PITRRecord{Event: "MODIFY", Keys: json.RawMessage(keysOf(t, raw)), NewImage: raw,
			Time: format.PITRTime(at.Add(-10 * time.Millisecond))})
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: sk,
			Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: raw, Log: rec}, nil }}); err != nil {
			t.Fatal(err)
		}
		s.ShipOnce(ctx)
		plan, err := PlanPITRRestore(ctx, st, prefix, at, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if plan.Replay.records != 101 {
			t.Fatalf("a plan made now: %d records, want 101 (the late record in)", plan.Replay.records)
		}
		plan.Close()
		time.Sleep(300 * time.Millisecond) // the claim is stale by its heartbeat
		other := newManager(t, otherServer(b), st, func(c *Config) {
			c.StaleAfter = 100 * time.Millisecond
			c.Restorer = testRestorer{}
			c.SpoolDir = t.TempDir()
		})
		if err := other.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		if n := counter(t, other, "resumed_restore"); n != 1 {
			t.Fatalf("the other server took the stale job over %v times, want 1", n)
		}
		opened()
		deadline := time.Now().Add(30 * time.Second)
		for m.RestoringFrom(key) || other.RestoringFrom(key) || finished(t, other, "ok") < 1 {
			if time.Now().After(deadline) {
				t.Fatal("the restore does not end")
			}
			time.Sleep(20 * time.Millisecond)
		}
		res, err := b.Scan(ctx, backend.ScanParams{Table: mustTable(t, b, "dst").Ref(), Limit: 2000})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range res.Rows {
			got[keysOf(t, r.Item)] = string(r.Item)
		}
		if len(res.Rows) != 300 {
			t.Fatalf("restored %d items, want 300", len(res.Rows))
		}
		for i := 0; i < 300; i++ {
			if v, want := value(t, got, i), map[bool]string{true: "b", false: "a"}[i < 100]; v != want {
				t.Fatalf("item %d: %s, want %s (the pinned plan)", i, v, want)
			}
		}
	})
}
