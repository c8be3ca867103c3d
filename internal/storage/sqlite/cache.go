package sqlite

import (
	"encoding/binary"
	"sync"
	"sync/atomic"

	"github.com/extenddb/extenddb/internal/storage"
)

// itemCache keeps recently written and read items in memory so that
// GetItem and the writer's read of the current item skip SQLite.
//
// Coherence. The writer is the only mutator of the database (a database
// file is used by one server process; another process's commit is seen
// through PRAGMA data_version and clears the cache). The writer applies a
// transaction's item changes to the cache only after COMMIT, and bumps gen
// before each batch begins and after its changes are applied. A reader
// that missed reads SQLite and inserts what it read only when gen did not
// move meanwhile and the key is still absent, so a value read from a
// snapshot older than a concurrent commit is never cached over a newer one.
type itemCache struct {
	gen    atomic.Uint64
	shards [cacheShards]cacheShard
}

const cacheShards = 16

type cacheShard struct {
	mu           sync.Mutex
	m            map[string]*centry
	head, tail   *centry // LRU list, head most recent
	bytes, max   int
	hits, misses int64 // lookups, for metrics (under mu)
}

type centry struct {
	key        string
	item       []byte
	prev, next *centry
}

func newItemCache(maxBytes int) *itemCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &itemCache{}
	for i := range c.shards {
		c.shards[i].m = map[string]*centry{}
		c.shards[i].max = maxBytes / cacheShards
	}
	return c
}

// cacheKey builds the cache key of an item.
func cacheKey(table int64, pk, sk []byte) string {
	b := make([]byte, 0, 8+binary.MaxVarintLen64+len(pk)+len(sk))
	b = binary.BigEndian.AppendUint64(b, uint64(table))
	b = binary.AppendUvarint(b, uint64(len(pk)))
	b = append(b, pk...)
	b = append(b, sk...)
	return string(b)
}

func (c *itemCache) shard(key string) *cacheShard {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return &c.shards[h%cacheShards]
}

func entrySize(e *centry) int { return len(e.key) + len(e.item) + 64 }

func (s *cacheShard) unlink(e *centry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (s *cacheShard) pushFront(e *centry) {
	e.next = s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

// get returns a cached item; the bytes must not be modified.
func (c *itemCache) get(key string) ([]byte, bool) {
	s := c.shard(key)
	s.mu.Lock()
	e, ok := s.m[key]
	if ok && s.head != e {
		s.unlink(e)
		s.pushFront(e)
	}
	if ok {
		s.hits++
	} else {
		s.misses++
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	return e.item, true
}

func (s *cacheShard) setLocked(key string, item []byte) {
	if e, ok := s.m[key]; ok {
		s.bytes -= entrySize(e)
		s.unlink(e)
		delete(s.m, key)
	}
	if item == nil {
		return
	}
	e := &centry{key: key, item: item}
	if entrySize(e) > s.max/4 {
		return
	}
	s.m[key] = e
	s.pushFront(e)
	s.bytes += entrySize(e)
	for s.bytes > s.max && s.tail != nil {
		old := s.tail
		s.unlink(old)
		delete(s.m, old.key)
		s.bytes -= entrySize(old)
	}
}

// set records a committed change (item nil: deleted). Writer only.
func (c *itemCache) set(key string, item []byte) {
	s := c.shard(key)
	s.mu.Lock()
	s.setLocked(key, item)
	s.mu.Unlock()
}

// fill inserts what a reader read, unless gen moved since gen0 or the key
// is present.
func (c *itemCache) fill(key string, item []byte, gen0 uint64) {
	s := c.shard(key)
	s.mu.Lock()
	if c.gen.Load() == gen0 {
		if _, ok := s.m[key]; !ok {
			s.setLocked(key, item)
		}
	}
	s.mu.Unlock()
}

// stats sums the shards' counters and content.
func (c *itemCache) stats() (hits, misses, bytes, entries, max int64) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		hits += s.hits
		misses += s.misses
		bytes += int64(s.bytes)
		entries += int64(len(s.m))
		max += int64(s.max)
		s.mu.Unlock()
	}
	return
}

// clear drops everything.
func (c *itemCache) clear() {
	c.gen.Add(1)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.head, s.tail, s.bytes = nil, nil, 0
		s.mu.Unlock()
	}
	c.gen.Add(1)
}

// cacheChange is a change made by the current write transaction.
type cacheChange struct {
	key  string
	item []byte
	// drop: the change leaves the key out of the cache at commit (a bulk
	// load's items); item is still what this transaction's later
	// operations read.
	drop bool
}

// Stats reports the reader pool and the item cache (storage.StatsReporter).
func (b *Backend) Stats() storage.Stats {
	st := storage.Stats{Retries: -1}
	if b.rdb != nil {
		ds := b.rdb.Stats()
		st.HasPool = true
		st.PoolMax, st.PoolInUse, st.PoolIdle = int64(ds.MaxOpenConnections), int64(ds.InUse), int64(ds.Idle)
		st.PoolWaits, st.PoolWaitTime = ds.WaitCount, ds.WaitDuration
	}
	if b.cache != nil {
		st.HasCache, st.CacheInUse = true, true
		st.CacheHits, st.CacheMisses, st.CacheBytes, st.CacheEntries, st.CacheMaxBytes = b.cache.stats()
	}
	return st
}
