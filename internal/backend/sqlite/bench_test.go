package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// The shared backend benchmarks (backendtest/bench.go) on a file database.

func benchBackend(b *testing.B) (*Backend, backend.TableRef) {
	be := openT(b, Options{Path: filepath.Join(b.TempDir(), "bench.db")})
	cr, err := be.CreateTable(context.Background(), backend.CreateTableParams{Account: "bench", Name: "t"})
	if err != nil {
		b.Fatal(err)
	}
	return be, cr.Table.Ref()
}

// benchWrite also reports the group commit factor (writes per commit)
// and the process CPU (user+system) per write.
func benchWrite(b *testing.B, parallelism int) { benchWriteLog(b, parallelism, 0) }

func benchWriteLog(b *testing.B, parallelism, logBytes int) {
	be, ref := benchBackend(b)
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	backendtest.BenchWriteItemLog(b, be, ref, parallelism, logBytes)
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	if b.N > 0 {
		cpu := ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano()
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
	if bt := be.batches.Load(); bt > 0 {
		b.ReportMetric(float64(be.batchedOps.Load())/float64(bt), "ops/commit")
	}
}

// BenchmarkWriteItem: 1 KiB puts of distinct keys from 16×GOMAXPROCS
// goroutines; ops/commit shows the group commit.
func BenchmarkWriteItem(b *testing.B)       { benchWrite(b, 16) }
func BenchmarkWriteItemSerial(b *testing.B) { benchWrite(b, 0) }

// BenchmarkWriteItemLog*: the same puts with a 1 KiB change record each
// (a stream with both images of a 1 KiB item is about 2 KiB; the
// 2 KiB variant bounds that), against BenchmarkWriteItem*.
func BenchmarkWriteItemLog1K(b *testing.B)       { benchWriteLog(b, 16, 1024) }
func BenchmarkWriteItemLog1KSerial(b *testing.B) { benchWriteLog(b, 0, 1024) }
func BenchmarkWriteItemLog2KSerial(b *testing.B) { benchWriteLog(b, 0, 2048) }

func BenchmarkGetItem(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchGetItem(b, be, ref, false)
}

func BenchmarkGetItemParallel(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchGetItem(b, be, ref, true)
}

// BenchmarkReadLog1000: ReadLog of 1,000 records.
func BenchmarkReadLog1000(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchReadLog(b, be, ref)
}

// BenchmarkQuery25: a 25-row page of one partition.
func BenchmarkQuery25(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchQuery25(b, be, ref)
}

// BenchmarkScanPages: Scan page time by page number (first, second,
// middle, last) over ScanBenchItems() items, table and index, whole and
// one segment.
func BenchmarkScanPages(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchScanPages(b, be, ref)
}

// BenchmarkWALBatchLoad: a batch load (TransactWrite of 25 × 1 KiB
// random-key items from 8 goroutines; EXTENDDB_BENCH_WAL_ITEMS items,
// default 200,000) with the WAL bound off (the behaviour before it) and
// at its default, in one run. Metrics: items/s, process CPU per item
// (user+system, the background checkpointer included), the largest WAL
// file seen, the database size, and the writer's checkpoints.
func BenchmarkWALBatchLoad(b *testing.B) {
	items := 200_000
	if s := os.Getenv("EXTENDDB_BENCH_WAL_ITEMS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			items = n
		}
	}
	for _, c := range []struct {
		name  string
		limit int64
	}{{"bound=off", -1}, {"bound=default", 0}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				path := filepath.Join(b.TempDir(), "load.db")
				be := openT(b, Options{Path: path, WALLimitBytes: c.limit})
				var ru0, ru1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				t0 := time.Now()
				maxWAL := walLoad(b, be, path, items, 8, 0)
				el := time.Since(t0)
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
				var dbSize int64
				if st, err := os.Stat(path); err == nil {
					dbSize = st.Size()
				}
				b.ReportMetric(float64(items)/el.Seconds(), "items/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(items), "cpu-µs/item")
				b.ReportMetric(float64(maxWAL)/(1<<20), "max-wal-MiB")
				b.ReportMetric(float64(dbSize)/(1<<20), "db-MiB")
				b.ReportMetric(float64(be.walRestarts.Load()), "restarts")
				b.ReportMetric(float64(be.walBusy.Load()), "busy")
				be.Close()
			}
		})
	}
}
