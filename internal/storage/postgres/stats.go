package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/storage"
)

// TableStats implements storage.Backend: one REPEATABLE READ READ ONLY
// transaction reads the catalog row, the items and the index entries from
// one snapshot.
func (b *Backend) TableStats(ctx context.Context, p storage.TableStatsParams) (*storage.TableStatsResult, error) {
	size := p.Size
	if size == nil {
		size = func(item []byte) int64 { return int64(len(item)) }
	}
	var res *storage.TableStatsResult
	err := b.read(ctx, "postgres: table stats", func(c *pgxpool.Conn) error {
		res = &storage.TableStatsResult{Indexes: map[string]storage.IndexStats{}}
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		var one int64
		err = tx.QueryRow(ctx, `SELECT id FROM tables WHERE id = $1`, p.Table.ID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return tableNotFound(p.Table)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT item FROM items WHERE t = $1`, p.Table.ID)
		if err != nil {
			return err
		}
		// RawValues: the item as received, valid until the next row (Size
		// must not retain it), instead of a copy allocated per item.
		for rows.Next() {
			res.ItemCount++
			res.SizeBytes += size(rows.RawValues()[0])
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `SELECT ix, item FROM idx WHERE t = $1`, p.Table.ID)
		if err != nil {
			return err
		}
		for rows.Next() {
			v := rows.RawValues()
			st := res.Indexes[string(v[0])]
			st.ItemCount++
			st.SizeBytes += size(v[1])
			res.Indexes[string(v[0])] = st
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
