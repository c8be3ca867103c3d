package sqlite

import (
	"context"
	"database/sql"

	"github.com/extenddb/extenddb/internal/storage"
)

// TableStats implements storage.Backend: one read transaction (one WAL
// snapshot) reads the table's items and index entries.
func (b *Backend) TableStats(ctx context.Context, p storage.TableStatsParams) (*storage.TableStatsResult, error) {
	size := p.Size
	if size == nil {
		size = func(item []byte) int64 { return int64(len(item)) }
	}
	tx, err := b.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapErr(err, "sqlite: begin read")
	}
	defer tx.Rollback()
	ok, err := b.hasTable(ctx, tx.StmtContext(ctx, b.tableByID), p.Table.ID)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, tableNotFound(p.Table)
	}
	res := &storage.TableStatsResult{Indexes: map[string]storage.IndexStats{}}
	rows, err := tx.QueryContext(ctx, `SELECT item FROM items WHERE t = ?`, p.Table.ID)
	if err != nil {
		return nil, mapErr(err, "sqlite: table stats")
	}
	for rows.Next() {
		var item sql.RawBytes
		if err := rows.Scan(&item); err != nil {
			rows.Close()
			return nil, mapErr(err, "sqlite: table stats")
		}
		res.ItemCount++
		res.SizeBytes += size(item)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "sqlite: table stats")
	}
	rows, err = tx.QueryContext(ctx, `SELECT ix, item FROM idx WHERE t = ?`, p.Table.ID)
	if err != nil {
		return nil, mapErr(err, "sqlite: index stats")
	}
	var last string
	var cur storage.IndexStats
	for rows.Next() {
		var ix string
		var item sql.RawBytes
		if err := rows.Scan(&ix, &item); err != nil {
			rows.Close()
			return nil, mapErr(err, "sqlite: index stats")
		}
		if ix != last {
			if cur.ItemCount > 0 {
				res.Indexes[last] = cur
			}
			last, cur = ix, res.Indexes[ix]
		}
		cur.ItemCount++
		cur.SizeBytes += size(item)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "sqlite: index stats")
	}
	if cur.ItemCount > 0 {
		res.Indexes[last] = cur
	}
	return res, nil
}
