package mongodb

import (
	"context"
	"encoding/hex"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
)

// Query implements backend.Backend: one range read of _id (the table) or
// of i_X (an index) in order, Limit+1 documents to tell More.
func (b *Backend) Query(ctx context.Context, p backend.QueryParams) (*backend.QueryResult, error) {
	if p.Limit <= 0 {
		return nil, backend.Errorf(backend.KindInternal, "mongodb: Query without Limit")
	}
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	field := "_id"
	prefix := partPrefix(p.PK)
	var lo, hi bson.E
	if p.Index == "" {
		lo = bson.E{Key: "$gte", Value: prefix}
		hi = bson.E{Key: "$lt", Value: prefix + top}
		if p.Lower != nil {
			lo = bson.E{Key: op(p.Lower.Inclusive, "$gte", "$gt"), Value: prefix + hex.EncodeToString(p.Lower.Key)}
		}
		if p.Upper != nil {
			hi = bson.E{Key: op(p.Upper.Inclusive, "$lte", "$lt"), Value: prefix + hex.EncodeToString(p.Upper.Key)}
		}
	} else {
		field = indexField(p.Index)
		lo = bson.E{Key: "$gte", Value: prefix}
		hi = bson.E{Key: "$lt", Value: prefix + top}
		if p.Lower != nil {
			k := prefix + hex.EncodeToString(p.Lower.Key) + sep
			if p.Lower.Inclusive {
				lo = bson.E{Key: "$gte", Value: k}
			} else {
				lo = bson.E{Key: "$gt", Value: k + top}
			}
		}
		if p.Upper != nil {
			k := prefix + hex.EncodeToString(p.Upper.Key) + sep
			if p.Upper.Inclusive {
				hi = bson.E{Key: "$lt", Value: k + top}
			} else {
				hi = bson.E{Key: "$lt", Value: k}
			}
		}
	}
	conds := bson.A{bson.D{{Key: field, Value: bson.D{lo}}}, bson.D{{Key: field, Value: bson.D{hi}}}}
	if p.After != nil {
		ak := cursorKey(p.Index, p.After)
		if p.Forward {
			conds = append(conds, bson.D{{Key: field, Value: bson.D{{Key: "$gt", Value: ak}}}})
		} else {
			conds = append(conds, bson.D{{Key: field, Value: bson.D{{Key: "$lt", Value: ak}}}})
		}
	}
	dir := 1
	if !p.Forward {
		dir = -1
	}
	rows, more, err := b.readRange(ctx, p.Table, p.Index, conds, field, dir, p.Limit)
	if err != nil {
		return nil, err
	}
	return &backend.QueryResult{Rows: rows, More: more}, nil
}

func op(inclusive bool, in, ex string) string {
	if inclusive {
		return in
	}
	return ex
}

func cursorKey(index string, c *backend.Cursor) string {
	if index == "" {
		return itemID(c.PK, c.SK)
	}
	return indexKey(c.PK, c.SK, c.BasePK, c.BaseSK)
}

// Scan implements backend.Backend: the table in _id order (KeyHash(pk),
// pk, sk), an index in i_X order; a segment is a range of the leading
// hash.
func (b *Backend) Scan(ctx context.Context, p backend.ScanParams) (*backend.ScanResult, error) {
	if p.Limit <= 0 {
		return nil, backend.Errorf(backend.KindInternal, "mongodb: Scan without Limit")
	}
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	field := "_id"
	if p.Index != "" {
		field = indexField(p.Index)
	}
	l, h := backend.SegmentRange(p.Segment, p.TotalSegments)
	lo := bson.E{Key: "$gte", Value: fmt.Sprintf("%08x", l)}
	hi := bson.E{Key: "$lt", Value: fmt.Sprintf("%08x", h) + top}
	conds := bson.A{bson.D{{Key: field, Value: bson.D{lo}}}, bson.D{{Key: field, Value: bson.D{hi}}}}
	if p.After != nil {
		conds = append(conds, bson.D{{Key: field, Value: bson.D{{Key: "$gt", Value: cursorKey(p.Index, p.After)}}}})
	}
	rows, more, err := b.readRange(ctx, p.Table, p.Index, conds, field, 1, p.Limit)
	if err != nil {
		return nil, err
	}
	return &backend.ScanResult{Rows: rows, More: more}, nil
}

// readRange reads up to limit rows of a filter in field order. A document
// locked by a committed transaction whose change is not applied yet is
// rolled forward (the ledger's release) and the range read again, so a
// read never misses a committed transaction's item or index entry; other
// locks show the document as stored. A lock whose transaction record is
// missing is an aborted transaction's only if it is still there when the
// document is read again; if not, the range is read again too.
func (b *Backend) readRange(ctx context.Context, ref backend.TableRef, index string, conds bson.A, field string, dir, limit int) ([]backend.Row, bool, error) {
	for attempt := 0; ; attempt++ {
		rows, more, locked, err := b.readRangeOnce(ctx, ref.ID, index, conds, field, dir, limit)
		if err != nil || len(locked) == 0 || attempt == 8 {
			return rows, more, err
		}
		rolled := false
		for _, d := range locked {
			ok, gone, err := b.lockOwner(ctx, d)
			if err != nil {
				return nil, false, err
			}
			if gone {
				// Aborted while the lock stays; otherwise the transaction
				// committed and finished since the range was read: read it
				// again (ADR 0041).
				now, err := b.readDoc(ctx, b.items(ref.ID), d.id)
				if err != nil {
					return nil, false, err
				}
				if now == nil || now.lock == nil || now.lock.Tx != d.lock.Tx {
					rolled = true
				}
				continue
			}
			if !ok {
				continue
			}
			ks, err := splitKey(d.id, 2)
			if err != nil {
				return nil, false, backend.Wrap(backend.KindInternal, err, "mongodb: decode key")
			}
			// The range read projects only what a row needs; the release
			// rewrites the whole document (version, index keys, pending
			// change records, pre-images), so it settles the document as
			// stored now.
			full, err := b.readDoc(ctx, b.items(ref.ID), d.id)
			if err != nil {
				return nil, false, err
			}
			if _, err := b.settleDoc(ctx, ref, ks[0], ks[1], full); err != nil {
				return nil, false, err
			}
			rolled = true
		}
		if !rolled {
			return rows, more, nil
		}
	}
}

func (b *Backend) readRangeOnce(ctx context.Context, id int64, index string, conds bson.A, field string, dir, limit int) ([]backend.Row, bool, []*itemDoc, error) {
	if index == "" {
		conds = append(conds, bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "it", Value: bson.D{{Key: "$exists", Value: true}}}},
			bson.D{{Key: "lk", Value: bson.D{{Key: "$exists", Value: true}}}}}}})
	}
	filter := bson.D{{Key: "$and", Value: conds}}
	o := options.Find().SetSort(bson.D{{Key: field, Value: dir}})
	if index == "" {
		// Documents of locks on absent items are skipped: no limit, the
		// cursor is closed after limit+1 rows.
		o.SetBatchSize(int32(min(limit+1, 10000)))
		o.SetProjection(bson.D{{Key: "it", Value: 1}, {Key: "lk", Value: 1}, {Key: "lc", Value: 1}})
	} else {
		o.SetLimit(int64(limit) + 1)
		o.SetProjection(bson.D{{Key: field, Value: 1}, {Key: projField(index), Value: 1}, {Key: "lk", Value: 1}, {Key: "lc", Value: 1}})
	}
	cur, err := b.items(id).Find(ctx, filter, o)
	if err != nil {
		return nil, false, nil, translate(err, "mongodb: read range")
	}
	defer cur.Close(context.Background())
	var rows []backend.Row
	var locked []*itemDoc
	more := false
	for cur.Next(ctx) {
		if len(rows) == limit {
			more = true
			break
		}
		d, err := parseItemDoc(cur.Current)
		if err != nil {
			return nil, false, nil, backend.Wrap(backend.KindInternal, err, "mongodb: decode row")
		}
		if d.lock != nil {
			locked = append(locked, d)
		}
		if index == "" && !d.hasItem {
			continue // a transaction's lock on an absent item
		}
		row, err := rowOf(d, index)
		if err != nil {
			return nil, false, nil, backend.Wrap(backend.KindInternal, err, "mongodb: decode row")
		}
		rows = append(rows, row)
	}
	if err := cur.Err(); err != nil {
		return nil, false, nil, translate(err, "mongodb: read range")
	}
	return rows, more, locked, nil
}

func rowOf(d *itemDoc, index string) (backend.Row, error) {
	if index == "" {
		ks, err := splitKey(d.id, 2)
		if err != nil {
			return backend.Row{}, err
		}
		return backend.Row{PK: ks[0], SK: ks[1], BasePK: ks[0], BaseSK: ks[1], Item: d.item}, nil
	}
	e := d.idx[indexField(index)[2:]]
	ks, err := splitKey(e.key, 4)
	if err != nil {
		return backend.Row{}, err
	}
	return backend.Row{PK: ks[0], SK: ks[1], BasePK: ks[2], BaseSK: ks[3], Item: nz(e.proj)}, nil
}
