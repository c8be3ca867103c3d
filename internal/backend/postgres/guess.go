package postgres

import (
	"bytes"
	"sync/atomic"

	"github.com/extenddb/extenddb/internal/backend/itemcache"
)

// The guess cache keeps, per item key, the last value this process saw
// committed (written by it, or read under the item's lock by a write). It
// is never answered to a read: it is only the guess of a speculative write
// (speculate.go), which the database checks under the item's lock, so a
// stale entry (another server wrote the item) costs a wasted round trip,
// never a wrong answer. Absent keys are not kept: a miss guesses "absent".
//
// It is an itemcache.Cache of guessShards shards (generations unused).
const guessShards = 16

// defaultGuessBytes bounds the cache when Options.WriteGuessBytes is 0.
const defaultGuessBytes = 16 << 20

// guessKey builds the cache key of an item (the read cache's too).
func guessKey(table int64, pk, sk []byte) string { return itemcache.Key(table, pk, sk) }

// guessGet returns the guessed item (nil: absent or unknown); the bytes
// must not be modified.
func (b *Backend) guessGet(key string) []byte {
	item, _, _ := b.guess.Get(key)
	return item
}

// guessSet records a value seen committed (nil: absent). It keeps a copy:
// the caller's slice may share a larger buffer (a request body), which the
// cache must not keep alive.
func (b *Backend) guessSet(key string, item []byte) {
	if item != nil {
		item = bytes.Clone(item)
	}
	b.guess.Set(key, item)
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
