package backup

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// jobGauges reads the per-job progress gauges of a registry: name ->
// labels of the series -> value.
func jobGauges(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + ","
			}
			if out[mf.GetName()] == nil {
				out[mf.GetName()] = map[string]float64{}
			}
			out[mf.GetName()][key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return out
}

// A running backup and a running restore show their progress on /metrics
// (items, bytes, the restore's totals and phase); the series go when the
// job ends.
func TestJobProgressMetrics(t *testing.T) {
	b := backends(t)[0].open(t)
	ref := createTable(t, b, "prog")
	for i := range 300 {
		put(t, b, ref, i, "v")
	}
	reg := prometheus.NewRegistry()
	held := make(chan string)
	release := make(chan struct{})
	hold := map[string]bool{PointBeforeManifest: true, PointRestoreBeforeActive: true}
	m := newManager(t, b, memstore.New(), func(c *Config) {
		c.Registerer = reg
		c.Restorer = testRestorer{}
		c.SpoolDir = t.TempDir()
		c.Hook = func(p string) {
			if hold[p] {
				held <- p
				<-release
			}
		}
	})
	rec, err := m.CreateBackup(t.Context(), account, "prog", "progress")
	if err != nil {
		t.Fatal(err)
	}
	if p := <-held; p != PointBeforeManifest {
		t.Fatalf("held at %s", p)
	}
	g := jobGauges(t, reg)
	key := "account=" + account + ",job=" + rec.BackupID + ",kind=backup,phase=finish,table=prog,"
	if g["extenddb_backup_job_items"][key] != 300 || g["extenddb_backup_job_bytes"][key] < 300*100 {
		t.Fatalf("backup progress: %v", g)
	}
	release <- struct{}{}
	bk := *waitStatus(t, m, rec.ARN, backend.BackupAvailable)
	// The backup is AVAILABLE from its final catalog write; its job ends
	// its progress when its goroutine returns, just after: wait for that
	// (the running-jobs gauge back to 0), then the series must be gone.
	for deadline := time.Now().Add(20 * time.Second); ; {
		g := jobGauges(t, reg)
		if g["extenddb_backup_jobs_running"]["kind=backup,"] == 0 {
			if len(g["extenddb_backup_job_items"]) != 0 {
				t.Fatalf("a finished backup still shows progress: %v", g)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the backup job still runs 20 s after its backup is AVAILABLE: %v", g)
		}
		time.Sleep(10 * time.Millisecond)
	}

	if err := restoreInto(t.Context(), m, b, bk, "progdst"); err != nil {
		t.Fatal(err)
	}
	if p := <-held; p != PointRestoreBeforeActive {
		t.Fatalf("held at %s", p)
	}
	g = jobGauges(t, reg)
	key = "account=" + account + ",job=" + rec.BackupID + ",kind=restore,phase=activate,table=progdst,"
	if g["extenddb_backup_job_items"][key] != 300 || g["extenddb_backup_job_total_items"][key] != 300 ||
		g["extenddb_backup_job_bytes"][key] != g["extenddb_backup_job_total_bytes"][key] {
		t.Fatalf("restore progress: %v", g)
	}
	close(release)
	// The job frees its backup (restoresRunning) as soon as the target is
	// ACTIVE and ends its progress when its goroutine returns, after the
	// final catalog write: wait for the latter.
	deadline := time.Now().Add(20 * time.Second)
	for {
		g := jobGauges(t, reg)
		if len(g["extenddb_backup_job_items"]) == 0 && !m.restoresRunning(bk.ARN) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a finished restore still shows progress after 20 s: %v", g)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A failed job stays on /metrics with its reason for failedKeep, at most
// failedMax of them, the newest kept; the reason label is cut at a rune
// boundary.
func TestJobFailuresOnMetrics(t *testing.T) {
	s := newProgressSet()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	now := time.Now()
	s.fail(kindRestore, "000000000000", "old", "b0", "long ago", now.Add(-2*failedKeep))
	long := strings.Repeat("é", reasonMaxLen) // two bytes each
	s.fail(kindBackup, "000000000000", "src", "b1", long, now)
	p := s.start(kindRestore, "000000000000", "dst", "b2", "load")
	p.fail(errors.New("data file 000001: checksum mismatch"))
	p.done()
	g := jobGauges(t, reg)["extenddb_backup_job_failed"]
	if len(g) != 2 {
		t.Fatalf("failed series %v, want the two recent ones", g)
	}
	want := "account=000000000000,job=b2,kind=restore,reason=data file 000001: checksum mismatch,table=dst,"
	if _, ok := g[want]; !ok {
		t.Errorf("no series %q in %v", want, g)
	}
	for k := range g {
		if strings.Contains(k, "table=src") {
			r := strings.Split(strings.Split(k, "reason=")[1], ",table=")[0]
			if len(r) > reasonMaxLen || !utf8.ValidString(r) || !strings.HasPrefix(long, r) {
				t.Errorf("reason label %d bytes, valid %v", len(r), utf8.ValidString(r))
			}
		}
	}
	for i := range failedMax + 5 {
		s.fail(kindBackup, "000000000000", "t", fmt.Sprint(i), "x", now)
	}
	g = jobGauges(t, reg)["extenddb_backup_job_failed"]
	if len(g) != failedMax {
		t.Fatalf("%d failed series, want %d", len(g), failedMax)
	}
	if _, ok := g[fmt.Sprintf("account=000000000000,job=%d,kind=backup,reason=x,table=t,", failedMax+4)]; !ok {
		t.Errorf("the newest failure was dropped")
	}
}
