package sqlite

import (
	"context"
	"strings"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/itemcache"
)

var _ backend.BulkLoader = (*Backend)(nil)

// bulkBatchItems is the bulk load size SQLite prefers
// (backend.Capabilities.BulkBatchItems): 100 items per load. The writer's
// fixed cost per call is small here (no round trip; group commit), and
// 500-item loads measured no cheaper per item while holding about 8 MiB
// more at a restore's peak (docs/benchmarks.md, ADR 0032).
const bulkBatchItems = 100

// BulkLoad implements backend.BulkLoader (ADR 0032): one operation of the
// writer's group commit, fenced like TransactWrite against the writer's
// table versions, then the items' and the index entries' UPSERTs with
// the prepared statements, bulkRows rows per statement, and no read, no
// write function, no savepoint (a statement error is fatal to the
// writer's transaction, which runs each operation alone again, so the
// load stays all or nothing). The loaded
// keys leave the item cache at commit rather than filling it with a
// restore's items.
func (b *Backend) BulkLoad(ctx context.Context, p backend.BulkLoadParams) error {
	return b.submit(ctx, func(w *writer) error { return w.bulkLoad(p) })
}

func (w *writer) bulkLoad(p backend.BulkLoadParams) error {
	ref := p.Table
	version, ok := w.tableVersion(ref.ID)
	if !ok {
		return tableNotFound(ref)
	}
	if version != ref.Version {
		return backend.VersionChanged(ref, version)
	}
	// The load writes without reading what it replaces: the table's
	// statistics are unknown until a recount (counts.go).
	if _, err := w.statBulk.ExecContext(bg, ref.ID); err != nil {
		return fail(err, "sqlite: bulk load")
	}
	items, idx := w.bulkItems[:0], w.bulkIdx[:0]
	defer func() {
		// Keep the buffers, not what they point to.
		clear(items[:cap(items)])
		clear(idx[:cap(idx)])
		w.bulkItems, w.bulkIdx = items[:0], idx[:0]
	}()
	for i := range p.Items {
		it := &p.Items[i]
		pk, sk := nz(it.PK), nz(it.SK)
		items = append(items, ref.ID, int64(backend.KeyHash(pk)), pk, sk, it.Change.Item)
		if len(items) == 5*bulkRows {
			if _, err := w.putItems.ExecContext(bg, items...); err != nil {
				return fail(err, "sqlite: bulk load item")
			}
			items = items[:0]
		}
		for _, e := range it.Change.PutIndex {
			ipk := nz(e.PK)
			idx = append(idx, ref.ID, e.Index, int64(backend.KeyHash(ipk)), ipk, nz(e.SK), pk, sk, nz(e.Item))
			if len(idx) == 8*bulkRows {
				if _, err := w.putIdxs.ExecContext(bg, idx...); err != nil {
					return fail(err, "sqlite: bulk load index entry")
				}
				idx = idx[:0]
			}
		}
		if w.cache != nil {
			key := itemcache.Key(ref.ID, pk, sk)
			w.pendIdx[key] = len(w.pendItems)
			w.pendItems = append(w.pendItems, cacheChange{key: key, item: it.Change.Item, drop: true})
		}
	}
	// The rows short of a whole statement, one by one.
	for r := 0; r < len(items); r += 5 {
		if _, err := w.putItem.ExecContext(bg, items[r:r+5]...); err != nil {
			return fail(err, "sqlite: bulk load item")
		}
	}
	for r := 0; r < len(idx); r += 8 {
		if _, err := w.putIdx.ExecContext(bg, idx[r:r+8]...); err != nil {
			return fail(err, "sqlite: bulk load index entry")
		}
	}
	return nil
}

// bulkRows is the number of rows of one multi-row UPSERT of a bulk load:
// a statement per row cost about a third of a loaded row's CPU in
// database/sql and the driver (argument conversion, binding, a step and
// a reset per row).
const bulkRows = 16

// bulkValues is the VALUES list of bulkRows rows of n parameters.
func bulkValues(n int) string {
	row := "(?" + strings.Repeat(", ?", n-1) + ")"
	return row + strings.Repeat(", "+row, bulkRows-1)
}
