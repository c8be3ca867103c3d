package sqlite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
)

// TestSpeculativeInsert: a write of a key the item cache does not hold
// runs Fn on "absent" first and inserts unless the key exists (one
// statement instead of a read and a write, ADR 0029). Disabled cache, so
// that every write takes that path: new keys are inserted by the
// speculation; existing keys are not overwritten by it, Fn runs again on
// the stored item (Old, index deletes and a condition on the old item
// see it), and after such misses the writer stops speculating for a
// while.
func TestSpeculativeInsert(t *testing.T) {
	ctx := context.Background()
	b := openT(t, Options{Path: filepath.Join(t.TempDir(), "spec.db"), ItemCacheBytes: -1})
	cr, err := b.CreateTable(ctx, backend.CreateTableParams{Account: "a", Name: "spec"})
	if err != nil {
		t.Fatal(err)
	}
	ref := cr.Table.Ref()
	put := func(pk string, fn backend.WriteFunc) (*backend.WriteItemResult, error) {
		return b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: []byte(pk), SK: []byte("s"), Fn: fn})
	}
	get := func(pk string) []byte {
		r, err := b.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte(pk), SK: []byte("s")})
		if err != nil {
			t.Fatal(err)
		}
		return r.Item
	}
	ix := func(v string) backend.IndexEntry {
		return backend.IndexEntry{IndexKey: backend.IndexKey{Index: "g", PK: []byte(v)}, Item: []byte(v)}
	}
	// New keys: the speculation holds, Fn runs once, on nil.
	for i := range 20 {
		calls := 0
		res, err := put(fmt.Sprint("k", i), func(old []byte) (backend.Change, error) {
			calls++
			if old != nil {
				t.Errorf("new key k%d: Fn saw %q", i, old)
			}
			return backend.Change{Op: backend.Put, Item: fmt.Appendf(nil, "v%d", i), PutIndex: []backend.IndexEntry{ix(fmt.Sprint("g", i))}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Old != nil || calls != 1 {
			t.Fatalf("new key k%d: Old %q, Fn called %d times", i, res.Old, calls)
		}
	}
	// The writer's counters are read after the writes were answered (the
	// answer happens after them).
	if b.w.specHits != 20 || b.w.specMisses != 0 {
		t.Fatalf("speculation: %d held, %d missed; want 20, 0", b.w.specHits, b.w.specMisses)
	}

	// An existing key: the speculative insert writes nothing, Fn runs
	// again on the stored item, whose index entry the write replaces.
	var seen [][]byte
	res, err := put("k3", func(old []byte) (backend.Change, error) {
		seen = append(seen, old)
		ch := backend.Change{Op: backend.Put, Item: []byte("new3"), PutIndex: []backend.IndexEntry{ix("h3")}}
		if old != nil {
			ch.DeleteIndex = []backend.IndexKey{{Index: "g", PK: []byte("g3")}}
		}
		return ch, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Old, []byte("v3")) || len(seen) != 2 || seen[0] != nil || !bytes.Equal(seen[1], []byte("v3")) {
		t.Fatalf("existing key: Old %q, Fn saw %q", res.Old, seen)
	}
	if got := get("k3"); !bytes.Equal(got, []byte("new3")) {
		t.Fatalf("existing key: stored %q, want new3", got)
	}
	q, err := b.Query(ctx, backend.QueryParams{Table: ref, Index: "g", PK: []byte("g3")})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Rows) != 0 {
		t.Fatalf("the old index entry g3 survived: %d rows", len(q.Rows))
	}

	// A condition on the old item ("must exist") fails on the speculative
	// run and holds on the stored item.
	errAbsent := errors.New("absent")
	_, err = put("k4", func(old []byte) (backend.Change, error) {
		if old == nil {
			return backend.Change{}, errAbsent
		}
		return backend.Change{Op: backend.Put, Item: append([]byte("upd-"), old...)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := get("k4"); !bytes.Equal(got, []byte("upd-v4")) {
		t.Fatalf("conditional update: stored %q", got)
	}
	// And on a missing key it fails as it should.
	if _, err := put("nope", func(old []byte) (backend.Change, error) {
		if old == nil {
			return backend.Change{}, errAbsent
		}
		return backend.Change{Op: backend.Put, Item: old}, nil
	}); !errors.Is(err, errAbsent) {
		t.Fatalf("conditional update of a missing key: %v", err)
	}
	if get("nope") != nil {
		t.Fatal("a failed write stored an item")
	}

	// After a miss the writer does not speculate for a while: the next
	// writes of existing keys are read first.
	overwrite := func(pk string) {
		if _, err := put(pk, func(old []byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: []byte("x")}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	misses := b.w.specMisses
	overwrite("k5")
	if b.w.specMisses != misses+1 {
		t.Fatalf("overwrite of an existing key: %d misses, want %d", b.w.specMisses, misses+1)
	}
	for i := 6; i < 12; i++ {
		overwrite(fmt.Sprint("k", i))
	}
	if b.w.specMisses != misses+1 {
		t.Fatalf("the writer kept speculating after a miss: %d more misses", b.w.specMisses-misses-1)
	}
}
