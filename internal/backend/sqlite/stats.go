package sqlite

import (
	"context"

	"github.com/extenddb/extenddb/internal/backend"
)

// TableStats implements backend.Backend: one read transaction (one WAL
// snapshot) reads the table's items and index entries.
func (b *Backend) TableStats(ctx context.Context, p backend.TableStatsParams) (*backend.TableStatsResult, error) {
	size := p.Size
	if size == nil {
		size = func(item []byte) int64 { return int64(len(item)) }
	}
	// A whole-table read on a connection of its own below database/sql
	// (rawread.go, ADR 0036): Size sees each item in SQLite's memory, not
	// a copy allocated per item (a million items made a gigabyte of
	// garbage, beside whatever else the server was doing).
	c, err := b.openRaw()
	if err != nil {
		return nil, mapErr(err, "sqlite: table stats")
	}
	defer c.close()
	if err := c.exec("BEGIN"); err != nil {
		return nil, mapErr(err, "sqlite: begin read")
	}
	defer c.exec("ROLLBACK")
	return countTable(ctx, c, p.Table, size)
}

// countTable counts a table's items and index entries inside c's read
// transaction. KindTableNotFound when the table is not live.
func countTable(ctx context.Context, c *rawConn, ref backend.TableRef, size func([]byte) int64) (*backend.TableStatsResult, error) {
	res := &backend.TableStatsResult{Indexes: map[string]backend.IndexStats{}}
	found := false
	err := rawRows(ctx, c, `SELECT 1 FROM tables WHERE id = ?`, ref.ID, func(*rawStmt) { found = true })
	if err != nil {
		return nil, mapErr(err, "sqlite: read catalog")
	}
	if !found {
		return nil, tableNotFound(ref)
	}
	err = rawRows(ctx, c, `SELECT item FROM items WHERE t = ?`, ref.ID, func(s *rawStmt) {
		res.ItemCount++
		res.SizeBytes += size(s.blob(0))
	})
	if err != nil {
		return nil, mapErr(err, "sqlite: table stats")
	}
	var last string
	var cur backend.IndexStats
	err = rawRows(ctx, c, `SELECT ix, item FROM idx WHERE t = ?`, ref.ID, func(s *rawStmt) {
		// Entries come grouped by index (the idx_key index leads with t,
		// ix); the name is compared in SQLite's memory, copied only when
		// it changes.
		if ix := s.blob(0); string(ix) != last {
			if cur.ItemCount > 0 {
				res.Indexes[last] = cur
			}
			last = string(ix)
			cur = res.Indexes[last]
		}
		cur.ItemCount++
		cur.SizeBytes += size(s.blob(1))
	})
	if err != nil {
		return nil, mapErr(err, "sqlite: index stats")
	}
	if cur.ItemCount > 0 {
		res.Indexes[last] = cur
	}
	return res, nil
}

// rawRows runs query with one integer parameter on c and calls row for
// each row (its columns are valid during the call only); it stops with
// ctx's error when ctx ends.
func rawRows(ctx context.Context, c *rawConn, query string, arg int64, row func(*rawStmt)) error {
	s, err := c.prepare(query)
	if err != nil {
		return err
	}
	defer s.finalize()
	if err := s.bindInt64(1, arg); err != nil {
		return err
	}
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		ok, err := s.step()
		if err != nil || !ok {
			return err
		}
		row(s)
	}
}
