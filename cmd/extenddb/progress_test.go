package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestParseJobStat(t *testing.T) {
	text := `# HELP extenddb_backup_job_items Items...
# TYPE extenddb_backup_job_items gauge
extenddb_backup_job_items{account="000000000000",job="01732908000123-1a2b3c4d",kind="restore",phase="load",table="dst"} 1200
extenddb_backup_job_bytes{account="000000000000",job="01732908000123-1a2b3c4d",kind="restore",phase="load",table="dst"} 1.2288e+06
extenddb_backup_job_total_items{account="000000000000",job="01732908000123-1a2b3c4d",kind="restore",phase="load",table="dst"} 5000
extenddb_backup_job_total_bytes{account="000000000000",job="01732908000123-1a2b3c4d",kind="restore",phase="load",table="dst"} 5.12e+06
extenddb_backup_job_items{account="000000000000",job="01732908000123-1a2b3c4d",kind="backup",phase="write",table="src"} 7
extenddb_backup_job_items{account="000000000000",job="x",kind="restore",phase="load",table="a\"b\\c"} 3
`
	st := parseJobStat(strings.NewReader(text), "restore", "dst", "01732908000123-1a2b3c4d")
	want := jobStat{found: true, phase: "load", items: 1200, bytes: 1228800, totalItems: 5000, totalBytes: 5120000}
	if st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	if st := parseJobStat(strings.NewReader(text), "restore", `a"b\c`, "x"); st.items != 3 {
		t.Fatalf("escaped label: %+v", st)
	}
	if st := parseJobStat(strings.NewReader(text), "backup", "dst", "01732908000123-1a2b3c4d"); st.found {
		t.Fatalf("another job matched: %+v", st)
	}
}

// Not on a terminal: plain progress lines, no bar.
func TestProgressViewPlainLines(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	v := newProgressView(w, "restore", 0)
	if v.bar != nil {
		t.Fatal("a bar on a pipe")
	}
	v.update("CREATING", jobStat{found: true, phase: "load", items: 500, bytes: 3 << 20, totalItems: 1000})
	v.finish()
	w.Close()
	out := make([]byte, 4096)
	n, _ := r.Read(out)
	line := string(out[:n])
	for _, s := range []string{"restore load", "500/1000 items", "3.0 MiB", "items/s", "ETA", "elapsed"} {
		if !strings.Contains(line, s) {
			t.Fatalf("line %q lacks %q", line, s)
		}
	}
	if strings.Count(line, "\n") != 1 {
		t.Fatalf("want one line, got %q", line)
	}
}

// TestScrapeJobFiltered: scrapeJob asks /metrics for the job series only
// (promhttp's name[] filter) and still finds the job.
func TestScrapeJobFiltered(t *testing.T) {
	reg := prometheus.NewRegistry()
	labels := []string{"account", "job", "kind", "phase", "table"}
	items := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "extenddb_backup_job_items", Help: "h"}, labels)
	total := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "extenddb_backup_job_total_items", Help: "h"}, labels)
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "extenddb_table_items", Help: "h"})
	reg.MustRegister(items, total, other)
	items.WithLabelValues("000000000000", "j1", "backup", "write", "src").Set(42)
	total.WithLabelValues("000000000000", "j1", "backup", "write", "src").Set(100)
	var query url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.Query()
		promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
	}))
	defer srv.Close()
	st := scrapeJob(t.Context(), srv.URL, "backup", "src", "j1")
	if !st.found || st.items != 42 || st.totalItems != 100 || st.phase != "write" {
		t.Fatalf("scraped %+v", st)
	}
	if names := query["name[]"]; len(names) != 4 {
		t.Fatalf("asked for %v", names)
	}
}
