package memory

import (
	"context"

	"github.com/tidwall/btree"

	"github.com/extenddb/extenddb/internal/backend"
)

// TableStats implements backend.Backend: the item and index trees are
// copied (copy-on-write, O(1)) under the table's write lock, one instant,
// and walked without a lock.
func (b *Backend) TableStats(ctx context.Context, p backend.TableStatsParams) (*backend.TableStatsResult, error) {
	t, err := b.liveTable(p.Table)
	if err != nil {
		return nil, err
	}
	res := &backend.TableStatsResult{Indexes: map[string]backend.IndexStats{}}
	size := p.Size
	if size == nil {
		size = func(item []byte) int64 { return int64(len(item)) }
	}
	t.mu.Lock()
	if t.dropped {
		t.mu.Unlock()
		return nil, tableNotFound(p.Table)
	}
	items := t.items.Copy()
	indexes := make(map[string]*btree.BTreeG[ixEnt], len(t.indexes))
	for name, ix := range t.indexes {
		indexes[name] = ix.tr.Copy()
	}
	t.mu.Unlock()
	items.Scan(func(e ent) bool {
		res.ItemCount++
		res.SizeBytes += size(e.item)
		return true
	})
	for name, tr := range indexes {
		var st backend.IndexStats
		tr.Scan(func(e ixEnt) bool {
			st.ItemCount++
			st.SizeBytes += size(e.item)
			return true
		})
		if st.ItemCount > 0 {
			res.Indexes[name] = st
		}
	}
	return res, nil
}

// Counts implements backend.TableCounter: the figures the apply function
// keeps under the table's write lock (memory has no crash to recover
// from, and no bulk load).
func (b *Backend) Counts(ctx context.Context, p backend.CountsParams) (*backend.CountsResult, error) {
	t, err := b.liveTable(p.Table)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.dropped {
		return nil, tableNotFound(p.Table)
	}
	res := &backend.CountsResult{Counted: true, Stats: backend.TableStatsResult{
		ItemCount: t.itemCount, SizeBytes: t.itemBytes, Indexes: map[string]backend.IndexStats{}}}
	for name, ix := range t.indexes {
		if ix.count > 0 {
			res.Stats.Indexes[name] = backend.IndexStats{ItemCount: ix.count, SizeBytes: ix.bytes}
		}
	}
	return res, nil
}

// Recount implements backend.TableCounter: the trees are counted under
// the table's write lock (no write runs meanwhile, so the count is the
// figures themselves).
func (b *Backend) Recount(ctx context.Context, p backend.CountsParams) (*backend.CountsResult, error) {
	t, err := b.liveTable(p.Table)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.dropped {
		t.mu.Unlock()
		return nil, tableNotFound(p.Table)
	}
	t.itemCount, t.itemBytes = 0, 0
	t.items.Scan(func(e ent) bool {
		t.itemCount++
		t.itemBytes += t.size.SizeOf(e.item)
		return true
	})
	for _, ix := range t.indexes {
		ix.count, ix.bytes = 0, 0
		ix.tr.Scan(func(e ixEnt) bool {
			ix.count++
			ix.bytes += t.size.SizeOf(e.item)
			return true
		})
	}
	t.mu.Unlock()
	return b.Counts(ctx, p)
}
