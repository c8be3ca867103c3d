package memory

import (
	"context"

	"github.com/tidwall/btree"

	"github.com/extenddb/extenddb/internal/storage"
)

// TableStats implements storage.Backend. Without a Size function the
// answer is the counts the apply function keeps (O(1)); with one, the
// item and index trees are copied (copy-on-write, O(1)) under the table's
// write lock, one instant, and walked without a lock.
func (b *Backend) TableStats(ctx context.Context, p storage.TableStatsParams) (*storage.TableStatsResult, error) {
	t, err := b.liveTable(p.Table)
	if err != nil {
		return nil, err
	}
	res := &storage.TableStatsResult{Indexes: map[string]storage.IndexStats{}}
	if p.Size == nil {
		t.mu.RLock()
		defer t.mu.RUnlock()
		if t.dropped {
			return nil, tableNotFound(p.Table)
		}
		res.ItemCount, res.SizeBytes = t.itemCount, t.itemBytes
		for name, ix := range t.indexes {
			if ix.count > 0 {
				res.Indexes[name] = storage.IndexStats{ItemCount: ix.count, SizeBytes: ix.bytes}
			}
		}
		return res, nil
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
		res.SizeBytes += p.Size(e.item)
		return true
	})
	for name, tr := range indexes {
		var st storage.IndexStats
		tr.Scan(func(e ixEnt) bool {
			st.ItemCount++
			st.SizeBytes += p.Size(e.item)
			return true
		})
		if st.ItemCount > 0 {
			res.Indexes[name] = st
		}
	}
	return res, nil
}
