package cassandra

import (
	"context"

	"github.com/extenddb/extenddb/internal/backend"
)

// TableStats counts items and index entries by reading them all. It is
// NOT from one consistent instant (Cassandra has no snapshot read): writes
// that run meanwhile may or may not be counted (ADR 0016).
func (b *Backend) TableStats(ctx context.Context, p backend.TableStatsParams) (*backend.TableStatsResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	size := func(item []byte) int64 {
		if p.Size != nil {
			return p.Size(item)
		}
		return int64(len(item))
	}
	res := &backend.TableStatsResult{Indexes: map[string]backend.IndexStats{}}
	t := p.Table.ID
	err := b.eachPartition(ctx, t, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		iter := b.query(ctx, `SELECT item FROM items WHERE t = ? AND pk = ? AND kind = 0`, t, pk).PageSize(500).Iter()
		var item []byte
		for iter.Scan(&item) {
			if item != nil {
				res.ItemCount++
				res.SizeBytes += size(item)
			}
			item = nil
		}
		return true, mapErr(iter.Close(), "table stats")
	})
	if err != nil {
		return nil, err
	}
	if res.Indexes, err = b.indexStats(ctx, t, size); err != nil {
		return nil, err
	}
	return res, nil
}

// indexStats counts the entries of each of the table's indexes.
func (b *Backend) indexStats(ctx context.Context, t int64, size func([]byte) int64) (map[string]backend.IndexStats, error) {
	names, err := b.indexNames(ctx, t)
	if err != nil {
		return nil, err
	}
	out := map[string]backend.IndexStats{}
	for _, ix := range names {
		var st backend.IndexStats
		for bk := range buckets {
			iter := b.query(ctx, `SELECT item FROM index_entries WHERE t = ? AND idx = ? AND b = ?`, t, ix, bk).PageSize(500).Iter()
			var item []byte
			for iter.Scan(&item) {
				st.ItemCount++
				st.SizeBytes += size(item)
				item = nil
			}
			if err := iter.Close(); err != nil {
				return nil, mapErr(err, "table stats")
			}
		}
		if st.ItemCount > 0 {
			out[ix] = st
		}
	}
	return out, nil
}
