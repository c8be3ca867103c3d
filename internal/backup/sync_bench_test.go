package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// cloneStore fills a filesystem store with n complete backups: one real
// backup taken by the job, then n-1 copies of it under other backup ids
// of the same instant (manifest rewritten for the new id, sidecar
// recomputed), as `extenddb backup sync` meets them after a catalog loss.
func cloneStore(b *testing.B, n int) string {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	db, err := sqlite.Open(ctx, sqlite.Options{Path: dir + "/src.sqlite"})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	st, err := blobstore.NewFS(dir + "/store")
	if err != nil {
		b.Fatal(err)
	}
	t := &testing.T{}
	ref := createTable(t, db, "bench")
	for i := range 50 {
		put(t, db, ref, i, "v")
	}
	cfg := Config{Backend: db, Store: st, Describer: descJSON{}, HeartbeatInterval: time.Second, StaleAfter: time.Minute, ReconcileInterval: time.Hour}
	m, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		b.Fatal(err)
	}
	rec, err := m.CreateBackup(ctx, account, "bench", "b")
	if err != nil {
		b.Fatal(err)
	}
	for {
		r, err := m.GetBackup(ctx, rec.ARN)
		if err != nil {
			b.Fatal(err)
		}
		if r.Status == backend.BackupAvailable {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.Close()
	root := dir + "/store"
	src := filepath.Join(root, rec.Prefix)
	manifest, err := os.ReadFile(filepath.Join(src, format.ManifestName))
	if err != nil {
		b.Fatal(err)
	}
	sc, err := os.ReadFile(filepath.Join(src, format.SidecarName))
	if err != nil {
		b.Fatal(err)
	}
	scLines, err := format.ParseSidecarLines(sc)
	if err != nil {
		b.Fatal(err)
	}
	id := rec.BackupID
	millis := id[:strings.IndexByte(id, '-')]
	for i := 1; i < n; i++ {
		nid := fmt.Sprintf("%s-%08x", millis, i)
		dst := filepath.Join(filepath.Dir(src), nid)
		err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, p)
			to := filepath.Join(dst, rel)
			switch {
			case d.IsDir():
				return os.MkdirAll(to, 0o700)
			case rel == format.ManifestName || rel == format.SidecarName:
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(to, bytes.ReplaceAll(data, []byte(id), []byte(nid)), 0o600)
		})
		if err != nil {
			b.Fatal(err)
		}
		mb := bytes.ReplaceAll(manifest, []byte(id), []byte(nid))
		if err := os.WriteFile(filepath.Join(dst, format.ManifestName), mb, 0o600); err != nil {
			b.Fatal(err)
		}
		// The sidecar names every file of the backup (format v2): each
		// line's sum is recomputed over the copy.
		lines := slices.Clone(scLines)
		for j := range lines {
			data, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(lines[j].Name)))
			if err != nil {
				b.Fatal(err)
			}
			lines[j].Sum = sha256.Sum256(data)
		}
		if err := os.WriteFile(filepath.Join(dst, format.SidecarName), format.SidecarOf(lines), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	// The catalog is lost: only the store is left.
	return root
}

// heapPeak samples the live heap while it runs.
type heapPeak struct {
	stop chan struct{}
	wg   sync.WaitGroup
	peak atomic.Uint64
}

func startHeapPeak() *heapPeak {
	h := &heapPeak{stop: make(chan struct{})}
	s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			rtmetrics.Read(s)
			if v := s[0].Value.Uint64(); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapPeak) done() uint64 {
	close(h.stop)
	h.wg.Wait()
	return h.peak.Load()
}

// BenchmarkSyncFS: `backup sync` rebuilding a lost SQLite catalog from a
// filesystem store of n backups (each adopted: sidecar and manifest read
// and checked, data file sizes checked, a row written). Reported: the
// time per sync, the peak live heap above the heap before it, and the
// bytes allocated per backup; the acceptance is 1,000 backups in under
// 10 s with a peak that does not grow faster than the rows written.
func BenchmarkSyncFS(b *testing.B) {
	for _, n := range []int{250, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			root := cloneStore(b, n)
			ctx := context.Background()
			var peak, base uint64
			var allocs uint64
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				db, err := sqlite.Open(ctx, sqlite.Options{Path: fmt.Sprintf("%s/../cat%d.sqlite", root, i)})
				if err != nil {
					b.Fatal(err)
				}
				st, err := blobstore.NewFS(root)
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				base, allocs = ms.HeapAlloc, ms.TotalAlloc
				h := startHeapPeak()
				b.StartTimer()
				got, err := Sync(ctx, db, st, descJSON{}, SyncOptions{AdoptStore: true})
				b.StopTimer()
				p := h.done()
				runtime.ReadMemStats(&ms)
				allocs = ms.TotalAlloc - allocs
				if p > base && p-base > peak {
					peak = p - base
				}
				if err != nil || outcomes(got)[OutcomeAdopted] != n {
					b.Fatalf("sync: %v %v", outcomes(got), err)
				}
				db.Close()
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(allocs)/float64(n), "alloc-B/backup")
		})
	}
}
