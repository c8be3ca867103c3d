package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func put(t *testing.T, b *Backend, ref backend.TableRef, pk, v string) {
	t.Helper()
	if _, err := b.WriteItem(t.Context(), backend.WriteItemParams{Table: ref, PK: []byte(pk), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Put, Item: []byte(v)}, nil
	}}); err != nil {
		t.Fatal(err)
	}
}

func eventual(t *testing.T, b *Backend, ref backend.TableRef, pk string) string {
	t.Helper()
	res, err := b.GetItem(t.Context(), backend.GetItemParams{Table: ref, PK: []byte(pk), Eventual: true})
	if err != nil {
		t.Fatal(err)
	}
	return string(res.Item)
}

// TestReadCacheConformance runs the storage suite on a server alone on its
// database, so that every eventually consistent read can be answered by
// the read cache, and checks that it was.
func TestReadCacheConformance(t *testing.T) {
	dsn := ownDatabase(t)
	b := openT(t, Options{DSN: dsn})
	if !b.readCacheOn() || !b.Stats().CacheInUse {
		t.Fatal("a server alone on its database does not use its read cache")
	}
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
	if hits := b.Stats().CacheHits; hits == 0 {
		t.Fatal("no read was answered by the read cache")
	}
	if !b.readCacheOn() {
		t.Fatal("the read cache went off with no other server attached")
	}
}

// TestReadCacheOtherServer: a second server attached to the database turns
// the first one's read cache off before the second can write, and a value
// cached before is not answered when the first is alone again.
func TestReadCacheOtherServer(t *testing.T) {
	dsn := ownDatabase(t)
	b1 := openT(t, Options{DSN: dsn})
	ref := createTable(t, b1, "presence")
	put(t, b1, ref, "k", "v1")
	// The write left its item in the cache (ADR 0039): the first read hits.
	if got := eventual(t, b1, ref, "k"); got != "v1" || b1.Stats().CacheHits != 1 || b1.Stats().CacheMisses != 0 {
		t.Fatalf("alone: %q, %d hits, %d misses", got, b1.Stats().CacheHits, b1.Stats().CacheMisses)
	}

	b2, err := Open(t.Context(), Options{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	// b2's first heartbeat notified b1 before Open returned; the
	// notification arrives within a round trip.
	waitFor(t, time.Second, "b1 still uses its cache beside b2", func() bool { return !b1.readCacheOn() })
	if b2.readCacheOn() {
		t.Fatal("b2 uses its cache beside b1")
	}
	put(t, b2, ref, "k", "v2")
	if got := eventual(t, b1, ref, "k"); got != "v2" {
		t.Fatalf("b1 beside b2 read %q, want b2's write v2", got)
	}
	// b1 keeps reading from the database while b2 is attached.
	time.Sleep(2 * presenceInterval)
	if b1.readCacheOn() {
		t.Fatal("b1 went back to its cache while b2 is attached")
	}
	b2.Close()
	deadline := time.Now().Add(3 * presenceInterval)
	for !b1.readCacheOn() {
		if time.Now().After(deadline) {
			p := b1.presence
			t.Fatalf("b1 does not use its cache %s after b2 left: its last count found %d other sessions",
				3*presenceInterval, p.others.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := eventual(t, b1, ref, "k"); got != "v2" {
		t.Fatalf("b1 alone again read %q, want v2 (a value cached before b2 came is stale)", got)
	}
}

// TestReadCacheOtherClient: any other client session on the database (one
// that does not announce itself, such as an older server or psql) turns the
// cache off within a count.
func TestReadCacheOtherClient(t *testing.T) {
	dsn := ownDatabase(t)
	b := openT(t, Options{DSN: dsn})
	if !b.readCacheOn() {
		t.Fatal("alone, the read cache is off")
	}
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*presenceInterval, "the cache is still used beside another client's session", func() bool { return !b.readCacheOn() })
	if b.Stats().CacheInUse {
		t.Fatal("Stats reports the cache in use beside another client")
	}
	c.Close(t.Context())
	waitFor(t, 3*presenceInterval, "the cache is still off after the other client left", b.readCacheOn)
}

// TestReadCacheWriteFill: a committed Put leaves its item in the read
// cache, a Delete drops it, and a canceled transaction leaves the key out
// (the next read goes to the database and finds the committed item).
func TestReadCacheWriteFill(t *testing.T) {
	dsn := ownDatabase(t)
	b := openT(t, Options{DSN: dsn})
	ref := createTable(t, b, "write-fill")
	ctx := t.Context()
	miss := func() int64 { return b.Stats().CacheMisses }
	put(t, b, ref, "a", "a1")
	put(t, b, ref, "a", "a2") // began after the first finished: replaces it
	m0 := miss()
	if got := eventual(t, b, ref, "a"); got != "a2" || miss() != m0 {
		t.Fatalf("after two puts: %q, %d misses, want a2 from the cache", got, miss()-m0)
	}
	if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte("a"), Fn: func([]byte) (backend.Change, error) {
		return backend.Change{Op: backend.Delete}, nil
	}}); err != nil {
		t.Fatal(err)
	}
	if got := eventual(t, b, ref, "a"); got != "" || miss() != m0+1 {
		t.Fatalf("after the delete: %q, %d misses, want absent from the database", got, miss()-m0)
	}
	put(t, b, ref, "b", "b1")
	fail := errors.New("condition failed")
	_, err := b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
		{Table: ref, PK: []byte("b"), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("b2")}, nil
		}},
		{Table: ref, PK: []byte("c"), Fn: func([]byte) (backend.Change, error) { return backend.Change{}, fail }},
	}})
	if err == nil {
		t.Fatal("the transaction was not canceled")
	}
	m1 := miss()
	if got := eventual(t, b, ref, "b"); got != "b1" || miss() != m1+1 {
		t.Fatalf("after a canceled transaction: %q, %d misses, want b1 from the database", got, miss()-m1)
	}
}
