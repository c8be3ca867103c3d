package itemcache

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

func TestKeyDistinguishesPartitionAndSort(t *testing.T) {
	// "ab"+"c" and "a"+"bc" must not collide; nor tables.
	keys := map[string]bool{}
	for _, k := range []string{
		Key(1, []byte("ab"), []byte("c")),
		Key(1, []byte("a"), []byte("bc")),
		Key(2, []byte("ab"), []byte("c")),
		Key(1, []byte("abc"), nil),
	} {
		if keys[k] {
			t.Fatalf("key collision: %q", k)
		}
		keys[k] = true
	}
	if got := string(AppendKey(nil, 1, []byte("ab"), []byte("c"))); got != Key(1, []byte("ab"), []byte("c")) {
		t.Fatal("AppendKey and Key differ")
	}
}

func TestFillAndGenerations(t *testing.T) {
	c := New(1<<20, 4)
	k := Key(1, []byte("p"), nil)
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("hit in an empty cache")
	}
	_, _, g := c.Get(k)
	c.Fill(k, nil, g) // absence is never kept
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("absence was cached")
	}
	_, _, g = c.Get(k)
	c.Invalidate(k) // a write of k happened after the read looked
	c.Fill(k, []byte("old"), g)
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("Fill after Invalidate inserted a stale value")
	}
	_, _, g = c.Get(k)
	c.BumpEpoch() // a writer's commit (SQLite)
	c.Fill(k, []byte("old"), g)
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("Fill after BumpEpoch inserted a stale value")
	}
	_, _, g = c.Get(k)
	c.Fill(k, []byte("v1"), g)
	if it, ok, _ := c.Get(k); !ok || string(it) != "v1" {
		t.Fatalf("Get = %q %v, want v1", it, ok)
	}
	c.Fill(k, []byte("v0"), c.Generation(k)) // present: Fill never replaces
	if it, _, _ := c.GetBytes(AppendKey(nil, 1, []byte("p"), nil)); string(it) != "v1" {
		t.Fatalf("GetBytes = %q, want v1", it)
	}
	c.Set(k, []byte("v2"))
	if it, _, _ := c.Get(k); string(it) != "v2" {
		t.Fatalf("after Set: %q", it)
	}
	c.Set(k, nil)
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("Set(nil) kept the key")
	}
	c.Set(k, []byte("v3"))
	g = c.Generation(k)
	c.Clear()
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("Clear kept the key")
	}
	c.Fill(k, []byte("v3"), g)
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("Fill with a generation from before Clear inserted")
	}
	st := c.Stats()
	if st.Entries != 0 || st.Bytes != 0 || st.Hits == 0 || st.Misses == 0 || st.MaxBytes != 1<<20 {
		t.Fatalf("Stats %+v", st)
	}
}

func TestEvictionKeepsBoundAndRecency(t *testing.T) {
	const max = 4 << 10
	c := New(max, 1)
	item := make([]byte, 100)
	for i := range 100 {
		c.Set(fmt.Sprint(i), item)
		if i == 50 {
			continue
		}
		c.Get("0") // key 0 stays the most recent
	}
	st := c.Stats()
	if st.Bytes > max {
		t.Fatalf("bytes %d over the bound %d", st.Bytes, max)
	}
	if _, ok, _ := c.Get("0"); !ok {
		t.Fatal("the most recently read key was evicted")
	}
	if _, ok, _ := c.Get("1"); ok {
		t.Fatal("an old key survived")
	}
	if _, ok, _ := c.Get("99"); !ok {
		t.Fatal("the newest key is missing")
	}
	c.Set("big", make([]byte, max/4))
	if _, ok, _ := c.Get("big"); ok {
		t.Fatal("an entry over a quarter of the shard was kept")
	}
	if New(0, 4) != nil {
		t.Fatal("New(0) is not nil")
	}
}

func TestGetBytesDoesNotAllocate(t *testing.T) {
	c := New(1<<20, 16)
	c.Set(Key(7, []byte("pk"), []byte("sk")), []byte("item"))
	pk, sk := []byte("pk"), []byte("sk")
	allocs := testing.AllocsPerRun(100, func() {
		var buf [64]byte
		if _, ok, _ := c.GetBytes(AppendKey(buf[:0], 7, pk, sk)); !ok {
			panic("miss")
		}
	})
	if allocs != 0 {
		t.Fatalf("GetBytes allocates %v times per lookup", allocs)
	}
}

// TestConcurrentFillNeverStale: readers fill while a writer invalidates
// before each change becomes visible to it; no reader ever finds a value
// older than the last one the writer finished writing before it looked.
func TestConcurrentFillNeverStale(t *testing.T) {
	c := New(1<<20, 8)
	k := Key(1, []byte("k"), nil)
	var mu sync.RWMutex // stands for the database
	var db, done int
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= 2000; i++ {
			mu.Lock()
			db = i
			mu.Unlock()
			c.Invalidate(k)
			mu.Lock()
			done = i
			mu.Unlock()
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4000 {
				mu.RLock()
				floor := done
				mu.RUnlock()
				it, ok, g := c.Get(k)
				if ok {
					var v int
					fmt.Sscan(string(it), &v)
					if v < floor {
						t.Errorf("read %d after write %d finished", v, floor)
						return
					}
					continue
				}
				mu.RLock()
				v := db
				mu.RUnlock()
				runtime.Gosched() // lets the writer commit between the read and the fill
				c.Fill(k, []byte(fmt.Sprint(v)), g)
			}
		}()
	}
	wg.Wait()
}

// TestReplaceOrder: of two writes of one key, the one that finishes second
// keeps its value only if it began after the first finished.
func TestReplaceOrder(t *testing.T) {
	c := New(1<<20, 4)
	k := Key(1, []byte("k"), nil)
	g1 := c.Generation(k) // write 1 begins
	g2 := c.Generation(k) // write 2 begins (commits after write 1)
	c.Replace(k, []byte("v2"), g2)
	c.Replace(k, []byte("v1"), g1) // finishes last, began before v2 finished
	if it, ok, _ := c.Get(k); ok {
		t.Fatalf("cache kept %q from overlapping writes", it)
	}
	g3 := c.Generation(k) // begins after both finished
	c.Replace(k, []byte("v3"), g3)
	if it, ok, _ := c.Get(k); !ok || string(it) != "v3" {
		t.Fatalf("Get = %q %v, want v3", it, ok)
	}
	_, _, gr := c.Get(k) // a read looked (hit), then a write replaced
	g4 := c.Generation(k)
	c.Replace(k, nil, g4) // a delete
	c.Fill(k, []byte("v3"), gr)
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("a delete's Replace kept a value, or a read's fill older than it was kept")
	}
	g5 := c.Generation(k)
	c.Clear()
	c.Replace(k, []byte("v5"), g5)
	if _, ok, _ := c.Get(k); ok {
		t.Fatal("Replace with a generation from before Clear inserted")
	}
}

// TestConcurrentReplaceNeverStale: several writers commit increasing
// values and Replace after their commit, readers fill after a miss; no
// read returns a value older than one acknowledged before it began.
func TestConcurrentReplaceNeverStale(t *testing.T) {
	c := New(1<<20, 2)
	k := Key(1, []byte("k"), nil)
	var mu sync.Mutex // stands for the database
	var db, acked int
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1500 {
				g := c.Generation(k)
				mu.Lock()
				db++
				v := db
				mu.Unlock()
				runtime.Gosched() // another write may commit and finish here
				c.Replace(k, []byte(fmt.Sprint(v)), g)
				mu.Lock()
				acked = max(acked, v)
				mu.Unlock()
			}
		}()
	}
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3000 {
				mu.Lock()
				floor := acked
				mu.Unlock()
				it, ok, g := c.Get(k)
				if !ok {
					mu.Lock()
					v := db
					mu.Unlock()
					runtime.Gosched()
					c.Fill(k, []byte(fmt.Sprint(v)), g)
					continue
				}
				var v int
				fmt.Sscan(string(it), &v)
				if v < floor {
					t.Errorf("read %d after write %d was acknowledged", v, floor)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestReplaceNewKeysEnterCold: writes of new keys fill free space but do
// not evict entries that reads use; a written key the cache held stays
// hot.
func TestReplaceNewKeysEnterCold(t *testing.T) {
	const max = 8 << 10
	c := New(max, 1)
	item := make([]byte, 100)
	hot := []string{"h0", "h1", "h2", "h3", "h4"}
	for _, k := range hot {
		c.Fill(k, item, c.Generation(k))
	}
	for i := range 500 { // a stream of new keys, far beyond the bound
		k := fmt.Sprint("new", i)
		c.Replace(k, item, c.Generation(k))
	}
	for _, k := range hot {
		if _, ok, _ := c.Get(k); !ok {
			t.Fatalf("writes of new keys evicted %s", k)
		}
	}
	if st := c.Stats(); st.Bytes > max || st.Entries <= int64(len(hot)) {
		t.Fatalf("Stats %+v: bound exceeded, or new keys did not fill free space", st)
	}
	c.Replace("h0", []byte("v"), c.Generation("h0"))
	for i := range 500 {
		k := fmt.Sprint("more", i)
		c.Replace(k, item, c.Generation(k))
	}
	if it, ok, _ := c.Get("h0"); !ok || string(it) != "v" {
		t.Fatalf("a held key written again: %q %v, want v kept hot", it, ok)
	}
}
