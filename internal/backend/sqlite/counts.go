package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/extenddb/extenddb/internal/backend"
)

// Table statistics kept with every write (backend.TableCounter, ADR
// 0053). The writer collects each write's delta (one item more or less,
// the difference of the sizes; the same per index) in w.deltas while it
// runs the batch and adds their sums to the table_stats rows just before
// COMMIT: one UPSERT per table and index the batch touched, in the
// batch's transaction, so the figures are those of the committed writes,
// also after a crash. A transaction's savepoint undo drops its deltas.

var _ backend.TableCounter = (*Backend)(nil)

// statDelta is one write's change to a table's (ix "") or an index's
// figures.
type statDelta struct {
	t            int64
	ix           string
	items, bytes int64
}

const (
	sqlStatAdd = `INSERT INTO table_stats(t, ix, items, bytes) VALUES (?, ?, ?, ?)
		ON CONFLICT (t, ix) DO UPDATE SET items = items + excluded.items, bytes = bytes + excluded.bytes`
	sqlStatCreate = `INSERT OR REPLACE INTO table_stats(t, ix, items, bytes, counted) VALUES (?, '', 0, 0, 1)`
	sqlStatDrop   = `DELETE FROM table_stats WHERE t = ?`
	sqlStatDropIx = `DELETE FROM table_stats WHERE t = ? AND ix = ?`
	sqlStatBulk   = `INSERT INTO table_stats(t, ix, items, bytes, bulk) VALUES (?, '', 0, 0, 1)
		ON CONFLICT (t, ix) DO UPDATE SET counted = 0, bulk = bulk + 1`
	sqlStatCounted = `UPDATE table_stats SET counted = 1 WHERE t = ? AND ix = ''`
	sqlStatBulkOf  = `SELECT bulk FROM table_stats WHERE t = ? AND ix = ''`
	sqlStatRead    = `SELECT ix, items, bytes, counted, bulk FROM table_stats WHERE t = ?`
)

func (w *writer) addDelta(t int64, ix string, items, bytes int64) {
	w.deltas = append(w.deltas, statDelta{t: t, ix: ix, items: items, bytes: bytes})
}

// itemDelta records a write of one item from old (nil: absent) to new
// (nil: deleted).
func (w *writer) itemDelta(t int64, old, new []byte) {
	switch {
	case old == nil && new == nil:
	case old == nil:
		w.addDelta(t, "", 1, w.size.SizeOf(new))
	case new == nil:
		w.addDelta(t, "", -1, -w.size.SizeOf(old))
	default:
		w.addDelta(t, "", 0, w.size.SizeOf(new)-w.size.SizeOf(old))
	}
}

// flushStats adds the collected deltas of live tables to their rows. A
// table deleted in this transaction keeps no row.
func (w *writer) flushStats() error {
	if len(w.deltas) == 0 {
		return nil
	}
	type key struct {
		t  int64
		ix string
	}
	sum := make(map[key]statDelta, 4)
	order := make([]key, 0, 4)
	for _, d := range w.deltas {
		k := key{d.t, d.ix}
		s, ok := sum[k]
		if !ok {
			order = append(order, k)
		}
		s.items += d.items
		s.bytes += d.bytes
		sum[k] = s
	}
	w.deltas = w.deltas[:0]
	for _, k := range order {
		s := sum[k]
		if (s.items == 0 && s.bytes == 0) || !w.exists(k.t) {
			continue
		}
		if _, err := w.statAdd.ExecContext(bg, k.t, k.ix, s.items, s.bytes); err != nil {
			return fail(err, "sqlite: table statistics")
		}
	}
	return nil
}

// Counts implements backend.TableCounter: the table's rows of
// table_stats, one statement on a reader (one read transaction). A live
// table always has its row but when it comes from before migration 0008;
// a table without one is looked up in the catalog.
func (b *Backend) Counts(ctx context.Context, p backend.CountsParams) (*backend.CountsResult, error) {
	res, found, _, err := readCounts(ctx, b.statRead, p.Table.ID)
	if err != nil {
		return nil, err
	}
	if !found {
		if err := b.checkTable(ctx, p.Table); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// readCounts reads a table's figures with the prepared sqlStatRead;
// found tells whether the table has its row.
func readCounts(ctx context.Context, stmt *sql.Stmt, id int64) (res *backend.CountsResult, found bool, bulk int64, err error) {
	rows, err := stmt.QueryContext(ctx, id)
	if err != nil {
		return nil, false, 0, mapErr(err, "sqlite: table statistics")
	}
	defer rows.Close()
	res = &backend.CountsResult{Stats: backend.TableStatsResult{Indexes: map[string]backend.IndexStats{}}}
	for rows.Next() {
		var ix string
		var items, bytes, counted, nbulk int64
		if err := rows.Scan(&ix, &items, &bytes, &counted, &nbulk); err != nil {
			return nil, false, 0, mapErr(err, "sqlite: table statistics")
		}
		if ix == "" {
			res.Stats.ItemCount, res.Stats.SizeBytes = items, bytes
			res.Counted, bulk, found = counted == 1, nbulk, true
		} else if items > 0 {
			res.Stats.Indexes[ix] = backend.IndexStats{ItemCount: items, SizeBytes: bytes}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, 0, mapErr(err, "sqlite: table statistics")
	}
	return res, found, bulk, nil
}

// Recount implements backend.TableCounter. One read transaction (one WAL
// snapshot) counts the table and reads its rows of table_stats as they
// were at that snapshot; then the writer adds, to each row as it is now,
// the difference between the count and the row at the snapshot, so the
// writes committed after the snapshot keep their deltas. Writes are not
// stopped while the table is read. A bulk load or a description change
// since the snapshot leaves the figures unknown.
func (b *Backend) Recount(ctx context.Context, p backend.CountsParams) (*backend.CountsResult, error) {
	c, err := b.openRaw()
	if err != nil {
		return nil, mapErr(err, "sqlite: recount")
	}
	defer c.close()
	if err := c.exec("BEGIN"); err != nil {
		return nil, mapErr(err, "sqlite: begin read")
	}
	count, err := countTable(ctx, c, p.Table, b.opts.ItemSize.SizeOf)
	if err != nil {
		c.exec("ROLLBACK")
		return nil, err
	}
	var version, bulk int64 = -1, 0
	err = rawRows(ctx, c, `SELECT version FROM tables WHERE id = ?`, p.Table.ID, func(s *rawStmt) { version = s.int64(0) })
	if err != nil {
		c.exec("ROLLBACK")
		return nil, mapErr(err, "sqlite: read catalog")
	}
	at := map[string]backend.IndexStats{}
	err = rawRows(ctx, c, `SELECT ix, items, bytes, bulk FROM table_stats WHERE t = ?`, p.Table.ID, func(s *rawStmt) {
		ix := string(s.blob(0))
		at[ix] = backend.IndexStats{ItemCount: s.int64(1), SizeBytes: s.int64(2)}
		if ix == "" {
			bulk = s.int64(3)
		}
	})
	c.exec("ROLLBACK")
	if err != nil {
		return nil, mapErr(err, "sqlite: recount")
	}
	// The difference to add, per row: what was counted minus what the row
	// held at the snapshot.
	diff := map[string]backend.IndexStats{"": {ItemCount: count.ItemCount - at[""].ItemCount, SizeBytes: count.SizeBytes - at[""].SizeBytes}}
	for ix, n := range count.Indexes {
		diff[ix] = backend.IndexStats{ItemCount: n.ItemCount, SizeBytes: n.SizeBytes}
	}
	for ix, n := range at {
		if ix != "" {
			d := diff[ix]
			diff[ix] = backend.IndexStats{ItemCount: d.ItemCount - n.ItemCount, SizeBytes: d.SizeBytes - n.SizeBytes}
		}
	}
	err = b.submit(ctx, func(w *writer) error {
		v, ok := w.tableVersion(p.Table.ID)
		if !ok {
			return tableNotFound(p.Table)
		}
		if v != version {
			return nil // a description changed since the snapshot
		}
		if err := w.flushStats(); err != nil {
			return err
		}
		var now int64
		err := w.statBulkOf.QueryRowContext(bg, p.Table.ID).Scan(&now)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fail(err, "sqlite: recount")
		}
		if now != bulk {
			return nil // a bulk load since the snapshot
		}
		for ix, d := range diff {
			if _, err := w.statAdd.ExecContext(bg, p.Table.ID, ix, d.ItemCount, d.SizeBytes); err != nil {
				return fail(err, "sqlite: recount")
			}
		}
		if _, err := w.statCounted.ExecContext(bg, p.Table.ID); err != nil {
			return fail(err, "sqlite: recount")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return b.Counts(ctx, p)
}
