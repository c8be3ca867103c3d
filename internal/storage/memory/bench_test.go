package memory

import (
	"context"
	"testing"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/storagetest"
)

// The shared backend benchmarks (storagetest/bench.go).

func benchBackend(b *testing.B) (*Backend, storage.TableRef) {
	be := openT(b, Options{})
	cr, err := be.CreateTable(context.Background(), storage.CreateTableParams{Account: "bench", Name: "t"})
	if err != nil {
		b.Fatal(err)
	}
	return be, cr.Table.Ref()
}

func BenchmarkWriteItem(b *testing.B) {
	be, ref := benchBackend(b)
	storagetest.BenchWriteItem(b, be, ref, 16)
}

func BenchmarkWriteItemSerial(b *testing.B) {
	be, ref := benchBackend(b)
	storagetest.BenchWriteItem(b, be, ref, 0)
}

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

// BenchmarkReadLog1000: ReadLog of 1,000 records.
func BenchmarkReadLog1000(b *testing.B) {
	be, ref := benchBackend(b)
	storagetest.BenchReadLog(b, be, ref)
}
