package postgres

import (
	"sync"
)

// readCache answers eventually consistent GetItems (storage.GetItemParams
// .Eventual, DynamoDB's default read) from memory while this server is the
// only one writing the database (presence.go). ADR 0037.
//
// Coherence with this process's own writes. Every write of this process
// (WriteItem, TransactWrite) drops its keys from the cache after its
// outcome is known, committed or not, and bumps its keys' shard generation
// in the same critical section; DeleteTable and BulkLoad clear the cache.
// A GetItem that missed reads the database and inserts what it read only
// when its shard's generation did not move meanwhile and the key is still
// absent, under the shard's lock: a value read from a snapshot older than a
// concurrent commit is either dropped by that write's invalidation (it was
// inserted first) or refused (the generation moved). A write is answered
// only after its invalidation, so a read that starts after a write was
// acknowledged never finds the older value. Writes never insert their new
// value: two writers of one key finish in an order unrelated to their
// commit order, and a read refills the key from the database.
//
// Other servers' writes are not seen; the cache is used only while
// presence says no other server is registered, and is cleared whenever
// that stops being true.
type readCache struct {
	shards [readShards]readShard
	max    int
}

const readShards = 64

// defaultReadCacheBytes bounds the cache when Options.ReadCacheBytes is 0.
const defaultReadCacheBytes = 16 << 20

type readShard struct {
	mu           sync.Mutex
	gen          uint64
	m            map[string]*rentry
	head, tail   *rentry // LRU list, head most recent
	bytes, max   int
	hits, misses int64
}

type rentry struct {
	key        string
	item       []byte
	prev, next *rentry
}

func newReadCache(maxBytes int) *readCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &readCache{max: maxBytes}
	for i := range c.shards {
		c.shards[i].m = map[string]*rentry{}
		c.shards[i].max = maxBytes / readShards
	}
	return c
}

func (c *readCache) shard(key string) *readShard {
	return &c.shards[fnv32(key)%readShards]
}

// fnv32 is FNV-1a of key: the shard of a cache key.
func fnv32(key string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return h
}

func rentrySize(e *rentry) int { return len(e.key) + len(e.item) + 64 }

func (s *readShard) unlink(e *rentry) {
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

func (s *readShard) pushFront(e *rentry) {
	e.next = s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

func (s *readShard) dropLocked(key string) {
	if e, ok := s.m[key]; ok {
		s.bytes -= rentrySize(e)
		s.unlink(e)
		delete(s.m, key)
	}
}

// get returns a cached item (never nil when ok) and, on a miss, the
// shard generation to hand to fill. The bytes must not be modified.
func (c *readCache) get(key string) (item []byte, ok bool, gen uint64) {
	s := c.shard(key)
	s.mu.Lock()
	e, ok := s.m[key]
	if ok {
		if s.head != e {
			s.unlink(e)
			s.pushFront(e)
		}
		s.hits++
		item = e.item
	} else {
		s.misses++
	}
	gen = s.gen
	s.mu.Unlock()
	return item, ok, gen
}

// generation is the key's shard generation, for a fill of a read that did
// not look the key up first.
func (c *readCache) generation(key string) uint64 {
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// fill inserts an item a read found (nil: absent, not kept) unless the
// shard's generation moved since gen or the key is present. The cache
// keeps item itself: the caller must not modify it afterwards.
func (c *readCache) fill(key string, item []byte, gen uint64) {
	if item == nil {
		return
	}
	s := c.shard(key)
	e := &rentry{key: key, item: item}
	if rentrySize(e) > s.max/4 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	if _, ok := s.m[key]; ok {
		return
	}
	s.insertLocked(e)
}

// insertLocked adds e (its key absent) as the most recent entry and
// evicts the least recent ones beyond the shard's bound.
func (s *readShard) insertLocked(e *rentry) {
	s.m[e.key] = e
	s.pushFront(e)
	s.bytes += rentrySize(e)
	for s.bytes > s.max && s.tail != nil {
		old := s.tail
		s.unlink(old)
		delete(s.m, old.key)
		s.bytes -= rentrySize(old)
	}
}

// invalidate drops a key a write of this process may have changed and
// moves its shard's generation, so no read that began before can insert.
func (c *readCache) invalidate(key string) {
	s := c.shard(key)
	s.mu.Lock()
	s.dropLocked(key)
	s.gen++
	s.mu.Unlock()
}

// clear drops everything and moves every generation.
func (c *readCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		if len(s.m) > 0 {
			clear(s.m)
		}
		s.head, s.tail, s.bytes = nil, nil, 0
		s.gen++
		s.mu.Unlock()
	}
}

// stats sums the shards' counters and content.
func (c *readCache) stats() (hits, misses, bytes, entries, max int64) {
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

// readCacheOn reports whether eventually consistent reads may be answered
// from the cache now: presence has seen no other server recently.
func (b *Backend) readCacheOn() bool {
	return b.rcache != nil && b.presence != nil && b.presence.alone()
}

// invalidateWritten drops the keys of a write whose outcome is known (or
// can no longer be learned).
func (b *Backend) invalidateWritten(keys []string) {
	if b.rcache == nil {
		return
	}
	for _, k := range keys {
		b.rcache.invalidate(k)
	}
}
