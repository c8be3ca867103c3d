package server

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backup/plan"
)

// statsBackend is a backend whose only behaviour is its name and Stats.
type statsBackend struct {
	backend.Backend
	st backend.Stats
}

func (b *statsBackend) Name() string         { return "postgres" }
func (b *statsBackend) Stats() backend.Stats { return b.st }
func (b *statsBackend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Stats: b}
}

// TestPipeliningMetrics: a backend that reports pipelining counters gets
// them on /metrics, read at each scrape; one that does not gets none.
func TestPipeliningMetrics(t *testing.T) {
	be := &statsBackend{st: backend.Stats{HasPipelining: true, Retries: -1}}
	reg := prometheus.NewRegistry()
	registerStorageMetrics(reg, be)
	be.st.SpeculativeApplied, be.st.SpeculativeRefused = 7, 2
	be.st.WriteBatches, be.st.WriteBatchWrites = 3, 11
	be.st.ReadPipelines, be.st.ReadPipelineGets = 5, 40

	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					name += "/" + l.GetValue()
				}
				if l.GetName() == "backend" && l.GetValue() != "postgres" {
					t.Errorf("%s: backend label %q", mf.GetName(), l.GetValue())
				}
			}
			got[name] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"extenddb_storage_speculative_writes_total/applied": 7,
		"extenddb_storage_speculative_writes_total/refused": 2,
		"extenddb_storage_write_batches_total":              3,
		"extenddb_storage_write_batch_writes_total":         11,
		"extenddb_storage_read_pipelines_total":             5,
		"extenddb_storage_read_pipeline_gets_total":         40,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("metrics %v, want exactly %v", got, want)
	}

	reg = prometheus.NewRegistry()
	registerStorageMetrics(reg, &statsBackend{st: backend.Stats{Retries: -1}})
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("a backend without pipelining exports %d metric families", len(mfs))
	}
}

// TestServerInfoMetric: the backend's name and the backup store are
// exported for every backend, the memory one (no Stats) included.
func TestServerInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	registerServerInfo(reg, &namedBackend{name: "memory"}, backupStore{desc: "disabled"})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "extenddb_server_info" {
		t.Fatalf("metrics %v", mfs)
	}
	labels := map[string]string{}
	for _, l := range mfs[0].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["backend"] != "memory" || labels["backup_store"] != "disabled" || mfs[0].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Fatalf("extenddb_server_info %v", mfs[0].GetMetric()[0])
	}
}

type namedBackend struct {
	backend.Backend
	name string
}

func (b *namedBackend) Name() string { return b.name }

// TestPlanInfoCollector: each plan's definition and its next slot.
func TestPlanInfoCollector(t *testing.T) {
	nightly, err := plan.Compile(plan.Spec{Name: "nightly", Account: "000000000000", Tables: []string{"orders", "users-*"},
		Cron: "0 3 * * *", TimeZone: "Europe/Paris", KeepLast: 7})
	if err != nil {
		t.Fatal(err)
	}
	hourly, err := plan.Compile(plan.Spec{Name: "six", Account: "111122223333", Tables: []string{"*"}, Every: 6 * time.Hour, MaxAge: 72 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := newPlanInfoCollector([]*plan.Plan{nightly, hourly})
	now := time.Date(2026, 12, 5, 13, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			ls := map[string]string{}
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
			}
			switch mf.GetName() {
			case "extenddb_backup_plan_info":
				got["info/"+ls["plan"]] = strings.Join([]string{ls["account"], ls["tables"], ls["schedule"], ls["retention"]}, "|")
			case "extenddb_backup_plan_next_run_timestamp_seconds":
				got["next/"+ls["plan"]] = time.Unix(int64(m.GetGauge().GetValue()), 0).UTC().Format(time.RFC3339)
			}
		}
	}
	want := map[string]string{
		"info/nightly": "000000000000|orders,users-*|0 3 * * * Europe/Paris|" + nightly.Retention(),
		"info/six":     "111122223333|*|every 6h0m0s|" + hourly.Retention(),
		"next/nightly": "2026-12-06T02:00:00Z", // 03:00 in Paris (UTC+1)
		"next/six":     "2026-12-05T18:00:00Z",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
