package postgres

import (
	"bytes"
	"encoding/binary"
	"sync"
	"sync/atomic"
)

// guessCache keeps, per item key, the last value this process saw
// committed (written by it, or read under the item's lock by a write). It
// is never answered to a read: it is only the guess of a speculative write
// (speculate.go), which the database checks under the item's lock, so a
// stale entry (another server wrote the item) costs a wasted round trip,
// never a wrong answer. Absent keys are not kept: a miss guesses "absent".
type guessCache struct {
	shards [guessShards]guessShard
}

const guessShards = 16

// defaultGuessBytes bounds the cache when Options.WriteGuessBytes is 0.
const defaultGuessBytes = 16 << 20

type guessShard struct {
	mu         sync.Mutex
	m          map[string]*gentry
	head, tail *gentry // LRU list, head most recent
	bytes, max int
}

type gentry struct {
	key        string
	item       []byte
	prev, next *gentry
}

func newGuessCache(maxBytes int) *guessCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &guessCache{}
	for i := range c.shards {
		c.shards[i].m = map[string]*gentry{}
		c.shards[i].max = maxBytes / guessShards
	}
	return c
}

// guessKey builds the cache key of an item.
func guessKey(table int64, pk, sk []byte) string {
	b := make([]byte, 0, 8+binary.MaxVarintLen64+len(pk)+len(sk))
	b = binary.BigEndian.AppendUint64(b, uint64(table))
	b = binary.AppendUvarint(b, uint64(len(pk)))
	b = append(b, pk...)
	b = append(b, sk...)
	return string(b)
}

func (c *guessCache) shard(key string) *guessShard {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return &c.shards[h%guessShards]
}

func gentrySize(e *gentry) int { return len(e.key) + len(e.item) + 64 }

func (s *guessShard) unlink(e *gentry) {
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

func (s *guessShard) pushFront(e *gentry) {
	e.next = s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

// get returns the guessed item (nil: absent or unknown); the bytes must
// not be modified.
func (c *guessCache) get(key string) []byte {
	s := c.shard(key)
	s.mu.Lock()
	e, ok := s.m[key]
	if ok && s.head != e {
		s.unlink(e)
		s.pushFront(e)
	}
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return e.item
}

// set records a value seen committed (nil: absent). It keeps a copy: the
// caller's slice may share a larger buffer (a request body), which the
// cache must not keep alive.
func (c *guessCache) set(key string, item []byte) {
	if item != nil {
		item = bytes.Clone(item)
	}
	s := c.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[key]; ok {
		s.bytes -= gentrySize(e)
		s.unlink(e)
		delete(s.m, key)
	}
	if item == nil {
		return
	}
	e := &gentry{key: key, item: item}
	if gentrySize(e) > s.max/4 {
		return
	}
	s.m[key] = e
	s.pushFront(e)
	s.bytes += gentrySize(e)
	for s.bytes > s.max && s.tail != nil {
		old := s.tail
		s.unlink(old)
		delete(s.m, old.key)
		s.bytes -= gentrySize(old)
	}
}

// absentScore decides whether a key the cache does not hold is guessed
// absent: each such guess that held raises it, each that failed lowers it
// by more, and below zero only one miss in 16 is guessed (a probe), so a
// workload that updates items this process never saw stops paying for
// wrong guesses and one that inserts new keys keeps its single round trip.
type absentScore struct {
	score  atomic.Int64
	probes atomic.Uint64
}

const (
	absentScoreMax  = 64
	absentScoreMin  = -64
	absentScoreFail = 8
)

func (a *absentScore) allow() bool {
	if a.score.Load() >= 0 {
		return true
	}
	return a.probes.Add(1)%16 == 0
}

func (a *absentScore) record(ok bool) {
	for {
		s := a.score.Load()
		n := s + 1
		if !ok {
			n = s - absentScoreFail
		}
		n = max(absentScoreMin, min(absentScoreMax, n))
		if n == s || a.score.CompareAndSwap(s, n) {
			return
		}
	}
}
