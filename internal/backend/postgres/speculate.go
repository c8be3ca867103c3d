package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/extenddb/extenddb/internal/backend"
)

// Speculative writes: one round trip instead of two.
//
// A write needs the current item before it can compute the change (the
// write function), so the locked path takes two round trips: (BEGIN, item
// locks, catalog fence, item reads), then (writes, COMMIT). When this
// process can guess the current item — the value it last saw committed
// (guessCache), or "absent" for a key it does not hold — it runs the write
// functions on the guesses first and sends everything in one pipelined
// batch without BEGIN, which PostgreSQL runs as one implicit transaction
// committed at the batch's Sync:
//
//	pg_advisory_xact_lock per key (ascending, as on the locked path)
//	per table: 1 / count(catalog row with the expected version FOR SHARE)
//	per operation, the write guarded by the guess, each statement taking
//	its snapshot after the locks were granted:
//	  Put on an absent guess:  INSERT (a unique violation if the item exists)
//	  Put on a present guess:  UPDATE ... WHERE item = guess, 1 / count(updated)
//	  Delete on a present guess: DELETE ... WHERE item = guess, 1 / count(deleted)
//	  otherwise:               1 / count(item = guess), or 1 / (1 - count(item))
//	then index deletes and puts and the change-log pending row, as on the
//	locked path.
//
// A wrong guess (or a stale table version, or a dropped table) makes a
// statement fail (division by zero, unique violation); the implicit
// transaction rolls back, nothing is written, and the write runs again on
// the locked path with the real item. The guard compares the whole stored
// item, so a write applied here was computed from exactly the item that
// was current under its lock: the same guarantees as the locked path
// (atomic conditional writes across servers, the write fence of ADR 0010,
// one change-log record per applied write, per-item record order). A write
// function that fails on a guess is not trusted: the write runs on the
// locked path, which decides on the real item.
//
// The one difference: the COMMIT travels in the first batch, so a
// connection lost while the batch is in flight answers KindUnavailable
// ("may or may not have been applied") where the locked path could retry
// transparently before sending its COMMIT batch — unless nothing was sent,
// or the server ended the session (a FATAL error: pg_terminate_backend,
// an idle connection killed by a restart) before the result of the last
// statement, hence before the COMMIT at the Sync: then the write runs on
// the locked path.

const (
	sqlSpecFence  = `SELECT 1 / count(*) FROM (SELECT 1 FROM tables WHERE id = $1 AND version = $2 FOR SHARE) s`
	sqlSpecUpd    = `WITH u AS (UPDATE items SET item = $5 WHERE t = $1 AND h = $2 AND pk = $3 AND sk = $4 AND item = $6 RETURNING 1) SELECT 1 / count(*) FROM u`
	sqlSpecDel    = `WITH d AS (DELETE FROM items WHERE t = $1 AND h = $2 AND pk = $3 AND sk = $4 AND item = $5 RETURNING 1) SELECT 1 / count(*) FROM d`
	sqlSpecIs     = `SELECT 1 / count(*) FROM items WHERE t = $1 AND h = $2 AND pk = $3 AND sk = $4 AND item = $5`
	sqlSpecAbsent = `SELECT 1 / (1 - count(*)) FROM items WHERE t = $1 AND h = $2 AND pk = $3 AND sk = $4`
)

// SpeculationStats reports speculative writes: applied in one round trip,
// and refused (a wrong guess, a stale version) then run on the locked path.
func (b *Backend) SpeculationStats() (applied, refused int64) {
	return b.specApplied.Load(), b.specRefused.Load()
}

// specPlan is a write prepared on its guesses: what its functions
// answered and the statements that apply it if the guesses hold.
type specPlan struct {
	locks    []int64 // distinct advisory lock keys, ascending
	tabs     []int64 // distinct tables, with the version each is expected at
	versions []int64
	keys     []string // guess keys, per operation
	results  []backend.WriteItemResult
	anyMiss  bool // some operation guessed "absent" for a key the cache lacks
	// stmts are the operations' statements, sent by pipeStatements
	// (pipeline.go) after the locks and fences.
	stmts []specStmt
}

type specStmt struct {
	sql  string
	args []any
}

// specOutcome is what a send decided for one plan.
type specOutcome struct {
	done bool  // false: nothing was written, run the locked path
	err  error // with done: the write's error (its outcome unknown)
	// alone: the plan was sent with others and a statement failed, so
	// nothing was written but the failing plan is not known: send it alone.
	alone bool
}

// writeSpeculative tries ops as one implicit transaction (see above).
// done=false: nothing was written, run the locked path.
func (b *Backend) writeSpeculative(ctx context.Context, ops []backend.WriteItemParams, keys []string, locks, tabs []int64) (results []backend.WriteItemResult, done bool, err error) {
	if b.guess == nil {
		return nil, false, nil
	}
	if b.wlanes != nil {
		// A key another speculative write of this process has in flight
		// would be guessed from before that write: a refusal that would
		// also roll back the batch it joins. The locked path waits for
		// the item's lock instead.
		if !b.wlanes.claim(keys) {
			return nil, false, nil
		}
		defer b.wlanes.release(keys)
	}
	plan := b.planSpeculative(ops, keys, locks, tabs)
	if plan == nil {
		return nil, false, nil
	}
	var out specOutcome
	if b.wlanes != nil {
		out = b.wlanes.submit(ctx, plan)
	} else {
		out = b.sendPlans(ctx, []*specPlan{plan})[0]
	}
	if out.alone {
		out = b.sendPlans(ctx, []*specPlan{plan})[0]
	}
	if !out.done {
		return nil, false, nil
	}
	if out.err != nil {
		return nil, true, out.err
	}
	return plan.results, true, nil
}

// planSpeculative runs the write functions on the guesses; nil when the
// write must take the locked path.
func (b *Backend) planSpeculative(ops []backend.WriteItemParams, keys []string, locks, tabs []int64) *specPlan {
	n := len(ops)
	guesses := make([][]byte, n)
	versions := make([]int64, len(tabs))
	seen := make([]bool, len(tabs))
	anyMiss := false
	for i := range ops {
		o := &ops[i]
		for j, t := range tabs {
			if t == o.Table.ID {
				if seen[j] && versions[j] != o.Table.Version {
					return nil // two versions of one table: the locked path refuses one
				}
				versions[j], seen[j] = o.Table.Version, true
			}
		}
		if !b.versionSeen(o.Table) {
			return nil
		}
		k := keys[i]
		for j := 0; j < i; j++ {
			if keys[j] == k {
				return nil // one item twice: left to the locked path
			}
		}
		if guesses[i] = b.guessGet(k); guesses[i] == nil {
			anyMiss = true
		}
	}
	if anyMiss && !b.absent.allow() {
		return nil
	}

	plan := &specPlan{locks: locks, tabs: tabs, versions: versions, keys: keys, anyMiss: anyMiss,
		results: make([]backend.WriteItemResult, n), stmts: make([]specStmt, 0, 2*n)}
	queue := func(sql string, args ...any) { plan.stmts = append(plan.stmts, specStmt{sql, args}) }
	for i := range ops {
		o := &ops[i]
		pk, sk := nz(o.PK), nz(o.SK)
		old := guesses[i]
		ch, err := o.Fn(old)
		if err != nil {
			return nil // decided on the real item, on the locked path
		}
		plan.results[i] = backend.WriteItemResult{Old: old, Change: ch}
		t, h := o.Table.ID, hashOf(pk)
		switch {
		case ch.Op == backend.Put && old == nil:
			queue(sqlInsItem, t, h, pk, sk, ch.Item)
		case ch.Op == backend.Put:
			queue(sqlSpecUpd, t, h, pk, sk, ch.Item, old)
		case ch.Op == backend.Delete && old != nil:
			queue(sqlSpecDel, t, h, pk, sk, old)
		case old != nil:
			queue(sqlSpecIs, t, h, pk, sk, old)
		default:
			queue(sqlSpecAbsent, t, h, pk, sk)
		}
		if ch.Op == backend.Keep {
			continue // a Keep changes nothing, index entries included
		}
		queueIndexAndLog(queue, t, pk, sk, old, ch, b.opts.ItemSize)
	}
	return plan
}

// sendPlans sends plans as one implicit transaction: every plan's item
// locks (ascending over all of them), each table's fence, then each plan's
// statements, committed at the one Sync. The plans must have distinct keys
// and agree on the version of every table they share (write lanes check
// it). It answers each plan's outcome.
func (b *Backend) sendPlans(ctx context.Context, plans []*specPlan) []specOutcome {
	out := make([]specOutcome, len(plans))
	all := func(o specOutcome) []specOutcome {
		for i := range out {
			out[i] = o
		}
		return out
	}
	locks, tabs, versions := plans[0].locks, plans[0].tabs, plans[0].versions
	if len(plans) > 1 {
		locks, tabs, versions = nil, nil, nil
		for _, p := range plans {
			locks = append(locks, p.locks...)
			for j, t := range p.tabs {
				if !slices.Contains(tabs, t) {
					tabs, versions = append(tabs, t), append(versions, p.versions[j])
				}
			}
		}
		slices.Sort(locks)
		locks = slices.Compact(locks)
	}
	n := len(locks) + len(tabs)
	for _, p := range plans {
		n += len(p.stmts)
	}
	stmts := make([]specStmt, 0, n)
	for _, k := range locks {
		stmts = append(stmts, specStmt{sqlLockKey, []any{k}})
	}
	for j, t := range tabs {
		stmts = append(stmts, specStmt{sqlSpecFence, []any{t, versions[j]}})
	}
	for _, p := range plans {
		stmts = append(stmts, p.stmts...)
	}

	c, err := b.acquire(ctx)
	if err != nil {
		if retryableBeforeCommit(err) {
			return all(specOutcome{})
		}
		return all(specOutcome{done: true, err: mapErr(err, "postgres: write")})
	}
	// lastDone: the last statement's result arrived. The implicit COMMIT
	// runs at the Sync, after it, so a server that ends the session (a
	// FATAL error: pg_terminate_backend, shutdown) before that result
	// committed nothing and the writes can run again.
	lastDone, sendErr := pipeStatements(ctx, c.Conn(), stmts)
	if sendErr == nil {
		c.Release()
		b.specApplied.Add(int64(len(plans)))
		for _, p := range plans {
			if p.anyMiss {
				b.absent.record(true)
			}
			for i := range p.keys {
				b.remember(p.keys[i], p.results[i])
			}
		}
		return all(specOutcome{done: true})
	}
	defer c.Release()
	var pe *pgconn.PgError
	var notSent errNotSent
	if errors.As(sendErr, &notSent) {
		// Preparing or encoding failed: nothing of the writes was sent.
		// The locked path runs them (and meets a broken connection's
		// error itself); a connection left mid-exchange is not reused.
		if !errors.As(sendErr, &pe) {
			cctx, cancel := context.WithTimeout(context.Background(), time.Second)
			c.Conn().Close(cctx)
			cancel()
		}
		return all(specOutcome{})
	}
	if errors.As(sendErr, &pe) && pe.Severity == "ERROR" {
		// A statement failed: the implicit transaction rolled back at the
		// Sync, nothing was written.
		if !c.Conn().IsClosed() && c.Conn().PgConn().TxStatus() != 'I' {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if _, err := c.Exec(rctx, "ROLLBACK"); err != nil {
				c.Conn().Close(rctx)
			}
			cancel()
		}
		if len(plans) > 1 {
			b.specCombinedRefused.Add(1)
			return all(specOutcome{alone: true})
		}
		b.specRefused.Add(1)
		if plans[0].anyMiss && (pe.Code == "22012" || pe.Code == "23505") {
			b.absent.record(false)
		}
		return all(specOutcome{})
	}
	if pgconn.SafeToRetry(sendErr) {
		return all(specOutcome{}) // nothing reached the server
	}
	if errors.As(sendErr, &pe) && (pe.Severity == "FATAL" || pe.Severity == "PANIC") && !lastDone {
		// The messages of a session come in order: the session ended
		// before the last statement completed, so before the COMMIT.
		return all(specOutcome{})
	}
	if errors.Is(sendErr, context.Canceled) || errors.Is(sendErr, context.DeadlineExceeded) {
		return all(specOutcome{done: true, err: backend.Wrap(backend.KindUnavailable, sendErr,
			"postgres: request ended while committing; the write may or may not have been applied")})
	}
	return all(specOutcome{done: true, err: backend.Wrap(backend.KindUnavailable, sendErr,
		"postgres: connection lost while committing; the write may or may not have been applied")})
}

// versionSeen tells whether ref's version is the one this process last
// saw current: the write function is only run on a guess then, so a write
// with a stale (or future) version is refused by the locked path before
// its function runs. Another server's UpdateTable since then is the one
// window in which a function may run on a guess, be discarded and the
// write refused (write functions have no side effects).
func (b *Backend) versionSeen(ref backend.TableRef) bool {
	v, ok := b.tabVersions.Load(ref.ID)
	return ok && v.(int64) == ref.Version
}

// noteVersion records a table's version seen current (versions only grow).
func (b *Backend) noteVersion(id, version int64) {
	for {
		v, loaded := b.tabVersions.LoadOrStore(id, version)
		if !loaded || v.(int64) >= version || b.tabVersions.CompareAndSwap(id, v, version) {
			return
		}
	}
}

// remember records the item an applied write left (or found, for a Keep).
func (b *Backend) remember(key string, r backend.WriteItemResult) {
	switch r.Change.Op {
	case backend.Put:
		b.guessSet(key, r.Change.Item)
	case backend.Delete:
		b.guessSet(key, nil)
	default:
		b.guessSet(key, r.Old)
	}
}

// queueIndexAndLog queues a change's item statistics delta (from old, the
// item the write replaces), its index entry deletes and puts (with their
// deltas) and its change-log pending row.
func queueIndexAndLog(queue func(sql string, args ...any), t int64, pk, sk, old []byte, ch backend.Change, size backend.ItemSizeFunc) {
	if items, bytes := itemDelta(old, ch, size); items != 0 || bytes != 0 {
		queue(sqlStatItem, t, items, bytes)
	}
	for _, d := range ch.DeleteIndex {
		ipk := nz(d.PK)
		queue(sqlDelIdx, t, d.Index, hashOf(ipk), ipk, nz(d.SK), pk, sk)
	}
	for _, e := range ch.PutIndex {
		ipk := nz(e.PK)
		queue(sqlPutIdx, t, e.Index, hashOf(ipk), ipk, nz(e.SK), pk, sk, nz(e.Item), size.SizeOf(e.Item))
	}
	if ch.Log != nil {
		// Published to the readable log later (changelog.go).
		queue(sqlPendLog, t, nz(ch.Log))
	}
}

// batchQueue queues statements on a pgx.Batch (for queueIndexAndLog).
func batchQueue(bt *pgx.Batch) func(sql string, args ...any) {
	return func(sql string, args ...any) { bt.Queue(sql, args...) }
}
