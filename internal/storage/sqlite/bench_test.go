package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/storagetest"
)

// The shared backend benchmarks (storagetest/bench.go) on a file database.

func benchBackend(b *testing.B) (*Backend, storage.TableRef) {
	be := openT(b, Options{Path: filepath.Join(b.TempDir(), "bench.db")})
	cr, err := be.CreateTable(context.Background(), storage.CreateTableParams{Account: "bench", Name: "t"})
	if err != nil {
		b.Fatal(err)
	}
	return be, storage.TableRef{Account: "bench", Name: "t", ID: cr.Table.ID}
}

// benchWrite also reports the group commit factor (writes per commit).
func benchWrite(b *testing.B, parallelism int) {
	be, ref := benchBackend(b)
	storagetest.BenchWriteItem(b, be, ref, parallelism)
	b.StopTimer()
	if bt := be.batches.Load(); bt > 0 {
		b.ReportMetric(float64(be.batchedOps.Load())/float64(bt), "ops/commit")
	}
}

// BenchmarkWriteItem: 1 KiB puts of distinct keys from 16×GOMAXPROCS
// goroutines; ops/commit shows the group commit.
func BenchmarkWriteItem(b *testing.B)       { benchWrite(b, 16) }
func BenchmarkWriteItemSerial(b *testing.B) { benchWrite(b, 0) }

func BenchmarkGetItem(b *testing.B) {
	be, ref := benchBackend(b)
	storagetest.BenchGetItem(b, be, ref, false)
}

func BenchmarkGetItemParallel(b *testing.B) {
	be, ref := benchBackend(b)
	storagetest.BenchGetItem(b, be, ref, true)
}

// BenchmarkQuery25: a 25-row page of one partition.
func BenchmarkQuery25(b *testing.B) {
	be, ref := benchBackend(b)
	storagetest.BenchQuery25(b, be, ref)
}

// BenchmarkScanPages: Scan page time by page number (first, second,
// middle, last) over ScanBenchItems() items, table and index, whole and
// one segment.
func BenchmarkScanPages(b *testing.B) {
	be, ref := benchBackend(b)
	storagetest.BenchScanPages(b, be, ref)
}
