package postgres

import (
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// The shared backend benchmarks (backendtest/bench.go), for comparison
// with SQLite's. They need EXTENDDB_TEST_BACKENDS=postgres and
// EXTENDDB_TEST_POSTGRES_DSN and use the run's database.

func benchBackend(b *testing.B) (*Backend, backend.TableRef) {
	need(b)
	be := openT(b, Options{DSN: testDSN})
	return be, createTable(b, be, "bench")
}

// BenchmarkWriteItem: 1 KiB puts of distinct keys from 16×GOMAXPROCS
// goroutines (the pool bounds the connections).
func BenchmarkWriteItem(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItem(b, be, ref, 16)
}

func BenchmarkWriteItemSerial(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItem(b, be, ref, 0)
}

// BenchmarkWriteItemLog1K*: the same puts with a 1 KiB change record each.
func BenchmarkWriteItemLog1K(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItemLog(b, be, ref, 16, 1024)
}

func BenchmarkWriteItemLog1KSerial(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItemLog(b, be, ref, 0, 1024)
}

// BenchmarkReadLog1000: ReadLog of 1,000 records.
func BenchmarkReadLog1000(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchReadLog(b, be, ref)
}

func BenchmarkGetItem(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchGetItem(b, be, ref, false)
}

func BenchmarkGetItemParallel(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchGetItem(b, be, ref, true)
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
