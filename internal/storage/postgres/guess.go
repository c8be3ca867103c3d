package postgres

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"
)

// guessCache keeps, per item key, the last value this process saw
// committed (written by it, or read under the item's lock by a write). It
// is never answered to a read: it is only the guess of a speculative write
// (speculate.go), which the database checks under the item's lock, so a
// stale entry (another server wrote the item) costs a wasted round trip,
// never a wrong answer. Absent keys are not kept: a miss guesses "absent".
type guessCache struct {
	shards [guessShards]readShard // the read cache's LRU shards; gen and counters unused
}

const guessShards = 16

// defaultGuessBytes bounds the cache when Options.WriteGuessBytes is 0.
const defaultGuessBytes = 16 << 20

func newGuessCache(maxBytes int) *guessCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &guessCache{}
	for i := range c.shards {
		c.shards[i].m = map[string]*rentry{}
		c.shards[i].max = maxBytes / guessShards
	}
	return c
}

// guessKey builds the cache key of an item (the read cache's too).
func guessKey(table int64, pk, sk []byte) string {
	b := make([]byte, 0, 8+binary.MaxVarintLen64+len(pk)+len(sk))
	b = binary.BigEndian.AppendUint64(b, uint64(table))
	b = binary.AppendUvarint(b, uint64(len(pk)))
	b = append(b, pk...)
	b = append(b, sk...)
	return string(b)
}

func (c *guessCache) shard(key string) *readShard {
	return &c.shards[fnv32(key)%guessShards]
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
	s.dropLocked(key)
	if item == nil {
		return
	}
	e := &rentry{key: key, item: item}
	if rentrySize(e) > s.max/4 {
		return
	}
	s.insertLocked(e)
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
