package backup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store"
)

// pitrFixture is a table with a shipped history in a directory store: a
// base of 40 items, then 120 records in many segments.
type pitrFixture struct {
	b      storage.Backend
	root   string
	st     store.Store
	m      *Manager
	s      *Shipper
	ref    storage.TableRef
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

func newPITRFixture(t *testing.T, b storage.Backend, name string) *pitrFixture {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := store.NewFS(root)
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
func (f *pitrFixture) restore(t *testing.T, at time.Time, dst string) storage.RestoreRecord {
	t.Helper()
	ctx := context.Background()
	var job string
	if err := f.m.RestorePITRUpTo(ctx, f.prefix, at, f.s.LastSegment(f.prefix), account, dst, func(ctx context.Context, key string) (*storage.Table, error) {
		job = key
		res, err := f.b.CreateTable(ctx, storage.CreateTableParams{Account: account, Name: dst, Desc: []byte(`{"restoring":true}`)})
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
func (f *pitrFixture) waitJob(t *testing.T, job, dst string) storage.RestoreRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows, err := f.m.rcat.ListRestores(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.BackupARN != job || r.TableName != dst || r.Status == storage.RestoreRunning {
				continue
			}
			_, gerr := f.b.GetTable(context.Background(), storage.GetTableParams{Account: account, Name: dst})
			if r.Status != storage.RestoreFailed || storage.IsKind(gerr, storage.KindTableNotFound) {
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
	forEach(t, func(t *testing.T, b storage.Backend) {
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
			if row.Status != storage.RestoreFailed || !strings.Contains(row.Message, c.named) {
				t.Fatalf("%s: job %s %q, want FAILED naming %s", c.name, row.Status, row.Message, c.named)
			}
			if n := f.hooks.count(PointRestoreMidLoad); n != before {
				t.Fatalf("%s: the job wrote items before failing", c.name)
			}
			if _, err := b.GetTable(context.Background(), storage.GetTableParams{Account: account, Name: "dst-" + c.name}); !storage.IsKind(err, storage.KindTableNotFound) {
				t.Fatalf("%s: the target is still there: %v", c.name, err)
			}
		}
		row := f.restore(t, at, "dst-ok")
		if row.Status != storage.RestoreDone {
			t.Fatalf("the undamaged history: %s %q", row.Status, row.Message)
		}
		res, err := b.Scan(context.Background(), storage.ScanParams{Table: mustTable(t, b, "dst-ok").Ref(), Limit: 1000})
		if err != nil || len(res.Rows) != 120 {
			t.Fatalf("restored %d items (%v), want 120", len(res.Rows), err)
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
	if _, err := planPITR(ctx, f.st, f.prefix, at, pin); err != nil {
		t.Fatal(err)
	}
	last := segs[len(segs)-1]
	os.Remove(f.path(format.SegmentSidecarKey(last)))
	if _, err := planPITR(ctx, f.st, f.prefix, at, pin); err == nil || !strings.Contains(err.Error(), format.SegmentSidecarKey(last)) {
		t.Fatalf("the pinned tail's sidecar removed: %v", err)
	}
	os.Remove(f.path(last))
	if _, err := planPITR(ctx, f.st, f.prefix, at, pin); err == nil || !strings.Contains(err.Error(), last) {
		t.Fatalf("the pinned tail removed: %v", err)
	}
	baseKey := format.BaseKey(f.prefix, pin.Base)
	os.Remove(f.path(baseKey))
	if _, err := planPITR(ctx, f.st, f.prefix, at, pin); err == nil || !strings.Contains(err.Error(), baseKey) {
		t.Fatalf("the pinned base's position object removed: %v", err)
	}
}
