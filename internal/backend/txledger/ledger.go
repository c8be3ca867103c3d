package txledger

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// Options tune a Ledger. Zero values take the defaults.
type Options struct {
	// LockTimeout: a PENDING transaction older than this may be aborted by
	// anyone who meets one of its locks, and the sweep finishes it. It
	// must exceed the time a live coordinator takes to lock its items
	// (default 5 s).
	LockTimeout time.Duration
	// MaxWait bounds how long a write (TransactWrite, or a backend's
	// WriteItem through Settle) waits for locks held by live transactions
	// and retries before answering KindTransactionConflict (default twice
	// LockTimeout, so a dead coordinator's locks are taken over first).
	// TransactGet uses the same bound for finding two passes that agree.
	MaxWait time.Duration
	// Parallel bounds concurrent store calls of one TransactGet or of the
	// releases after a commit (default 16).
	Parallel int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.LockTimeout <= 0 {
		o.LockTimeout = 5 * time.Second
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 2 * o.LockTimeout
	}
	if o.Parallel <= 0 {
		o.Parallel = 16
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Ledger runs transactions over a Store. It is safe for concurrent use;
// several Ledgers (servers) may share one store.
type Ledger struct {
	s Items
	o Options
}

// New returns a ledger over s.
func New(s Items, o Options) *Ledger {
	o.defaults()
	return &Ledger{s: s, o: o}
}

// Options returns the effective options.
func (l *Ledger) Options() Options { return l.o }

func conflict() error {
	return backend.Errorf(backend.KindTransactionConflict, "transaction is ongoing for the item")
}

// sleep waits a randomized, growing backoff (backend.Backoff: 2^(attempt-1)
// ms on average, at most 16 ms on average); false when ctx ended.
func sleep(ctx context.Context, attempt int) bool {
	return backend.Backoff(ctx, attempt-1, 16*time.Millisecond) == nil
}

// errAbortedWhileWaiting: another party aborted the waiting coordinator's
// attempt (a writer or the sweep took it for dead): the attempt
// is rolled back and run again.
var errAbortedWhileWaiting = errors.New("txledger: attempt aborted while waiting")

// waitBound tells when a wait for other transactions must end because
// ctx will: once three quarters of ctx's remaining time (from now) have
// passed, leaving the rest for the work that follows the wait (a write's
// context is its operation's bound). The waiter then answers
// KindTransactionConflict, as after MaxWait: the wait ran out, the store
// did not fail.
func waitBound(ctx context.Context) func() bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return func() bool { return false }
	}
	at := dl.Add(-time.Until(dl) / 4)
	return func() bool { return time.Now().After(at) }
}

func ctxErr(ctx context.Context) error {
	return backend.Wrap(backend.KindUnavailable, ctx.Err(), "transaction")
}

// settle returns the record of k unlocked, settling the locks it meets.
// self is the calling transaction (zero for none): meeting its own lock
// is an error (an item twice in one transaction).
//
// alive (non-nil with self) is when self's record last said its
// coordinator was alive: while it waits for a live owner, settle moves it
// forward (TouchTx) every quarter of LockTimeout, so that the transactions
// waiting for self's locks do not take a waiting coordinator for a dead
// one (ADR 0042); errAbortedWhileWaiting when self was aborted meanwhile.
func (l *Ledger) settle(ctx context.Context, k Key, rec Record, self TxID, deadline time.Time, alive *time.Time) (Record, error) {
	giveUp := waitBound(ctx)
	for attempt := 0; rec.Lock != nil; attempt++ {
		owner := rec.Lock.Tx
		if !self.IsZero() && owner == self {
			return rec, backend.Errorf(backend.KindInternal, "txledger: item locked twice by transaction %s", self)
		}
		tx, err := l.s.ReadTx(ctx, owner)
		if err != nil {
			return rec, err
		}
		if tx != nil && tx.State == Pending {
			now := l.o.Now()
			if now.Sub(tx.Started) > l.o.LockTimeout {
				if _, err := l.s.SetTxState(ctx, owner, Pending, Aborted); err != nil {
					return rec, err
				}
				continue // read the owner's state again
			}
			if now.After(deadline) || giveUp() {
				return rec, conflict()
			}
			if alive != nil && now.Sub(*alive) > l.o.LockTimeout/4 {
				ok, err := l.s.TouchTx(ctx, self, now)
				if err != nil {
					return rec, err
				}
				if !ok {
					return rec, errAbortedWhileWaiting
				}
				*alive = now
			}
			if !sleep(ctx, attempt) {
				return rec, ctxErr(ctx)
			}
			if rec, err = l.s.ReadItem(ctx, k); err != nil {
				return rec, err
			}
			continue
		}
		commit := tx != nil && tx.State == Committed
		if _, err := l.s.ReleaseItem(ctx, k, rec, commit); err != nil {
			return rec, err
		}
		if rec, err = l.s.ReadItem(ctx, k); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// Settle is for a backend's own WriteItem: it returns k's record free of
// locks, rolling decided transactions forward or back and waiting for a
// live one (at most Options.MaxWait, then KindTransactionConflict; a live
// transaction older than LockTimeout is aborted). rec is the record the
// writer read; an unlocked one is returned as it is.
func (l *Ledger) Settle(ctx context.Context, k Key, rec Record) (Record, error) {
	if rec.Lock == nil {
		return rec, nil
	}
	return l.settle(ctx, k, rec, TxID{}, l.o.Now().Add(l.o.MaxWait), nil)
}

// Visible is the committed item a plain read (GetItem, Query, Scan) of
// k's record rec shows: the stored item, or the lock's after-image when
// its transaction has committed. It reads the owner's record but never
// waits and never writes.
//
// A missing owner record means an aborted transaction only while the lock
// is still there: a committed transaction's coordinator deletes its record
// after releasing its locks, so between the caller's read of rec and ours
// of the record it may have applied the change and gone. Visible then
// reads k again and answers from that newer record (the read is then
// placed at that later instant), as TransactGet's passes do (ADR 0041).
func (l *Ledger) Visible(ctx context.Context, k Key, rec Record) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		if rec.Lock == nil {
			return rec.Item, nil
		}
		tx, err := l.s.ReadTx(ctx, rec.Lock.Tx)
		if err != nil {
			return nil, err
		}
		if tx != nil && tx.State == Committed {
			return After(rec.Item, rec.Lock), nil
		}
		if tx != nil || attempt == visibleRereads {
			return rec.Item, nil
		}
		again, err := l.s.ReadItem(ctx, k)
		if err != nil {
			return nil, err
		}
		if again.Lock != nil && again.Lock.Tx == rec.Lock.Tx {
			return rec.Item, nil // the lock outlived its record: aborted
		}
		rec = again
	}
}

// visibleRereads bounds Visible's re-reads of an item whose lock's record
// vanished (each a transaction that finished between two reads); past it
// the stored item, a committed state, is answered.
const visibleRereads = 8

func compareKeys(a, b Key) int {
	if c := cmp.Compare(a.Table.ID, b.Table.ID); c != 0 {
		return c
	}
	if c := bytes.Compare(a.PK, b.PK); c != 0 {
		return c
	}
	return bytes.Compare(a.SK, b.SK)
}

// TransactWrite applies p.Ops all-or-nothing (the backend.Backend
// contract): KindTransactionCanceled with per-operation Reasons when a
// write function fails, KindTableVersion (from LockItem) when an
// operation's description version is stale, KindTransactionConflict when
// live transactions hold its items longer than MaxWait. Two operations
// on one item are refused (KindInternal): the engine refuses them first.
func (l *Ledger) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	n := len(p.Ops)
	if n == 0 {
		return &backend.TransactWriteResult{}, nil
	}
	keys := make([]Key, n)
	for i, op := range p.Ops {
		keys[i] = Key{Table: op.Table, PK: op.PK, SK: op.SK}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareKeys(keys[a], keys[b]) })
	for j := 1; j < n; j++ {
		if compareKeys(keys[order[j-1]], keys[order[j]]) == 0 {
			return nil, backend.Errorf(backend.KindInternal, "txledger: one item twice in a transaction (operations %d and %d)", order[j-1], order[j])
		}
	}
	deadline := l.o.Now().Add(l.o.MaxWait)
	for attempt := 0; ; attempt++ {
		res, retry, err := l.try(ctx, p, keys, order, deadline)
		if !retry {
			return res, err
		}
		if l.o.Now().After(deadline) {
			return nil, conflict()
		}
		if !sleep(ctx, attempt) {
			return nil, ctxErr(ctx)
		}
	}
}

// try runs one attempt of a transaction; retry=true when another party
// aborted it (the whole transaction runs again, write functions are pure).
func (l *Ledger) try(ctx context.Context, p backend.TransactWriteParams, keys []Key, order []int, deadline time.Time) (*backend.TransactWriteResult, bool, error) {
	n := len(p.Ops)
	id := NewTxID()
	sorted := make([]Key, n)
	for j, i := range order {
		sorted[j] = keys[i]
	}
	alive := l.o.Now()
	if err := l.s.CreateTx(ctx, TxRecord{ID: id, State: Pending, Started: alive, Items: sorted}); err != nil {
		return nil, false, err
	}
	locked := make([]Record, n) // the locked record per operation (Lock nil: not locked)
	results := make([]backend.WriteItemResult, n)
	var reasons []error
	// abort rolls back what this attempt locked (best effort: a lock
	// left behind belongs to an ABORTED or missing record, which every
	// reader rolls back) and removes the record.
	abort := func() {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, err := l.s.SetTxState(actx, id, Pending, Aborted); err != nil {
			return // the record stays PENDING: it times out and the sweep finishes it
		}
		l.releaseAll(actx, keys, locked, false)
		_ = l.s.DeleteTx(actx, id)
	}
	// Every record is read at once (the reads of a transaction's items do
	// not wait for each other); the locks are then taken in order, each
	// from the record read, and a lost CAS reads that item again.
	pre, preErr := l.readEach(ctx, keys)
	for _, i := range order {
		op, k := p.Ops[i], keys[i]
		for first := true; ; first = false {
			var rec Record
			var err error
			if first {
				rec, err = pre[i], preErr[i]
			} else {
				rec, err = l.s.ReadItem(ctx, k)
			}
			if err == nil {
				rec, err = l.settle(ctx, k, rec, id, deadline, &alive)
			}
			if err == errAbortedWhileWaiting {
				abort()
				return nil, true, nil // run again, as after a failed commit
			}
			if err != nil {
				abort()
				return nil, false, err
			}
			ch, fnErr := op.Fn(rec.Item)
			if fnErr != nil {
				if reasons == nil {
					reasons = make([]error, n)
				}
				reasons[i] = fnErr
				break
			}
			if reasons != nil {
				break // canceled already: only evaluate, for the reasons
			}
			lr, ok, err := l.s.LockItem(ctx, k, rec, id, ch)
			if err != nil {
				// The lock's outcome may be unknown: settle it by reading.
				if lr2, err2 := l.s.ReadItem(ctx, k); err2 == nil && lr2.Lock != nil && lr2.Lock.Tx == id {
					locked[i] = lr2
				}
				abort()
				return nil, false, err
			}
			if !ok {
				continue
			}
			if lr.Lock == nil {
				lr.Lock = &Lock{Tx: id, Change: ch}
			}
			locked[i] = lr
			results[i] = backend.WriteItemResult{Old: rec.Item, Change: ch}
			break
		}
	}
	if reasons != nil {
		abort()
		return nil, false, &backend.Error{Kind: backend.KindTransactionCanceled, Message: "a write function failed", Reasons: reasons}
	}
	ok, err := l.s.SetTxState(ctx, id, Pending, Committed)
	if err != nil {
		// Outcome unknown: read the record.
		tx, err2 := l.s.ReadTx(context.WithoutCancel(ctx), id)
		switch {
		case err2 != nil:
			return nil, false, backend.Wrap(backend.KindUnavailable, err, "transaction: commit outcome unknown")
		case tx != nil && tx.State == Committed:
			ok = true
		case tx != nil && tx.State == Pending:
			abort()
			return nil, false, err
		case tx != nil && tx.State == Aborted:
			ok = false
		default:
			// Gone: finished by the sweep, committed or not.
			return nil, false, backend.Wrap(backend.KindUnavailable, err, "transaction: commit outcome unknown")
		}
	}
	if !ok {
		// Another party aborted this attempt (a writer or the sweep that
		// took it for dead): roll back and run again.
		abort()
		return nil, true, nil
	}
	// Committed: the changes are durable. Apply them; what fails here is
	// rolled forward by whoever meets the lock, or by the sweep.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if l.releaseAll(rctx, keys, locked, true) {
		_ = l.s.DeleteTx(rctx, id)
	}
	return &backend.TransactWriteResult{Results: results}, false, nil
}

// releaseAll releases the locked records, at most Parallel at a time;
// true when every release settled (applied, or found already released).
func (l *Ledger) releaseAll(ctx context.Context, keys []Key, locked []Record, commit bool) bool {
	var failed atomic.Bool
	l.each(len(locked), func(i int) {
		if locked[i].Lock != nil && !l.release(ctx, keys[i], locked[i], commit) {
			failed.Store(true)
		}
	})
	return !failed.Load()
}

// each runs fn(0) … fn(n-1), at most Options.Parallel at a time, and
// returns when every call has; one call runs in the caller's goroutine.
func (l *Ledger) each(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, l.o.Parallel)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(i)
		}()
	}
	wg.Wait()
}

// release releases one lock; when the CAS fails it checks that the lock
// is gone (released by someone else).
func (l *Ledger) release(ctx context.Context, k Key, rec Record, commit bool) bool {
	ok, err := l.s.ReleaseItem(ctx, k, rec, commit)
	if err == nil && ok {
		return true
	}
	cur, err := l.s.ReadItem(ctx, k)
	if err != nil {
		return backend.IsKind(err, backend.KindTableNotFound)
	}
	if cur.Lock == nil || cur.Lock.Tx != rec.Lock.Tx {
		return true
	}
	ok, err = l.s.ReleaseItem(ctx, k, cur, commit)
	return err == nil && ok
}

// TransactGet reads the items of p.Keys from one instant: it reads them
// (readPass) until two consecutive passes agree, at most MaxWait, then
// answers KindTransactionConflict. It never waits for a lock, writes or
// aborts anything: live transactions go on, and a writer holding an item
// costs a reader only the passes that see it move. A missing item is nil.
func (l *Ledger) TransactGet(ctx context.Context, p backend.TransactGetParams) (*backend.TransactGetResult, error) {
	n := len(p.Keys)
	if n == 0 {
		return &backend.TransactGetResult{}, nil
	}
	keys := make([]Key, n)
	for i, g := range p.Keys {
		keys[i] = Key{Table: g.Table, PK: g.PK, SK: g.SK}
	}
	deadline := l.o.Now().Add(l.o.MaxWait)
	giveUp := waitBound(ctx)
	first, err := l.readPass(ctx, keys)
	if err != nil {
		return nil, err
	}
	items := func(ss []seen) *backend.TransactGetResult {
		out := &backend.TransactGetResult{Items: make([][]byte, n)}
		for i := range ss {
			out.Items[i] = ss[i].item
		}
		return out
	}
	for attempt := 0; ; attempt++ {
		if n == 1 && !first[0].unstable {
			return items(first), nil // one item: one read is an instant
		}
		if l.o.Now().After(deadline) || giveUp() {
			return nil, conflict()
		}
		second, err := l.readPass(ctx, keys)
		if err != nil {
			return nil, err
		}
		same := n > 1
		for i := range first {
			if !first[i].agrees(second[i]) {
				same = false
				break
			}
		}
		if same {
			return items(second), nil
		}
		first = second
		if attempt >= 3 {
			// Busy items: back off (the passes after the pause start a
			// new pair) rather than read them at full speed until MaxWait.
			if !sleep(ctx, attempt-3) {
				return nil, ctxErr(ctx)
			}
			if first, err = l.readPass(ctx, keys); err != nil {
				return nil, err
			}
		}
	}
}

// seen is one item as a pass of TransactGet read it: the record's version,
// whether the committed item is a lock's after-image (its owner had
// committed), and that committed item. unstable: the record changed while
// the pass read it (it agrees with no other pass).
type seen struct {
	item     []byte
	version  int64
	after    bool
	unstable bool
}

func (a seen) agrees(b seen) bool {
	return !a.unstable && !b.unstable && a.version == b.version && a.after == b.after
}

// readPass reads every key once, at most Parallel at a time, without
// waiting for or disturbing anyone: the committed item of a record locked
// by transaction T is the lock's after-image if T's record, read after
// the item's, says COMMITTED, and the stored item otherwise. Two
// consecutive passes that agree on every item (same version, same after
// flag) read the items of one instant I, any instant between the passes:
// each record was unchanged from its first read to its second, so the
// same lock (or none) held it at I; an owner seen COMMITTED by the first
// pass had committed before I; one seen PENDING or ABORTED by the second
// pass had not committed at I (a decision is final).
//
// T's record missing means ABORTED only while T's lock is still on the
// item: a committed transaction's record is deleted after its locks are
// released. So a missing record is confirmed by reading the item again:
// unchanged, the item is the stored one; changed, the pass read the item
// while it moved, and that item is unstable.
func (l *Ledger) readPass(ctx context.Context, keys []Key) ([]seen, error) {
	out := make([]seen, len(keys))
	errs := make([]error, len(keys))
	l.each(len(keys), func(i int) {
		rec, err := l.s.ReadItem(ctx, keys[i])
		if err != nil {
			errs[i] = err
			return
		}
		out[i] = seen{item: rec.Item, version: rec.Version}
		if rec.Lock == nil || rec.Lock.Change.Op == backend.Keep {
			return // a Keep lock changes nothing, whatever its owner decides
		}
		tx, err := l.s.ReadTx(ctx, rec.Lock.Tx)
		if err != nil {
			errs[i] = err
			return
		}
		switch {
		case tx != nil && tx.State == Committed:
			out[i] = seen{item: After(rec.Item, rec.Lock), version: rec.Version, after: true}
		case tx == nil:
			again, err := l.s.ReadItem(ctx, keys[i])
			if err != nil {
				errs[i] = err
				return
			}
			out[i].unstable = again.Version != rec.Version
		}
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readEach reads every key once, at most Parallel at a time.
func (l *Ledger) readEach(ctx context.Context, keys []Key) ([]Record, []error) {
	recs := make([]Record, len(keys))
	errs := make([]error, len(keys))
	l.each(len(keys), func(i int) { recs[i], errs[i] = l.s.ReadItem(ctx, keys[i]) })
	return recs, errs
}

// Sweep finishes the transactions started more than LockTimeout ago
// whose records remain (their coordinator died or failed to clean up):
// a PENDING one is aborted, then every lock it holds is rolled forward
// (COMMITTED) or back (ABORTED), and the record is removed. Decided
// transactions (COMMITTED or ABORTED) are finished whatever their age:
// anyone may release a decided transaction's locks (its coordinator, if
// alive, meets the locks gone and goes on), and a coordinator that died
// between its decision and its releases must not leave its items locked
// (a committed change invisible to the change log and the indexes) until
// the record is a lock timeout old. It returns how many records it
// removed. A backend runs it periodically, and once when it opens.
func (l *Ledger) Sweep(ctx context.Context) (int, error) {
	done := 0
	txs, err := l.s.ListTx(ctx, l.o.Now(), 500)
	if err != nil {
		return done, err
	}
	for _, tx := range txs {
		if tx.State == Pending {
			continue
		}
		ok, err := l.Finish(ctx, tx.ID)
		if err != nil {
			return done, err
		}
		if ok {
			done++
		}
	}
	for {
		txs, err := l.s.ListTx(ctx, l.o.Now().Add(-l.o.LockTimeout), 500)
		if err != nil {
			return done, err
		}
		progressed := 0
		for _, tx := range txs {
			ok, err := l.Finish(ctx, tx.ID)
			if err != nil {
				return done, err
			}
			if ok {
				done++
				progressed++
			}
		}
		if len(txs) < 500 || progressed == 0 {
			return done, nil
		}
	}
}

// Finish settles one transaction: a PENDING record is aborted, its locks
// are released according to the decision, and the record is removed.
// false when the record is gone already.
func (l *Ledger) Finish(ctx context.Context, id TxID) (bool, error) {
	tx, err := l.s.ReadTx(ctx, id)
	if err != nil || tx == nil {
		return false, err
	}
	if tx.State == Pending {
		if _, err := l.s.SetTxState(ctx, id, Pending, Aborted); err != nil {
			return false, err
		}
		if tx, err = l.s.ReadTx(ctx, id); err != nil || tx == nil {
			return false, err
		}
	}
	commit := tx.State == Committed
	for _, k := range tx.Items {
		released := false
		for range 10 {
			rec, err := l.s.ReadItem(ctx, k)
			if backend.IsKind(err, backend.KindTableNotFound) {
				released = true
				break // the table is gone, and its items with it
			}
			if err != nil {
				return false, err
			}
			if rec.Lock == nil || rec.Lock.Tx != id {
				released = true
				break
			}
			if _, err := l.s.ReleaseItem(ctx, k, rec, commit); err != nil {
				return false, err
			}
		}
		if !released && commit {
			// The record stays: without it the lock would read as an
			// aborted transaction's and be rolled back, leaving the
			// transaction half applied. (A dead writer's claim on the
			// item's next version can refuse releases for a while.) A
			// later sweep, or any reader, finishes it.
			return false, nil
		}
	}
	if err := l.s.DeleteTx(ctx, id); err != nil {
		return false, err
	}
	return true, nil
}
