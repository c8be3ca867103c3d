package mongodb

import (
	"fmt"
	"math/rand/v2"
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
	backendtest.BenchWriteItemOverwrite(b, be, ref)
}

// BenchmarkCounts: DescribeTable's statistics (Counts: a fold of what is
// pending, then the latest figures) beside a full count (TableStats), on
// tables of 1,000 and 10,000 items of 1 KiB.
func BenchmarkCounts(b *testing.B) {
	backendtest.BenchCounts(b, func() (backend.Backend, backend.TableRef) { return benchBackend(b) }, 1000, 10000)
}
