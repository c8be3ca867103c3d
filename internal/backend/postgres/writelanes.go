package postgres

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/extenddb/extenddb/internal/backend"
)

// Write lanes: speculative writes of concurrent requests committed in one
// implicit transaction (ADR 0038).
//
// A speculative write (ADR 0028) is one round trip; what it costs the
// extenddb process above the work of the request is mostly that round
// trip: a pool acquire, a socket write (on loopback the kernel delivers to
// the PostgreSQL backend inside the writer's system call), a park and a
// wake-up, a read. And each one is a commit of its own in PostgreSQL.
//
// A write that finds no other speculative write in flight sends itself at
// once, alone. One that finds others in flight queues its plan; a lane
// takes every queued plan it can combine (distinct keys, the same version
// of every shared table; at most wlaneBatch) and sends them as one
// pipelined batch: all their item locks in ascending order, each table's
// fence once, every plan's guarded statements, one Sync. PostgreSQL runs it
// as one implicit transaction, committed at the Sync: one round trip, one
// commit, for all.
//
// Outcomes. Committed: every plan is applied. A statement failed (a wrong
// guess, a stale version): nothing was written, and each plan is sent
// again alone by its own request, which then learns its own outcome (the
// lock path after a refusal, as for a write sent alone). Nothing sent, or a session ended
// by the server before the last statement's result: nothing committed,
// every write runs on the locked path. Otherwise (a connection lost with
// the Sync sent) the outcome is unknown for every plan of the batch:
// KindUnavailable, "may or may not have been applied", as for one write.
// A request whose context ends while its plan is queued is answered at
// once and its plan is never sent; once a lane has taken it, the answer
// is the unknown outcome.
//
// Lock order: every transaction takes its item locks in ascending order
// of lock key, whichever plans they come from, so combined batches cannot
// deadlock with each other or with the locked path.
type wlanes struct {
	b     *Backend
	queue chan *wpending
	stop  chan struct{}
	wg    sync.WaitGroup

	// active counts the plans submitted and not yet answered.
	active atomic.Int64
	// batches and plans count the lanes' batches and the plans in them
	// (WriteLaneStats).
	batches, plans atomic.Int64

	// inflight holds the keys of the speculative writes planned or sent
	// and not yet answered (claim).
	mu       sync.Mutex
	inflight map[string]int
}

// claim marks keys in flight, unless one already is.
func (l *wlanes) claim(keys []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.inflight[k] > 0 {
			return false
		}
	}
	for _, k := range keys {
		l.inflight[k]++
	}
	return true
}

// release ends a claim.
func (l *wlanes) release(keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.inflight[k]--; l.inflight[k] <= 0 {
			delete(l.inflight, k)
		}
	}
}

// wlaneBatch bounds the plans of one combined batch.
const wlaneBatch = 32

type wpending struct {
	plan  *specPlan
	state atomic.Int32 // wQueued, wTaken or wAbandoned
	done  chan specOutcome
}

const (
	wQueued int32 = iota
	wTaken
	wAbandoned
)

// WriteLaneStats reports the write lanes' batches and the plans they
// carried (plans/batches is the mean batch).
func (b *Backend) WriteLaneStats() (batches, plans int64) {
	if b.wlanes == nil {
		return 0, 0
	}
	return b.wlanes.batches.Load(), b.wlanes.plans.Load()
}

func newWriteLanes(b *Backend, n int) *wlanes {
	l := &wlanes{b: b, queue: make(chan *wpending, 1024), stop: make(chan struct{}), inflight: map[string]int{}}
	for range n {
		l.wg.Add(1)
		go l.run()
	}
	return l
}

// close stops the lanes after their batches in flight; plans still queued
// run on the locked path (which answers the closed backend).
func (l *wlanes) close() {
	close(l.stop)
	l.wg.Wait()
	for {
		select {
		case p := <-l.queue:
			if p.state.CompareAndSwap(wQueued, wTaken) {
				p.done <- specOutcome{}
			}
		default:
			return
		}
	}
}

// submit sends plan now when no other speculative write is in flight, or
// through a lane.
func (l *wlanes) submit(ctx context.Context, plan *specPlan) specOutcome {
	if l.active.Add(1) == 1 {
		defer l.active.Add(-1)
		return l.b.sendPlans(ctx, []*specPlan{plan})[0]
	}
	p := &wpending{plan: plan, done: make(chan specOutcome, 1)}
	select {
	case l.queue <- p:
	default:
		l.active.Add(-1)
		return l.b.sendPlans(ctx, []*specPlan{plan})[0] // queue full
	}
	select {
	case o := <-p.done:
		return o
	case <-ctx.Done():
		if p.state.CompareAndSwap(wQueued, wAbandoned) {
			// Never sent: nothing was written.
			return specOutcome{done: true, err: mapErr(ctx.Err(), "postgres: write")}
		}
		return specOutcome{done: true, err: backend.Wrap(backend.KindUnavailable, ctx.Err(),
			"postgres: request ended while committing; the write may or may not have been applied")}
	case <-l.stop:
		if p.state.CompareAndSwap(wQueued, wAbandoned) {
			return specOutcome{} // the locked path answers the closed backend
		}
		return <-p.done // taken: the lane ends its batch before it stops
	}
}

func (l *wlanes) run() {
	defer l.wg.Done()
	var carry []*wpending // queued plans a batch could not combine
	for {
		var cand []*wpending
		if len(carry) > 0 {
			cand, carry = carry, nil
		} else {
			select {
			case <-l.stop:
				return
			case p := <-l.queue:
				cand = append(cand, p)
			}
		}
	drain:
		for len(cand) < 2*wlaneBatch {
			select {
			case p := <-l.queue:
				cand = append(cand, p)
			default:
				break drain
			}
		}
		batch, rest := l.combine(cand)
		carry = rest
		if len(batch) == 0 {
			continue
		}
		plans := make([]*specPlan, len(batch))
		for i, p := range batch {
			plans[i] = p.plan
		}
		l.batches.Add(1)
		l.plans.Add(int64(len(plans)))
		// Not a request's context: the batch carries several requests.
		outs := l.b.sendPlans(context.Background(), plans)
		for i, p := range batch {
			p.done <- outs[i]
			l.active.Add(-1)
		}
	}
}

// combine takes, in order, the candidates that can share one transaction
// (distinct keys, one version per table, at most wlaneBatch) and returns
// them and the ones left for a later batch. Abandoned plans are dropped.
func (l *wlanes) combine(cand []*wpending) (batch, rest []*wpending) {
	keys := map[string]struct{}{}
	versions := map[int64]int64{}
next:
	for _, p := range cand {
		if p.state.Load() == wAbandoned {
			l.active.Add(-1)
			continue
		}
		if len(batch) == wlaneBatch {
			rest = append(rest, p)
			continue
		}
		for _, k := range p.plan.keys {
			if _, dup := keys[k]; dup {
				rest = append(rest, p)
				continue next
			}
		}
		for j, t := range p.plan.tabs {
			if v, ok := versions[t]; ok && v != p.plan.versions[j] {
				rest = append(rest, p)
				continue next
			}
		}
		if !p.state.CompareAndSwap(wQueued, wTaken) {
			l.active.Add(-1) // abandoned meanwhile
			continue
		}
		for _, k := range p.plan.keys {
			keys[k] = struct{}{}
		}
		for j, t := range p.plan.tabs {
			versions[t] = p.plan.versions[j]
		}
		batch = append(batch, p)
	}
	return batch, rest
}
