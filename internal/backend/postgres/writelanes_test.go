package postgres

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// TestWriteLanesCombine: concurrent writers of one server share
// transactions (more plans than batches), and every write lands once:
// puts of new keys and read-modify-write increments of shared counters,
// raced by a second server whose writes make some guesses stale.
func TestWriteLanesCombine(t *testing.T) {
	need(t)
	b1 := openT(t, Options{DSN: testDSN, MaxConns: 8})
	b2 := openT(t, Options{DSN: testDSN, MaxConns: 4, WriteLanes: -1})
	ref := createTable(t, b1, "write-lanes")
	ctx := t.Context()
	const workers, per, counters = 24, 40, 6
	incr := func(old []byte) (backend.Change, error) {
		n := 0
		if old != nil {
			fmt.Sscanf(string(old), "%d", &n)
		}
		return backend.Change{Op: backend.Put, Item: []byte(fmt.Sprint(n + 1))}, nil
	}
	var wg sync.WaitGroup
	for w := range workers {
		b := b1
		if w%6 == 5 {
			b = b2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				pk := fmt.Appendf(nil, "new-%d-%d", w, i)
				fn := func([]byte) (backend.Change, error) {
					return backend.Change{Op: backend.Put, Item: append([]byte("v"), pk...)}, nil
				}
				if i%2 == 1 {
					pk, fn = fmt.Appendf(nil, "c%d", (w+i)%counters), incr
				}
				if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: fn}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for k := range counters {
		got, err := b2.GetItem(ctx, backend.GetItemParams{Table: ref, PK: fmt.Appendf(nil, "c%d", k)})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		fmt.Sscanf(string(got.Item), "%d", &n)
		total += n
	}
	if want := workers * per / 2; total != want {
		t.Fatalf("counters sum to %d, want %d", total, want)
	}
	for w := range workers {
		for i := 0; i < per; i += 2 {
			pk := fmt.Appendf(nil, "new-%d-%d", w, i)
			got, err := b2.GetItem(ctx, backend.GetItemParams{Table: ref, PK: pk})
			if err != nil || string(got.Item) != "v"+string(pk) {
				t.Fatalf("item %s: %q %v", pk, got.Item, err)
			}
		}
	}
	batches, plans := b1.WriteLaneStats()
	t.Logf("write lanes: %d plans in %d batches; %d combined batches refused", plans, batches, b1.specCombinedRefused.Load())
	if batches == 0 || plans <= batches {
		t.Fatalf("write lanes combined nothing: %d plans in %d batches", plans, batches)
	}
	// The same counters reach /metrics through Stats.
	st := b1.Stats()
	applied, refused := b1.SpeculationStats()
	if !st.HasPipelining || st.WriteBatches != batches || st.WriteBatchWrites != plans ||
		st.SpeculativeApplied != applied || st.SpeculativeRefused != refused || applied == 0 {
		t.Fatalf("Stats %+v, want write batches %d/%d, speculative %d/%d", st, batches, plans, applied, refused)
	}
}

// TestWriteLanesRefusedBatch: when one plan of a combined batch was built
// on a stale guess, the whole transaction writes nothing and every plan is
// answered "send alone"; sent alone, the good plan applies and the stale
// one is refused (then the locked path decides on the real item).
func TestWriteLanesRefusedBatch(t *testing.T) {
	need(t)
	b1 := openT(t, Options{DSN: testDSN, WriteLanes: -1})
	b2 := openT(t, Options{DSN: testDSN, WriteLanes: -1})
	ref := createTable(t, b1, "write-lanes-refused")
	ctx := t.Context()
	put := func(b *Backend, pk, v string) {
		t.Helper()
		if _, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(pk), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(v)}, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(pk string) string {
		t.Helper()
		got, err := b2.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte(pk)})
		if err != nil {
			t.Fatal(err)
		}
		return string(got.Item)
	}
	put(b1, "a", "a1")
	put(b1, "b", "b1")
	put(b2, "b", "b2") // b1's guess of b is stale
	plan := func(pk, v string) *specPlan {
		t.Helper()
		ops := []backend.WriteItemParams{{Table: ref, PK: []byte(pk), Fn: func([]byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte(v)}, nil
		}}}
		p := b1.planSpeculative(ops, []string{guessKey(ref.ID, []byte(pk), empty)}, []int64{lockKey(ref.ID, []byte(pk), empty)}, []int64{ref.ID})
		if p == nil {
			t.Fatalf("no speculative plan for %s", pk)
		}
		return p
	}
	pa, pb := plan("a", "a2"), plan("b", "b3")
	outs := b1.sendPlans(ctx, []*specPlan{pa, pb})
	if !slices.Equal(outs, []specOutcome{{alone: true}, {alone: true}}) {
		t.Fatalf("combined batch with a stale guess: %+v, want both sent alone", outs)
	}
	if a, b := get("a"), get("b"); a != "a1" || b != "b2" {
		t.Fatalf("a refused batch wrote: a=%q b=%q", a, b)
	}
	if o := b1.sendPlans(ctx, []*specPlan{pa})[0]; !o.done || o.err != nil {
		t.Fatalf("good plan alone: %+v", o)
	}
	if o := b1.sendPlans(ctx, []*specPlan{pb})[0]; o.done || o.alone {
		t.Fatalf("stale plan alone: %+v, want refused (locked path)", o)
	}
	if a, b := get("a"), get("b"); a != "a2" || b != "b2" {
		t.Fatalf("after the plans alone: a=%q b=%q", a, b)
	}
}

// TestConformanceNoWriteLanes runs the suite with every speculative write
// in a transaction of its own.
func TestConformanceNoWriteLanes(t *testing.T) {
	need(t)
	if testing.Short() {
		t.Skip("short")
	}
	b := openT(t, Options{DSN: testDSN, WriteLanes: -1})
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
}

// TestWriteLanesCombineRules: a batch takes queued plans in order, leaving
// for later a plan whose key is already in the batch or that expects
// another version of a table in it, and never more than wlaneBatch;
// abandoned plans are dropped.
func TestWriteLanesCombineRules(t *testing.T) {
	l := &wlanes{inflight: map[string]int{}}
	pend := func(key string, table, version int64) *wpending {
		return &wpending{plan: &specPlan{keys: []string{key}, tabs: []int64{table}, versions: []int64{version}}}
	}
	a, b, dupA, otherVersion, otherTable := pend("a", 1, 1), pend("b", 1, 1), pend("a", 1, 1), pend("c", 1, 2), pend("d", 2, 7)
	gone := pend("e", 1, 1)
	gone.state.Store(wAbandoned)
	l.active.Store(6)
	batch, rest := l.combine([]*wpending{a, gone, b, dupA, otherVersion, otherTable})
	if !slices.Equal(batch, []*wpending{a, b, otherTable}) || !slices.Equal(rest, []*wpending{dupA, otherVersion}) {
		t.Fatalf("batch %v rest %v", batch, rest)
	}
	for _, p := range batch {
		if p.state.Load() != wTaken {
			t.Fatal("a plan in the batch is not marked taken")
		}
	}
	if dupA.state.Load() != wQueued || l.active.Load() != 5 {
		t.Fatalf("left plan state %d, active %d (the abandoned plan is no longer counted)", dupA.state.Load(), l.active.Load())
	}
	var many []*wpending
	for i := range wlaneBatch + 3 {
		many = append(many, pend(fmt.Sprint(i), 1, 1))
	}
	batch, rest = l.combine(many)
	if len(batch) != wlaneBatch || len(rest) != 3 {
		t.Fatalf("%d plans: batch of %d, %d left", len(many), len(batch), len(rest))
	}
	if !l.claim([]string{"x", "y"}) || l.claim([]string{"y"}) {
		t.Fatal("claim: a key in flight was claimed twice")
	}
	l.release([]string{"x", "y"})
	if !l.claim([]string{"y"}) {
		t.Fatal("claim after release refused")
	}
}
