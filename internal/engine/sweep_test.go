package engine

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/sqlite"
)

// TestSweeperRepairsStaleHits: TTL index entries that do not match their
// item (left by writes computed without the TTL index, e.g. before the
// write fence) are removed or corrected by the sweeper, so expired items
// behind them are reached, and a pass that has nothing left to do does
// not ask for another at once.
func TestSweeperRepairsStaleHits(t *testing.T) {
	b, err := sqlite.Open(context.Background(), sqlite.Options{Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	e := startEngine(t, b, Options{SweepInterval: time.Hour})
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
		_, err := b.WriteItem(ctx, storage.WriteItemParams{Table: tb.ref, PK: k, Fn: func([]byte) (storage.Change, error) {
			if it == nil {
				return storage.Change{Op: storage.Delete}, nil
			}
			return storage.Change{Op: storage.Put, Item: attr.EncodeItem(it)}, nil
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
		if res, err := b.GetItem(ctx, storage.GetItemParams{Table: tb.ref, PK: k}); err != nil || res.Item == nil {
			t.Fatalf("item s%03d (not expired) is gone: %v", i, err)
		}
	}
}
