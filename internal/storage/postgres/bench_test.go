package postgres

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/extenddb/extenddb/internal/storage"
)

// The benchmarks mirror internal/storage/sqlite's, for comparison. They
// need EXTENDDB_TEST_BACKENDS=postgres and EXTENDDB_TEST_POSTGRES_DSN and
// use the run's database.

func benchBackend(b *testing.B) (*Backend, storage.TableRef) {
	need(b)
	be := openT(b, Options{DSN: testDSN})
	return be, createTable(b, be, "bench")
}

func benchWrite(b *testing.B, parallelism int) {
	be, ref := benchBackend(b)
	item := make([]byte, 1024)
	for i := range item {
		item[i] = byte('a' + i%26)
	}
	fn := func([]byte) (storage.Change, error) { return storage.Change{Op: storage.Put, Item: item}, nil }
	var n atomic.Uint64
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		pk := make([]byte, 8)
		for pb.Next() {
			binary.BigEndian.PutUint64(pk, n.Add(1))
			if _, err := be.WriteItem(ctx, storage.WriteItemParams{Table: ref, PK: pk, SK: []byte("s"), Fn: fn}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkWriteItem: 1 KiB puts of distinct keys from 16×GOMAXPROCS
// goroutines (the pool bounds the connections).
func BenchmarkWriteItem(b *testing.B)       { benchWrite(b, 16) }
func BenchmarkWriteItemSerial(b *testing.B) { benchWrite(b, 0) }

func load(b *testing.B, be *Backend, ref storage.TableRef, parts, per int) {
	ctx := context.Background()
	item := make([]byte, 256)
	ops := make([]storage.WriteItemParams, 0, 100)
	flush := func() {
		if _, err := be.TransactWrite(ctx, storage.TransactWriteParams{Ops: ops}); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	for p := range parts {
		for s := range per {
			ops = append(ops, storage.WriteItemParams{Table: ref, PK: fmt.Appendf(nil, "p%06d", p), SK: fmt.Appendf(nil, "s%04d", s),
				Fn: func([]byte) (storage.Change, error) { return storage.Change{Op: storage.Put, Item: item}, nil }})
			if len(ops) == cap(ops) {
				flush()
			}
		}
	}
	if len(ops) > 0 {
		flush()
	}
}

func BenchmarkGetItem(b *testing.B) {
	be, ref := benchBackend(b)
	load(b, be, ref, 1000, 10)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		pk := fmt.Appendf(nil, "p%06d", i%1000)
		res, err := be.GetItem(ctx, storage.GetItemParams{Table: ref, PK: pk, SK: []byte("s0003")})
		if err != nil || res.Item == nil {
			b.Fatal(res, err)
		}
		i++
	}
}

func BenchmarkGetItemParallel(b *testing.B) {
	be, ref := benchBackend(b)
	load(b, be, ref, 1000, 10)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			pk := fmt.Appendf(nil, "p%06d", i%1000)
			if _, err := be.GetItem(ctx, storage.GetItemParams{Table: ref, PK: pk, SK: []byte("s0003")}); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkQuery25: a 25-row page of one partition.
func BenchmarkQuery25(b *testing.B) {
	be, ref := benchBackend(b)
	load(b, be, ref, 100, 50)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		pk := fmt.Appendf(nil, "p%06d", i%100)
		res, err := be.Query(ctx, storage.QueryParams{Table: ref, PK: pk, Forward: i%2 == 0, Limit: 25})
		if err != nil || len(res.Rows) != 25 {
			b.Fatal(len(res.Rows), err)
		}
		i++
	}
}
