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

// BenchmarkGetItem and BenchmarkQuery25 come when TransactWrite does:
// backendtest.Load fills their tables with transactions.
