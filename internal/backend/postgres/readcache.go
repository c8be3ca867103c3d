package postgres

import (
	"bytes"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/itemcache"
)

// The read cache answers eventually consistent GetItems (backend.GetItemParams
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
// acknowledged never finds the older value. A committed Put leaves its
// new item instead of dropping the key, but only if no other write of the
// key's shard finished since it began (ADR 0039): two writers of one key
// finish in an order unrelated to their commit order, and the one that
// finishes second may keep its value only if it began after the first
// finished, hence committed after it.
//
// Other servers' writes are not seen; the cache is used only while
// presence says no other server is registered, and is cleared whenever
// that stops being true.
//
// The cache is an itemcache.Cache of readShards shards; a read that missed
// hands Fill the generation Get answered, and each write's Invalidate
// moves its key's shard generation.
const readShards = 64

// defaultReadCacheBytes bounds the cache when Options.ReadCacheBytes is 0.
const defaultReadCacheBytes = 16 << 20

// readCacheOn reports whether eventually consistent reads may be answered
// from the cache now: presence has seen no other server recently.
func (b *Backend) readCacheOn() bool {
	return b.rcache != nil && b.presence != nil && b.presence.alone()
}

// writtenGens are the keys' generations before a write is sent, for
// settleWritten (nil without a read cache).
func (b *Backend) writtenGens(keys []string) []itemcache.Gen {
	if b.rcache == nil {
		return nil
	}
	gens := make([]itemcache.Gen, len(keys))
	for i, k := range keys {
		gens[i] = b.rcache.Generation(k)
	}
	return gens
}

// settleWritten runs once a write's outcome is known (or can no longer be
// learned). committed holds, per key, what the write committed, or is nil
// when nothing is known committed (an error, a canceled transaction): then
// every key is dropped. A Put's item is kept (a copy: the caller's slice
// may share a request body) unless another write of the key's shard
// finished since gens were taken (ADR 0039); other changes drop the key.
func (b *Backend) settleWritten(keys []string, gens []itemcache.Gen, committed []backend.WriteItemResult) {
	if b.rcache == nil {
		return
	}
	for i, k := range keys {
		if committed != nil && committed[i].Change.Op == backend.Put && committed[i].Change.Item != nil {
			b.rcache.Replace(k, bytes.Clone(committed[i].Change.Item), gens[i])
			continue
		}
		b.rcache.Invalidate(k)
	}
}
