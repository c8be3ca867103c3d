package cassandra

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
)

// The index outbox (ADR 0016). A write whose change has index entries
// writes, in the same conditional batch as the item (one partition, so one
// LWT), an outbox row (kind 1, sk, seq = the item's new version) holding
// the index change. After the LWT the writer applies the change to
// index_entries (cell timestamps = seq, so applications in any order and
// any number of times converge) and deletes the outbox row. A writer that
// dies in between leaves the row; drain applies it: DropIndex drains the
// table before deleting entries, and a background sweep drains every table
// periodically.

// encodeOutbox serializes an index change: deletes then puts, each field
// length-prefixed (uvarint).
func encodeOutbox(ch backend.Change) []byte {
	var out []byte
	put := func(b []byte) {
		out = binary.AppendUvarint(out, uint64(len(b)))
		out = append(out, b...)
	}
	out = binary.AppendUvarint(out, uint64(len(ch.DeleteIndex)))
	for _, d := range ch.DeleteIndex {
		put([]byte(d.Index))
		put(d.PK)
		put(d.SK)
	}
	out = binary.AppendUvarint(out, uint64(len(ch.PutIndex)))
	for _, e := range ch.PutIndex {
		put([]byte(e.Index))
		put(e.PK)
		put(e.SK)
		put(e.Item)
	}
	return out
}

var errBadOutbox = errors.New("cassandra: malformed outbox row")

func decodeOutbox(b []byte) (backend.Change, error) {
	var ch backend.Change
	r := &reader{b: b}
	for range r.count() {
		ch.DeleteIndex = append(ch.DeleteIndex, backend.IndexKey{Index: r.str(), PK: r.bytes(), SK: r.bytes()})
	}
	for range r.count() {
		k := backend.IndexKey{Index: r.str(), PK: r.bytes(), SK: r.bytes()}
		ch.PutIndex = append(ch.PutIndex, backend.IndexEntry{IndexKey: k, Item: r.bytes()})
	}
	if r.err || len(r.b) != 0 {
		return ch, errBadOutbox
	}
	return ch, nil
}

// finishOutbox applies one outbox row's change (with the copy of the
// write's statistics delta, when cp has one) and removes the row.
func (b *Backend) finishOutbox(ctx context.Context, t int64, pk, sk []byte, seq int64, ch backend.Change, cp *statsWrite) error {
	if err := b.applyIndexWith(ctx, t, pk, sk, seq, ch, cp); err != nil {
		return err
	}
	return mapErr(b.query(ctx, `DELETE FROM items WHERE t = ? AND pk = ? AND kind = 1 AND sk = ? AND seq = ?`, t, pk, sk, seq).Exec(), "outbox")
}

// applyOutbox is a writer's application of the outbox row it has just
// committed (at = when its LWT answered), with the copy of its
// statistics delta (cp, counts.go): counted as pending while it runs; a
// failure leaves the row to the sweep and it stays counted until a drain
// applies it (and the delta to the sweep's move).
func (b *Backend) applyOutbox(ctx context.Context, at time.Time, t int64, pk, sk []byte, seq int64, ch backend.Change, cp *statsWrite) {
	k := outboxKey{t, string(pk), string(sk), seq}
	b.obStats.begin(k, at)
	if err := b.finishOutbox(ctx, t, pk, sk, seq, ch, cp); err == nil {
		b.obStats.end(k)
	}
}

// outboxKey names one outbox row.
type outboxKey struct {
	t      int64
	pk, sk string
	seq    int64
}

// outboxStats are the index changes this process knows to be committed
// with their item and not yet applied to index_entries (the GSI lag,
// backend.Stats): those its writers are applying now, those whose
// application failed, and those its sweep found left over (by a writer
// that died or failed, in any process) and is applying. Rows left in
// partitions the sweep has not reached yet are not counted.
type outboxStats struct {
	mu        sync.Mutex
	pending   map[outboxKey]time.Time
	recovered atomic.Int64 // changes applied by the sweep (or DropIndex's drain)
}

func (s *outboxStats) begin(k outboxKey, at time.Time) {
	s.mu.Lock()
	if s.pending == nil {
		s.pending = map[outboxKey]time.Time{}
	}
	if old, ok := s.pending[k]; !ok || at.Before(old) {
		s.pending[k] = at
	}
	s.mu.Unlock()
}

func (s *outboxStats) end(k outboxKey) {
	s.mu.Lock()
	delete(s.pending, k)
	s.mu.Unlock()
}

// forgetBefore drops entries older than t (a complete sweep round that
// started at t found no row of theirs: another process applied them).
func (s *outboxStats) forgetBefore(t time.Time) {
	s.mu.Lock()
	for k, at := range s.pending {
		if at.Before(t) {
			delete(s.pending, k)
		}
	}
	s.mu.Unlock()
}

// snapshot is the number of pending changes and the age of the oldest.
func (s *outboxStats) snapshot(now time.Time) (int64, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest time.Duration
	for _, at := range s.pending {
		oldest = max(oldest, now.Sub(at))
	}
	return int64(len(s.pending)), oldest
}

// Stats reports the index outbox (the GSI lag, ADR 0016) and the failed
// folds of the table statistics (counts.go); Cassandra has no pool or
// cache statistics and does not retry operations.
func (b *Backend) Stats() backend.Stats {
	n, oldest := b.obStats.snapshot(time.Now())
	return backend.Stats{Retries: -1, HasOutbox: true, OutboxPending: n, OutboxOldest: oldest, OutboxRecovered: b.obStats.recovered.Load(),
		HasBackground: true, BackgroundFailures: b.stats.failures.Load()}
}

// drain applies every outbox row of table t.
func (b *Backend) drain(ctx context.Context, t int64) (int, error) {
	return b.drainTable(ctx, t, false)
}

// drainTable applies every outbox row of table t; with stats, it also
// moves the table's unfolded statistics deltas to a current slot
// (counts.go), in the same pass over the partitions.
func (b *Backend) drainTable(ctx context.Context, t int64, stats bool) (int, error) {
	var st *statsRow
	if stats {
		var err error
		if st, err = b.readStats(ctx, t); err != nil {
			return 0, err
		}
	}
	n := 0
	err := b.eachPartition(ctx, t, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		iter := b.query(ctx, `SELECT kind, sk, seq, ob, writetime(ob), sw FROM items WHERE t = ? AND pk = ? AND kind IN (1, 4)`, t, pk).PageSize(200).Iter()
		type row struct {
			sk  []byte
			seq int64
			ob  []byte
			wt  int64
		}
		var rows []row
		var deltas []deltaRow
		var r row
		var kind int8
		var sw *int64
		for iter.Scan(&kind, &r.sk, &r.seq, &r.ob, &r.wt, &sw) {
			if kind == 4 {
				deltas = append(deltas, deltaRow{sk: skOf(r.sk), ob: r.ob, seq: r.seq, sw: val(sw), wt: r.wt})
			} else {
				rows = append(rows, row{skOf(r.sk), r.seq, r.ob, r.wt})
			}
			r, sw = row{}, nil
		}
		if err := iter.Close(); err != nil {
			return false, mapErr(err, "outbox")
		}
		if len(deltas) > 0 && st != nil {
			if _, err := b.rehome(ctx, t, pk, deltas, st); err != nil {
				return false, err
			}
		}
		for _, r := range rows {
			k := outboxKey{t, string(pk), string(r.sk), r.seq}
			b.obStats.begin(k, time.UnixMicro(r.wt))
		}
		for _, r := range rows {
			ch, err := decodeOutbox(r.ob)
			if err != nil {
				return false, err
			}
			if err := b.finishOutbox(ctx, t, pk, r.sk, r.seq, ch, nil); err != nil {
				return false, err
			}
			b.obStats.end(outboxKey{t, string(pk), string(r.sk), r.seq})
			b.obStats.recovered.Add(1)
			n++
		}
		return true, nil
	})
	return n, err
}

// drainAll drains every live table once (and moves its unfolded
// statistics deltas).
func (b *Backend) drainAll(ctx context.Context) (int, error) {
	iter := b.query(ctx, `SELECT id FROM tables`).PageSize(500).Iter()
	var ids []int64
	var id int64
	for iter.Scan(&id) {
		ids = append(ids, id)
	}
	if err := iter.Close(); err != nil {
		return 0, mapErr(err, "outbox sweep")
	}
	total := 0
	for _, id := range ids {
		n, err := b.drainTable(ctx, id, true)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// sweep drains every table at start and then every interval until Close.
// The second round runs one ledger LockTimeout after the first, so that
// transactions too young for the first (their coordinator died just
// before a restart) are finished and their index changes applied then,
// not an interval later.
func (b *Backend) sweep(interval time.Duration) {
	defer close(b.sweepDone)
	lt := b.opt.Tx.LockTimeout
	if lt <= 0 {
		lt = 5 * time.Second
	}
	for round := 0; ; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		go func() {
			select {
			case <-b.closing:
				cancel()
			case <-ctx.Done():
			}
		}()
		start := time.Now()
		_, _ = b.tx.Sweep(ctx) // transactions whose coordinator died (their release writes outbox rows)
		if _, err := b.drainAll(ctx); err == nil {
			b.obStats.forgetBefore(start)
		} // errors: the next round retries
		cancel()
		next := interval
		if round == 0 {
			next = min(interval, lt+time.Second)
		}
		select {
		case <-b.closing:
			return
		case <-time.After(next):
		}
	}
}

// writeWithOutbox is the item's conditional batch: the item row (with its
// index entry sizes), the outbox row (ob, when not nil), the pending
// change log record (lg, when not nil; changelog.go) and the statistics
// delta (when stw has one; counts.go), conditioned on the item's version
// and the fence.
func (b *Backend) writeWithOutbox(ctx context.Context, t int64, pk, sk, item []byte, nv int64, wid gocql.UUID, cur *current, ob, lg []byte, stw *statsWrite) (bool, error) {
	batch := b.s.NewBatch(gocql.LoggedBatch).WithContext(ctx)
	batch.SetConsistency(b.cl)
	batch.SerialConsistency(gocql.SerialConsistency(b.scl))
	batch.Query(`UPDATE items SET item = ?, ver = ?, wid = ?, isz = ? WHERE t = ? AND pk = ? AND kind = 0 AND sk = ? AND seq = 0 IF ver = ? AND tv = ? AND sf = ?`,
		item, nv, wid, stw.isz, t, pk, sk, cur.ver, cur.tv, cur.sf)
	addDelta(batch, t, pk, sk, nv, stw)
	addPreImages(batch, t, pk, sk, cur.pre) // snapshot.go
	if ob != nil {
		batch.Query(`INSERT INTO items (t, pk, kind, sk, seq, ob) VALUES (?, ?, 1, ?, ?, ?)`, t, pk, sk, nv, ob)
	}
	if lg != nil {
		batch.Query(`INSERT INTO items (t, pk, kind, sk, seq, ob) VALUES (?, ?, 2, ?, ?, ?)`, t, pk, sk, nv, lg)
	}
	applied, iter, err := b.s.MapExecuteBatchCAS(batch, map[string]any{})
	if iter != nil {
		iter.Close()
	}
	return applied, err
}
