package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/format/awsexport"
)

// exportRow is an export row's payload as the engine writes it (the
// members the job reads).
func exportRow(id, prefix string, at time.Time) []byte {
	raw, _ := json.Marshal(map[string]any{
		"ExportArn": "arn:aws:dynamodb:us-east-1:" + account + ":table/exp1/export/" + id, "ExportId": id,
		"ExportStatus": exportInProgress, "TableArn": "arn:aws:dynamodb:us-east-1:" + account + ":table/exp1",
		"TableId": "tid", "StartTime": float64(time.Now().UnixMilli()) / 1000, "S3Bucket": "bkt", "S3Prefix": "p",
		"S3SseAlgorithm": "AES256", "ExportFormat": awsexport.FormatJSON, "HistoryPrefix": prefix, "ExportTimeMs": at.UnixMilli(),
	})
	return raw
}

// TestExportTakenOver: an IN_PROGRESS export whose server stopped (its
// claim stale) is taken over by another server's reconciler, which
// removes the dead attempt's objects and writes the export again: its
// image is the point-in-time plan's (base, then the replay up to the
// instant). A live export is left alone; an export whose history cannot
// be read ends FAILED with its objects removed.
func TestExportTakenOver(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		jobs := b.Capabilities().Jobs
		if jobs == nil {
			t.Fatalf("the %s backend has no job catalog", b.Name())
		}
		st := memstore.New()
		ref := createTable(t, b, "exp1")
		for i := 0; i < 120; i++ {
			logWrite(t, b, ref, i, "a", "", 0)
		}
		m := newManager(t, b, st, func(c *Config) { c.StaleAfter = 100 * time.Millisecond })
		s := newShipper(t, m, &testPITR{tables: []PITRTable{pitrTable(ref)}})
		s.ShipOnce(ctx)
		time.Sleep(30 * time.Millisecond)
		for i := 0; i < 50; i++ {
			logWrite(t, b, ref, i, "b", "", 0)
		}
		for i := 50; i < 70; i++ {
			logWrite(t, b, ref, i, "", "", 0)
		}
		time.Sleep(30 * time.Millisecond)
		at := time.Now()
		time.Sleep(30 * time.Millisecond)
		logWrite(t, b, ref, 0, "late", "", 0)
		s.ShipOnce(ctx)
		prefix := format.PITRPrefix(account, "exp1", pitrTable(ref).Incarnation())

		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "bkt"), 0o700); err != nil {
			t.Fatal(err)
		}
		buckets := blobstore.BucketConfig{FilesystemRoot: root}
		bst, err := blobstore.OpenBucket(ctx, buckets, "bkt", "")
		if err != nil {
			t.Fatal(err)
		}
		const stale, live, broken = "01796465913882-27c99ca6", "01796465913882-00000001", "01796465913882-00000002"
		// The dead attempt's objects.
		for _, k := range []string{"_started", "data/aaaaaaaaaaaaaaaaaaaaaaaaaa.json.gz"} {
			for _, id := range []string{stale, broken} {
				if err := bst.Put(ctx, awsexport.Dir("p", id)+"/"+k, bytes.NewReader([]byte("partial"))); err != nil {
					t.Fatal(err)
				}
			}
		}
		for id, hist := range map[string]string{stale: prefix, live: prefix, broken: "000000000000/none/pitr/x"} {
			if _, err := jobs.InsertJob(ctx, backend.JobRecord{Kind: jobKindExport, ID: id, Account: account, Status: exportInProgress,
				Payload: exportRow(id, hist, at), Owner: "dead-server"}); err != nil {
				t.Fatal(err)
			}
		}
		// Stale after a second; the live one's owner renews its claim just
		// before the reconciler looks (a second of margin for a loaded
		// machine).
		time.Sleep(1300 * time.Millisecond)
		if r, err := jobs.HeartbeatJob(ctx, backend.HeartbeatJobParams{Kind: jobKindExport, ID: live, Owner: "dead-server", Generation: 1}); err != nil || !r.Matched {
			t.Fatalf("heartbeat: %+v %v", r, err)
		}
		other := newManager(t, otherServer(b), st, func(c *Config) { c.StaleAfter = time.Second })
		x := NewExports(other, ExportsConfig{Jobs: jobs, Buckets: buckets, MaxFileBytes: 2000})
		if err := other.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		x.Wait()
		if n := counter(t, other, "resumed_export"); n != 2 {
			t.Fatalf("took over %v exports, want 2 (the stale and the broken one)", n)
		}
		r, err := jobs.GetJob(ctx, jobKindExport, stale)
		if err != nil || r.Status != exportCompleted || r.Generation != 2 || r.Owner != other.Owner() {
			t.Fatalf("the stale export: %+v, %v", r, err)
		}
		var done struct {
			ItemCount      int64  `json:"ItemCount"`
			ExportManifest string `json:"ExportManifest"`
			ExportStatus   string `json:"ExportStatus"`
			EndTime        float64
		}
		if err := json.Unmarshal(r.Payload, &done); err != nil || done.ExportStatus != exportCompleted || done.EndTime == 0 {
			t.Fatalf("payload %s: %v", r.Payload, err)
		}
		plan, err := PlanPITRRestore(ctx, st, prefix, at, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		want := restored(t, plan)
		var files []awsexport.FileEntry
		for _, line := range bytes.Split(bytes.TrimSpace(read(t, bst, awsexport.Dir("p", stale)+"/manifest-files.json")), []byte("\n")) {
			var f awsexport.FileEntry
			if err := json.Unmarshal(line, &f); err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		got := map[string]string{}
		for _, f := range files {
			if err := awsexport.ReadDataFile(bytes.NewReader(read(t, bst, f.DataFileS3Key)), awsexport.FormatJSON, func(it attr.Item) error {
				raw := attr.EncodeItem(it)
				got[keysOf(t, raw)] = string(raw)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if len(files) < 2 || len(got) != len(want) || int64(len(got)) != done.ItemCount {
			t.Fatalf("%d files, %d items exported, %d in the plan, ItemCount %d", len(files), len(got), len(want), done.ItemCount)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("item %s: exported %q, plan %q", k, got[k], v)
			}
		}
		if value(t, got, 0) != "b" || value(t, got, 60) != "absent" || value(t, got, 100) != "a" {
			t.Fatalf("image: 0=%s 60=%s 100=%s", value(t, got, 0), value(t, got, 60), value(t, got, 100))
		}
		// The dead attempt's data file is gone; the new layout is whole.
		objs, err := bst.List(ctx, awsexport.Dir("p", stale))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if filepath.Base(o.Key) == "aaaaaaaaaaaaaaaaaaaaaaaaaa.json.gz" {
				t.Fatalf("the dead attempt's object %s survived", o.Key)
			}
		}
		if len(objs) != 5+len(files) {
			t.Fatalf("%d objects, want 5 + %d data files", len(objs), len(files))
		}
		// The broken one failed, leaving nothing; the live one is untouched.
		r, _ = jobs.GetJob(ctx, jobKindExport, broken)
		if r.Status != exportFailed || r.Message == "" {
			t.Fatalf("the broken export: %+v", r)
		}
		if objs, _ := bst.List(ctx, awsexport.Dir("p", broken)); len(objs) != 0 {
			t.Fatalf("a failed export left %v", objs)
		}
		if r, _ := jobs.GetJob(ctx, jobKindExport, live); r.Status != exportInProgress || r.Owner != "dead-server" {
			t.Fatalf("a live export was taken: %+v", r)
		}
	})
}

func read(t *testing.T, st blobstore.Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(rc); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestIncrementalExport: an incremental export holds one line per item
// written in [from, to): its key, its last image (none when deleted) and
// the time of its last write; writes before from or at to and after are
// left out.
func TestIncrementalExport(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		jobs := b.Capabilities().Jobs
		st := memstore.New()
		ref := createTable(t, b, "exp1")
		for i := 0; i < 10; i++ {
			logWrite(t, b, ref, i, "a", "", 0)
		}
		m := newManager(t, b, st, nil)
		s := newShipper(t, m, &testPITR{tables: []PITRTable{pitrTable(ref)}})
		s.ShipOnce(ctx)
		time.Sleep(30 * time.Millisecond)
		from := time.Now()
		time.Sleep(5 * time.Millisecond)
		for i := 0; i < 5; i++ {
			logWrite(t, b, ref, i, "b", "", 0)
		}
		logWrite(t, b, ref, 5, "", "", 0)
		logWrite(t, b, ref, 0, "c", "", 0)
		time.Sleep(30 * time.Millisecond)
		to := time.Now()
		time.Sleep(5 * time.Millisecond)
		logWrite(t, b, ref, 1, "late", "", 0)
		s.ShipOnce(ctx)
		prefix := format.PITRPrefix(account, "exp1", pitrTable(ref).Incarnation())
		root := t.TempDir()
		if err := os.Mkdir(filepath.Join(root, "bkt"), 0o700); err != nil {
			t.Fatal(err)
		}
		buckets := blobstore.BucketConfig{FilesystemRoot: root}
		x := NewExports(m, ExportsConfig{Jobs: jobs, Buckets: buckets})
		const id = "01796465913882-0000000a"
		var row map[string]any
		_ = json.Unmarshal(exportRow(id, prefix, to), &row)
		row["ExportTypeAsked"], row["ExportFromTimeMs"], row["ExportToTimeMs"], row["ExportViewTypeAsked"] =
			"INCREMENTAL_EXPORT", from.UnixMilli(), to.UnixMilli(), "NEW_AND_OLD_IMAGES"
		payload, _ := json.Marshal(row)
		res, err := jobs.InsertJob(ctx, backend.JobRecord{Kind: jobKindExport, ID: id, Account: account, Status: exportInProgress,
			Payload: payload, Owner: m.Owner()})
		if err != nil {
			t.Fatal(err)
		}
		x.RunExport(*res.Record)
		x.Wait()
		r, _ := jobs.GetJob(ctx, jobKindExport, id)
		if r.Status != exportCompleted {
			t.Fatalf("export: %+v", r)
		}
		bst, _ := blobstore.OpenBucket(ctx, buckets, "bkt", "")
		var sum awsexport.IncrementalSummary
		if err := json.Unmarshal(read(t, bst, awsexport.Dir("p", id)+"/manifest-summary.json"), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Version != "2023-08-01" || sum.ExportType != "INCREMENTAL_EXPORT" || sum.ItemCount != 6 || sum.OutputView != "NEW_AND_OLD_IMAGES" {
			t.Fatalf("summary %+v", sum)
		}
		var entry awsexport.FileEntry
		if err := json.Unmarshal(read(t, bst, awsexport.Dir("p", id)+"/manifest-files.json"), &entry); err != nil {
			t.Fatal(err)
		}
		gz, err := gzipOpen(read(t, bst, entry.DataFileS3Key))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, line := range bytes.Split(bytes.TrimSpace(gz), []byte("\n")) {
			var l struct {
				Metadata struct {
					WriteTimestampMicros struct{ N string }
				}
				Keys     json.RawMessage
				NewImage json.RawMessage
			}
			if err := json.Unmarshal(line, &l); err != nil {
				t.Fatal(err)
			}
			var micros int64
			fmt.Sscan(l.Metadata.WriteTimestampMicros.N, &micros)
			if ts := time.UnixMicro(micros); ts.Before(from.Truncate(time.Millisecond)) || !ts.Before(to) {
				t.Fatalf("write time %v outside [%v, %v)", ts, from, to)
			}
			got[string(l.Keys)] = string(l.NewImage)
		}
		want := map[int]string{0: "c", 1: "b", 2: "b", 3: "b", 4: "b", 5: "absent"}
		if len(got) != len(want) {
			t.Fatalf("%d lines: %v", len(got), got)
		}
		for i, v := range want {
			if g := value(t, got, i); g != v && !(v == "absent" && g == "") {
				t.Fatalf("item %d: %q, want %q", i, g, v)
			}
		}
	})
}

func gzipOpen(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
