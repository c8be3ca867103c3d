package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/itemcache"
)

const (
	sqlLockKey   = `SELECT pg_advisory_xact_lock($1)`
	sqlFenceTabs = `SELECT id, version FROM tables WHERE id = ANY($1) FOR SHARE`
	sqlLiveTabs  = `SELECT id FROM tables WHERE id = ANY($1)`
	sqlReadItem  = `SELECT item FROM items WHERE t = $1 AND h = $2 AND pk = $3 AND sk = $4`
	sqlInsItem   = `INSERT INTO items(t, h, pk, sk, item) VALUES ($1, $2, $3, $4, $5)`
	sqlUpdItem   = `UPDATE items SET item = $5 WHERE t = $1 AND h = $2 AND pk = $3 AND sk = $4`
	sqlDelItem   = `DELETE FROM items WHERE t = $1 AND h = $2 AND pk = $3 AND sk = $4`
	// An index entry's delete and put append their statistics deltas
	// (counts.go) in the same statement: what was deleted or replaced is
	// known only there.
	sqlDelIdx = `WITH d AS (DELETE FROM idx WHERE t = $1 AND ix = $2 AND h = $3 AND ipk = $4 AND isk = $5 AND pk = $6 AND sk = $7 RETURNING sz)
		INSERT INTO table_stats_delta(t, ix, items, bytes) SELECT $1, $2, -1, -coalesce(sz, 0) FROM d`
	sqlPutIdx = `WITH o AS (SELECT sz FROM idx WHERE t = $1 AND ix = $2 AND h = $3 AND ipk = $4 AND isk = $5 AND pk = $6 AND sk = $7),
		u AS (INSERT INTO idx(t, ix, h, ipk, isk, pk, sk, item, sz) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (t, ix, h, ipk, isk, pk, sk) DO UPDATE SET item = EXCLUDED.item, sz = EXCLUDED.sz)
		INSERT INTO table_stats_delta(t, ix, items, bytes) SELECT $1, $2, 1 - count(*), $9::bigint - coalesce(sum(o.sz), 0) FROM o`
	sqlDropIdx    = `DELETE FROM idx WHERE t = $1 AND ix = $2`
	sqlGetItem    = `SELECT i.item FROM tables tb LEFT JOIN items i ON i.t = tb.id AND i.h = $2 AND i.pk = $3 AND i.sk = $4 WHERE tb.id = $1`
	sqlBeginSnap  = `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`
	sqlCommitSnap = `COMMIT`
)

// WriteItem implements backend.Backend.
func (b *Backend) WriteItem(ctx context.Context, p backend.WriteItemParams) (*backend.WriteItemResult, error) {
	if p.Fn == nil {
		return nil, backend.Errorf(backend.KindInternal, "postgres: WriteItem without Fn")
	}
	results, reasons, err := b.writeItems(ctx, []backend.WriteItemParams{p}, "postgres: write item")
	if err != nil {
		return nil, err
	}
	if reasons != nil {
		return nil, reasons[0]
	}
	return &results[0], nil
}

// TransactWrite implements backend.Backend.
func (b *Backend) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	for i := range p.Ops {
		if p.Ops[i].Fn == nil {
			return nil, backend.Errorf(backend.KindInternal, "postgres: TransactWrite operation %d without Fn", i)
		}
	}
	if len(p.Ops) == 0 {
		return &backend.TransactWriteResult{}, nil
	}
	results, reasons, err := b.writeItems(ctx, p.Ops, "postgres: transact write")
	if err != nil {
		return nil, err
	}
	if reasons != nil {
		n := 0
		for _, r := range reasons {
			if r != nil {
				n++
			}
		}
		return nil, &backend.Error{Kind: backend.KindTransactionCanceled,
			Message: fmt.Sprintf("%d of %d operations failed", n, len(p.Ops)), Reasons: reasons}
	}
	return &backend.TransactWriteResult{Results: results}, nil
}

// opKey is the identity of an item inside one transaction.
type opKey struct {
	t      int64
	pk, sk string
}

// writeItems runs ops in one transaction (see the package comment). When
// a write function fails, nothing is written and reasons holds, per op,
// the error of the failing functions (nil for the others).
func (b *Backend) writeItems(ctx context.Context, ops []backend.WriteItemParams, msg string) (results []backend.WriteItemResult, reasons []error, err error) {
	// The items' cache keys (the guess cache's and the read cache's).
	keys := make([]string, len(ops))
	for i := range ops {
		keys[i] = guessKey(ops[i].Table.ID, nz(ops[i].PK), nz(ops[i].SK))
	}
	// After the outcome, whatever it is, the read cache learns it (ADR
	// 0037, 0039): committed is set only where the writes are known
	// committed.
	var committed []backend.WriteItemResult
	if gens := b.writtenGens(keys); gens != nil {
		defer func() { b.settleWritten(keys, gens, committed) }()
	}
	locks, tabs := lockKeys(ops)
	if results, done, err := b.writeSpeculative(ctx, ops, keys, locks, tabs); done {
		if err != nil {
			return nil, nil, err
		}
		committed = results
		return results, nil, nil
	}

	var seen []backend.WriteItemResult // what the committed run found or left, per op
	err = b.write(ctx, msg, func(x *txn) error {
		results, reasons, seen = nil, nil, nil
		olds, err := b.lockAndRead(x, ops, locks, tabs)
		if err != nil {
			return err
		}
		bt, res, rs, guessable := queueWrites(ops, olds, b.opts.ItemSize)
		if rs != nil {
			reasons = rs
			x.rollback()
			// The items as they are: the next attempt's guesses.
			for i := range ops {
				seen = append(seen, backend.WriteItemResult{Old: olds[i]})
			}
			return nil
		}
		results = res
		bt.Queue("COMMIT")
		x.commitSent = true
		if err := x.send(bt); err != nil {
			return err
		}
		if guessable {
			seen = results
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if b.guess != nil && len(seen) == len(ops) {
		for i := range ops {
			b.remember(keys[i], seen[i])
		}
	}
	if reasons == nil && len(seen) == len(ops) {
		committed = seen // committed, one operation per key
	}
	return results, reasons, nil
}

// lockKeys are the distinct advisory lock keys of ops in ascending order,
// and their distinct tables.
func lockKeys(ops []backend.WriteItemParams) (locks, tabs []int64) {
	locks = make([]int64, 0, len(ops))
	for i := range ops {
		o := &ops[i]
		locks = append(locks, lockKey(o.Table.ID, nz(o.PK), nz(o.SK)))
		if !slices.Contains(tabs, o.Table.ID) {
			tabs = append(tabs, o.Table.ID)
		}
	}
	slices.Sort(locks)
	return slices.Compact(locks), tabs
}

// lockAndRead begins the transaction in one round trip: the items'
// advisory locks, the tables' versions (FOR SHARE, which conflicts with
// UpdateTable's FOR NO KEY UPDATE: a version read here stays current
// until the transaction ends) and the items as they are (nil when
// absent). Every op's table must be live at its version.
func (b *Backend) lockAndRead(x *txn, ops []backend.WriteItemParams, locks, tabs []int64) ([][]byte, error) {
	olds := make([][]byte, len(ops))
	live := make(map[int64]int64, len(tabs))
	bt := &pgx.Batch{}
	bt.Queue("BEGIN")
	for _, k := range locks {
		bt.Queue(sqlLockKey, k)
	}
	bt.Queue(sqlFenceTabs, tabs).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var id, version int64
			if err := rows.Scan(&id, &version); err != nil {
				return err
			}
			live[id] = version
		}
		return rows.Err()
	})
	for i := range ops {
		o := &ops[i]
		pk := nz(o.PK)
		bt.Queue(sqlReadItem, o.Table.ID, hashOf(pk), pk, nz(o.SK)).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&olds[i])
			if errors.Is(err, pgx.ErrNoRows) {
				olds[i] = nil
				return nil
			}
			return err
		})
	}
	if err := x.send(bt); err != nil {
		return nil, err
	}
	if b.guess != nil {
		for id, version := range live {
			b.noteVersion(id, version)
		}
	}
	for i := range ops {
		ref := ops[i].Table
		version, ok := live[ref.ID]
		if !ok {
			return nil, tableNotFound(ref)
		}
		if version != ref.Version {
			return nil, backend.VersionChanged(ref, version)
		}
	}
	return olds, nil
}

// queueWrites runs the write functions in order on the items read (a
// later operation on the same item sees the earlier one's result) and
// queues their statements. When a function fails, reasons holds, per op,
// the error of the failing functions and nothing is to be written.
// guessable is false when two operations write one key (the guess cache
// keeps one value per key).
func queueWrites(ops []backend.WriteItemParams, olds [][]byte, size backend.ItemSizeFunc) (bt *pgx.Batch, results []backend.WriteItemResult, reasons []error, guessable bool) {
	results = make([]backend.WriteItemResult, len(ops))
	cur := make(map[opKey][]byte, len(ops))
	guessable = true
	exists := func(k opKey, i int) []byte {
		if v, ok := cur[k]; ok {
			return v
		}
		return olds[i]
	}
	bt = &pgx.Batch{}
	for i := range ops {
		o := &ops[i]
		pk, sk := nz(o.PK), nz(o.SK)
		k := opKey{o.Table.ID, string(pk), string(sk)}
		old := exists(k, i)
		// backend.Checked recovers a panic of the function and
		// validates the Change it returns (it wraps every backend).
		ch, err := o.Fn(old)
		if err != nil {
			if reasons == nil {
				reasons = make([]error, len(ops))
			}
			reasons[i] = err
			continue
		}
		if reasons != nil {
			continue // the transaction is canceled; still collect reasons
		}
		results[i] = backend.WriteItemResult{Old: old, Change: ch}
		h := hashOf(pk)
		if _, dup := cur[k]; dup {
			guessable = false
		}
		switch ch.Op {
		case backend.Keep:
			continue // a Keep changes nothing, index entries included
		case backend.Put:
			if old == nil {
				bt.Queue(sqlInsItem, o.Table.ID, h, pk, sk, ch.Item)
			} else {
				bt.Queue(sqlUpdItem, o.Table.ID, h, pk, sk, ch.Item)
			}
			cur[k] = ch.Item
		case backend.Delete:
			if old != nil {
				bt.Queue(sqlDelItem, o.Table.ID, h, pk, sk)
			}
			cur[k] = nil
		}
		queueIndexAndLog(batchQueue(bt), o.Table.ID, pk, sk, old, ch, size)
	}
	if reasons != nil {
		return nil, nil, reasons, false
	}
	return bt, results, nil, guessable
}

// GetItem implements backend.Backend: one statement reads the catalog row
// and the item from one snapshot.
func (b *Backend) GetItem(ctx context.Context, p backend.GetItemParams) (*backend.GetItemResult, error) {
	if !b.readCacheOn() {
		return b.getItem(ctx, p)
	}
	// While no other server is attached, the read cache answers eventually
	// consistent reads and keeps what any read finds (ADR 0037).
	var kbuf [96]byte
	key := itemcache.AppendKey(kbuf[:0], p.Table.ID, nz(p.PK), nz(p.SK))
	var gen itemcache.Gen
	if p.Eventual {
		item, ok, g := b.rcache.GetBytes(key)
		if ok {
			return &backend.GetItemResult{Item: item}, nil
		}
		gen = g
	} else {
		gen = b.rcache.Generation(string(key))
	}
	res, err := b.getItem(ctx, p)
	if err == nil && res.Item != nil { // absence is not kept: no key string to build
		b.rcache.Fill(string(key), res.Item, gen)
	}
	return res, err
}

// getItem reads one item from the database.
func (b *Backend) getItem(ctx context.Context, p backend.GetItemParams) (*backend.GetItemResult, error) {
	if b.lanes != nil {
		if res, ok, err := b.getViaLane(ctx, p); ok {
			return res, err
		}
	}
	pk := nz(p.PK)
	res := &backend.GetItemResult{}
	err := b.read(ctx, "postgres: get item", func(c *pgxpool.Conn) error {
		err := c.QueryRow(ctx, sqlGetItem, p.Table.ID, hashOf(pk), pk, nz(p.SK)).Scan(&res.Item)
		if errors.Is(err, pgx.ErrNoRows) {
			return tableNotFound(p.Table)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// TransactGet implements backend.Backend: one REPEATABLE READ READ ONLY
// transaction, sent as one batch, reads every key from one snapshot.
func (b *Backend) TransactGet(ctx context.Context, p backend.TransactGetParams) (*backend.TransactGetResult, error) {
	res := &backend.TransactGetResult{Items: make([][]byte, len(p.Keys))}
	var tabs []int64
	for _, k := range p.Keys {
		if !slices.Contains(tabs, k.Table.ID) {
			tabs = append(tabs, k.Table.ID)
		}
	}
	err := b.read(ctx, "postgres: transact get", func(c *pgxpool.Conn) error {
		live := make(map[int64]bool, len(tabs))
		bt := &pgx.Batch{}
		bt.Queue(sqlBeginSnap)
		bt.Queue(sqlLiveTabs, tabs).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return err
				}
				live[id] = true
			}
			return rows.Err()
		})
		for i, k := range p.Keys {
			pk := nz(k.PK)
			bt.Queue(sqlReadItem, k.Table.ID, hashOf(pk), pk, nz(k.SK)).QueryRow(func(row pgx.Row) error {
				res.Items[i] = nil
				err := row.Scan(&res.Items[i])
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				return err
			})
		}
		bt.Queue(sqlCommitSnap)
		err := c.SendBatch(ctx, bt).Close()
		if err != nil {
			if !c.Conn().IsClosed() && c.Conn().PgConn().TxStatus() != 'I' {
				c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
			}
			return err
		}
		for _, k := range p.Keys {
			if !live[k.Table.ID] {
				return tableNotFound(k.Table)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
