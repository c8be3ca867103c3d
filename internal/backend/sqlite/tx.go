package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/itemcache"
)

// wop is one queued write operation. run executes it inside the batch's
// transaction. It returns nil, an operation error (a write function's or
// a storage error such as KindTableNotFound) after writing nothing, or a
// *fatal when a statement failed and the transaction must be rolled back.
type wop struct {
	ctx  context.Context
	run  func(w *writer) error
	err  error
	done chan struct{}
}

// fatal marks an SQL failure inside a batch.
type fatal struct{ err error }

func (f *fatal) Error() string { return f.err.Error() }

func fail(err error, msg string) error { return &fatal{mapErr(err, msg)} }

// submit queues run for the writer and waits for its answer. Once queued,
// the operation's outcome is waited for even when ctx ends, so the answer
// is always definite; ctx is checked again when the writer picks it up.
func (b *Backend) submit(ctx context.Context, run func(w *writer) error) error {
	op := &wop{ctx: ctx, run: run, done: make(chan struct{})}
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		return errClosed
	}
	select {
	case b.ops <- op:
	case <-ctx.Done():
		b.mu.RUnlock()
		return mapErr(ctx.Err(), "sqlite: write not queued")
	}
	b.mu.RUnlock()
	<-op.done
	return op.err
}

// DefaultCommitWait is the default Options.CommitWait.
const DefaultCommitWait = defaultCommitWaitUS * time.Microsecond

const defaultCommitWaitUS = 2000

// writeLoop is the writer goroutine: group commit of whatever is queued.
//
// The commit wait: a commit costs the same few WAL frames and system
// calls (begin, the right edge of the items table, the commit) whatever
// the number of writes it carries, and with the writer faster than the
// HTTP layer in front of it the queue rarely holds more than one write
// (about 1.4 writes per commit at 16 concurrent clients). So while writes
// arrive concurrently the writer waits, after taking what is queued, for
// more writes to join the batch, at most Options.CommitWait: until the
// batch holds as many writes as the previous one, or one more (a probe
// for more concurrency). "Concurrently" is learnt: waiting starts when
// the queue by itself held two writes or more, and stops when a wait for
// a single write gathered nothing, so a lone client never waits (except
// once, right after a concurrent stretch). A probe that runs into the
// wait's end means that the batch has reached the clients' concurrency
// (a closed loop of k clients never has more than k writes to offer): the
// writer then holds the batch size without probing for probeHoldMin
// batches, doubling up to probeHoldMax while probes keep failing, so that
// k concurrent clients (2, say) do not pay the whole wait on every other
// commit (ADR 0029).
func (b *Backend) writeLoop() {
	defer close(b.done)
	batch := make([]*wop, 0, b.opts.MaxBatch)
	var wait *time.Timer
	if b.opts.CommitWait > 0 {
		wait = time.NewTimer(time.Hour)
		wait.Stop()
	}
	waiting, prev := false, 0
	hold, holdLen := 0, probeHoldMin
	for {
		op, ok := <-b.ops
		if !ok {
			return
		}
		batch = append(batch[:0], op)
		open := b.drain(&batch, 0, nil)
		if len(batch) >= 2 {
			waiting = true
		}
		target, probe := prev, false
		if hold > 0 {
			hold--
		} else {
			target, probe = prev+1, true
		}
		target = min(target, b.opts.MaxBatch)
		if open && waiting && wait != nil && len(batch) < target {
			n := len(batch)
			wait.Reset(b.opts.CommitWait)
			b.drain(&batch, target, wait.C)
			wait.Stop()
			if n == 1 && len(batch) == 1 {
				waiting = false
			}
			b.commitWaits.Add(1)
			switch {
			case len(batch) < target && probe:
				b.commitTimeouts.Add(1)
				hold, holdLen = holdLen, min(2*holdLen, probeHoldMax)
			case len(batch) < target:
				b.commitTimeouts.Add(1)
			case probe:
				holdLen = probeHoldMin
			}
		}
		prev = len(batch)
		b.batches.Add(1)
		b.batchedOps.Add(int64(len(batch)))
		b.runBatch(batch)
		clear(batch)
		b.boundWAL()
	}
}

// probeHoldMin and probeHoldMax bound the batches during which the
// writer's commit wait does not probe for a larger batch after a probe
// ran into the wait's end (writeLoop).
const (
	probeHoldMin = 8
	probeHoldMax = 1024
)

// drain appends queued operations to batch, up to MaxBatch: what is
// queued now when until is nil, else whatever arrives until it fires or
// the batch holds enough operations. It reports false when the queue is
// closed.
func (b *Backend) drain(batch *[]*wop, enough int, until <-chan time.Time) bool {
	for len(*batch) < b.opts.MaxBatch {
		if until == nil {
			select {
			case op, ok := <-b.ops:
				if !ok {
					return false
				}
				*batch = append(*batch, op)
			default:
				return true
			}
			continue
		}
		if len(*batch) >= enough {
			return true
		}
		select {
		case op, ok := <-b.ops:
			if !ok {
				return false
			}
			*batch = append(*batch, op)
		case <-until:
			return true
		}
	}
	return true
}

func answer(op *wop, err error) {
	op.err = err
	close(op.done)
}

// runBatch runs a batch in one transaction and answers every operation.
func (b *Backend) runBatch(batch []*wop) {
	w := b.w
	if err := w.begin(); err != nil {
		for _, op := range batch {
			answer(op, err)
		}
		return
	}
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			op.err = mapErr(err, "sqlite: write canceled before it ran")
			op.run = nil
			continue
		}
		// backend.Checked recovers a panic of a write function and
		// validates its Change (it wraps every backend).
		err := op.run(w)
		var f *fatal
		if errors.As(err, &f) {
			w.rollback()
			if len(batch) == 1 {
				answer(op, f.err)
				return
			}
			// Run each operation alone so the failure stays with its own.
			for _, o := range batch {
				if o.run == nil {
					answer(o, o.err)
					continue
				}
				b.runBatch([]*wop{o})
			}
			return
		}
		op.err = err
	}
	if err := w.commit(); err != nil {
		for _, op := range batch {
			if op.run != nil {
				op.err = err
			}
		}
	} else if w.catalogChanged {
		b.publish()
	}
	w.catalogChanged = false
	for _, op := range batch {
		answer(op, op.err)
	}
}

// writer owns the single write connection. Only the writer goroutine (and
// Open/Close around it) touches it.
type writer struct {
	conn *sql.Conn

	getItem, putItem, insItem, delItem, putIdx, delIdx   *sql.Stmt
	putItems, putIdxs                                    *sql.Stmt // bulkRows rows each
	getTable, insertTable, updTableStmt                  *sql.Stmt
	delTableStmt, allTables, dropIdx                     *sql.Stmt
	purgeNext, purgeAdd, purgeDone                       *sql.Stmt
	purgeItems, purgeIdx, purgeLog                       *sql.Stmt
	begin_, commit_, rollback_, savepoint, release, undo *sql.Stmt
	dataVersion                                          *sql.Stmt
	// Table statistics (counts.go).
	getIdx, insIdx, statAdd, statCreate, statDrop, statDropIx, statBulk, statCounted, statBulkOf *sql.Stmt
	// size measures items and index entries (Options.ItemSize); deltas
	// are this transaction's changes to the figures (counts.go).
	size   backend.ItemSizeFunc
	deltas []statDelta
	// The change log (changelog.go).
	putLog, lastLog, lastTrimmed, deleteLogLast *sql.Stmt

	// logs holds, per table that wrote a record since it was loaded, the
	// last Seq assigned and the At of the last record (changelog.go).
	logs map[int64]logPos

	// live maps the live table IDs to their description versions as of
	// the last commit; pend holds this transaction's catalog changes (the
	// new version, 0 for deleted). Item writes are fenced against them
	// without a query (backend.TableRef.Version).
	live           map[int64]int64
	pend           map[int64]int64
	catalogChanged bool
	version        int64 // PRAGMA data_version at the last check

	// cache is the item cache (nil when disabled); pendItems are this
	// transaction's item changes (and reads), applied to it after COMMIT;
	// pendIdx maps a cache key to its latest entry in pendItems.
	cache     *itemcache.Cache
	pendItems []cacheChange
	pendIdx   map[string]int

	// bulkItems and bulkIdx hold a bulk load's statement arguments
	// (bulk.go), kept between loads.
	bulkItems, bulkIdx []any

	// specScore gates writeItem's speculative insert: +1 when it held,
	// -specScoreMiss when the key existed; no speculation while negative
	// (each write without it adds 1 back).
	specScore int
	// specHits and specMisses count the speculative inserts that held
	// and those that found the key (for tests).
	specHits, specMisses int64
}

const (
	specScoreMax  = 16
	specScoreMiss = 16
)

func (w *writer) notePend(key string, item []byte) {
	if w.cache == nil {
		return
	}
	w.pendIdx[key] = len(w.pendItems)
	w.pendItems = append(w.pendItems, cacheChange{key: key, item: item})
}

func (w *writer) clearPend() {
	clear(w.pendItems)
	w.pendItems = w.pendItems[:0]
	clear(w.pendIdx)
}

// truncatePend undoes the changes noted after position n (savepoint undo).
func (w *writer) truncatePend(n int) {
	if w.cache == nil {
		return
	}
	clear(w.pendItems[n:])
	w.pendItems = w.pendItems[:n]
	clear(w.pendIdx)
	for i, c := range w.pendItems {
		w.pendIdx[c.key] = i
	}
}

var bg = context.Background()

func (w *writer) prepare(ctx context.Context) error {
	for _, s := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&w.getItem, `SELECT item FROM items WHERE t = ? AND h = ? AND pk = ? AND sk = ?`},
		{&w.putItem, `INSERT INTO items(t, h, pk, sk, item) VALUES (?, ?, ?, ?, ?) ON CONFLICT (t, h, pk, sk) DO UPDATE SET item = excluded.item`},
		{&w.insItem, `INSERT INTO items(t, h, pk, sk, item) VALUES (?, ?, ?, ?, ?) ON CONFLICT (t, h, pk, sk) DO NOTHING`},
		{&w.delItem, `DELETE FROM items WHERE t = ? AND h = ? AND pk = ? AND sk = ?`},
		{&w.putIdx, `INSERT INTO idx(t, ix, h, ipk, isk, pk, sk, item) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (t, ix, h, ipk, isk, pk, sk) DO UPDATE SET item = excluded.item`},
		{&w.putItems, `INSERT INTO items(t, h, pk, sk, item) VALUES ` + bulkValues(5) + ` ON CONFLICT (t, h, pk, sk) DO UPDATE SET item = excluded.item`},
		{&w.putIdxs, `INSERT INTO idx(t, ix, h, ipk, isk, pk, sk, item) VALUES ` + bulkValues(8) + ` ON CONFLICT (t, ix, h, ipk, isk, pk, sk) DO UPDATE SET item = excluded.item`},
		{&w.delIdx, `DELETE FROM idx WHERE t = ? AND ix = ? AND h = ? AND ipk = ? AND isk = ? AND pk = ? AND sk = ? RETURNING item`},
		{&w.getIdx, `SELECT item FROM idx WHERE t = ? AND ix = ? AND h = ? AND ipk = ? AND isk = ? AND pk = ? AND sk = ?`},
		{&w.insIdx, `INSERT INTO idx(t, ix, h, ipk, isk, pk, sk, item) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (t, ix, h, ipk, isk, pk, sk) DO NOTHING`},
		{&w.statAdd, sqlStatAdd},
		{&w.statCreate, sqlStatCreate},
		{&w.statDrop, sqlStatDrop},
		{&w.statDropIx, sqlStatDropIx},
		{&w.statBulk, sqlStatBulk},
		{&w.statCounted, sqlStatCounted},
		{&w.statBulkOf, sqlStatBulkOf},
		{&w.getTable, `SELECT id, desc, version, created_at FROM tables WHERE account = ? AND name = ?`},
		{&w.insertTable, `INSERT INTO tables(account, name, desc, version, created_at) VALUES (?, ?, ?, 1, ?) RETURNING id`},
		{&w.updTableStmt, `UPDATE tables SET desc = ?, version = version + 1 WHERE id = ?`},
		{&w.delTableStmt, `DELETE FROM tables WHERE id = ?`},
		{&w.purgeNext, sqlPurgeNext},
		{&w.purgeAdd, sqlPurgeAdd},
		{&w.purgeDone, sqlPurgeDone},
		{&w.purgeItems, sqlPurgeItems},
		{&w.purgeIdx, sqlPurgeIdx},
		{&w.purgeLog, sqlPurgeLog},
		{&w.allTables, `SELECT id, version FROM tables`},
		{&w.dropIdx, `DELETE FROM idx WHERE t = ? AND ix = ?`},
		{&w.begin_, `BEGIN IMMEDIATE`},
		{&w.commit_, `COMMIT`},
		{&w.rollback_, `ROLLBACK`},
		{&w.savepoint, `SAVEPOINT tw`},
		{&w.release, `RELEASE tw`},
		{&w.undo, `ROLLBACK TO tw`},
		{&w.dataVersion, `PRAGMA data_version`},
		{&w.putLog, `INSERT INTO changelog(t, seq, at, data) VALUES (?, ?, ?, ?)`},
		{&w.lastLog, `SELECT seq, at FROM changelog WHERE t = ? ORDER BY seq DESC LIMIT 1`},
		{&w.lastTrimmed, `SELECT seq FROM changelog_last WHERE t = ?`},
		{&w.deleteLogLast, `DELETE FROM changelog_last WHERE t = ?`},
	} {
		var err error
		if *s.dst, err = w.conn.PrepareContext(ctx, s.sql); err != nil {
			return mapErr(err, "sqlite: prepare "+s.sql)
		}
	}
	return nil
}

func (w *writer) close() {
	for _, s := range []*sql.Stmt{w.getItem, w.putItem, w.insItem, w.delItem, w.putIdx, w.delIdx, w.getTable, w.insertTable,
		w.updTableStmt, w.delTableStmt, w.allTables, w.dropIdx, w.begin_, w.commit_, w.rollback_,
		w.purgeNext, w.purgeAdd, w.purgeDone, w.purgeItems, w.purgeIdx, w.purgeLog,
		w.savepoint, w.release, w.undo, w.dataVersion, w.putLog, w.lastLog, w.lastTrimmed, w.deleteLogLast,
		w.getIdx, w.insIdx, w.putItems, w.putIdxs, w.statAdd, w.statCreate, w.statDrop, w.statDropIx, w.statBulk, w.statCounted, w.statBulkOf} {
		if s != nil {
			s.Close()
		}
	}
	if w.conn != nil {
		w.conn.Close()
	}
}

// loadTables reads the live table IDs and versions and the data version.
func (w *writer) loadTables(ctx context.Context) error {
	rows, err := w.allTables.QueryContext(ctx)
	if err != nil {
		return mapErr(err, "sqlite: load catalog")
	}
	defer rows.Close()
	clear(w.live)
	for rows.Next() {
		var id, version int64
		if err := rows.Scan(&id, &version); err != nil {
			return mapErr(err, "sqlite: load catalog")
		}
		w.live[id] = version
	}
	if err := rows.Err(); err != nil {
		return mapErr(err, "sqlite: load catalog")
	}
	if err := w.dataVersion.QueryRowContext(ctx).Scan(&w.version); err != nil {
		return mapErr(err, "sqlite: data version")
	}
	return nil
}

// begin starts the batch transaction. Another process may have changed
// the catalog since the last batch (PRAGMA data_version tells); then the
// table set is reloaded inside the transaction, where it cannot change.
func (w *writer) begin() error {
	if _, err := w.begin_.ExecContext(bg); err != nil {
		return mapErr(err, "sqlite: begin")
	}
	var v int64
	if err := w.dataVersion.QueryRowContext(bg).Scan(&v); err != nil {
		w.rollback()
		return mapErr(err, "sqlite: data version")
	}
	if w.cache != nil {
		w.cache.BumpEpoch()
	}
	if v != w.version {
		if err := w.loadTables(bg); err != nil {
			w.rollback()
			return err
		}
		w.catalogChanged = true
		w.forgetLogs()
		if w.cache != nil {
			// Another process wrote to the database.
			w.cache.Clear()
		}
	}
	return nil
}

func (w *writer) commit() error {
	if err := w.flushStats(); err != nil {
		w.rollback()
		var f *fatal
		if errors.As(err, &f) {
			return f.err
		}
		return err
	}
	if _, err := w.commit_.ExecContext(bg); err != nil {
		w.rollback()
		return mapErr(err, "sqlite: commit")
	}
	for id, version := range w.pend {
		if version != 0 {
			w.live[id] = version
		} else {
			delete(w.live, id)
		}
	}
	clear(w.pend)
	if w.cache != nil {
		for _, c := range w.pendItems {
			if c.drop {
				w.cache.Set(c.key, nil)
			} else {
				w.cache.Set(c.key, c.item)
			}
		}
		w.clearPend()
		w.cache.BumpEpoch()
	}
	return nil
}

func (w *writer) rollback() {
	// Errors are ignored: SQLite may already have rolled back (e.g. after
	// SQLITE_FULL), and there is nothing more to undo.
	w.rollback_.ExecContext(bg)
	clear(w.pend)
	w.deltas = w.deltas[:0]
	w.forgetLogs()
	if w.cache != nil {
		w.clearPend()
	}
}

func (w *writer) exists(id int64) bool {
	_, ok := w.tableVersion(id)
	return ok
}

// tableVersion is a live table's description version inside this
// transaction (its own catalog changes included).
func (w *writer) tableVersion(id int64) (int64, bool) {
	if v, ok := w.pend[id]; ok {
		return v, v != 0
	}
	v, ok := w.live[id]
	return v, ok
}

func (w *writer) readTable(account, name string) (*backend.Table, error) {
	t, err := scanTable(w.getTable.QueryRowContext(bg, account, name), account, name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail(err, "sqlite: read catalog")
	}
	return t, nil
}

func (w *writer) createTable(p backend.CreateTableParams) (*backend.Table, error) {
	old, err := w.readTable(p.Account, p.Name)
	if err != nil {
		return nil, err
	}
	if old != nil {
		return nil, backend.Errorf(backend.KindTableExists, "table %q of account %q already exists", p.Name, p.Account)
	}
	now := time.Now()
	t := &backend.Table{Account: p.Account, Name: p.Name, Desc: append([]byte{}, p.Desc...), Version: 1,
		CreatedAt: time.Unix(0, now.UnixNano()).UTC()}
	if err := w.insertTable.QueryRowContext(bg, p.Account, p.Name, t.Desc, now.UnixNano()).Scan(&t.ID); err != nil {
		return nil, fail(err, "sqlite: create table")
	}
	if _, err := w.statCreate.ExecContext(bg, t.ID); err != nil {
		return nil, fail(err, "sqlite: create table")
	}
	w.pend[t.ID] = t.Version
	w.catalogChanged = true
	return t, nil
}

func (w *writer) updateTable(p backend.UpdateTableParams) (*backend.Table, error) {
	if p.Fn == nil {
		return nil, backend.Errorf(backend.KindInternal, "sqlite: UpdateTable without Fn")
	}
	old, err := w.readTable(p.Account, p.Name)
	if err != nil {
		return nil, err
	}
	if old == nil {
		return nil, backend.Errorf(backend.KindTableNotFound, "table %q of account %q not found", p.Name, p.Account)
	}
	cur := *old
	desc, err := p.Fn(&cur)
	if err != nil {
		return nil, err
	}
	desc = nz(desc)
	if _, err := w.updTableStmt.ExecContext(bg, desc, old.ID); err != nil {
		return nil, fail(err, "sqlite: update table")
	}
	nt := *old
	nt.Desc = append([]byte{}, desc...)
	nt.Version++
	w.pend[old.ID] = nt.Version
	return &nt, nil
}

func (w *writer) deleteTable(p backend.DeleteTableParams) (*backend.Table, error) {
	old, err := w.readTable(p.Account, p.Name)
	if err != nil {
		return nil, err
	}
	if old == nil {
		return nil, backend.Errorf(backend.KindTableNotFound, "table %q of account %q not found", p.Name, p.Account)
	}
	// The catalog row, the log's trim mark and the statistics go now; the
	// table's rows are unreachable from the commit on and the purger
	// deletes them in bounded steps (purge.go).
	for _, s := range []*sql.Stmt{w.delTableStmt, w.deleteLogLast, w.statDrop, w.purgeAdd} {
		if _, err := s.ExecContext(bg, old.ID); err != nil {
			return nil, fail(err, "sqlite: delete table")
		}
	}
	w.pend[old.ID] = 0
	w.catalogChanged = true
	delete(w.logs, old.ID)
	return old, nil
}

// writeItem reads the current item, runs Fn and applies its change. fnErr
// is the write function's error (nothing written); err is a storage error
// (nothing written) or a *fatal.
func (w *writer) writeItem(p *backend.WriteItemParams, res *backend.WriteItemResult) (fnErr, err error) {
	version, ok := w.tableVersion(p.Table.ID)
	if !ok {
		return nil, tableNotFound(p.Table)
	}
	if version != p.Table.Version {
		return nil, backend.VersionChanged(p.Table, version)
	}
	pk, sk := nz(p.PK), nz(p.SK)
	h := int64(backend.KeyHash(pk))
	d, fnErr, err := w.decide(p, pk, sk, h)
	if fnErr != nil || err != nil {
		return fnErr, err
	}
	ch := d.ch
	switch ch.Op {
	case backend.Keep, backend.Delete:
	case backend.Put:
		if ch.Item == nil {
			return nil, backend.Errorf(backend.KindInternal, "sqlite: write function returned Put without an item")
		}
	default:
		return nil, backend.Errorf(backend.KindInternal, "sqlite: write function returned unknown op %d", ch.Op)
	}
	res.Old, res.Change = d.old, ch
	if ch.Op == backend.Keep {
		return nil, nil
	}
	return nil, w.apply(p.Table.ID, pk, sk, h, d)
}

// writeDecision is what a write found and decided: the item it replaces
// (old, nil when absent), its item-cache key, the change Fn returned and
// whether the speculative insert already wrote it.
type writeDecision struct {
	old      []byte
	key      string
	ch       backend.Change
	inserted bool
}

// decide finds the current item (the batch's pending writes, the item
// cache, a speculative insert or a read) and runs Fn on it.
func (w *writer) decide(p *backend.WriteItemParams, pk, sk []byte, h int64) (d writeDecision, fnErr, err error) {
	var known bool
	if w.cache != nil {
		d.key = itemcache.Key(p.Table.ID, pk, sk)
		if i, ok := w.pendIdx[d.key]; ok {
			d.old, known = w.pendItems[i].item, true
		} else {
			d.old, known, _ = w.cache.Get(d.key)
		}
	}
	if !known && w.specScore >= 0 {
		// Speculation (ADR 0029): a write of a key that the item cache
		// does not hold mostly creates the item (a PutItem of a new key).
		// Fn is run on "absent" and, if it puts, the item is inserted
		// unless the key exists: one statement instead of a read and a
		// write. If the key exists the insert writes nothing, and the
		// write reads the item and runs Fn again on it (Fn may be called
		// more than once: backend.Backend.WriteItem). specScore stops
		// speculating for a while once it mostly fails (updates of items
		// the cache does not hold).
		if sc, fnErr := p.Fn(nil); fnErr == nil && sc.Op == backend.Put && sc.Item != nil {
			r, err := w.insItem.ExecContext(bg, p.Table.ID, h, pk, sk, sc.Item)
			if err != nil {
				return d, nil, fail(err, "sqlite: put item")
			}
			if n, err := r.RowsAffected(); err == nil && n == 1 {
				d.ch, d.inserted = sc, true
				w.specScore = min(w.specScore+1, specScoreMax)
				w.specHits++
			} else {
				w.specScore -= specScoreMiss
				w.specMisses++
			}
		}
	}
	if !known && w.specScore < 0 {
		w.specScore++
	}
	if !d.inserted {
		// A blind write reads the item too (and speculates like the
		// others, above): its statistics delta depends on whether it
		// replaces an item, and on the size of what it replaces.
		if !known {
			if err := w.getItem.QueryRowContext(bg, p.Table.ID, h, pk, sk).Scan(&d.old); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return d, nil, fail(err, "sqlite: read item")
			}
			if d.old != nil {
				w.notePend(d.key, d.old)
			}
		}
		var err error
		if d.ch, err = p.Fn(d.old); err != nil {
			return d, err, nil
		}
	}
	return d, nil, nil
}

// apply writes the decided change: its change-log record, the item, its
// index entries, and their statistics deltas.
func (w *writer) apply(t int64, pk, sk []byte, h int64, d writeDecision) error {
	ch := d.ch
	if ch.Log != nil {
		if err := w.appendLog(t, ch.Log); err != nil {
			return err
		}
	}
	switch ch.Op {
	case backend.Put:
		if !d.inserted {
			if _, err := w.putItem.ExecContext(bg, t, h, pk, sk, ch.Item); err != nil {
				return fail(err, "sqlite: put item")
			}
		}
		w.notePend(d.key, ch.Item)
		w.itemDelta(t, d.old, ch.Item)
	case backend.Delete:
		if d.old == nil {
			break
		}
		if _, err := w.delItem.ExecContext(bg, t, h, pk, sk); err != nil {
			return fail(err, "sqlite: delete item")
		}
		w.notePend(d.key, nil)
		w.itemDelta(t, d.old, nil)
	}
	for _, k := range ch.DeleteIndex {
		if reput(k, ch.PutIndex) {
			// The UPSERT below rewrites this entry's row in place.
			continue
		}
		ipk := nz(k.PK)
		var gone []byte
		err := w.delIdx.QueryRowContext(bg, t, k.Index, int64(backend.KeyHash(ipk)), ipk, nz(k.SK), pk, sk).Scan(&gone)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fail(err, "sqlite: delete index entry")
		default:
			w.addDelta(t, k.Index, -1, -w.size.SizeOf(gone))
		}
	}
	for i := range ch.PutIndex {
		if err := w.putIndexEntry(t, pk, sk, &ch.PutIndex[i], deletes(ch.DeleteIndex, ch.PutIndex[i].IndexKey)); err != nil {
			return err
		}
	}
	return nil
}

// putIndexEntry writes one index entry and records its statistics delta:
// an entry the change did not delete is mostly new (inserted in one
// statement, read and replaced only when it exists after all); one it
// deleted (an update that keeps the item's index key) is read and
// replaced.
func (w *writer) putIndexEntry(t int64, pk, sk []byte, e *backend.IndexEntry, replaces bool) error {
	ipk, isk, item := nz(e.PK), nz(e.SK), nz(e.Item)
	h := int64(backend.KeyHash(ipk))
	if !replaces {
		r, err := w.insIdx.ExecContext(bg, t, e.Index, h, ipk, isk, pk, sk, item)
		if err != nil {
			return fail(err, "sqlite: put index entry")
		}
		if n, err := r.RowsAffected(); err == nil && n == 1 {
			w.addDelta(t, e.Index, 1, w.size.SizeOf(item))
			return nil
		}
	}
	var prev []byte
	switch err := w.getIdx.QueryRowContext(bg, t, e.Index, h, ipk, isk, pk, sk).Scan(&prev); {
	case errors.Is(err, sql.ErrNoRows):
		w.addDelta(t, e.Index, 1, w.size.SizeOf(item))
	case err != nil:
		return fail(err, "sqlite: read index entry")
	default:
		w.addDelta(t, e.Index, 0, w.size.SizeOf(item)-w.size.SizeOf(prev))
	}
	if _, err := w.putIdx.ExecContext(bg, t, e.Index, h, ipk, isk, pk, sk, item); err != nil {
		return fail(err, "sqlite: put index entry")
	}
	return nil
}

// reput reports whether an index key that a change deletes is put again
// by the same change (an update that keeps an item's index keys): the put
// replaces the entry, so the delete is skipped.
func reput(k backend.IndexKey, puts []backend.IndexEntry) bool {
	for i := range puts {
		e := &puts[i].IndexKey
		if e.Index == k.Index && bytes.Equal(e.PK, k.PK) && bytes.Equal(e.SK, k.SK) {
			return true
		}
	}
	return false
}

// deletes reports whether a change deletes an index key (the entry a put
// of that key replaces).
func deletes(dels []backend.IndexKey, k backend.IndexKey) bool {
	for i := range dels {
		d := &dels[i]
		if d.Index == k.Index && bytes.Equal(d.PK, k.PK) && bytes.Equal(d.SK, k.SK) {
			return true
		}
	}
	return false
}

// transactWrite runs every operation inside a savepoint; each Fn sees the
// earlier operations' writes. When any Fn fails the savepoint is rolled
// back and the result is KindTransactionCanceled with per-op Reasons.
func (w *writer) transactWrite(ops []backend.WriteItemParams) ([]backend.WriteItemResult, error) {
	// Fence every operation before running any write function.
	for i := range ops {
		ref := ops[i].Table
		version, ok := w.tableVersion(ref.ID)
		if !ok {
			return nil, tableNotFound(ref)
		}
		if version != ref.Version {
			return nil, backend.VersionChanged(ref, version)
		}
	}
	if _, err := w.savepoint.ExecContext(bg); err != nil {
		return nil, fail(err, "sqlite: savepoint")
	}
	mark, dmark := len(w.pendItems), len(w.deltas)
	results := make([]backend.WriteItemResult, len(ops))
	var reasons []error
	for i := range ops {
		fnErr, err := w.writeItem(&ops[i], &results[i])
		if err != nil {
			var f *fatal
			if !errors.As(err, &f) {
				if uerr := w.undoSavepoint(); uerr != nil {
					return nil, uerr
				}
				w.truncatePend(mark)
				w.deltas = w.deltas[:dmark]
			}
			return nil, err
		}
		if fnErr != nil {
			if reasons == nil {
				reasons = make([]error, len(ops))
			}
			reasons[i] = fnErr
		}
	}
	if reasons != nil {
		if err := w.undoSavepoint(); err != nil {
			return nil, err
		}
		w.truncatePend(mark)
		w.deltas = w.deltas[:dmark]
		n := 0
		for _, r := range reasons {
			if r != nil {
				n++
			}
		}
		return nil, &backend.Error{Kind: backend.KindTransactionCanceled,
			Message: fmt.Sprintf("%d of %d operations failed", n, len(ops)), Reasons: reasons}
	}
	if _, err := w.release.ExecContext(bg); err != nil {
		return nil, fail(err, "sqlite: release savepoint")
	}
	return results, nil
}

func (w *writer) undoSavepoint() error {
	if _, err := w.undo.ExecContext(bg); err != nil {
		return fail(err, "sqlite: rollback to savepoint")
	}
	w.forgetLogs()
	if _, err := w.release.ExecContext(bg); err != nil {
		return fail(err, "sqlite: release savepoint")
	}
	return nil
}

func (w *writer) dropIndex(p backend.DropIndexParams) error {
	version, ok := w.tableVersion(p.Table.ID)
	if !ok {
		return tableNotFound(p.Table)
	}
	if version != p.Table.Version {
		return backend.VersionChanged(p.Table, version)
	}
	if err := w.flushStats(); err != nil {
		return err
	}
	if _, err := w.dropIdx.ExecContext(bg, p.Table.ID, p.Index); err != nil {
		return fail(err, "sqlite: drop index")
	}
	if _, err := w.statDropIx.ExecContext(bg, p.Table.ID, p.Index); err != nil {
		return fail(err, "sqlite: drop index")
	}
	return nil
}
