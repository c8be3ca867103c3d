// Package itemcache is the in-memory item cache the SQLite and PostgreSQL
// backends share: a sharded LRU of encoded items bounded in bytes, with the
// generation counters their coherence protocols need (ADR 0037 for
// PostgreSQL's read cache, docs/architecture.md for SQLite's item cache).
//
// The cache itself knows nothing of transactions. What it offers is the
// one primitive both protocols rest on: a reader that missed remembers the
// generation it saw (Get, Generation) and Fill inserts what it read only if
// that generation did not move and the key is still absent. A writer moves
// the generation of the keys it changes (Invalidate, per shard) or of the
// whole cache (BumpEpoch) around its commit, so a value read from a
// snapshot older than a concurrent commit is never inserted.
//
// Items are kept as given: callers must not modify a slice they handed
// to the cache or got from it.
package itemcache

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// entryOverhead is the accounted cost of an entry besides its key and
// item bytes (the entry struct, its map slot, the list links).
const entryOverhead = 64

// Cache is a sharded LRU. A nil *Cache is not usable; New returns nil for
// a zero bound so callers can keep "disabled" as nil.
type Cache struct {
	epoch  atomic.Uint64
	shards []shard
	max    int
}

// genSlots is how many generation counters a shard keeps: a key moves
// only its own slot's, so a write or a read of one key is refused by
// another key's write only when the two share a slot (1 in 4096 pairs
// over 64 shards), not a whole shard (1 in 64).
const genSlots = 64

type shard struct {
	mu           sync.Mutex
	gens         [genSlots]uint64
	m            map[string]*entry
	head, tail   *entry // LRU list, head most recent
	bytes, max   int
	hits, misses int64
	_            [40]byte // keeps neighbouring shards' locks off one cache line
}

type entry struct {
	key        string
	item       []byte
	prev, next *entry
}

// Gen is what a reader hands back to Fill: the cache epoch and the
// generation of the key's slot in its shard when it looked.
type Gen struct{ epoch, shard uint64 }

// New returns a cache bounded to maxBytes over n shards (nil when maxBytes
// is not positive). An entry larger than a quarter of a shard's bound is
// never kept.
func New(maxBytes, n int) *Cache {
	if maxBytes <= 0 {
		return nil
	}
	n = max(n, 1)
	c := &Cache{shards: make([]shard, n), max: maxBytes}
	for i := range c.shards {
		c.shards[i].m = map[string]*entry{}
		c.shards[i].max = maxBytes / n
	}
	return c
}

// AppendKey appends the cache key of an item (table, partition key,
// sort key) to dst. A lookup can build it in a stack buffer and pass it to
// GetBytes without allocating.
func AppendKey(dst []byte, table int64, pk, sk []byte) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(table))
	dst = binary.AppendUvarint(dst, uint64(len(pk)))
	dst = append(dst, pk...)
	return append(dst, sk...)
}

// Key is AppendKey as a string.
func Key(table int64, pk, sk []byte) string {
	return string(AppendKey(make([]byte, 0, 8+binary.MaxVarintLen64+len(pk)+len(sk)), table, pk, sk))
}

// fnv32 is FNV-1a of a key, its shard's hash (not storage.KeyHash: that
// one is persisted and hashes partition keys only).
func fnv32[K string | []byte](key K) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return h
}

// locate returns the key's shard and its generation slot there.
func locate[K string | []byte](c *Cache, key K) (*shard, uint32) {
	h, n := fnv32(key), uint32(len(c.shards))
	return &c.shards[h%n], (h / n) % genSlots
}

func size(key string, item []byte) int { return len(key) + len(item) + entryOverhead }

func (s *shard) unlink(e *entry) {
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

func (s *shard) pushFront(e *entry) {
	e.next = s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

// lookupLocked finds e, marks it most recent and counts the lookup.
func (s *shard) lookupLocked(e *entry, ok bool) {
	if ok {
		if s.head != e {
			s.unlink(e)
			s.pushFront(e)
		}
		s.hits++
	} else {
		s.misses++
	}
}

func (s *shard) dropLocked(key string) {
	if e, ok := s.m[key]; ok {
		s.bytes -= size(e.key, e.item)
		s.unlink(e)
		delete(s.m, key)
	}
}

func (s *shard) pushBack(e *entry) {
	e.prev = s.tail
	if s.tail != nil {
		s.tail.next = e
	}
	s.tail = e
	if s.head == nil {
		s.head = e
	}
}

// insertLocked adds key (absent) as the most recent entry and evicts the
// least recent ones beyond the shard's bound.
func (s *shard) insertLocked(key string, item []byte) { s.insertAtLocked(key, item, true) }

// insertAtLocked adds key (absent) as the most recent entry (hot) or the
// least recent one, then evicts from the least recent end beyond the
// shard's bound: a cold entry that does not fit is evicted first.
func (s *shard) insertAtLocked(key string, item []byte, hot bool) {
	e := &entry{key: key, item: item}
	s.m[key] = e
	if hot {
		s.pushFront(e)
	} else {
		s.pushBack(e)
	}
	s.bytes += size(key, item)
	for s.bytes > s.max && s.tail != nil {
		old := s.tail
		s.unlink(old)
		delete(s.m, old.key)
		s.bytes -= size(old.key, old.item)
	}
}

// Get returns the cached item (never nil when ok) and the generation to
// hand to Fill after a miss.
func (c *Cache) Get(key string) (item []byte, ok bool, g Gen) {
	s, slot := locate(c, key)
	g.epoch = c.epoch.Load()
	s.mu.Lock()
	e, ok := s.m[key]
	s.lookupLocked(e, ok)
	if ok {
		item = e.item
	}
	g.shard = s.gens[slot]
	s.mu.Unlock()
	return item, ok, g
}

// GetBytes is Get with the key as bytes (from AppendKey): it does not
// allocate.
func (c *Cache) GetBytes(key []byte) (item []byte, ok bool, g Gen) {
	s, slot := locate(c, key)
	g.epoch = c.epoch.Load()
	s.mu.Lock()
	e, ok := s.m[string(key)]
	s.lookupLocked(e, ok)
	if ok {
		item = e.item
	}
	g.shard = s.gens[slot]
	s.mu.Unlock()
	return item, ok, g
}

// Generation is the key's generation, for a Fill by a read that did not
// look the key up first.
func (c *Cache) Generation(key string) Gen {
	s, slot := locate(c, key)
	g := Gen{epoch: c.epoch.Load()}
	s.mu.Lock()
	g.shard = s.gens[slot]
	s.mu.Unlock()
	return g
}

// Fill inserts an item a read found (nil: absent, never kept) unless the
// generation moved since g or the key is present.
func (c *Cache) Fill(key string, item []byte, g Gen) {
	if item == nil {
		return
	}
	s, slot := locate(c, key)
	if size(key, item) > s.max/4 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gens[slot] != g.shard || c.epoch.Load() != g.epoch {
		return
	}
	if _, ok := s.m[key]; ok {
		return
	}
	s.insertLocked(key, item)
}

// Set records a value known committed (nil: absent, dropped), replacing
// what the key held. It does not move generations: the caller's protocol
// decides (SQLite's writer bumps the epoch around its commits).
func (c *Cache) Set(key string, item []byte) {
	s, _ := locate(c, key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(key)
	if item == nil || size(key, item) > s.max/4 {
		return
	}
	s.insertLocked(key, item)
}

// Invalidate drops a key and moves its generation (its slot's), so no read
// that looked before can insert.
func (c *Cache) Invalidate(key string) {
	s, slot := locate(c, key)
	s.mu.Lock()
	s.dropLocked(key)
	s.gens[slot]++
	s.mu.Unlock()
}

// Replace records the value a write committed (nil: absent) if no
// generation moved since g, taken before the write was sent; otherwise it
// only drops the key. Either way it moves the key's generation, like
// Invalidate. Of two writes of one key in this process, the one that
// finishes second replaces only if it began after the first finished, so
// after the first's commit: the cache never goes back to an older value.
//
// A key the cache held keeps its place as the most recent entry; a new
// key enters as the least recent one, so that a stream of writes of new
// keys fills free space but never evicts what reads use.
func (c *Cache) Replace(key string, item []byte, g Gen) {
	s, slot := locate(c, key)
	s.mu.Lock()
	fresh := s.gens[slot] == g.shard && c.epoch.Load() == g.epoch
	_, held := s.m[key]
	s.dropLocked(key)
	s.gens[slot]++
	if fresh && item != nil && size(key, item) <= s.max/4 {
		s.insertAtLocked(key, item, held)
	}
	s.mu.Unlock()
}

// BumpEpoch moves every key's generation at once.
func (c *Cache) BumpEpoch() { c.epoch.Add(1) }

// Clear drops everything and moves every generation.
func (c *Cache) Clear() {
	c.epoch.Add(1)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		if len(s.m) > 0 {
			clear(s.m)
		}
		s.head, s.tail, s.bytes = nil, nil, 0
		for j := range s.gens {
			s.gens[j]++
		}
		s.mu.Unlock()
	}
	c.epoch.Add(1)
}

// Stats are a cache's counters and content.
type Stats struct {
	Hits, Misses, Bytes, Entries, MaxBytes int64
}

// Stats sums the shards' counters and content.
func (c *Cache) Stats() Stats {
	var st Stats
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Hits += s.hits
		st.Misses += s.misses
		st.Bytes += int64(s.bytes)
		st.Entries += int64(len(s.m))
		st.MaxBytes += int64(s.max)
		s.mu.Unlock()
	}
	return st
}
