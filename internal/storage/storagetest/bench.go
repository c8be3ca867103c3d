package storagetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/extenddb/extenddb/internal/storage"
)

// The shared backend benchmarks: each backend's bench_test.go calls them
// with a backend and a fresh table, so figures compare like for like.

// BenchWriteItem: 1 KiB puts of distinct keys; parallelism as for
// b.SetParallelism (0: one goroutine).
func BenchWriteItem(b *testing.B, be storage.Backend, ref storage.TableRef, parallelism int) {
	item := make([]byte, 1024)
	for i := range item {
		item[i] = byte('a' + i%26)
	}
	fn := func([]byte) (storage.Change, error) { return storage.Change{Op: storage.Put, Item: item}, nil }
	var n atomic.Uint64
	ctx := context.Background()
	b.ReportAllocs()
	put := func(pk []byte) bool {
		binary.BigEndian.PutUint64(pk, n.Add(1))
		if _, err := be.WriteItem(ctx, storage.WriteItemParams{Table: ref, PK: pk, SK: []byte("s"), Fn: fn}); err != nil {
			b.Error(err)
			return false
		}
		return true
	}
	b.ResetTimer()
	if parallelism == 0 {
		pk := make([]byte, 8)
		for b.Loop() {
			if !put(pk) {
				return
			}
		}
		return
	}
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		pk := make([]byte, 8)
		for pb.Next() {
			if !put(pk) {
				return
			}
		}
	})
}

// Load writes parts×per items of 256 bytes (keys p%06d / s%04d) in
// 100-item transactions.
func Load(b *testing.B, be storage.Backend, ref storage.TableRef, parts, per int) {
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

// BenchGetItem reads items of a Load(1000, 10) table, in parallel when
// parallel is true.
func BenchGetItem(b *testing.B, be storage.Backend, ref storage.TableRef, parallel bool) {
	Load(b, be, ref, 1000, 10)
	ctx := context.Background()
	get := func(i int) bool {
		pk := fmt.Appendf(nil, "p%06d", i%1000)
		res, err := be.GetItem(ctx, storage.GetItemParams{Table: ref, PK: pk, SK: []byte("s0003")})
		if err != nil || res.Item == nil {
			b.Error(res, err)
			return false
		}
		return true
	}
	b.ReportAllocs()
	b.ResetTimer()
	if !parallel {
		i := 0
		for b.Loop() {
			if !get(i) {
				return
			}
			i++
		}
		return
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if !get(i) {
				return
			}
			i++
		}
	})
}

// BenchQuery25 reads 25-row pages of one partition of a Load(100, 50)
// table, alternating directions.
func BenchQuery25(b *testing.B, be storage.Backend, ref storage.TableRef) {
	Load(b, be, ref, 100, 50)
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
