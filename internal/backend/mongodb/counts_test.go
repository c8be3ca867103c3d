package mongodb

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// TestCountsHandles: two backends on one database (two servers) write one
// table at once; the figures are exact through either and after both
// closed.
func TestCountsHandles(t *testing.T) {
	backendtest.CountsHandles(t, func(t *testing.T) backend.Backend { return openT(t, Options{}) })
}

// TestCountsAfterClose: the figures after a close and a new open.
func TestCountsAfterClose(t *testing.T) {
	b := openT(t, Options{})
	backendtest.CountsAfter(t, b, func() { b.Close() }, func() backend.Backend { return openT(t, Options{}) })
}

// countsChildEnv makes the test binary the writer TestCountsAfterKill
// kills.
const countsChildEnv = "EXTENDDB_TEST_MONGODB_COUNTS_CHILD"

// countsChild writes items of random sizes with index entries, deletes
// them and moves them in transactions until killed.
func countsChild() {
	var spec crashSpec
	if err := json.Unmarshal([]byte(os.Getenv(countsChildEnv)), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "counts child:", err)
		os.Exit(2)
	}
	b, err := Open(context.Background(), Options{URI: spec.URI, Database: spec.Database, LeaseDuration: spec.Lease, TxLockTimeout: txLockTimeout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "counts child:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	put := func(k []byte, size int) backend.WriteFunc {
		return func(old []byte) (backend.Change, error) {
			item := []byte(strings.Repeat("x", size))
			ch := backend.Change{Op: backend.Put, Item: item,
				PutIndex: []backend.IndexEntry{{IndexKey: backend.IndexKey{Index: "g", PK: []byte{byte(size % 3)}, SK: k}, Item: item[:1+size/2]}}}
			for g := range 3 {
				ch.DeleteIndex = append(ch.DeleteIndex, backend.IndexKey{Index: "g", PK: []byte{byte(g)}, SK: k})
			}
			return ch, nil
		}
	}
	for n := 0; ; n++ {
		i := rand.IntN(spec.Keys)
		k := crashKey(i)
		var err error
		switch x := rand.IntN(10); {
		case x < 6:
			_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: spec.Table, PK: k, Fn: put(k, 1+rand.IntN(40))})
		case x < 8:
			_, err = b.WriteItem(ctx, backend.WriteItemParams{Table: spec.Table, PK: k, Fn: func([]byte) (backend.Change, error) {
				ch := backend.Change{Op: backend.Delete}
				for g := range 3 {
					ch.DeleteIndex = append(ch.DeleteIndex, backend.IndexKey{Index: "g", PK: []byte{byte(g)}, SK: k})
				}
				return ch, nil
			}})
		default:
			k2 := crashKey((i + 1 + rand.IntN(spec.Keys-1)) % spec.Keys)
			_, err = b.TransactWrite(ctx, backend.TransactWriteParams{Ops: []backend.WriteItemParams{
				{Table: spec.Table, PK: k, Fn: put(k, 1+rand.IntN(40))},
				{Table: spec.Table, PK: k2, Fn: put(k2, 1+rand.IntN(40))},
			}})
		}
		// A lock or claim the killed process left (waited for past the
		// lease), or a race lost: nothing written.
		if backend.IsKind(err, backend.KindTransactionConflict) || backend.IsKind(err, backend.KindTransactionCanceled) ||
			backend.IsKind(err, backend.KindUnavailable) {
			err = nil
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "counts child:", err)
			os.Exit(2)
		}
		if n == 20 {
			fmt.Println("writing")
		}
	}
}

// TestCountsAfterKill: a writer process killed at random moments (hints
// inserted whose writes never came, deltas pending in documents, locks
// of transactions left) leaves figures equal to a full count, seen from a
// fresh process at once, and the next writer and folds keep them so.
func TestCountsAfterKill(t *testing.T) {
	const lease = 2 * time.Second
	b := openT(t, Options{LeaseDuration: lease, TxLockTimeout: txLockTimeout})
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "countskill", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	spec, _ := json.Marshal(crashSpec{URI: uri, Database: testDB, Table: ref, Keys: 12, Lease: lease})
	// The fresh process's sweep may roll a dead coordinator's committed
	// transaction forward while the figures are compared: they are
	// compared when two readings of them around the full count agree.
	check := func(what string) {
		t.Helper()
		fresh := openT(t, Options{LeaseDuration: lease, TxLockTimeout: txLockTimeout})
		counts := func() string {
			got, err := fresh.Counts(ctx, backend.CountsParams{Table: ref})
			if err != nil {
				t.Fatalf("%s: Counts: %v", what, err)
			}
			if !got.Counted {
				t.Fatalf("%s: figures unknown", what)
			}
			return fmt.Sprintf("%d items, %d bytes, indexes %v", got.Stats.ItemCount, got.Stats.SizeBytes, got.Stats.Indexes)
		}
		for attempt := 0; ; attempt++ {
			before := counts()
			full, err := fresh.TableStats(ctx, backend.TableStatsParams{Table: ref})
			if err != nil {
				t.Fatal(err)
			}
			counted := fmt.Sprintf("%d items, %d bytes, indexes %v", full.ItemCount, full.SizeBytes, full.Indexes)
			after := counts()
			if before != after && attempt < 20 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if before != counted {
				t.Fatalf("%s: maintained %s, counted %s", what, before, counted)
			}
			return
		}
	}
	hintsLeft := 0
	for round := range 4 {
		runAndKill(t, round, countsChildEnv, spec)
		n, err := b.claims(ref.ID).CountDocuments(ctx, bson.D{})
		if err != nil {
			t.Fatal(err)
		}
		hintsLeft += int(n)
		check(fmt.Sprintf("round %d, after the kill", round))
	}
	t.Logf("%d statistics hints left behind by the killed processes over 4 rounds", hintsLeft)
	// Once the dead writers' leases and locks ended, every hint is
	// folded or dropped.
	time.Sleep(txLockTimeout + 2*lease + 500*time.Millisecond)
	if _, err := b.ledger.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	check("after the leases ended")
	if n, err := b.claims(ref.ID).CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("%d statistics hints left after the folds (%v)", n, err)
	}
}

// TestCountsClaimInsertedAgain: a version claim a fold consumed and
// deleted, inserted again under the same _id by a writer that read the
// document long before (its write then finds the document moved on),
// does not make the delta the document still carries count twice.
func TestCountsClaimInsertedAgain(t *testing.T) {
	b := openT(t, Options{})
	ctx := t.Context()
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: fmt.Sprintf("acct-%08x", rand.Uint32()), Name: "claimagain", Desc: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	pk := []byte("k")
	for _, item := range []string{"first", "second, longer"} {
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(item)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	want := "1 items, 14 bytes"
	figures := func() string {
		t.Helper()
		r, err := b.Counts(ctx, backend.CountsParams{Table: ref})
		if err != nil || !r.Counted {
			t.Fatalf("Counts: %v %v", r, err)
		}
		return fmt.Sprintf("%d items, %d bytes", r.Stats.ItemCount, r.Stats.SizeBytes)
	}
	if got := figures(); got != want {
		t.Fatalf("figures %s, want %s", got, want)
	}
	d, err := b.readDoc(ctx, b.items(ref.ID), itemID(pk, nil))
	if err != nil || d == nil {
		t.Fatalf("document %v: %v", d, err)
	}
	carries := false
	for _, sd := range d.sd {
		carries = carries || sd.R == claimID(itemID(pk, nil), 1, 0)
	}
	if d.v != 2 || !carries {
		t.Fatalf("document %+v (%v): want version 2 carrying the delta of claim %s", d, err, claimID(itemID(pk, nil), 1, 0))
	}
	// The stale writer's claim: same _id, its own nonce.
	if _, err := b.claims(ref.ID).InsertOne(ctx, claimDoc{ID: claimID(d.id, 1, 0), Exp: time.Now().Add(time.Minute).UnixMilli(), T: nowMs(), W: nonce()}); err != nil {
		t.Fatal(err)
	}
	if got := figures(); got != want {
		t.Fatalf("after the claim was inserted again: figures %s, want %s", got, want)
	}
	if n, err := b.claims(ref.ID).CountDocuments(ctx, bson.D{}); err != nil || n != 0 {
		t.Fatalf("%d claims left (%v): the fold is done with a claim whose document moved past it", n, err)
	}
}
