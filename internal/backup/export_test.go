package backup

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store/memstore"
)

// TestStaleExportFails: an IN_PROGRESS export whose server stopped (its
// claim stale) is marked FAILED by the reconciler, with a failure code
// and message; a live one is left alone.
func TestStaleExportFails(t *testing.T) {
	forEach(t, func(t *testing.T, b storage.Backend) {
		jobs := b.Capabilities().Jobs
		m := newManager(t, b, memstore.New(), func(c *Config) { c.StaleAfter = 200 * time.Millisecond })
		d, _ := json.Marshal(ExportDescription{ExportArn: "arn:aws:dynamodb:us-east-1:000000000000:table/t/export/01796465913882-27c99ca6",
			ExportStatus: ExportInProgress, TableArn: "arn:aws:dynamodb:us-east-1:000000000000:table/t", S3Bucket: "b", ExportFormat: "DYNAMODB_JSON"})
		for _, id := range []string{"01796465913882-27c99ca6", "01796465913882-00000001"} {
			if _, err := jobs.InsertJob(t.Context(), storage.JobRecord{Kind: KindExport, ID: id, Account: account, Status: ExportInProgress,
				Payload: d, Owner: "dead-server"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(300 * time.Millisecond)
		// One of them is heartbeaten by its (live) owner just before.
		if _, err := jobs.HeartbeatJob(t.Context(), storage.HeartbeatJobParams{Kind: KindExport, ID: "01796465913882-00000001", Owner: "dead-server", Generation: 1}); err != nil {
			t.Fatal(err)
		}
		if err := m.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		r, err := jobs.GetJob(t.Context(), KindExport, "01796465913882-27c99ca6")
		if err != nil || r.Status != ExportFailed {
			t.Fatalf("stale export: %+v, %v", r, err)
		}
		var got ExportDescription
		if err := json.Unmarshal(r.Payload, &got); err != nil || got.ExportStatus != ExportFailed || got.FailureCode == "" || got.FailureMessage == "" || got.EndTime == 0 {
			t.Fatalf("stale export's description: %+v, %v", got, err)
		}
		if r, _ := jobs.GetJob(t.Context(), KindExport, "01796465913882-00000001"); r.Status != ExportInProgress {
			t.Fatalf("a live export was failed: %+v", r)
		}
	})
}
