package engine

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// TestSweeperRepairsStaleHits: TTL index entries that do not match their
// item (left by writes computed without the TTL index, e.g. before the
// write fence) are removed or corrected by the sweeper, so expired items
// behind them are reached, and a pass that has nothing left to do does
// not ask for another at once.
func TestSweeperRepairsStaleHits(t *testing.T) {
	b := memSQLite(t)
	e := startEngine(t, checked(t, b), Options{SweepInterval: time.Hour})
	ctx := t.Context()
	const name = "sweep-repair"
	createHashTable(t, e, name)
	ok(t)(e.UpdateTimeToLive(ctx, msAccount, &UpdateTimeToLiveInput{TableName: ptr(name),
		TimeToLiveSpecification: &TimeToLiveSpecification{Enabled: ptr(true), AttributeName: ptr("exp")}}))
	tb := waitBackfilled(t, e, name, 10*time.Second)
	now := time.Now().Unix()
	item := func(pk string, exp int64) attr.Item {
		return attr.Item{"pk": sv(pk), "exp": attr.MustNum(strconv.FormatInt(exp, 10))}
	}
	put := func(pk string, exp int64) {
		ok(t)(e.PutItem(ctx, msAccount, &PutItemInput{TableName: ptr(name), Item: item(pk, exp)}))
	}
	// raw writes the item (or deletes it) without touching any index entry.
	raw := func(pk string, it attr.Item) {
		k, _ := attr.KeyBytes(sv(pk))
		_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: tb.ref, PK: k, Fn: func([]byte) (backend.Change, error) {
			if it == nil {
				return backend.Change{Op: backend.Delete}, nil
			}
			return backend.Change{Op: backend.Put, Item: attr.EncodeItem(it)}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 600; i++ {
		pk := fmt.Sprintf("s%03d", i)
		put(pk, now-100)
		raw(pk, item(pk, now+3600)) // stale hit at now-100, no entry at now+3600
	}
	for i := 0; i < 20; i++ {
		pk := fmt.Sprintf("o%03d", i)
		put(pk, now-100)
		raw(pk, nil) // orphan hit
	}
	for i := 0; i < 50; i++ {
		put(fmt.Sprintf("g%03d", i), now-10) // genuinely expired
	}

	var total sweepStats
	for pass := 0; ; pass++ {
		if pass > 10 {
			t.Fatal("the sweeper keeps asking for another pass")
		}
		st, err := e.sweepTable(ctx, tb)
		if err != nil {
			t.Fatal(err)
		}
		total.deleted += st.deleted
		total.repaired += st.repaired
		if !st.more {
			break
		}
	}
	if total.deleted != 50 || total.repaired != 620 {
		t.Fatalf("sweep: %d deleted, %d repaired; want 50 and 620", total.deleted, total.repaired)
	}
	if st, err := e.sweepTable(ctx, tb); err != nil || st != (sweepStats{}) {
		t.Fatalf("second sweep: %+v %v; want nothing to do", st, err)
	}
	checkIndexes(t, e, name)
	for i := 0; i < 600; i++ {
		k, _ := attr.KeyBytes(sv(fmt.Sprintf("s%03d", i)))
		if res, err := b.GetItem(ctx, backend.GetItemParams{Table: tb.ref, PK: k}); err != nil || res.Item == nil {
			t.Fatalf("item s%03d (not expired) is gone: %v", i, err)
		}
	}
}

// TestIndexCreatedOverLeftovers: entries left under an index name (a GSI
// or TTL index deleted while its entries could not be dropped: a crash, or
// a concurrent UpdateTable that made the fenced DropIndex refuse) are
// cleared before an index of that name is created again, so the new index
// holds exactly its own entries.
func TestIndexCreatedOverLeftovers(t *testing.T) {
	b := memSQLite(t)
	e := startEngine(t, checked(t, b), Options{SweepInterval: time.Hour})
	ctx := t.Context()
	const name = "leftovers"
	createHashTable(t, e, name)
	for i := 0; i < 30; i++ {
		ok(t)(e.PutItem(ctx, msAccount, &PutItemInput{TableName: ptr(name), Item: attr.Item{"pk": sv(fmt.Sprintf("k%02d", i)),
			"g": sv("now"), "exp": attr.MustNum(strconv.FormatInt(time.Now().Unix()+3600, 10))}}))
	}
	tb := waitBackfilled(t, e, name, 10*time.Second)
	// Leftovers: entries of by_g and $ttl that no description has, as a
	// deletion that never dropped its entries leaves them.
	for i := 0; i < 30; i++ {
		k, _ := attr.KeyBytes(sv(fmt.Sprintf("k%02d", i)))
		gk, _ := attr.KeyBytes(sv("before"))
		tk, _ := attr.NumberKey("100")
		_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: tb.ref, PK: k, Fn: func(old []byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: old, PutIndex: []backend.IndexEntry{
				{IndexKey: backend.IndexKey{Index: "by_g", PK: gk}, Item: old},
				{IndexKey: backend.IndexKey{Index: ttlIndexName, PK: ttlPartition, SK: tk}, Item: old}}}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	addGSI(t, e, name, "by_g", "g", "S")
	ok(t)(e.UpdateTimeToLive(ctx, msAccount, &UpdateTimeToLiveInput{TableName: ptr(name),
		TimeToLiveSpecification: &TimeToLiveSpecification{Enabled: ptr(true), AttributeName: ptr("exp")}}))
	waitBackfilled(t, e, name, 10*time.Second)
	if got := queryPKs(t, e, name, "by_g", "g", "before"); len(got) != 0 {
		t.Errorf(`g = "before" returns %d items from a former index`, len(got))
	}
	checkIndexes(t, e, name)
}
