package backup

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store"
	"github.com/extenddb/extenddb/internal/store/memstore"
)

// testImporter is testRestorer with the import side: the table's
// description marks its import as the engine's does ("importJob").
type testImporter struct{ testRestorer }

func (testImporter) IsImportTarget(t *storage.Table, id string) bool {
	return strings.Contains(string(t.Desc), `"importJob":"`+id+`"`)
}

func (testImporter) FinishImport(t *storage.Table) ([]byte, error) {
	return []byte(strings.Replace(string(t.Desc), `"importJob"`, `"wasImport"`, 1)), nil
}

// importFixture writes a bucket "bkt" under a new root with n items (and
// bad lines) and answers the root.
func importFixture(t *testing.T, n, bad int) string {
	root := t.TempDir()
	dir := filepath.Join(root, "bkt", "in")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "bkt"), 0o700); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"Item":{"pk":{"S":"p%d"},"sk":{"N":"%d"},"v":{"S":"x"}}}`+"\n", i%13, i)
	}
	for range bad {
		b.WriteString("not json\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

func importRequest(id, table string) []byte {
	req := map[string]any{
		"id": id, "tableName": table,
		"desc": map[string]any{"ImportArn": "arn:aws:dynamodb:us-east-1:000000000000:table/" + table + "/import/" + id,
			"ImportStatus": ImportInProgress, "InputFormat": "DYNAMODB_JSON", "InputCompressionType": "NONE",
			"S3BucketSource": map[string]any{"S3Bucket": "bkt", "S3KeyPrefix": "in/"}},
		"table": json.RawMessage(`{"desc":{"TableId":"tid-` + id + `","TableStatus":"CREATING"},"importJob":"` + id + `"}`),
		"keys":  []map[string]any{{"name": "pk", "type": "S"}, {"name": "sk", "type": "N"}},
	}
	raw, _ := json.Marshal(req)
	return raw
}

func waitImport(t *testing.T, jobs storage.JobCatalog, id string) (*storage.JobRecord, ImportDescription) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := jobs.GetJob(t.Context(), KindImport, id)
		if err != nil {
			t.Fatal(err)
		}
		if r != nil && r.Status != ImportInProgress {
			var row importRow
			_ = json.Unmarshal(r.Payload, &row)
			d, _ := row.desc()
			return r, d
		}
		if time.Now().After(deadline) {
			t.Fatalf("import %s still in progress: %+v", id, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func countRows(t *testing.T, b storage.Backend, name string) int {
	res, err := b.Scan(t.Context(), storage.ScanParams{Table: mustTable(t, b, name).Ref(), Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Rows)
}

// TestImportTakeoverRestarts: an import whose server died mid-load (its
// claim stale, its table CREATING with part of the items and one that is
// not in the source) is restarted by the reconciler on a new table, which
// ends holding exactly the source's items.
func TestImportTakeoverRestarts(t *testing.T) {
	forEach(t, func(t *testing.T, b storage.Backend) {
		root := importFixture(t, 1200, 0)
		m := newManager(t, b, memstore.New(), func(c *Config) {
			c.StaleAfter = 200 * time.Millisecond
			c.Restorer = testImporter{}
			c.Buckets = store.BucketConfig{FilesystemRoot: root}
		})
		jobs := b.Capabilities().Jobs
		id := "01796465913882-0000000a"
		req := importRequest(id, "imp")
		var row importRow
		_ = json.Unmarshal(req, &row)
		if _, err := jobs.InsertJob(t.Context(), storage.JobRecord{Kind: KindImport, ID: id, Account: account, Status: ImportInProgress,
			Payload: req, Owner: "dead-server"}); err != nil {
			t.Fatal(err)
		}
		res, err := b.CreateTable(t.Context(), storage.CreateTableParams{Account: account, Name: "imp", Desc: row.Table})
		if err != nil {
			t.Fatal(err)
		}
		put(t, b, res.Table.Ref(), 99999, "left by the dead job")
		time.Sleep(300 * time.Millisecond)
		if err := m.Reconcile(t.Context()); err != nil {
			t.Fatal(err)
		}
		r, d := waitImport(t, jobs, id)
		if r.Status != ImportCompleted || d.ImportedItemCount != 1200 || d.ProcessedItemCount != 1200 || d.ErrorCount != 0 || r.Generation != 2 {
			t.Fatalf("restarted import: %+v %+v", r, d)
		}
		if n := countRows(t, b, "imp"); n != 1200 {
			t.Fatalf("table holds %d items, want the source's 1200", n)
		}
		if tb := mustTable(t, b, "imp"); tb.ID == res.Table.ID || strings.Contains(string(tb.Desc), "importJob") {
			t.Fatalf("the table was not re-created and finished: %s", tb.Desc)
		}
	})
}

// TestImportErrorBound: up to ImportMaxErrors bad items the import loads
// the rest and ends FAILED with the table kept; past it, it stops and
// removes the table.
func TestImportErrorBound(t *testing.T) {
	forEach(t, func(t *testing.T, b storage.Backend) {
		for _, c := range []struct {
			bad       int
			wantTable bool
		}{{3, true}, {8, false}} {
			root := importFixture(t, 700, c.bad)
			m := newManager(t, b, memstore.New(), func(cfg *Config) {
				cfg.Restorer = testImporter{}
				cfg.Buckets = store.BucketConfig{FilesystemRoot: root}
				cfg.ImportMaxErrors = 5
			})
			id := fmt.Sprintf("01796465913882-%08x", c.bad)
			name := fmt.Sprintf("imp%d", c.bad)
			if _, err := m.StartImport(t.Context(), account, importRequest(id, name)); err != nil {
				t.Fatal(err)
			}
			r, d := waitImport(t, b.Capabilities().Jobs, id)
			if r.Status != ImportFailed || d.FailureCode != "ItemValidationError" || d.ErrorCount != int64(c.bad) || d.FailureMessage == "" {
				t.Fatalf("%d bad lines: %+v %+v", c.bad, r, d)
			}
			_, err := b.GetTable(t.Context(), storage.GetTableParams{Account: account, Name: name})
			if c.wantTable {
				if err != nil || countRows(t, b, name) != 700 || d.ImportedItemCount != 700 {
					t.Fatalf("%d bad lines: table %v, imported %d", c.bad, err, d.ImportedItemCount)
				}
			} else if !storage.IsKind(err, storage.KindTableNotFound) {
				t.Fatalf("%d bad lines: the table was kept (%v)", c.bad, err)
			}
		}
	})
}
