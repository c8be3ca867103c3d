package sqlite

import (
	"context"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/itemcache"
)

var _ storage.BulkLoader = (*Backend)(nil)

// bulkBatchItems is the bulk load size SQLite prefers
// (storage.Capabilities.BulkBatchItems): 100 items per load. The writer's
// fixed cost per call is small here (no round trip; group commit), and
// 500-item loads measured no cheaper per item while holding about 8 MiB
// more at a restore's peak (docs/benchmarks.md, ADR 0032).
const bulkBatchItems = 100

// BulkLoad implements storage.BulkLoader (ADR 0032): one operation of the
// writer's group commit, fenced like TransactWrite against the writer's
// table versions, then an UPSERT per item and per index entry with the
// prepared statements, and no read, no write function, no savepoint (a
// statement error is fatal to the writer's transaction, which runs each
// operation alone again, so the load stays all or nothing). The loaded
// keys leave the item cache at commit rather than filling it with a
// restore's items.
func (b *Backend) BulkLoad(ctx context.Context, p storage.BulkLoadParams) error {
	return b.submit(ctx, func(w *writer) error { return w.bulkLoad(p) })
}

func (w *writer) bulkLoad(p storage.BulkLoadParams) error {
	ref := p.Table
	version, ok := w.tableVersion(ref.ID)
	if !ok {
		return tableNotFound(ref)
	}
	if version != ref.Version {
		return storage.VersionChanged(ref, version)
	}
	// The load writes without reading what it replaces: the table's
	// statistics are unknown until a recount (counts.go).
	if _, err := w.statBulk.ExecContext(bg, ref.ID); err != nil {
		return fail(err, "sqlite: bulk load")
	}
	for i := range p.Items {
		it := &p.Items[i]
		pk, sk := nz(it.PK), nz(it.SK)
		if _, err := w.putItem.ExecContext(bg, ref.ID, int64(storage.KeyHash(pk)), pk, sk, it.Change.Item); err != nil {
			return fail(err, "sqlite: bulk load item")
		}
		for _, e := range it.Change.PutIndex {
			ipk := nz(e.PK)
			if _, err := w.putIdx.ExecContext(bg, ref.ID, e.Index, int64(storage.KeyHash(ipk)), ipk, nz(e.SK), pk, sk, nz(e.Item)); err != nil {
				return fail(err, "sqlite: bulk load index entry")
			}
		}
		if w.cache != nil {
			key := itemcache.Key(ref.ID, pk, sk)
			w.pendIdx[key] = len(w.pendItems)
			w.pendItems = append(w.pendItems, cacheChange{key: key, item: it.Change.Item, drop: true})
		}
	}
	return nil
}
