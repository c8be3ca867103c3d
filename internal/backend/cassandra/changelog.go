package cassandra

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
)

// The change log (backend.ChangeLog; ADR 0021). A write whose change has a
// record writes it in the item's conditional batch as an items row of
// kind 2 (sk, seq = the item's new version, ob = data), after marking the
// partition dirty (log_dirty). publish moves pending records to the log:
// it reads the table's newest block, collects the pending records of the
// dirty partitions (per partition in clustering order, so per item in
// version order), writes the seqs it means to give them (log_marks), and
// commits them with one conditional batch on the block (IF last = <read>).
// Only then are the pending rows removed; a record whose pending row
// outlives a commit (a publisher that died) is recognised by its marks
// and never published twice. ReadLog and LogInfo publish first, so every
// record of a write acknowledged before them is readable; seqs are dense
// and only ever assigned above the committed last, so there are no late
// gaps.

const (
	logBlockBits = 16
	// dirtyGrace: a dirty marker is removed only when older than this and
	// its partition has no pending record (a writer writes its marker
	// before its LWT; the LWT lands within its timeout).
	dirtyGrace = 2 * time.Minute
	// dirtyRefresh: a process writes a partition's marker again when its
	// own last one is older than this (well under dirtyGrace).
	dirtyRefresh = 20 * time.Second
	// maxRound bounds a publish round from its state read to its commit
	// (well under dirtyGrace, after which marks are removed).
	maxRound     = 30 * time.Second
	publishBatch = 500
	// publishConc bounds the concurrent requests of one publish step
	// (marks, pending reads, removals): its rounds are many small
	// independent requests, which one at a time made a round of 500
	// records take seconds (publishing fell behind 8 writers).
	publishConc  = 16
	collectMax   = 20000 // pending records one publish round looks at
	publishBytes = 4 << 20
)

func blkOf(seq int64) int64 { return seq >> logBlockBits }

// logState is the committed end of a table's log.
type logState struct {
	blk    int64
	last   *int64 // the block's static last (nil: nothing committed in it)
	lastAt time.Time
}

// lastSeq is the highest committed seq (0: none).
func (s logState) lastSeq() int64 {
	if s.last != nil {
		return *s.last
	}
	if s.blk == 0 {
		return 0
	}
	return s.blk<<logBlockBits - 1
}

type dirtyCache struct {
	mu  sync.Mutex
	m   map[dirKey]time.Time
	pub map[int64]chan struct{} // per table: one publisher at a time in this process
}

// markDirty records that partition (t, pk) may hold pending records; it
// is called before the write's LWT.
func (b *Backend) markDirty(ctx context.Context, t int64, pk []byte) error {
	c := &b.dirty
	k := dirKey{t, string(pk)}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[dirKey]time.Time{}
	}
	at, ok := c.m[k]
	c.mu.Unlock()
	if ok && time.Since(at) < dirtyRefresh {
		return nil
	}
	now := time.Now()
	if err := b.quorum(ctx, `INSERT INTO log_dirty (t, pk, m) VALUES (?, ?, true)`, t, pk).Exec(); err != nil {
		return mapErr(err, "change log marker")
	}
	c.mu.Lock()
	if len(c.m) >= dirCacheMax {
		clear(c.m)
	}
	c.m[k] = now
	c.mu.Unlock()
	return nil
}

// readLogState finds the table's newest block and its committed last.
func (b *Backend) readLogState(ctx context.Context, t int64) (logState, int64, error) {
	var head, trimmed *int64
	err := b.quorum(ctx, `SELECT blk, trimmed FROM log_head WHERE t = ?`, t).Scan(&head, &trimmed)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return logState{}, 0, mapErr(err, "change log head")
	}
	st := logState{}
	if head != nil {
		st.blk = *head
	}
	for {
		var last *int64
		var at *time.Time
		err := b.quorum(ctx, `SELECT last, last_at FROM log WHERE t = ? AND blk = ? LIMIT 1`, t, st.blk).Scan(&last, &at)
		if err != nil && !errors.Is(err, gocql.ErrNotFound) {
			return logState{}, 0, mapErr(err, "change log state")
		}
		st.last = last
		if at != nil {
			st.lastAt = *at
		}
		if last != nil && *last == (st.blk+1)<<logBlockBits-1 {
			st.blk++ // full: the log goes on in the next block
			continue
		}
		if last == nil && st.blk > 0 && st.lastAt.IsZero() {
			// A fresh block: the previous one's last_at orders At.
			var pat *time.Time
			if err := b.quorum(ctx, `SELECT last_at FROM log WHERE t = ? AND blk = ? LIMIT 1`, t, st.blk-1).Scan(&pat); err == nil && pat != nil {
				st.lastAt = *pat
			}
		}
		break
	}
	tr := int64(0)
	if trimmed != nil {
		tr = *trimmed
	}
	return st, tr, nil
}

type pendingRec struct {
	pk, sk []byte
	ver    int64
	data   []byte
	wt     int64 // the write's timestamp (writetime of the pending row)
}

// publish moves the table's pending records to the log, until none is
// left that it can see. Publishers of one process take turns per table
// (fewer lost commits); across processes the commit's condition decides.
func (b *Backend) publish(ctx context.Context, t int64) error {
	mu := b.publishLock(t)
	select {
	case mu <- struct{}{}:
	case <-ctx.Done():
		return mapErr(ctx.Err(), "change log publish")
	}
	defer func() { <-mu }()
	return b.publishRounds(ctx, t)
}

func (b *Backend) publishLock(t int64) chan struct{} {
	b.dirty.mu.Lock()
	defer b.dirty.mu.Unlock()
	if b.dirty.pub == nil {
		b.dirty.pub = map[int64]chan struct{}{}
	}
	c := b.dirty.pub[t]
	if c == nil {
		c = make(chan struct{}, 1)
		b.dirty.pub[t] = c
	}
	return c
}

func (b *Backend) publishRounds(ctx context.Context, t int64) error {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, min(attempt, 8)); err != nil {
				return err
			}
		}
		if attempt > 200 {
			return backend.Errorf(backend.KindUnavailable, "cassandra: change log: publish did not settle (contention)")
		}
		roundStart := time.Now()
		st, _, err := b.readLogState(ctx, t)
		if err != nil {
			return err
		}
		last := st.lastSeq()
		room := int((st.blk+1)<<logBlockBits - 1 - last) // seqs left in the block
		if st.blk == 0 && st.last == nil {
			room = 1<<logBlockBits - 1 // seq 0 is never used
		}
		recs, more, err := b.collectPending(ctx, t, last, min(room, publishBatch))
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		// Marks first: a record is published when a committed log row at
		// one of its marks names it.
		byPK := map[string]*gocql.Batch{}
		var order []string
		for i, r := range recs {
			mb := byPK[string(r.pk)]
			if mb == nil {
				mb = b.s.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
				mb.SetConsistency(b.cl)
				byPK[string(r.pk)] = mb
				order = append(order, string(r.pk))
			}
			mb.Query(`INSERT INTO log_marks (t, pk, sk, ver, s) VALUES (?, ?, ?, ?, ?)`, t, r.pk, r.sk, r.ver, last+1+int64(i))
		}
		if err := parallel(len(order), publishConc, func(i int) error {
			return mapErr(b.s.ExecuteBatch(byPK[order[i]]), "change log marks")
		}); err != nil {
			return err
		}
		if time.Since(roundStart) > maxRound {
			continue // too slow: marks it relied on may be gone
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		if now.Before(st.lastAt) {
			now = st.lastAt
		}
		batch := b.s.NewBatch(gocql.LoggedBatch).WithContext(ctx)
		batch.SetConsistency(b.cl)
		batch.SerialConsistency(gocql.SerialConsistency(b.scl))
		batch.Query(`UPDATE log SET last = ?, last_at = ? WHERE t = ? AND blk = ? IF last = ?`, last+int64(len(recs)), now, t, st.blk, st.last)
		for i, r := range recs {
			batch.Query(`INSERT INTO log (t, blk, seq, at, data, pk, sk, ver) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
				t, st.blk, last+1+int64(i), now, r.data, r.pk, r.sk, r.ver)
		}
		applied, iter, err := b.s.MapExecuteBatchCAS(batch, map[string]any{})
		if iter != nil {
			iter.Close()
		}
		if err != nil {
			return mapErr(err, "change log publish")
		}
		if !applied {
			continue // another publisher committed: look again
		}
		if st.blk > 0 {
			_ = b.query(ctx, `UPDATE log_head USING TIMESTAMP ? SET blk = ? WHERE t = ?`, st.blk+1, st.blk, t).Exec()
		}
		if !b.skipForget {
			b.forgetPendings(ctx, t, recs)
		}
		if !more {
			return nil
		}
		attempt = -1 // progress: go on without waiting
	}
}

// forgetPending removes a published record's pending row (an error
// leaves it; its marks tell the next publisher it is published). The
// marks stay: another publisher may have read the pending row and not yet
// its marks. They are removed once older than dirtyGrace, when their
// partition has no pending row left (collectPending); a publish round
// that takes longer than maxRound commits nothing.
func (b *Backend) forgetPending(ctx context.Context, t int64, r pendingRec) {
	_ = b.query(ctx, `DELETE FROM items WHERE t = ? AND pk = ? AND kind = 2 AND sk = ? AND seq = ?`, t, r.pk, r.sk, r.ver).Exec()
}

// forgetPendings removes the pending rows of published records: one
// unlogged batch per partition, publishConc partitions at a time (errors
// leave rows, as forgetPending).
func (b *Backend) forgetPendings(ctx context.Context, t int64, recs []pendingRec) {
	byPK := map[string]*gocql.Batch{}
	var order []string
	for _, r := range recs {
		fb := byPK[string(r.pk)]
		if fb == nil {
			fb = b.s.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
			fb.SetConsistency(b.cl)
			byPK[string(r.pk)] = fb
			order = append(order, string(r.pk))
		}
		fb.Query(`DELETE FROM items WHERE t = ? AND pk = ? AND kind = 2 AND sk = ? AND seq = ?`, t, r.pk, r.sk, r.ver)
	}
	_ = parallel(len(order), publishConc, func(i int) error {
		_ = b.s.ExecuteBatch(byPK[order[i]])
		return nil
	})
}

// parallel runs fn(0..n-1), at most limit at a time, and returns the
// first error (all calls run).
func parallel(n, limit int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// published tells whether a pending record is already in the log (seq <=
// last): a committed row at one of its marks names it.
func (b *Backend) published(ctx context.Context, t int64, r pendingRec, last int64, ss []int64) (bool, error) {
	for _, s := range ss {
		if s > last {
			continue
		}
		var pk, sk []byte
		var ver int64
		err := b.quorum(ctx, `SELECT pk, sk, ver FROM log WHERE t = ? AND blk = ? AND seq = ?`, t, blkOf(s), s).Scan(&pk, &sk, &ver)
		if errors.Is(err, gocql.ErrNotFound) {
			continue // trimmed, or never committed; a trimmed record was published
		}
		if err != nil {
			return false, mapErr(err, "change log")
		}
		if bytes.Equal(pk, r.pk) && bytes.Equal(skOf(sk), skOf(r.sk)) && ver == r.ver {
			return true, nil
		}
	}
	return false, nil
}

type markKey struct {
	pk, sk string
	ver    int64
}

// partitionMarks reads the marks of some partitions (read after their
// pending rows, so a mark written before a commit that removed a row is
// seen).
func (b *Backend) partitionMarks(ctx context.Context, t int64, pks [][]byte) (map[markKey][]int64, error) {
	iter := b.quorum(ctx, `SELECT pk, sk, ver, s FROM log_marks WHERE t = ? AND pk IN ?`, t, pks).PageSize(1000).Iter()
	out := map[markKey][]int64{}
	var pk, sk []byte
	var ver, s int64
	for iter.Scan(&pk, &sk, &ver, &s) {
		k := markKey{string(pk), string(skOf(sk)), ver}
		out[k] = append(out[k], s)
	}
	return out, mapErr(iter.Close(), "change log marks")
}

// dirty is a partition's change log marker as collectPending reads it.
type dirty struct {
	pk []byte
	wt int64 // the marker's writetime
}

// collectGroup reads the unpublished pending records of a group of dirty
// partitions, one queue per item in version order, and removes the
// markers (and old marks) of quiet empty partitions.
func (b *Backend) collectGroup(ctx context.Context, t, last int64, group []dirty) ([][]pendingRec, error) {
	var queues [][]pendingRec
	pks := make([][]byte, len(group))
	for i, d := range group {
		pks[i] = d.pk
	}
	it := b.quorum(ctx, `SELECT pk, sk, seq, ob, writetime(ob) FROM items WHERE t = ? AND pk IN ? AND kind = 2`, t, pks).PageSize(1000).Iter()
	rowsOf := map[string][]pendingRec{}
	var r pendingRec
	for it.Scan(&r.pk, &r.sk, &r.ver, &r.data, &r.wt) {
		r.sk = skOf(r.sk)
		rowsOf[string(r.pk)] = append(rowsOf[string(r.pk)], r)
		r = pendingRec{}
	}
	if err := it.Close(); err != nil {
		return nil, mapErr(err, "change log pending")
	}
	var withRows [][]byte
	var quiet []dirty
	old := time.Now().Add(-dirtyGrace).UnixMicro()
	for _, d := range group {
		if len(rowsOf[string(d.pk)]) > 0 {
			withRows = append(withRows, d.pk)
		} else if d.wt < old {
			quiet = append(quiet, d)
		}
	}
	// Empty and quiet: remove the marks older than dirtyGrace, then the
	// marker when no mark is left (a newer marker, written by a writer
	// since, survives: the delete carries the time it read). Partitions
	// at once: after a burst of writes every partition it touched turns
	// quiet together.
	_ = parallel(len(quiet), 4, func(i int) error {
		d := quiet[i]
		_ = b.query(ctx, `DELETE FROM log_marks USING TIMESTAMP ? WHERE t = ? AND pk = ?`, old, t, d.pk).Exec()
		var s int64
		err := b.quorum(ctx, `SELECT s FROM log_marks WHERE t = ? AND pk = ? LIMIT 1`, t, d.pk).Scan(&s)
		if errors.Is(err, gocql.ErrNotFound) {
			_ = b.query(ctx, `DELETE FROM log_dirty USING TIMESTAMP ? WHERE t = ? AND pk = ?`, d.wt, t, d.pk).Exec()
		}
		return nil
	})
	if len(withRows) == 0 {
		return nil, nil
	}
	marks, err := b.partitionMarks(ctx, t, withRows)
	if err != nil {
		return nil, err
	}
	for _, d := range group {
		for _, r := range rowsOf[string(d.pk)] {
			done, err := b.published(ctx, t, r, last, marks[markKey{string(r.pk), string(r.sk), r.ver}])
			if err != nil {
				return nil, err
			}
			if done {
				b.forgetPending(ctx, t, r)
				continue
			}
			n := len(queues)
			if n == 0 || !bytes.Equal(queues[n-1][0].pk, r.pk) || !bytes.Equal(queues[n-1][0].sk, r.sk) {
				queues = append(queues, nil)
				n++
			}
			queues[n-1] = append(queues[n-1], r)
		}
	}
	return queues, nil
}

// collectPending reads up to limit unpublished pending records of the
// dirty partitions, in commit order as far as the writes' timestamps tell
// it and always in version order per item (a merge of the items' queues
// by timestamp); more is true when it stopped at the limit.
func (b *Backend) collectPending(ctx context.Context, t, last int64, limit int) ([]pendingRec, bool, error) {
	iter := b.quorum(ctx, `SELECT pk, writetime(m) FROM log_dirty WHERE t = ?`, t).PageSize(1000).Iter()
	var ds []dirty
	var d dirty
	for iter.Scan(&d.pk, &d.wt) {
		ds = append(ds, d)
		d = dirty{}
	}
	if err := iter.Close(); err != nil {
		return nil, false, mapErr(err, "change log markers")
	}
	var queues [][]pendingRec // one per item, in version order
	total := 0
	capped := false
	// The dirty partitions, 32 at a time: one read of their pending rows,
	// one of the marks of those that have some; groupConc groups at once.
	const groupSize, groupConc = 32, 8
	var groups [][]dirty
	for lo := 0; lo < len(ds); lo += groupSize {
		groups = append(groups, ds[lo:min(lo+groupSize, len(ds))])
	}
	for lo := 0; lo < len(groups); lo += groupConc {
		if total >= collectMax {
			capped = true
			break
		}
		wave := groups[lo:min(lo+groupConc, len(groups))]
		got := make([][][]pendingRec, len(wave))
		if err := parallel(len(wave), groupConc, func(i int) error {
			var err error
			got[i], err = b.collectGroup(ctx, t, last, wave[i])
			return err
		}); err != nil {
			return nil, false, err
		}
		for _, qs := range got {
			for _, q := range qs {
				queues = append(queues, q)
				total += len(q)
			}
		}
	}
	// Merge: repeatedly take the queue head with the smallest timestamp.
	var out []pendingRec
	size := 0
	for {
		best := -1
		for i, q := range queues {
			if len(q) > 0 && (best < 0 || q[0].wt < queues[best][0].wt) {
				best = i
			}
		}
		if best < 0 {
			return out, capped, nil
		}
		r := queues[best][0]
		if len(out) >= limit || (len(out) > 0 && size+len(r.data) > publishBytes) {
			return out, true, nil
		}
		queues[best] = queues[best][1:]
		out = append(out, r)
		size += len(r.data)
	}
}

// ReadLog publishes, then reads committed records after p.After.
func (b *Backend) ReadLog(ctx context.Context, p backend.ReadLogParams) (*backend.ReadLogResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	t := p.Table.ID
	if err := b.publish(ctx, t); err != nil {
		return nil, err
	}
	st, trimmed, err := b.readLogState(ctx, t)
	if err != nil {
		return nil, err
	}
	last := st.lastSeq()
	from := max(p.After+1, trimmed+1, 1)
	res := &backend.ReadLogResult{}
	size := 0
	for from <= last && len(res.Records) < p.Limit {
		blk := blkOf(from)
		iter := b.quorum(ctx, `SELECT seq, at, data FROM log WHERE t = ? AND blk = ? AND seq >= ? AND seq <= ? LIMIT ?`,
			t, blk, from, min(last, (blk+1)<<logBlockBits-1), p.Limit-len(res.Records)).PageSize(500).Iter()
		var r backend.LogRecord
		stop := false
		for !stop && iter.Scan(&r.Seq, &r.At, &r.Data) {
			if p.MaxBytes > 0 && len(res.Records) > 0 && size+len(r.Data) > p.MaxBytes {
				stop = true
				break
			}
			size += len(r.Data)
			res.Records = append(res.Records, r)
			r = backend.LogRecord{}
		}
		if err := iter.Close(); err != nil {
			return nil, mapErr(err, "read change log")
		}
		if stop {
			break
		}
		from = (blk + 1) << logBlockBits
	}
	return res, nil
}

// LogInfo publishes, then describes the log (seqs are dense: every seq
// from the trimmed point to last is present).
func (b *Backend) LogInfo(ctx context.Context, p backend.LogInfoParams) (*backend.LogInfoResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	if err := b.publish(ctx, p.Table.ID); err != nil {
		return nil, err
	}
	st, trimmed, err := b.readLogState(ctx, p.Table.ID)
	if err != nil {
		return nil, err
	}
	last := st.lastSeq()
	res := &backend.LogInfoResult{Last: last}
	if last > trimmed {
		res.First = trimmed + 1
		res.Count = last - trimmed
	}
	return res, nil
}

// TrimLog removes the prefix of records whose At is before p.Before.
func (b *Backend) TrimLog(ctx context.Context, p backend.TrimLogParams) (*backend.TrimLogResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	t := p.Table.ID
	st, trimmed, err := b.readLogState(ctx, t)
	if err != nil {
		return nil, err
	}
	last := st.lastSeq()
	// cut: the first seq to keep.
	cut := trimmed + 1
	for cut <= last {
		blk := blkOf(cut)
		iter := b.quorum(ctx, `SELECT seq, at FROM log WHERE t = ? AND blk = ? AND seq >= ? AND seq <= ?`, t, blk, cut, min(last, (blk+1)<<logBlockBits-1)).PageSize(1000).Iter()
		var seq int64
		var at time.Time
		found := false
		for iter.Scan(&seq, &at) {
			if !at.Before(p.Before) {
				found = true
				break
			}
			cut = seq + 1
		}
		if err := iter.Close(); err != nil {
			return nil, mapErr(err, "trim change log")
		}
		if found {
			break
		}
		if cut <= (blk+1)<<logBlockBits-1 {
			break // the block's rows ended before the block: nothing more
		}
	}
	if cut <= trimmed+1 {
		return &backend.TrimLogResult{}, nil
	}
	for blk := blkOf(max(trimmed, 1)); blk <= blkOf(cut-1); blk++ {
		if err := b.query(ctx, `DELETE FROM log WHERE t = ? AND blk = ? AND seq < ?`, t, blk, cut).Exec(); err != nil {
			return nil, mapErr(err, "trim change log")
		}
	}
	if err := b.quorum(ctx, `UPDATE log_head USING TIMESTAMP ? SET trimmed = ? WHERE t = ?`, cut, cut-1, t).Exec(); err != nil {
		return nil, mapErr(err, "trim change log")
	}
	return &backend.TrimLogResult{Removed: cut - 1 - trimmed}, nil
}

// purgeLog deletes a dead table's log.
func (b *Backend) purgeLog(ctx context.Context, t int64) error {
	st, _, err := b.readLogState(ctx, t)
	if err != nil {
		return err
	}
	for blk := int64(0); blk <= st.blk; blk++ {
		if err := b.query(ctx, `DELETE FROM log WHERE t = ? AND blk = ?`, t, blk).Exec(); err != nil {
			return mapErr(err, "purge change log")
		}
	}
	for _, stmt := range []string{`DELETE FROM log_dirty WHERE t = ?`, `DELETE FROM log_head WHERE t = ?`} {
		if err := b.query(ctx, stmt, t).Exec(); err != nil {
			return mapErr(err, "purge change log")
		}
	}
	return nil
}
