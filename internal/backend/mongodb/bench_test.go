package mongodb

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// The shared backend benchmarks (backendtest/bench.go), for comparison
// with the other backends. They need EXTENDDB_TEST_BACKENDS=mongodb and
// EXTENDDB_TEST_MONGODB_URI and use the run's database. The read
// benchmarks (BenchGetItem, BenchQuery25, BenchScanPages) load their table
// with 100-item TransactWrites, which this backend does not have yet.

func benchBackend(b *testing.B) (*Backend, backend.TableRef) {
	be := openT(b, Options{})
	cr, err := be.CreateTable(b.Context(), backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "bench", Desc: []byte("d")})
	if err != nil {
		b.Fatal(err)
	}
	return be, cr.Table.Ref()
}

func BenchmarkWriteItemSerial(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItem(b, be, ref, 0)
}

func BenchmarkWriteItem(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItem(b, be, ref, 16)
}

// BenchmarkWriteItemOverwrite: serial 1 KiB puts over 100 existing items,
// alternating between two sizes (every write changes the table's
// statistics).
func BenchmarkWriteItemOverwrite(b *testing.B) {
	be, ref := benchBackend(b)
	items := [][]byte{make([]byte, 1024), make([]byte, 1000)}
	ctx := b.Context()
	put := func(i int) {
		pk := []byte(fmt.Sprintf("k%03d", i%100))
		item := items[(i/100)%2]
		if _, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, SK: []byte("s"), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: item}, nil
		}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 100 {
		put(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		put(i)
		i++
	}
}

// BenchmarkCounts: DescribeTable's statistics (Counts: a fold of what is
// pending, then the latest figures) beside a full count (TableStats), on
// tables of 1,000 and 10,000 items of 1 KiB.
func BenchmarkCounts(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		be, ref := benchBackend(b)
		item := make([]byte, 1024)
		ctx := b.Context()
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += 16 {
					if _, err := be.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(fmt.Sprintf("k%06d", i)), Fn: func([]byte) (backend.Change, error) {
						return backend.Change{Op: backend.Put, Item: item}, nil
					}}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		b.Run(fmt.Sprintf("items=%d/Counts", n), func(b *testing.B) {
			for b.Loop() {
				if r, err := be.Counts(ctx, backend.CountsParams{Table: ref}); err != nil || r.Stats.ItemCount != int64(n) {
					b.Fatalf("%v %v", r, err)
				}
			}
		})
		b.Run(fmt.Sprintf("items=%d/TableStats", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := be.TableStats(ctx, backend.TableStatsParams{Table: ref}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
