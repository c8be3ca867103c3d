package backup

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/format/awsexport"
)

// discardStore is a store that keeps nothing: the sink of the export
// encoder measured alone.
type discardStore struct{}

func (discardStore) Put(_ context.Context, _ string, r io.Reader) error {
	_, err := io.Copy(io.Discard, r)
	return err
}
func (d discardStore) PutIfAbsent(ctx context.Context, k string, r io.Reader) error {
	return d.Put(ctx, k, r)
}
func (discardStore) Get(context.Context, string) (io.ReadCloser, error) {
	return nil, blobstore.ErrNotFound
}
func (discardStore) GetRange(context.Context, string, int64, int64) (io.ReadCloser, error) {
	return nil, blobstore.ErrNotFound
}
func (discardStore) Head(_ context.Context, k string) (blobstore.ObjectInfo, error) {
	return blobstore.ObjectInfo{}, blobstore.ErrNotFound
}
func (discardStore) List(context.Context, string) ([]blobstore.ObjectInfo, error) { return nil, nil }
func (discardStore) Walk(context.Context, string, func(blobstore.ObjectInfo) error) error {
	return nil
}
func (discardStore) DeletePrefix(context.Context, string) error { return nil }
func (discardStore) Validate(context.Context) error             { return nil }
func (discardStore) String() string                             { return "discard" }

// BenchmarkExportThroughput measures, in one run and on the same items,
// the AWS export encoder alone (awsexport.Writer over the items already
// in memory, into a store that discards: DynamoDB JSON, gzip, MD5) and a
// full export job (the table's image read from its point-in-time history
// in a filesystem store, the encoder, the objects written into a bucket
// directory), and reports their ratio (target: the job at least 0.7 of
// the encoder, as for backups). The history's first base is shipped
// before the clock starts. EXTENDDB_EXPORT_BENCH_ITEMS sets the item
// count (default 20,000); run it with -benchtime 1x at large counts.
func BenchmarkExportThroughput(b *testing.B) {
	n := 20000
	if v, _ := strconv.Atoi(os.Getenv("EXTENDDB_EXPORT_BENCH_ITEMS")); v > 0 {
		n = v
	}
	items := benchItems(n)
	var ubytes int64
	for _, it := range items {
		ubytes += int64(len(it.raw))
	}
	mib := float64(ubytes) / (1 << 20)
	for _, bc := range backends(b) {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			be := bc.open(b)
			loadBench(b, be, items)
			tr, err := be.GetTable(ctx, backend.GetTableParams{Account: account, Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			ref := tr.Table.Ref()
			st, err := blobstore.NewFS(b.TempDir() + "/store")
			if err != nil {
				b.Fatal(err)
			}
			m := newManager(b, be, st, func(c *Config) {
				c.TargetFileBytes = 0
				c.HeartbeatInterval = time.Second
				c.StaleAfter = time.Minute
			})
			pt := pitrTable(ref)
			s, err := NewShipper(m, &testPITR{tables: []PITRTable{pt}}, PITRConfig{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			s.ShipOnce(ctx)
			at := time.Now()
			prefix := format.PITRPrefix(account, "bench", pt.Incarnation())
			root := b.TempDir()
			if err := os.Mkdir(filepath.Join(root, "bkt"), 0o700); err != nil {
				b.Fatal(err)
			}
			jobs := be.Capabilities().Jobs
			x := NewExports(m, ExportsConfig{Jobs: jobs, Buckets: blobstore.BucketConfig{FilesystemRoot: root}})
			var enc, job, encCPU, jobCPU time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c0 := processCPU()
				t0 := time.Now()
				encodeExportAlone(b, items)
				enc += time.Since(t0)
				c1 := processCPU()
				encCPU += c1 - c0
				id := "01796465913882-" + strconv.FormatInt(int64(0x10000000+i), 16)
				raw, _ := json.Marshal(map[string]any{
					"ExportArn": "arn:aws:dynamodb:us-east-1:" + account + ":table/bench/export/" + id, "ExportId": id,
					"ExportStatus": exportInProgress, "TableArn": "arn:aws:dynamodb:us-east-1:" + account + ":table/bench",
					"TableId": pt.TableID, "StartTime": epochSec(time.Now()), "S3Bucket": "bkt", "S3Prefix": "p",
					"S3SseAlgorithm": "AES256", "ExportFormat": awsexport.FormatJSON, "HistoryPrefix": prefix, "ExportTimeMs": at.UnixMilli(),
				})
				res, err := jobs.InsertJob(ctx, backend.JobRecord{Kind: jobKindExport, ID: id, Account: account, Status: exportInProgress,
					Payload: raw, Owner: m.Owner()})
				if err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				x.RunExport(*res.Record)
				x.Wait()
				job += time.Since(t1)
				jobCPU += processCPU() - c1
				r, err := jobs.GetJob(ctx, jobKindExport, id)
				if err != nil || r.Status != exportCompleted {
					b.Fatalf("export: %+v %v", r, err)
				}
				var done struct{ ItemCount int64 }
				if err := json.Unmarshal(r.Payload, &done); err != nil || done.ItemCount != int64(n) {
					b.Fatalf("export of %d items, want %d (%v)", done.ItemCount, n, err)
				}
			}
			b.StopTimer()
			per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
			encS, jobS := per(enc), per(job)
			b.ReportMetric(mib/encS, "encoder-MiB/s")
			b.ReportMetric(mib/jobS, "export-MiB/s")
			b.ReportMetric(encS/jobS, "ratio")
			b.ReportMetric(per(encCPU)/per(jobCPU), "cpu-ratio")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d items, %.0f MiB of items: export encoder alone %.2fs (%.0f MiB/s, CPU %.2fs), export job %.2fs (%.0f MiB/s, CPU %.2fs), ratio %.2f (target >= 0.70), CPU ratio %.2f",
				bc.name, n, mib, encS, mib/encS, per(encCPU), jobS, mib/jobS, per(jobCPU), encS/jobS, per(encCPU)/per(jobCPU))
		})
	}
}

// encodeExportAlone runs the AWS export writer over the items into a
// store that discards.
func encodeExportAlone(b *testing.B, items []benchItem) {
	ctx := context.Background()
	w, err := awsexport.Create(ctx, discardStore{}, awsexport.Params{ExportArn: "arn:aws:dynamodb:us-east-1:" + account + ":table/bench/export/01796465913882-00000000",
		ExportID: "01796465913882-00000000", TableArn: "arn:aws:dynamodb:us-east-1:" + account + ":table/bench", TableID: "tid",
		ExportTime: time.Now(), StartTime: time.Now(), S3Bucket: "bkt", S3SseAlgorithm: "AES256", Format: awsexport.FormatJSON})
	if err != nil {
		b.Fatal(err)
	}
	for i := range items {
		if err := w.Add(ctx, items[i].raw); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Finish(ctx, time.Now()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPITRPlan: planning a restore (reading, verifying and decoding
// every segment, spilling the replay) of a history of
// EXTENDDB_PLAN_BENCH_RECORDS (default 30,000) changes of ~1 KiB items
// after its base.
func BenchmarkPITRPlan(b *testing.B) {
	n := 30000
	if v, _ := strconv.Atoi(os.Getenv("EXTENDDB_PLAN_BENCH_RECORDS")); v > 0 {
		n = v
	}
	ctx := context.Background()
	be := backends(b)[0].open(b)
	ref := createTable(b, be, "planbench")
	st := memstore.New()
	m := newManager(b, be, st, nil)
	s, err := NewShipper(m, &testPITR{tables: []PITRTable{pitrTable(ref)}}, PITRConfig{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	s.ShipOnce(ctx) // the head and an empty base
	pad := strings.Repeat("y", 900)
	for i := range n {
		logWrite(b, be, ref, i%(n/2), pad+strconv.Itoa(i), "", 0)
	}
	s.ShipOnce(ctx)
	at := time.Now()
	prefix := format.PITRPrefix(account, "planbench", pitrTable(ref).Incarnation())
	dir := b.TempDir()
	b.ResetTimer()
	for b.Loop() {
		p, err := PlanPITRRestore(ctx, st, prefix, at, dir)
		if err != nil {
			b.Fatal(err)
		}
		if p.Replay.records != int64(n) {
			b.Fatalf("%d records, want %d", p.Replay.records, n)
		}
		p.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/record")
}
