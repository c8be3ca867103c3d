package postgres

// The read cache answers eventually consistent GetItems (storage.GetItemParams
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

// invalidateWritten drops the keys of a write whose outcome is known (or
// can no longer be learned).
func (b *Backend) invalidateWritten(keys []string) {
	if b.rcache == nil {
		return
	}
	for _, k := range keys {
		b.rcache.Invalidate(k)
	}
}
