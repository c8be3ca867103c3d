package backendtest

import (
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/extenddb/extenddb/internal/backend"
)

// testIndexUnderConcurrentWrites: writers race to move items between
// index partitions (each write deletes the entry its old item had and
// writes the new one, as the engine does). Afterwards every item has
// exactly one index entry, at the key its final value names, and nothing
// else is in the index.
func testIndexUnderConcurrentWrites(e *env) {
	ref := e.createTable("ixrace")
	const items, writers, rounds = 8, 8, 40
	key := func(i int) []byte { return strKey("item" + strconv.Itoa(i)) }
	entry := func(pk []byte, g int) backend.IndexEntry {
		return ixe("g", strKey("g"+strconv.Itoa(g%3)), numKey(strconv.Itoa(g)), "")
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for n := 0; n < rounds; n++ {
				i := r.IntN(items)
				g := r.IntN(1000)
				_, err := e.b.WriteItem(e.ctx, backend.WriteItemParams{Table: ref, PK: key(i), SK: nil, Fn: func(old []byte) (backend.Change, error) {
					ch := backend.Change{Op: backend.Put, Item: numItem(g), PutIndex: []backend.IndexEntry{entry(key(i), g)}}
					if old != nil {
						og := itemNumNoT(old)
						oe := entry(key(i), og)
						ch.DeleteIndex = []backend.IndexKey{oe.IndexKey}
					}
					return ch, nil
				}})
				if err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		e.t.Fatalf("concurrent index write: %v", err)
	}
	want := map[string]bool{}
	for i := 0; i < items; i++ {
		item := e.get(ref, key(i), nil)
		if item == nil {
			continue
		}
		g := itemNum(e.t, item)
		ie := entry(key(i), g)
		want[string(ie.PK)+"\x00"+string(ie.SK)+"\x00"+string(key(i))] = true
	}
	got := map[string]bool{}
	for _, rows := range [][]backend.Row{e.scanAll(backend.ScanParams{Table: ref, Index: "g"}, 5)} {
		for _, r := range rows {
			k := string(r.PK) + "\x00" + string(r.SK) + "\x00" + string(r.BasePK)
			if got[k] {
				e.t.Fatalf("index entry %q listed twice", k)
			}
			got[k] = true
		}
	}
	if len(got) != len(want) {
		e.t.Fatalf("index has %d entries, want %d (one per item)", len(got), len(want))
	}
	for k := range want {
		if !got[k] {
			e.t.Fatalf("index entry %q of an item's final value is missing", k)
		}
	}
}

// itemNumNoT decodes numItem bytes without a *testing.T (write functions
// may run on any goroutine); a malformed item counts as 0.
func itemNumNoT(item []byte) int {
	const prefix = `{"v":{"N":"`
	s := string(item)
	if len(s) < len(prefix)+3 || s[:len(prefix)] != prefix {
		return 0
	}
	n, _ := strconv.Atoi(s[len(prefix) : len(s)-3])
	return n
}
