package engine

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// Background work: index backfills (UpdateTable creating a GSI, TTL being
// enabled) and the TTL sweeper. Start launches it; Stop ends it.

// ttlMaxAge: the service does not delete items whose expiry is more than
// five years in the past.
const ttlMaxAge = 5 * 365 * 24 * time.Hour

type background struct {
	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	running  map[string]bool // backfills in flight: table id + index
	accounts map[string]bool
}

// Start launches background work (resuming interrupted backfills) for the
// given accounts; it returns at once.
func (e *Engine) Start(ctx context.Context, accounts []string) {
	b := &e.bg
	b.mu.Lock()
	b.ctx, b.cancel = context.WithCancel(ctx)
	if b.running == nil {
		b.running = map[string]bool{}
	}
	if b.accounts == nil {
		b.accounts = map[string]bool{}
	}
	for _, a := range accounts {
		b.accounts[a] = true
	}
	b.mu.Unlock()
	e.tables.gen.Add(1) // the shared table list covers the new accounts
	b.wg.Add(2)
	go func() {
		defer b.wg.Done()
		e.resumeBackfills(b.ctx)
		e.sweepLoop(b.ctx)
	}()
	go func() {
		defer b.wg.Done()
		e.streamLoop(b.ctx)
	}()
}

// Stop ends background work and waits for it.
func (e *Engine) Stop() {
	e.bg.mu.Lock()
	cancel := e.bg.cancel
	e.bg.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	e.bg.wg.Wait()
}

func (e *Engine) accounts() []string {
	e.bg.mu.Lock()
	defer e.bg.mu.Unlock()
	out := make([]string, 0, len(e.bg.accounts))
	for a := range e.bg.accounts {
		out = append(out, a)
	}
	return out
}

// forEachTable calls fn for every table of every known account, from the
// list the background loops share (table_list.go).
func (e *Engine) forEachTable(ctx context.Context, fn func(t *table)) {
	for _, t := range e.listTables(ctx, e.accounts()) {
		if ctx.Err() != nil {
			return
		}
		fn(t)
	}
}

func (e *Engine) resumeBackfills(ctx context.Context) {
	e.forEachTable(ctx, func(t *table) {
		for _, ix := range t.allIndexes() {
			if ix.Status == "CREATING" {
				e.startBackfill(t.ref, ix.Name)
			}
		}
	})
}

// startBackfill runs a backfill of one index in the background unless one
// is already running in this process.
func (e *Engine) startBackfill(ref backend.TableRef, index string) {
	b := &e.bg
	b.mu.Lock()
	key := jsonInt(ref.ID) + "/" + index
	if b.ctx == nil || b.running[key] {
		b.mu.Unlock()
		return
	}
	b.running[key] = true
	ctx := b.ctx
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer func() {
			b.mu.Lock()
			delete(b.running, key)
			b.mu.Unlock()
		}()
		pctx, prog := e.beginBackfill(ctx, ref, index) // log lines and metrics (bgmetrics.go)
		err := e.backfill(pctx, ref, index)
		prog.end(err, ctx.Err() != nil)
		if err != nil && ctx.Err() == nil {
			e.log.Error("index backfill failed", "table", ref.Name, "index", index, "err", err)
		}
	}()
}

// backfill writes the entries of a new index for every existing item, in
// batches; each item is rewritten inside the backend's atomic section, so
// concurrent writes are never lost or doubled.
//
// It starts at once: item writes are fenced on the description version
// (backend.TableRef.Version), so once the UpdateTable that added the
// index has committed, every write that lands (on any server) was computed
// from a description that has the index and maintains its entry. An item
// therefore has either no entry (not written since) or its exact entry,
// and rewriting the entry computed from its current value is exact. A
// page refused as computed from a stale description is read again.
func (e *Engine) backfill(ctx context.Context, ref backend.TableRef, index string) error {
	var after *backend.Cursor
	for {
		t, err := e.currentTable(ctx, ref)
		if err != nil {
			return err
		}
		if t == nil {
			return nil
		}
		ix := t.anyIndex(index)
		if ix == nil || ix.Status != "CREATING" {
			return nil
		}
		res, err := e.backend.Scan(ctx, backend.ScanParams{Table: t.ref, After: after, Limit: 200})
		if err != nil {
			if backend.IsKind(err, backend.KindTableNotFound) {
				return nil
			}
			return err
		}
		if len(res.Rows) > 0 {
			ops := make([]backend.WriteItemParams, len(res.Rows))
			for i, r := range res.Rows {
				ops[i] = backend.WriteItemParams{Table: t.ref, PK: r.PK, SK: r.SK, Fn: func(oldRaw []byte) (backend.Change, error) {
					if oldRaw == nil {
						return backend.Change{Op: backend.Keep}, nil
					}
					old, err := decodeStored(oldRaw)
					if err != nil {
						return backend.Change{}, err
					}
					pk, sk, ok, err := ix.keyOf(old)
					if err != nil || !ok {
						// Items whose index key has the wrong type are left
						// out of the index, as the service does.
						return backend.Change{Op: backend.Keep}, nil
					}
					k := backend.IndexKey{Index: ix.Name, PK: pk, SK: sk}
					return backend.Change{Op: backend.Put, Item: oldRaw, DeleteIndex: []backend.IndexKey{k},
						PutIndex: []backend.IndexEntry{{IndexKey: k, Item: ix.project(t, old, oldRaw)}}}, nil
				}}
			}
			if _, err := e.writeEach(ctx, ops); err != nil {
				if backend.IsKind(err, backend.KindTableNotFound) {
					return nil
				}
				if backend.IsKind(err, backend.KindTableVersion) {
					continue // the description changed: read it and this page again
				}
				return err
			}
			last := res.Rows[len(res.Rows)-1]
			after = &backend.Cursor{PK: last.PK, SK: last.SK}
			backfillBatch(ctx, len(res.Rows), last.PK)
		}
		if !res.More {
			break
		}
	}
	_, err := e.backend.UpdateTable(ctx, backend.UpdateTableParams{Account: ref.Account, Name: ref.Name, Fn: func(old *backend.Table) ([]byte, error) {
		if old.ID != ref.ID {
			return nil, errBackfillObsolete
		}
		var st storedTable
		if err := json.Unmarshal(old.Desc, &st); err != nil {
			return nil, err
		}
		if index == ttlIndexName {
			if st.TTL == nil || st.TTL.Status != "ENABLING" {
				return nil, errBackfillObsolete
			}
			st.TTL.Status = "ENABLED"
		} else {
			creating := false
			for i := range st.Desc.GlobalSecondaryIndexes {
				g := &st.Desc.GlobalSecondaryIndexes[i]
				if g.IndexName == index {
					g.IndexStatus = "ACTIVE"
					g.Backfilling = nil
				} else if g.IndexStatus == "CREATING" {
					creating = true
				}
			}
			if !creating {
				st.Desc.TableStatus = "ACTIVE"
			}
		}
		return json.Marshal(&st)
	}})
	if err == errBackfillObsolete || backend.IsKind(err, backend.KindTableNotFound) {
		return nil
	}
	e.tables.drop(ref.Account, ref.Name)
	return err
}

var errBackfillObsolete = &Error{Code: CodeInternal, Message: "backfill obsolete"}

// sweepLoop deletes expired items of TTL-enabled tables. A pass that made
// progress on a full batch is followed at once by another, so the rate
// follows the backlog; a pass that found nothing to do, or could not
// change anything, waits SweepInterval (never a busy loop).
func (e *Engine) sweepLoop(ctx context.Context) {
	for {
		busy := false
		pass := e.beginTTLPass() // log line and metrics (bgmetrics.go)
		e.forEachTable(ctx, func(t *table) {
			if ctx.Err() != nil {
				return
			}
			st, err := e.sweepTable(ctx, t)
			if t.ttl != nil {
				pass.table(st.deleted, err)
			}
			if err != nil && ctx.Err() == nil {
				e.log.Warn("ttl sweep", "table", t.ref.Name, "err", err)
			}
			if st.more {
				busy = true
			}
		})
		if ctx.Err() == nil {
			pass.end()
		}
		wait := e.sweepInterval
		if busy {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

const sweepBatch = 500

// readEach reads independent items: one TransactGet, or one GetItem each
// on a backend that answers KindUnsupported to it.
func (e *Engine) readEach(ctx context.Context, keys []backend.GetItemParams) (*backend.TransactGetResult, error) {
	res, err := e.backend.TransactGet(ctx, backend.TransactGetParams{Keys: keys})
	if err == nil || !backend.IsKind(err, backend.KindUnsupported) {
		return res, err
	}
	res = &backend.TransactGetResult{Items: make([][]byte, 0, len(keys))}
	for _, k := range keys {
		r, err := e.backend.GetItem(ctx, k)
		if err != nil {
			return nil, err
		}
		res.Items = append(res.Items, r.Item)
	}
	return res, nil
}

// writeEach applies independent item writes (a backfill page, a batch of
// the TTL sweep, BatchWriteItem): they need no atomicity between them, so
// they go as one TransactWrite where the backend has multi-item atomicity
// (the cheapest there), and as one WriteItem each on a backend that
// answers KindUnsupported to it or whose TransactWrite runs on the
// transaction ledger (backend.Capabilities.PerItemAtomic: MongoDB, Cassandra), where
// a multi-item transaction costs more than its items' writes and, on a
// loaded server, can outlive the ledger's lock timeout and end in
// TransactionConflict although no client transaction is involved. On an
// error the writes before it may have been applied; each is idempotent,
// so the caller simply tries again later.
func (e *Engine) writeEach(ctx context.Context, ops []backend.WriteItemParams) (*backend.TransactWriteResult, error) {
	if !e.backend.Capabilities().PerItemAtomic {
		res, err := e.backend.TransactWrite(ctx, backend.TransactWriteParams{Ops: ops})
		if err == nil || !backend.IsKind(err, backend.KindUnsupported) {
			return res, err
		}
	}
	res := &backend.TransactWriteResult{Results: make([]backend.WriteItemResult, 0, len(ops))}
	for _, op := range ops {
		r, err := e.backend.WriteItem(ctx, op)
		if err != nil {
			return nil, err
		}
		res.Results = append(res.Results, *r)
	}
	return res, nil
}

// sweepStats is what one sweep of a table did.
type sweepStats struct {
	deleted  int // expired items deleted
	repaired int // index hits that did not match their item, removed
	// more is true when the last batch was full and made progress: more
	// expired items may be waiting.
	more bool
}

// sweepTable deletes up to a few batches of expired items of one table.
// Each hit of the TTL index is checked against its item inside the
// backend's atomic section: an expired item is deleted; a hit whose item
// is gone or no longer expired (an entry that does not match the item) is
// removed and the item's true entry written, so it is never found again.
func (e *Engine) sweepTable(ctx context.Context, t *table) (sweepStats, error) {
	var st sweepStats
	ix := t.ttl
	if ix == nil || ix.Status != "ACTIVE" {
		return st, nil
	}
	now := e.now()
	lo, _ := attr.NumberKey(jsonInt(now.Add(-ttlMaxAge).Unix()))
	hi, _ := attr.NumberKey(jsonInt(now.Unix()))
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		res, err := e.backend.Query(ctx, backend.QueryParams{Table: t.ref, Index: ttlIndexName, PK: ttlPartition,
			Lower: &backend.Bound{Key: lo, Inclusive: true}, Upper: &backend.Bound{Key: hi, Inclusive: true}, Forward: true, Limit: sweepBatch})
		if err != nil {
			return st, err
		}
		n := len(res.Rows)
		if n == 0 {
			return st, nil
		}
		ops := make([]backend.WriteItemParams, n)
		nowSec := now.Unix()
		for i, r := range res.Rows {
			hit := backend.IndexKey{Index: ttlIndexName, PK: r.PK, SK: r.SK}
			// A TTL deletion is a stream record of the service (keys
			// taken from the deleted item); the repairs change nothing.
			ops[i] = e.streamed(t, backend.WriteItemParams{Table: t.ref, PK: r.BasePK, SK: r.BaseSK, Fn: func(oldRaw []byte) (backend.Change, error) {
				return t.sweepChange(ix, hit, oldRaw, nowSec)
			}}, nil, true)
		}
		tw, err := e.writeEach(ctx, ops)
		if err != nil {
			if backend.IsKind(err, backend.KindTableVersion) || backend.IsKind(err, backend.KindTableNotFound) {
				// The description changed (or the table is gone): the
				// next pass reads it again.
				return st, nil
			}
			return st, err
		}
		e.countLogged(tw.Results...)
		progress, deleted := 0, 0
		for _, r := range tw.Results {
			switch {
			case r.Change.Op == backend.Delete && r.Old != nil:
				st.deleted++
				deleted++
				progress++
			case r.Change.Op != backend.Keep:
				st.repaired++
				progress++
			}
		}
		e.ttlDeleted(deleted)
		st.more = n >= sweepBatch && progress > 0
		if !st.more {
			break
		}
	}
	return st, nil
}

// sweepChange decides what the sweeper does with one hit of the TTL index
// (hit) for the item oldRaw (nil when absent).
func (t *table) sweepChange(ix *index, hit backend.IndexKey, oldRaw []byte, nowSec int64) (backend.Change, error) {
	if oldRaw == nil {
		// An orphan entry: delete it (a Delete of an absent item still
		// removes the index keys it names).
		return backend.Change{Op: backend.Delete, DeleteIndex: []backend.IndexKey{hit}}, nil
	}
	old, err := decodeStored(oldRaw)
	if err != nil {
		return backend.Change{}, err
	}
	if expired(old, ix.Hash.Name, nowSec) {
		ch := t.deleteChange(old)
		ch.DeleteIndex = append(ch.DeleteIndex, hit)
		return ch, nil
	}
	// Not expired: the hit does not match the item. Remove it and write
	// the item's true TTL entry (if it has one); the item and its other
	// index entries stay as they are.
	ch := backend.Change{Op: backend.Put, Item: oldRaw, DeleteIndex: []backend.IndexKey{hit}}
	if pk, sk, ok, err := ix.keyOf(old); err == nil && ok {
		k := backend.IndexKey{Index: ix.Name, PK: pk, SK: sk}
		ch.DeleteIndex = append(ch.DeleteIndex, k)
		ch.PutIndex = []backend.IndexEntry{{IndexKey: k, Item: ix.project(t, old, oldRaw)}}
	}
	return ch, nil
}

// expired reports whether an item's TTL attribute has passed.
func expired(it attr.Item, name string, now int64) bool {
	v, ok := it[name]
	if !ok || v.Type != attr.N {
		return false
	}
	c := attr.CompareNumbers(v.Str, jsonInt(now))
	old := attr.CompareNumbers(v.Str, jsonInt(now-int64(ttlMaxAge/time.Second)))
	return c <= 0 && old >= 0
}

// ActiveTables lists the names of the account's ACTIVE tables (not those
// being restored or imported), for backup plans.
func (e *Engine) ActiveTables(ctx context.Context, account string) ([]string, error) {
	res, err := e.backend.ListTables(ctx, backend.ListTablesParams{Account: account})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range res.Names {
		gt, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: account, Name: n})
		if backend.IsKind(err, backend.KindTableNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		t, err := parseTable(gt.Table)
		if err != nil {
			return nil, err
		}
		if t.stored.Desc.TableStatus == "ACTIVE" {
			out = append(out, n)
		}
	}
	return out, ctx.Err()
}
