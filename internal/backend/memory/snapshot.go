package memory

import (
	"context"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// SnapshotKind names the memory backend's snapshot mechanism in backup
// manifests.
const SnapshotKind = "memory_btree_copy_on_write"

// OpenTableSnapshot implements backend.Snapshotter: under the table's
// write lock (so between two applied writes) it takes the catalog row and
// a copy-on-write copy of the items' B-tree, which costs O(1); from then
// on the live tree copies a node before changing it, and the snapshot's
// tree never changes. The stream pages through that copy without a lock.
// Open snapshots are bounded by Options.MaxSnapshots, since each one
// keeps the nodes changed after it alive.
func (b *Backend) OpenTableSnapshot(ctx context.Context, p backend.OpenSnapshotParams) (*backend.TableSnapshot, error) {
	t, err := b.namedTable(p.Account, p.Name)
	if err != nil {
		return nil, err
	}
	release, err := b.snaps.Acquire()
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if t.dropped {
		t.mu.Unlock()
		release()
		return nil, nameNotFound(p.Account, p.Name)
	}
	items := t.items.Copy()
	meta := metaCopy(t.meta)
	t.mu.Unlock()
	at := time.Now().UTC()
	if p.AfterPin != nil {
		p.AfterPin()
	}
	fetch := func(ctx context.Context, after *backend.Cursor, limit int) ([]backend.Row, bool, error) {
		rows, more := scanItems(items, 0, 0xFFFFFFFF, after, limit)
		return rows, more, nil
	}
	end := func() error {
		items = nil
		release()
		return nil
	}
	return &backend.TableSnapshot{
		Table:      meta,
		At:         at,
		Descriptor: backend.SnapshotDescriptor{Kind: SnapshotKind},
		KeyOrder:   false, // (KeyHash(pk), pk, sk) order, the order of Scan
		Items:      backend.NewSnapshotStream(fetch, p.PageSize, end),
	}, nil
}
