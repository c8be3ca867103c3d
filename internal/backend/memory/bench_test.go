package memory

import (
	"context"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// The shared backend benchmarks (backendtest/bench.go).

func benchBackend(b *testing.B) (*Backend, backend.TableRef) {
	be := openT(b, Options{})
	cr, err := be.CreateTable(context.Background(), backend.CreateTableParams{Account: "bench", Name: "t"})
	if err != nil {
		b.Fatal(err)
	}
	return be, cr.Table.Ref()
}

func BenchmarkWriteItem(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItem(b, be, ref, 16)
}

func BenchmarkWriteItemSerial(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItem(b, be, ref, 0)
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

// BenchmarkReadLog1000: ReadLog of 1,000 records.
func BenchmarkReadLog1000(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchReadLog(b, be, ref)
}
