package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/storage"
)

// statsBackend is a backend whose only behaviour is its name and Stats.
type statsBackend struct {
	storage.Backend
	st storage.Stats
}

func (b *statsBackend) Name() string         { return "postgres" }
func (b *statsBackend) Stats() storage.Stats { return b.st }
func (b *statsBackend) Capabilities() storage.Capabilities {
	return storage.Capabilities{Stats: b}
}

// TestPipeliningMetrics: a backend that reports pipelining counters gets
// them on /metrics, read at each scrape; one that does not gets none.
func TestPipeliningMetrics(t *testing.T) {
	be := &statsBackend{st: storage.Stats{HasPipelining: true, Retries: -1}}
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
	registerStorageMetrics(reg, &statsBackend{st: storage.Stats{Retries: -1}})
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("a backend without pipelining exports %d metric families", len(mfs))
	}
}
