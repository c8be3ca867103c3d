package postgres

import (
	"crypto/rand"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
)

// TestLargeKeys: a PostgreSQL btree entry holds at most about 2.7 KB, so
// incompressible keys near DynamoDB's limits (partition 2048 B + sort
// 1024 B) do not fit. Keys of up to 2600 bytes in total (table keys, and
// index plus table keys) work; larger ones answer KindUnsupported and
// write nothing.
func TestLargeKeys(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: testDSN})
	ref := createTable(t, b, "bigkeys")
	rnd := func(n int) []byte { p := make([]byte, n); rand.Read(p); return p }
	write := func(pk, sk, ipk, isk []byte) error {
		_, err := b.WriteItem(t.Context(), backend.WriteItemParams{Table: ref, PK: pk, SK: sk, Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("x"),
				PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: ipk, SK: isk}, Item: []byte("x")}}}, nil
		}})
		return err
	}
	if err := write(rnd(2048), rnd(552), rnd(10), nil); err != nil {
		t.Fatalf("2600 bytes of table keys: %v", err)
	}
	if err := write(rnd(1000), rnd(300), rnd(1000), rnd(300)); err != nil {
		t.Fatalf("2600 bytes of index plus table keys: %v", err)
	}
	pk, sk := rnd(2048), rnd(1024)
	err := write(pk, sk, rnd(1), nil)
	if !backend.IsKind(err, backend.KindUnsupported) {
		t.Fatalf("maximal keys: %v, want KindUnsupported", err)
	}
	if g, err := b.GetItem(t.Context(), backend.GetItemParams{Table: ref, PK: pk, SK: sk}); err != nil || g.Item != nil {
		t.Fatalf("refused write left %q (%v)", g.Item, err)
	}
}
