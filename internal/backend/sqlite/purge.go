package sqlite

import (
	"context"
	"database/sql"
)

// Deleting a table's rows is the purger's work, not DeleteTable's (ADR
// 0056). SQLite has one writer for every table of the database, so
// deleting a large table's rows in one transaction would hold every other
// write of the server for as long as it takes (minutes for 10M items),
// and the DeleteTable call past its client's timeout. DeleteTable deletes
// the catalog row and records the id in the purge table (migration 0009)
// in one transaction; the rows left are unreachable, since ids are never
// reused and every read and write checks the catalog. The purger deletes
// them purgeBatch rows per write operation, queued with the other writes
// like any of them, until none is left, and removes the purge row with the
// last batch. It runs when a DeleteTable commits and when the database is
// opened (a purge cut short by a crash or a Close goes on).

// purgeBatch bounds the rows one purge step deletes (items first, then
// index entries, then change records). BenchmarkDeleteLargeTable (200k
// items of 1 KiB with an index entry each, a writer of another table
// beside it): 800 steps in about 6 s, the other writer's longest PutItem
// 74-95 ms (2,000 rows a step: 120-187 ms, in the same total time). A
// variable for tests.
var purgeBatch = 500

const (
	sqlPurgeAny    = `SELECT EXISTS (SELECT 1 FROM purge)`
	sqlPurgeNext   = `SELECT t FROM purge ORDER BY t LIMIT 1`
	sqlPurgeAdd    = `INSERT INTO purge(t) VALUES (?) ON CONFLICT (t) DO NOTHING`
	sqlPurgeDone   = `DELETE FROM purge WHERE t = ?`
	sqlPurgeItems  = `DELETE FROM items WHERE rowid IN (SELECT rowid FROM items WHERE t = ?1 LIMIT ?2)`
	sqlPurgeIdx    = `DELETE FROM idx WHERE rowid IN (SELECT rowid FROM idx WHERE t = ?1 LIMIT ?2)`
	sqlPurgeLog    = `DELETE FROM changelog WHERE id IN (SELECT id FROM changelog WHERE t = ?1 LIMIT ?2)`
	purgeWhat      = "sqlite: purge a deleted table"
	purgeNextWhat  = "sqlite: find a deleted table to purge"
	purgeClearWhat = "sqlite: finish the purge of a deleted table"
)

// wakePurge asks the purger to run (it runs once for any number of wakes
// that come while it is busy).
func (b *Backend) wakePurge() {
	select {
	case b.purgeWake <- struct{}{}:
	default:
	}
}

// purgeLoop is the purger goroutine: one pass at start, then one per wake,
// until stopPurge is closed.
func (b *Backend) purgeLoop() {
	defer close(b.purgeDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.stopPurge
		cancel()
	}()
	for {
		if !b.holdPurge {
			for {
				more, err := b.purgeOnce(ctx)
				if err != nil && ctx.Err() == nil {
					b.bgFailures.Add(1)
				}
				if err != nil || !more {
					// An error (the database closing, a failed write) is
					// retried at the next wake or the next open: the purge
					// row stays until its table's rows are gone.
					break
				}
			}
		}
		select {
		case <-b.stopPurge:
			return
		case <-b.purgeWake:
		}
	}
}

// purgeOnce runs one purge step as a write operation; more tells whether
// rows or purge rows are left. It reads the purge list on a reader first,
// so that a pass with nothing to do (every open) queues no write beside
// the others.
func (b *Backend) purgeOnce(ctx context.Context) (more bool, err error) {
	var listed bool
	if err := b.rdb.QueryRowContext(ctx, sqlPurgeAny).Scan(&listed); err != nil {
		return false, mapErr(err, purgeNextWhat)
	}
	if !listed {
		return false, nil
	}
	err = b.submit(ctx, func(w *writer) error {
		var e error
		more, e = w.purgeStep(purgeBatch)
		return e
	})
	return more, err
}

// purgeStep deletes up to n rows of the first table in the purge list;
// when fewer were left, its purge row goes too. more is false when the
// list is empty.
func (w *writer) purgeStep(n int) (more bool, err error) {
	var t int64
	switch err := w.purgeNext.QueryRowContext(bg).Scan(&t); err {
	case nil:
	case sql.ErrNoRows:
		return false, nil
	default:
		return false, fail(err, purgeNextWhat)
	}
	left := int64(n)
	for _, s := range []*sql.Stmt{w.purgeItems, w.purgeIdx, w.purgeLog} {
		res, err := s.ExecContext(bg, t, left)
		if err != nil {
			return false, fail(err, purgeWhat)
		}
		k, err := res.RowsAffected()
		if err != nil {
			return false, fail(err, purgeWhat)
		}
		if left -= k; left <= 0 {
			return true, nil
		}
	}
	if _, err := w.purgeDone.ExecContext(bg, t); err != nil {
		return false, fail(err, purgeClearWhat)
	}
	return true, nil
}
