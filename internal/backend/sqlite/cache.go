package sqlite

import (
	"github.com/extenddb/extenddb/internal/backend"
)

// The item cache (internal/backend/itemcache) keeps recently written and
// read items in memory so that GetItem and the writer's read of the current
// item skip SQLite.
//
// Coherence. The writer is the only mutator of the database (a database
// file is used by one server process; another process's commit is seen
// through PRAGMA data_version and clears the cache). The writer applies a
// transaction's item changes to the cache only after COMMIT, and bumps the
// cache epoch before each batch begins and after its changes are applied.
// A reader that missed reads SQLite and fills the cache with what it read
// only when the epoch did not move meanwhile and the key is still absent,
// so a value read from a snapshot older than a concurrent commit is never
// cached over a newer one.

const cacheShards = 16

// cacheChange is a change made by the current write transaction.
type cacheChange struct {
	key  string
	item []byte
	// drop: the change leaves the key out of the cache at commit (a bulk
	// load's items); item is still what this transaction's later
	// operations read.
	drop bool
}

// Stats reports the reader pool and the item cache (backend.StatsReporter).
func (b *Backend) Stats() backend.Stats {
	st := backend.Stats{Retries: -1, HasBackground: true, BackgroundFailures: b.bgFailures.Load()}
	if b.rdb != nil {
		ds := b.rdb.Stats()
		st.HasPool = true
		st.PoolMax, st.PoolInUse, st.PoolIdle = int64(ds.MaxOpenConnections), int64(ds.InUse), int64(ds.Idle)
		st.PoolWaits, st.PoolWaitTime = ds.WaitCount, ds.WaitDuration
	}
	if b.cache != nil {
		st.HasCache, st.CacheInUse = true, true
		cs := b.cache.Stats()
		st.CacheHits, st.CacheMisses, st.CacheBytes, st.CacheEntries, st.CacheMaxBytes = cs.Hits, cs.Misses, cs.Bytes, cs.Entries, cs.MaxBytes
	}
	return st
}
