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
