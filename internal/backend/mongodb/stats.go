package mongodb

import (
	"context"
	"encoding/hex"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/extenddb/extenddb/internal/backend"
)

// TableStats implements backend.Backend by reading every document of the
// table once. A standalone server has no snapshot read: the counts are
// those of one cursor over the collection, not of one instant (ADR 0017).
func (b *Backend) TableStats(ctx context.Context, p backend.TableStatsParams) (*backend.TableStatsResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	size := p.Size
	if size == nil {
		size = func(item []byte) int64 { return int64(len(item)) }
	}
	cur, err := b.items(p.Table.ID).Find(ctx, bson.D{})
	if err != nil {
		return nil, translate(err, "mongodb: table stats")
	}
	defer cur.Close(context.Background())
	res := &backend.TableStatsResult{Indexes: map[string]backend.IndexStats{}}
	for cur.Next(ctx) {
		d, err := parseItemDoc(cur.Current)
		if err != nil {
			return nil, backend.Wrap(backend.KindInternal, err, "mongodb: decode item")
		}
		if d.hasItem {
			res.ItemCount++
			res.SizeBytes += size(d.item)
		}
		for f, e := range d.idx {
			name, err := hex.DecodeString(f)
			if err != nil {
				continue
			}
			st := res.Indexes[string(name)]
			st.ItemCount++
			st.SizeBytes += size(e.proj)
			res.Indexes[string(name)] = st
		}
	}
	if err := cur.Err(); err != nil {
		return nil, translate(err, "mongodb: table stats")
	}
	return res, nil
}
