package backup

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// benchItem is one item of the throughput benchmark: its canonical bytes
// and its key as the order-preserving key bytes storage keeps.
type benchItem struct {
	raw    []byte
	pk, sk []byte
}

var benchWords = strings.Fields(`alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike
november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu order invoice
customer shipped pending refund account region warehouse latency payload status active archived`)

// benchItems makes n items of about 1 KiB, deterministic, of a shape an
// application might store: a string partition key spread over many
// partitions, a number sort key, a few scalar attributes, a string set and
// a ~850-byte text payload of words in random order (compresses ~3-4x,
// as text does; an item of one repeated byte would flatter the encoder).
func benchItems(n int) []benchItem {
	r := rand.New(rand.NewPCG(12, uint64(n)))
	out := make([]benchItem, n)
	var sb strings.Builder
	for i := range out {
		sb.Reset()
		for sb.Len() < 850 {
			sb.WriteString(benchWords[r.IntN(len(benchWords))])
			sb.WriteByte(' ')
		}
		it := attr.Item{
			"pk":      {Type: attr.S, Str: fmt.Sprintf("customer#%07d", r.IntN(max(n/10, 1)))},
			"sk":      {Type: attr.N, Str: strconv.Itoa(i)},
			"name":    {Type: attr.S, Str: fmt.Sprintf("Customer %d", i)},
			"email":   {Type: attr.S, Str: fmt.Sprintf("c%d@example.com", r.Int())},
			"balance": {Type: attr.N, Str: fmt.Sprintf("%d.%02d", r.IntN(100000), r.IntN(100))},
			"tags":    {Type: attr.SS, Strs: []string{benchWords[r.IntN(len(benchWords))], fmt.Sprint("t", i%97)}},
			"payload": {Type: attr.S, Str: sb.String()},
		}
		pk, _ := attr.KeyBytes(it["pk"])
		sk, _ := attr.KeyBytes(it["sk"])
		out[i] = benchItem{raw: attr.EncodeItem(it), pk: pk, sk: sk}
	}
	return out
}

const benchDesc = `{"TableName":"bench","KeySchema":[{"AttributeName":"pk","KeyType":"HASH"},{"AttributeName":"sk","KeyType":"RANGE"}],` +
	`"AttributeDefinitions":[{"AttributeName":"pk","AttributeType":"S"},{"AttributeName":"sk","AttributeType":"N"}],"TableStatus":"ACTIVE"}`

// BenchmarkBackupThroughput measures, in one run and on the same items,
// the format encoder alone (items and keys already in memory, written to a
// discarding sink: compression and hashing only) and the backup job (the
// snapshot read from the backend, the encoder, the upload into a
// filesystem store), and reports their ratio (the target: the job
// at least 0.7 of the encoder). EXTENDDB_BACKUP_BENCH_ITEMS sets the item
// count (default 20,000); run it with -benchtime 1x at large counts.
// EXTENDDB_BACKUP_BENCH_CPUPROFILE names a file for a CPU profile of the
// backup job alone. PostgreSQL is measured too when
// EXTENDDB_TEST_BACKENDS names it.
func BenchmarkBackupThroughput(b *testing.B) {
	n := 20000
	if v, _ := strconv.Atoi(os.Getenv("EXTENDDB_BACKUP_BENCH_ITEMS")); v > 0 {
		n = v
	}
	items := benchItems(n)
	var ubytes int64
	for _, it := range items {
		ubytes += int64(len(format.LinePrefix) + len(it.raw) + len(format.LineSuffix))
	}
	mib := float64(ubytes) / (1 << 20)
	for _, bc := range backends(b) {
		b.Run(bc.name, func(b *testing.B) {
			be := bc.open(b)
			loadBench(b, be, items)
			root := b.TempDir() + "/store"
			st, err := blobstore.NewFS(root)
			if err != nil {
				b.Fatal(err)
			}
			m := newManager(b, be, st, func(c *Config) {
				c.TargetFileBytes = 0
				c.HeartbeatInterval = time.Second
				c.StaleAfter = time.Minute
			})
			var enc, job, encCPU, jobCPU time.Duration
			var peak, alloc uint64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c0 := processCPU()
				enc += encodeAlone(b, items)
				c1 := processCPU()
				r := backupOnce(b, m, st, n, i == 0)
				encCPU += c1 - c0
				jobCPU += r.cpu
				job += r.wall
				peak = max(peak, r.peakHeap)
				alloc += r.alloc
			}
			b.StopTimer()
			per := func(d time.Duration) float64 { return d.Seconds() / float64(b.N) }
			encS, jobS := per(enc), per(job)
			b.ReportMetric(mib/encS, "encoder-MiB/s")
			b.ReportMetric(mib/jobS, "backup-MiB/s")
			b.ReportMetric(encS/jobS, "ratio")
			b.ReportMetric(per(encCPU)/per(jobCPU), "cpu-ratio")
			b.ReportMetric(0, "ns/op")
			b.Logf("%s: %d items, %.0f MiB uncompressed: encoder alone %.2fs (%.0f MiB/s, CPU %.2fs), backup job %.2fs (%.0f MiB/s, CPU %.2fs), ratio %.2f (target >= 0.70), CPU ratio %.2f; during the job %d bytes allocated per item, heap in use peaked %d MiB above the start (the benchmark's own items included in what GOGC lets grow)",
				bc.name, n, mib, encS, mib/encS, per(encCPU), jobS, mib/jobS, per(jobCPU), encS/jobS, per(encCPU)/per(jobCPU),
				alloc/uint64(b.N)/uint64(n), peak>>20)
		})
	}
}

// loadBench writes the items in transactions of 100 blind puts.
func loadBench(b *testing.B, be backend.Backend, items []benchItem) {
	res, err := be.CreateTable(context.Background(), backend.CreateTableParams{Account: account, Name: "bench", Desc: []byte(benchDesc)})
	if err != nil {
		b.Fatal(err)
	}
	ref := res.Table.Ref()
	ops := make([]backend.WriteItemParams, 0, 100)
	for i := range items {
		raw := items[i].raw
		ops = append(ops, backend.WriteItemParams{Table: ref, PK: items[i].pk, SK: items[i].sk, Blind: true,
			Fn: func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Put, Item: raw}, nil }})
		if len(ops) == cap(ops) || i == len(items)-1 {
			if _, err := be.TransactWrite(context.Background(), backend.TransactWriteParams{Ops: ops}); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
}

// encodeAlone runs the format writer over the items into a discarding
// sink and returns how long it took.
func encodeAlone(b *testing.B, items []benchItem) time.Duration {
	arn := format.ARN{Partition: "aws", Region: "us-east-1", Account: account, Table: "bench", BackupID: "01732908000123-1a2b3c4d"}
	discard := format.FileSinkFunc(func(ctx context.Context, key string) (io.WriteCloser, error) { return nopWC{}, nil })
	w, err := format.NewWriter(context.Background(), discard, format.WriterConfig{ARN: arn, BackupName: "x",
		Source: format.Source{Backend: "x"}, Snapshot: format.Snapshot{Kind: "x"}, SourceTable: []byte(benchDesc), ItemOrder: format.OrderUnordered})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := range items {
		if err := w.AppendKeyBytes(items[i].raw, items[i].pk, items[i].sk); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := w.Finish(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// processCPU is this process's user+system CPU time so far (every
// goroutine: the encoder, the snapshot reader, the backend, the upload).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type backupRun struct {
	wall, cpu       time.Duration
	peakHeap, alloc uint64
}

// backupOnce runs one backup of the bench table to AVAILABLE and verifies
// it; it returns its duration, the process's CPU time meanwhile, the peak
// heap in use above the start and the bytes allocated.
func backupOnce(b *testing.B, m *Manager, st blobstore.Store, n int, profile bool) backupRun {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0, alloc0 := ms.HeapInuse, ms.TotalAlloc
	if path := os.Getenv("EXTENDDB_BACKUP_BENCH_CPUPROFILE"); profile && path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := processCPU()
	start := time.Now()
	rec, err := m.CreateBackup(context.Background(), account, "bench", "bench")
	if err != nil {
		b.Fatal(err)
	}
	var peak uint64
	for {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		r, err := m.GetBackup(context.Background(), rec.ARN)
		if err != nil {
			b.Fatal(err)
		}
		if r.Status != backend.BackupCreating {
			if r.Status != backend.BackupAvailable {
				b.Fatalf("backup %s: %s", r.Status, r.Message)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	run := backupRun{wall: time.Since(start), cpu: processCPU() - cpu0}
	runtime.ReadMemStats(&ms)
	run.peakHeap, run.alloc = peak-min(peak, heap0), ms.TotalAlloc-alloc0
	pprof.StopCPUProfile()
	b.StopTimer()
	res, err := Verify(context.Background(), st, rec.ARN)
	if err != nil {
		b.Fatal(err)
	}
	if res.Manifest.ItemCount != int64(n) {
		b.Fatalf("backup holds %d items, want %d", res.Manifest.ItemCount, n)
	}
	b.StartTimer()
	return run
}

type nopWC struct{}

func (nopWC) Write(p []byte) (int, error) { return len(p), nil }
func (nopWC) Close() error                { return nil }
