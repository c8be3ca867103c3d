package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// importEngine is the engine's side of imports for these tests: a
// table's description is {"import": id, "status": ...}, and an item's
// key is its "pk" string.
type importEngine struct{}

type importDesc struct {
	Import string `json:"import"`
	Status string `json:"status"`
}

func (importEngine) FinishImport(t *backend.Table) ([]byte, error) {
	var d importDesc
	if err := json.Unmarshal(t.Desc, &d); err != nil || d.Status != "CREATING" {
		return nil, errors.New("not an import in progress")
	}
	return json.Marshal(importDesc{Status: "ACTIVE"})
}

func (importEngine) IsImportTarget(t *backend.Table, id string) bool {
	var d importDesc
	return json.Unmarshal(t.Desc, &d) == nil && d.Import == id && d.Status == "CREATING"
}

func (importEngine) ItemLoader(*backend.Table) (func([]byte) ([]byte, []byte, backend.Change, error), error) {
	return func(raw []byte) ([]byte, []byte, backend.Change, error) {
		it, err := attr.DecodeItem(raw)
		if err != nil {
			return nil, nil, backend.Change{}, err
		}
		pk, ok := attr.KeyBytes(it["pk"])
		if !ok {
			return nil, nil, backend.Change{}, errors.New("no string pk")
		}
		return pk, nil, backend.Change{Op: backend.Put, Item: raw}, nil
	}, nil
}

func (importEngine) FinishRestore(*backend.Table) ([]byte, error)          { return nil, errors.New("unused") }
func (importEngine) IsRestoreTarget(*backend.Table, string) bool           { return false }
func (importEngine) TableDescriptionJSON(t *backend.Table) ([]byte, error) { return t.Desc, nil }
func (importEngine) StoredDescription(src []byte) ([]byte, error)          { return src, nil }

// TestImportTakenOver: an IN_PROGRESS import whose server stopped (its
// claim stale) is taken over by another server's reconciler, which
// replaces the partial target by an empty table of the same description
// and imports every object again: the import ends COMPLETED with the
// source's items only (an item the dead attempt wrote and the source does
// not hold is gone). An import whose table is gone ends FAILED.
func TestImportTakenOver(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		jobs := b.Capabilities().Jobs
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "bkt", "in"), 0o700); err != nil {
			t.Fatal(err)
		}
		var lines bytes.Buffer
		const n = 350
		for i := 0; i < n; i++ {
			fmt.Fprintf(&lines, `{"Item":{"pk":{"S":"k%03d"},"v":{"N":"%d"}}}`+"\n", i, i)
		}
		if err := os.WriteFile(filepath.Join(root, "bkt", "in", "data.json"), lines.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		row := func(id, table string) []byte {
			raw, _ := json.Marshal(ImportDescription{ImportArn: "arn:aws:dynamodb:us-east-1:" + account + ":table/" + table + "/import/" + id,
				ImportStatus: ImportInProgress, TableArn: "arn:aws:dynamodb:us-east-1:" + account + ":table/" + table,
				S3BucketSource: S3BucketSource{S3Bucket: "bkt", S3KeyPrefix: "in/"}, InputFormat: "DYNAMODB_JSON", InputCompressionType: "NONE",
				TableCreation: json.RawMessage(`{"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"}]}`), ProcessedItemCount: 42})
			return raw
		}
		const stale, gone = "01796465913882-0000000a", "01796465913882-0000000b"
		desc, _ := json.Marshal(importDesc{Import: stale, Status: "CREATING"})
		res, err := b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: "imp1", Desc: desc})
		if err != nil {
			t.Fatal(err)
		}
		// What the dead attempt wrote: some of the items, and one the
		// source does not hold.
		load, _ := importEngine{}.ItemLoader(nil)
		for _, s := range []string{`{"pk":{"S":"k001"},"v":{"N":"1"}}`, `{"pk":{"S":"junk"}}`} {
			pk, _, ch, err := load([]byte(s))
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Capabilities().Bulk.BulkLoad(ctx, backend.BulkLoadParams{Table: res.Table.Ref(), Items: []backend.BulkItem{{PK: pk, Change: ch}}}); err != nil {
				t.Fatal(err)
			}
		}
		for id, table := range map[string]string{stale: "imp1", gone: "imp2"} {
			if _, err := jobs.InsertJob(ctx, backend.JobRecord{Kind: KindImport, ID: id, Account: account, Status: ImportInProgress,
				Payload: row(id, table), Owner: "dead-server"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(1300 * time.Millisecond)
		other := newManager(t, otherServer(b), memstore.New(), func(c *Config) {
			c.StaleAfter = time.Second
			c.Importer, c.Restorer, c.Describer = importEngine{}, importEngine{}, importEngine{}
			c.Buckets = blobstore.BucketConfig{FilesystemRoot: root}
		})
		if err := other.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(30 * time.Second)
		var r *backend.JobRecord
		for {
			if r, err = jobs.GetJob(ctx, KindImport, stale); err != nil {
				t.Fatal(err)
			}
			if r.Status != ImportInProgress {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the import is still IN_PROGRESS: %+v", r)
			}
			time.Sleep(20 * time.Millisecond)
		}
		var d ImportDescription
		if err := json.Unmarshal(r.Payload, &d); err != nil {
			t.Fatal(err)
		}
		if r.Status != ImportCompleted || r.Owner != other.Owner() || d.ImportedItemCount != n || d.ProcessedItemCount != n || d.ErrorCount != 0 {
			t.Fatalf("the taken-over import: %s %s, %+v", r.Status, r.Owner, d)
		}
		if got := counter(t, other, "restarted_import"); got != 1 {
			t.Fatalf("restarted %v imports, want 1", got)
		}
		tr, err := b.GetTable(ctx, backend.GetTableParams{Account: account, Name: "imp1"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(tr.Table.Desc), `"ACTIVE"`) || tr.Table.ID == res.Table.ID {
			t.Fatalf("the target: %s (id %d, the partial one's %d)", tr.Table.Desc, tr.Table.ID, res.Table.ID)
		}
		var keys []string
		var after *backend.Cursor
		for {
			s, err := b.Scan(ctx, backend.ScanParams{Table: tr.Table.Ref(), After: after, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range s.Rows {
				it, _ := attr.DecodeItem(row.Item)
				keys = append(keys, it["pk"].Str)
			}
			if !s.More || len(s.Rows) == 0 {
				break
			}
			last := s.Rows[len(s.Rows)-1]
			after = &backend.Cursor{PK: last.PK, SK: last.SK}
		}
		if len(keys) != n {
			t.Fatalf("%d items in the target, want %d", len(keys), n)
		}
		for _, k := range keys {
			if k == "junk" {
				t.Fatal("an item of the dead attempt that the source does not hold survived")
			}
		}
		if r, _ := jobs.GetJob(ctx, KindImport, gone); r.Status != ImportFailed || r.Message == "" {
			t.Fatalf("the import whose table is gone: %+v", r)
		}
	})
}

// TestImportMaxErrors: up to backup.import_max_errors bad items an import
// goes on (FAILED with the good items, as on the service); past it the
// import stops FAILED and removes its table.
func TestImportMaxErrors(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "bkt"), 0o700); err != nil {
			t.Fatal(err)
		}
		var lines bytes.Buffer
		for i := 0; i < 50; i++ {
			if i%10 == 3 {
				lines.WriteString("not json\n") // 5 bad lines
				continue
			}
			fmt.Fprintf(&lines, `{"Item":{"pk":{"S":"k%03d"}}}`+"\n", i)
		}
		if err := os.WriteFile(filepath.Join(root, "bkt", "data.json"), lines.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			max     int
			status  string
			table   bool
			message string
		}{{5, ImportFailed, true, "Some of the items"}, {4, ImportFailed, false, "More than 4 items"}} {
			m := newManager(t, b, memstore.New(), func(c *Config) {
				c.Importer, c.Restorer, c.Describer = importEngine{}, importEngine{}, importEngine{}
				c.Buckets = blobstore.BucketConfig{FilesystemRoot: root}
				c.ImportMaxErrors = tc.max
			})
			name := fmt.Sprintf("maxerr%d", tc.max)
			d, err := m.StartImport(ctx, ImportRequest{Account: account, Table: name,
				Desc: ImportDescription{TableArn: "arn:aws:dynamodb:us-east-1:" + account + ":table/" + name,
					S3BucketSource: S3BucketSource{S3Bucket: "bkt", S3KeyPrefix: "data"}, InputFormat: "DYNAMODB_JSON", InputCompressionType: "NONE"},
				Create: func(ctx context.Context, id string) (*backend.Table, error) {
					desc, _ := json.Marshal(importDesc{Import: id, Status: "CREATING"})
					res, err := b.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: name, Desc: desc})
					if err != nil {
						return nil, err
					}
					return res.Table, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			id := d.ImportArn[strings.LastIndexByte(d.ImportArn, '/')+1:]
			deadline := time.Now().Add(30 * time.Second)
			var r *backend.JobRecord
			for {
				if r, err = b.Capabilities().Jobs.GetJob(ctx, KindImport, id); err != nil {
					t.Fatal(err)
				}
				if r.Status != ImportInProgress {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("max %d: still IN_PROGRESS", tc.max)
				}
				time.Sleep(20 * time.Millisecond)
			}
			var got ImportDescription
			_ = json.Unmarshal(r.Payload, &got)
			_, terr := b.GetTable(ctx, backend.GetTableParams{Account: account, Name: name})
			if r.Status != tc.status || got.FailureCode != "ItemValidationError" || !strings.HasPrefix(got.FailureMessage, tc.message) || (terr == nil) != tc.table {
				t.Fatalf("max %d: %s %+v, table present %v (%v)", tc.max, r.Status, got, terr == nil, terr)
			}
		}
	})
}

// TestPipeLines: every line reaches each in order; an error of each
// stops the reader and is answered; the reader's own error comes after
// the lines it parsed before it.
func TestPipeLines(t *testing.T) {
	const n = 1000
	readN := func(stopAt int, rerr error) func(lineFunc) error {
		return func(fn lineFunc) error {
			for i := 1; i <= n; i++ {
				if i == stopAt {
					return rerr
				}
				if err := fn(i, attr.Item{"i": attr.StrValue(fmt.Sprint(i))}, nil); err != nil {
					return err
				}
			}
			return nil
		}
	}
	var got []int
	each := func(line int, it attr.Item, err error) error {
		if err != nil || it["i"].Str != fmt.Sprint(line) {
			return fmt.Errorf("line %d: %v %v", line, it, err)
		}
		got = append(got, line)
		return nil
	}
	if err := pipeLines(readN(0, nil), each); err != nil || len(got) != n || got[n-1] != n {
		t.Fatalf("%v, %d lines", err, len(got))
	}
	got = nil
	bad := errors.New("unreadable")
	if err := pipeLines(readN(301, bad), each); err != bad || len(got) != 300 {
		t.Fatalf("%v, %d lines, want the reader's error after 300", err, len(got))
	}
	got = nil
	full := errors.New("too many")
	err := pipeLines(readN(0, nil), func(line int, it attr.Item, err error) error {
		if line == 200 {
			return full
		}
		return each(line, it, err)
	})
	if err != full || len(got) != 199 {
		t.Fatalf("%v, %d lines, want each's error after 199", err, len(got))
	}
}
