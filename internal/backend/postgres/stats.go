package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/backend"
)

// TableStats implements backend.Backend: one REPEATABLE READ READ ONLY
// transaction reads the catalog row, the items and the index entries from
// one snapshot.
func (b *Backend) TableStats(ctx context.Context, p backend.TableStatsParams) (*backend.TableStatsResult, error) {
	size := p.Size
	if size == nil {
		size = func(item []byte) int64 { return int64(len(item)) }
	}
	var res *backend.TableStatsResult
	err := b.read(ctx, "postgres: table stats", func(c *pgxpool.Conn) error {
		tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		var err2 error
		if res, err2 = countIn(ctx, tx, p.Table, size); err2 != nil {
			return err2
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// countIn counts a table's items and index entries in tx (one snapshot).
func countIn(ctx context.Context, tx pgx.Tx, ref backend.TableRef, size func([]byte) int64) (*backend.TableStatsResult, error) {
	res := &backend.TableStatsResult{Indexes: map[string]backend.IndexStats{}}
	err := func() error {
		var one int64
		err := tx.QueryRow(ctx, `SELECT id FROM tables WHERE id = $1`, ref.ID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return tableNotFound(ref)
		}
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT item FROM items WHERE t = $1`, ref.ID)
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
		rows, err = tx.Query(ctx, `SELECT ix, item FROM idx WHERE t = $1`, ref.ID)
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
		return nil
	}()
	if err != nil {
		return nil, err
	}
	return res, nil
}
