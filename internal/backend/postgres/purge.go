package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Deleting a table's rows is the purger's work, not DeleteTable's (ADR
// 0057). In one transaction the delete of a large table's rows takes as
// long as the table is large (minutes for 10M items), past the client's
// timeout, and leaves a burst of dead rows and WAL at once. DeleteTable
// deletes the catalog row and records the id in the purge table
// (migration 0008); the rows left are unreachable, since ids are never
// reused and every read and write checks the catalog. The purger of each
// server deletes them purgeBatch rows per statement (items, then index
// entries, then pending and published change records), each statement its own transaction, and
// removes the purge row with a statement that finds none of the table's
// rows left. It runs when the server's DeleteTable commits, at open and
// every purgeEvery (a purge another server left when it stopped).
//
// Each relation is walked in its primary key's order from a cursor kept
// in memory: a step starts where the last one ended, so it does not
// re-read the index entries of the rows it deleted before (dead until
// vacuum). Two servers purging one table at once wait on each other's
// row locks and skip the rows the other deleted; the purge row goes only
// when its guarded delete sees nothing left.

// purgeBatch bounds the rows one purge statement deletes; a variable for
// tests.
var purgeBatch = 5000

// purgeEvery is the period of the purger's pass when nothing wakes it; a
// variable for tests.
var purgeEvery = 30 * time.Second

// testHoldPurge keeps the purger from running (tests that look at the
// rows a DeleteTable leaves).
var testHoldPurge bool

const (
	sqlPurgeAdd  = `INSERT INTO purge(t) VALUES ($1) ON CONFLICT (t) DO NOTHING`
	sqlPurgeNext = `SELECT t FROM purge ORDER BY t LIMIT 1`
	// sqlPurgeDone removes the purge row once none of the table's rows is
	// left (a concurrent purger's uncommitted deletes still count).
	sqlPurgeDone = `DELETE FROM purge WHERE t = $1
		AND NOT EXISTS (SELECT 1 FROM items WHERE t = $1)
		AND NOT EXISTS (SELECT 1 FROM idx WHERE t = $1)
		AND NOT EXISTS (SELECT 1 FROM changelog_pending WHERE t = $1)
		AND NOT EXISTS (SELECT 1 FROM changelog WHERE t = $1)`
)

// purgeRel is one relation the purger empties: its step statement takes
// the table id, the cursor's columns and the batch size, deletes the
// next rows after the cursor in key order, and answers the number of
// rows it selected and the last one's key (no row when none is left).
type purgeRel struct {
	what string
	sql  string
	cols int // the cursor's columns
}

var purgeRels = []purgeRel{
	{"items", `WITH s AS (SELECT ctid, h, pk, sk FROM items WHERE t = $1 AND (h, pk, sk) > ($2, $3, $4)
			ORDER BY h, pk, sk LIMIT $5),
		d AS (DELETE FROM items WHERE ctid = ANY (ARRAY(SELECT ctid FROM s)))
		SELECT (SELECT count(*) FROM s), h, pk, sk FROM s ORDER BY h DESC, pk DESC, sk DESC LIMIT 1`, 3},
	{"idx", `WITH s AS (SELECT ctid, ix, h, ipk, isk, pk, sk FROM idx WHERE t = $1 AND (ix, h, ipk, isk, pk, sk) > ($2, $3, $4, $5, $6, $7)
			ORDER BY ix, h, ipk, isk, pk, sk LIMIT $8),
		d AS (DELETE FROM idx WHERE ctid = ANY (ARRAY(SELECT ctid FROM s)))
		SELECT (SELECT count(*) FROM s), ix, h, ipk, isk, pk, sk FROM s ORDER BY ix DESC, h DESC, ipk DESC, isk DESC, pk DESC, sk DESC LIMIT 1`, 6},
	{"changelog_pending", `WITH s AS (SELECT ctid, id FROM changelog_pending WHERE t = $1 AND id > $2 ORDER BY id LIMIT $3),
		d AS (DELETE FROM changelog_pending WHERE ctid = ANY (ARRAY(SELECT ctid FROM s)))
		SELECT (SELECT count(*) FROM s), id FROM s ORDER BY id DESC LIMIT 1`, 1},
	{"changelog", `WITH s AS (SELECT ctid, seq FROM changelog WHERE t = $1 AND seq > $2 ORDER BY seq LIMIT $3),
		d AS (DELETE FROM changelog WHERE ctid = ANY (ARRAY(SELECT ctid FROM s)))
		SELECT (SELECT count(*) FROM s), seq FROM s ORDER BY seq DESC LIMIT 1`, 1},
}

// purgeStart is the cursor before every row of a relation: h, id and
// seq are never negative, every text and bytea is greater than or equal to
// the empty one (the comparison is strict, so the cursor itself must not
// be a key: no key has h or seq -1 first, and ix comes first in idx, an
// index name is never empty).
func purgeStart(rel purgeRel) []any {
	switch rel.cols {
	case 3:
		return []any{int64(-1), []byte{}, []byte{}}
	case 6:
		return []any{"", int64(-1), []byte{}, []byte{}, []byte{}, []byte{}}
	default:
		return []any{int64(-1)}
	}
}

// purgeState is where the purger is in one table's relations.
type purgeState struct {
	t      int64
	rel    int   // index in purgeRels
	cursor []any // the last key deleted in purgeRels[rel]
}

// wakePurge asks the purger to run (once for any number of wakes that come
// while it is busy).
func (b *Backend) wakePurge() {
	select {
	case b.purgeWake <- struct{}{}:
	default:
	}
}

// purgeLoop is the purger goroutine: a pass at start, then one per wake
// and every purgeEvery, until purgeStop closes.
func (b *Backend) purgeLoop() {
	defer close(b.purgeDone)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.purgeStop
		cancel()
	}()
	tick := time.NewTicker(purgeEvery)
	defer tick.Stop()
	var st *purgeState
	for {
		if !testHoldPurge {
			for {
				more, err := b.purgeStep(ctx, &st)
				if err != nil && ctx.Err() == nil {
					b.bgFailures.Add(1)
				}
				if err != nil || !more {
					// An error (the server closing, the database away) is
					// retried at the next pass: the purge row stays until
					// its table's rows are gone.
					break
				}
			}
		}
		select {
		case <-b.purgeStop:
			return
		case <-b.purgeWake:
		case <-tick.C:
		}
	}
}

// purgeStep runs one purge statement for the first table of the purge
// list; more tells whether to go on at once. *st keeps the cursor between
// steps of the same table.
func (b *Backend) purgeStep(ctx context.Context, st **purgeState) (more bool, err error) {
	var t int64
	if err := b.pool.QueryRow(ctx, sqlPurgeNext).Scan(&t); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			*st = nil
			return false, nil
		}
		return false, mapErr(err, "postgres: find a deleted table to purge")
	}
	if *st == nil || (*st).t != t {
		*st = &purgeState{t: t, cursor: purgeStart(purgeRels[0])}
	}
	s := *st
	if s.rel == len(purgeRels) {
		tag, err := b.pool.Exec(ctx, sqlPurgeDone, t)
		if err != nil {
			return false, mapErr(err, "postgres: finish the purge of a deleted table")
		}
		if tag.RowsAffected() == 0 {
			// Rows are left (another server's purge not committed yet,
			// or rows written after this walk passed them): walk again
			// at the next pass.
			*st = nil
			return false, nil
		}
		*st = nil
		return true, nil
	}
	rel := purgeRels[s.rel]
	args := append(append([]any{t}, s.cursor...), purgeBatch)
	dest := make([]any, 1+rel.cols)
	var n int64
	dest[0] = &n
	next := make([]any, rel.cols)
	for i := range next {
		dest[1+i] = &next[i]
	}
	err = b.pool.QueryRow(ctx, rel.sql, args...).Scan(dest...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		n = 0
	case err != nil:
		return false, mapErr(err, "postgres: purge a deleted table's "+rel.what)
	}
	if n < int64(purgeBatch) {
		s.rel++
		if s.rel < len(purgeRels) {
			s.cursor = purgeStart(purgeRels[s.rel])
		}
		return true, nil
	}
	s.cursor = next
	return true, nil
}
