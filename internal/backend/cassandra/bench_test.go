package cassandra

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// The shared backend benchmarks (backendtest/bench.go), for comparison
// with SQLite's and PostgreSQL's. They need EXTENDDB_TEST_BACKENDS=cassandra
// and EXTENDDB_TEST_CASSANDRA_HOSTS and use the run's keyspace.

func benchBackend(b *testing.B) (*Backend, backend.TableRef) {
	be := openT(b, keyspace)
	cr, err := be.CreateTable(b.Context(), backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "bench", Desc: []byte("d")})
	if err != nil {
		b.Fatal(err)
	}
	return be, cr.Table.Ref()
}

// BenchmarkWriteItem: 1 KiB puts of distinct keys from 16×GOMAXPROCS
// goroutines.
func BenchmarkWriteItem(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItem(b, be, ref, 16)
}

func BenchmarkWriteItemSerial(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItem(b, be, ref, 0)
}

// BenchmarkWriteItemOverwrite: serial 1 KiB puts over 100 existing items,
// alternating between two sizes (every write changes the table's
// statistics).
func BenchmarkWriteItemOverwrite(b *testing.B) {
	be, ref := benchBackend(b)
	backendtest.BenchWriteItemOverwrite(b, be, ref)
}

// BenchmarkCounts: DescribeTable's statistics (Counts: the folded figures
// plus the slots not folded yet) beside a full count (TableStats), on
// tables of 1,000 and 10,000 items of 1 KiB.
func BenchmarkCounts(b *testing.B) {
	backendtest.BenchCounts(b, func() (backend.Backend, backend.TableRef) { return benchBackend(b) }, 1000, 10000)
}

// BenchmarkGetItem and BenchmarkQuery25 come when TransactWrite does:
// backendtest.Load fills their tables with transactions.
