package cassandra

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
)

// Table statistics kept with every write (backend.TableCounter; ADR 0059).
//
// A write whose figures change keeps its delta in the item's conditional
// batch, as an items row of kind 4 (sk, seq = the item's new version, ob
// = the delta, sw = its slot), and sets the item row's isz: the size and
// stamp (the description version the write was computed from) of each
// index entry the item has. So the delta of the next write of the item is
// known from the row it reads, though index_entries are applied later.
//
// After the LWT the writer copies the delta into stats_pending, in the
// partition of its slot (2-second steps of Unix time). Counts answers the
// folded figures of table_stats plus the copies of the slots not folded
// yet (read between two reads of the fold counter n). A fold adds the
// copies of closed slots (slotClose past their end) to the figures with
// an LWT conditioned on n, which also moves lo (the first slot not
// folded) and plo (the first slot of this fold); it then removes the
// copies' kind-4 rows and the slots. The next fold commits only once
// those removals are done: it is the same process's (which knows), or
// another's once the commit is cleanGrace old (its folder is presumed
// dead: it removes them itself, reading the slots again). So at any
// commit every kind-4 row of a slot below plo whose copy was folded is
// gone. (The grace is what keeps a copy that came after its slot was
// read, a writer's late one, from having its row removed as folded: no
// write lasts that long.)
//
// A kind-4 row with sw below plo is therefore a delta nobody folded (its
// writer died before the copy, or the copy came after its slot was
// folded): the sweep moves it to a current slot with an LWT on the row
// (IF sw = old) and copies it there. A delta is thus folded exactly
// once, and the figures after a crash are those of the committed writes
// once the sweep has run.
//
// Indexes: a delta's index figures and isz's entries carry the stamp of
// their write; DropIndex records the description version it ran at in
// the table row (dropped), and everything stamped at or below it belongs
// to the dropped index, in writes, folds, Counts and Recount.

const (
	slotMs = 2000
	// slotClose: a slot is folded once its end is this far in the past
	// (a writer picks its slot before its LWT and copies after it).
	slotClose = 10 * time.Second
	// slotAhead: slots past the reader's clock that Counts reads (other
	// writers' clocks may be ahead).
	slotAhead = 5
	// foldSlots bounds the slots one fold reads.
	foldSlots = 64
	// recountLease: a recount's lease lasts this long past its last
	// heartbeat; folds do not commit while it holds.
	recountLease = 30 * time.Second
	// orphanAge: a kind-4 row younger than this is never moved by the
	// sweep (its writer may still be copying it).
	orphanAge = time.Minute
	// cleanGrace: a fold's removals are finished by another process only
	// when the fold committed this long ago.
	cleanGrace = 30 * time.Second
	foldEvery  = time.Second
	// deleteGroup: kind-4 rows a fold removes per request.
	deleteGroup = 10
)

func slotOf(t time.Time) int64 { return t.UnixMilli() / slotMs }

// delta is one write's change of the figures; v stamps its index deltas.
type delta struct {
	items, size int64
	v           int64
	idx         map[string][2]int64 // entries, bytes
}

func (d *delta) zero() bool {
	return d.items == 0 && d.size == 0 && len(d.idx) == 0
}

func appendStr(out []byte, s string) []byte {
	out = binary.AppendUvarint(out, uint64(len(s)))
	return append(out, s...)
}

// reader decodes the varint encodings of this file.
type reader struct {
	b   []byte
	err bool
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

// bytes reads a length-prefixed field (it aliases the input).
func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err || n > uint64(len(r.b)) {
		r.err = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str() string { return string(r.bytes()) }

// count reads a number of fields to come; more than the bytes left is
// malformed.
func (r *reader) count() int {
	n := r.uvarint()
	if r.err || n > uint64(len(r.b)) {
		r.err = true
		return 0
	}
	return int(n)
}

var errBadStats = errors.New("cassandra: malformed table statistics value")

func (d *delta) encode() []byte {
	out := binary.AppendVarint(nil, d.items)
	out = binary.AppendVarint(out, d.size)
	out = binary.AppendVarint(out, d.v)
	out = binary.AppendUvarint(out, uint64(len(d.idx)))
	for _, n := range sortedKeys(d.idx) {
		out = appendStr(out, n)
		out = binary.AppendVarint(out, d.idx[n][0])
		out = binary.AppendVarint(out, d.idx[n][1])
	}
	return out
}

func decodeDelta(b []byte) (*delta, error) {
	r := &reader{b: b}
	d := &delta{items: r.varint(), size: r.varint(), v: r.varint()}
	n := r.count()
	for range n {
		name := r.str()
		c, s := r.varint(), r.varint()
		if d.idx == nil {
			d.idx = map[string][2]int64{}
		}
		d.idx[name] = [2]int64{c, s}
	}
	if r.err || len(r.b) != 0 {
		return nil, errBadStats
	}
	return d, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ixFig is one index's folded figures; m is the highest stamp folded in
// (the figures belong to a dropped index when m <= its drop version).
type ixFig struct{ count, size, m int64 }

// figures are a table's figures.
type figures struct {
	items, size int64
	idx         map[string]ixFig
}

func (f *figures) clone() *figures {
	c := &figures{items: f.items, size: f.size, idx: make(map[string]ixFig, len(f.idx))}
	for k, v := range f.idx {
		c.idx[k] = v
	}
	return c
}

// add adds d to f (sign -1 subtracts it); index deltas of dropped
// indexes are ignored, and an index's figures older than its drop start
// from zero.
func (f *figures) add(d *delta, sign int64, dropped map[string]int64) {
	f.items += sign * d.items
	f.size += sign * d.size
	for n, v := range d.idx {
		if d.v <= dropped[n] {
			continue
		}
		x := f.idx[n]
		if x.m <= dropped[n] {
			x = ixFig{}
		}
		x.count += sign * v[0]
		x.size += sign * v[1]
		x.m = max(x.m, d.v)
		if f.idx == nil {
			f.idx = map[string]ixFig{}
		}
		f.idx[n] = x
	}
}

func (f *figures) result(dropped map[string]int64) backend.TableStatsResult {
	res := backend.TableStatsResult{ItemCount: f.items, SizeBytes: f.size, Indexes: map[string]backend.IndexStats{}}
	for n, x := range f.idx {
		if x.m > dropped[n] && x.count > 0 {
			res.Indexes[n] = backend.IndexStats{ItemCount: x.count, SizeBytes: x.size}
		}
	}
	return res
}

func (f *figures) encode() []byte {
	out := binary.AppendVarint(nil, f.items)
	out = binary.AppendVarint(out, f.size)
	out = binary.AppendUvarint(out, uint64(len(f.idx)))
	for _, n := range sortedKeys(f.idx) {
		x := f.idx[n]
		out = appendStr(out, n)
		out = binary.AppendVarint(out, x.count)
		out = binary.AppendVarint(out, x.size)
		out = binary.AppendVarint(out, x.m)
	}
	return out
}

func decodeFigures(b []byte) (*figures, error) {
	f := &figures{idx: map[string]ixFig{}}
	if len(b) == 0 {
		return f, nil
	}
	r := &reader{b: b}
	f.items, f.size = r.varint(), r.varint()
	n := r.count()
	for range n {
		name := r.str()
		f.idx[name] = ixFig{count: r.varint(), size: r.varint(), m: r.varint()}
	}
	if r.err || len(r.b) != 0 {
		return nil, errBadStats
	}
	return f, nil
}

// entrySize is one index entry an item has, as isz keeps it.
type entrySize struct{ size, v int64 }

// iszFormat starts every isz value: a row written since the table
// statistics has a non-empty isz, even without entries (a null isz is an
// item written before them).
const iszFormat = 1

// emptyIsz is the isz of an item without entries (most items of most
// tables): shared, so such a write neither decodes nor allocates one.
var emptyIsz = encodeIsz(nil)

func encodeIsz(m map[string]entrySize) []byte {
	out := []byte{iszFormat}
	out = binary.AppendUvarint(out, uint64(len(m)))
	for _, n := range sortedKeys(m) {
		out = appendStr(out, n)
		out = binary.AppendVarint(out, m[n].size)
		out = binary.AppendVarint(out, m[n].v)
	}
	return out
}

// decodeIsz decodes an item's entries, without those of dropped indexes.
func decodeIsz(b []byte, dropped map[string]int64) (map[string]entrySize, error) {
	if len(b) == 0 || b[0] != iszFormat {
		return nil, errBadStats
	}
	r := &reader{b: b[1:]}
	n := r.count()
	m := make(map[string]entrySize, n)
	for range n {
		name := r.str()
		e := entrySize{size: r.varint(), v: r.varint()}
		if e.v > dropped[name] {
			m[name] = e
		}
	}
	if r.err || len(r.b) != 0 {
		return nil, errBadStats
	}
	return m, nil
}

// statsWrite is what a write adds for the statistics: the item row's new
// isz, and its delta (nil when the figures do not change) with its slot.
type statsWrite struct {
	isz []byte
	d   []byte
	sw  int64
}

// statsChange computes the statistics of change ch of item (t, pk, sk),
// read as old with entries oldIsz, computed at description version v.
// An item written before the statistics (no isz) has its old entries
// read from index_entries at the keys the change deletes.
func (b *Backend) statsChange(ctx context.Context, t int64, pk, sk []byte, dropped map[string]int64, v int64, old, oldIsz []byte, ch backend.Change) (*statsWrite, error) {
	size := b.opt.ItemSize.SizeOf
	var before map[string]entrySize
	switch {
	case bytes.Equal(oldIsz, emptyIsz):
	case oldIsz != nil:
		m, err := decodeIsz(oldIsz, dropped)
		if err != nil {
			return nil, backend.Wrap(backend.KindInternal, err, "cassandra: item index sizes")
		}
		before = m
	case old != nil:
		before = map[string]entrySize{}
		for _, k := range ch.DeleteIndex {
			if _, ok := before[k.Index]; ok {
				continue
			}
			h := backend.KeyHash(k.PK)
			var item []byte
			err := b.quorum(ctx, `SELECT item FROM index_entries WHERE t = ? AND idx = ? AND b = ? AND h = ? AND ipk = ? AND isk = ? AND bpk = ? AND bsk = ?`,
				t, k.Index, bucketOf(h), int64(h), skOf(k.PK), skOf(k.SK), pk, sk).Scan(&item)
			if err == nil {
				before[k.Index] = entrySize{size(item), v}
			} else if !errors.Is(err, gocql.ErrNotFound) {
				return nil, mapErr(err, "index entry size")
			}
		}
	}
	after := map[string]entrySize{}
	var item []byte
	if ch.Op == backend.Put {
		item = ch.Item
		for n, e := range before {
			after[n] = e
		}
		for _, k := range ch.DeleteIndex {
			delete(after, k.Index)
		}
		for _, e := range ch.PutIndex {
			after[e.Index] = entrySize{size(e.Item), v}
		}
	}
	d := &delta{v: v}
	if item != nil {
		d.items++
		d.size += size(item)
	}
	if old != nil {
		d.items--
		d.size -= size(old)
	}
	for n, a := range after {
		bf, had := before[n]
		c := int64(1)
		if had {
			c = 0
		}
		if c != 0 || a.size != bf.size {
			if d.idx == nil {
				d.idx = map[string][2]int64{}
			}
			d.idx[n] = [2]int64{c, a.size - bf.size}
		}
	}
	for n, bf := range before {
		if _, ok := after[n]; !ok {
			if d.idx == nil {
				d.idx = map[string][2]int64{}
			}
			d.idx[n] = [2]int64{-1, -bf.size}
		}
	}
	sw := &statsWrite{isz: emptyIsz}
	if len(after) > 0 {
		sw.isz = encodeIsz(after)
	}
	if !d.zero() {
		sw.d = d.encode()
	}
	return sw, nil
}

// slotFor is the slot of a delta committed now: never below the first
// slot not folded that this process knows of.
func (b *Backend) slotFor(t int64) int64 {
	s := slotOf(time.Now())
	b.stats.mu.Lock()
	defer b.stats.mu.Unlock()
	return max(s, b.stats.lo[t])
}

const insertCopy = `INSERT INTO stats_pending (t, s, pk, sk, seq, d) VALUES (?, ?, ?, ?, ?, ?)`

// copyDelta copies a committed delta to its slot (a failure leaves the
// kind-4 row to the sweep) and has this process fold the table. The
// copies of concurrent writers go together (copyLoop).
func (b *Backend) copyDelta(ctx context.Context, t int64, pk, sk []byte, seq int64, st *statsWrite) {
	if b.stats.skipCopy {
		return
	}
	r := &copyReq{t: t, s: st.sw, pk: pk, sk: sk, seq: seq, d: st.d, done: make(chan struct{})}
	c := b.stats
	c.mu.Lock()
	if c.closed {
		// Closing: the kind-4 row is left to the sweep.
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, r)
	if len(c.queue) == 1 {
		c.wake.Signal()
	}
	c.mu.Unlock()
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	b.noteCopied(t, st.sw)
}

// copyReq is one writer's copy waiting for copyLoop.
type copyReq struct {
	t, s   int64
	pk, sk []byte
	seq    int64
	d      []byte
	done   chan struct{}
}

// copyBatch bounds the copies of one request (Cassandra warns about
// batches over 5 KiB).
const copyBatch = 32

// copyLoop sends the waiting copies, all of them at each turn: one
// unlogged batch per slot partition (up to copyBatch copies), the
// batches in parallel; a writer waits for the turn that holds its copy.
// Under one writer a turn is one insert, as without it; under many, the
// node gets one request per partition and turn instead of one per write.
func (b *Backend) copyLoop() {
	c := b.stats
	defer close(c.copied)
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closed {
			c.wake.Wait()
		}
		q := c.queue
		c.queue = nil
		closed := c.closed
		c.mu.Unlock()
		if len(q) > 0 {
			b.sendCopies(q)
		}
		if closed {
			return
		}
	}
}

func (b *Backend) sendCopies(q []*copyReq) {
	ctx, cancel := context.WithTimeout(context.Background(), b.opt.Timeout+time.Second)
	defer cancel()
	type part struct{ t, s int64 }
	var parts [][]*copyReq
	idx := map[part]int{}
	for _, r := range q {
		k := part{r.t, r.s}
		i, ok := idx[k]
		if !ok || len(parts[i]) == copyBatch {
			i = len(parts)
			idx[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], r)
	}
	_ = parallel(len(parts), publishConc, func(i int) error {
		rs := parts[i]
		if len(rs) == 1 {
			r := rs[0]
			_ = b.query(ctx, insertCopy, r.t, r.s, r.pk, r.sk, r.seq, r.d).Exec()
		} else {
			batch := b.s.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
			batch.SetConsistency(b.cl)
			for _, r := range rs {
				batch.Query(insertCopy, r.t, r.s, r.pk, r.sk, r.seq, r.d)
			}
			_ = b.s.ExecuteBatch(batch)
		}
		for _, r := range rs {
			close(r.done)
		}
		return nil
	})
}

// addCopy adds the copy of a committed delta (when st has one) to a batch
// the writer sends anyway: its index entries' (items.go).
func (b *Backend) addCopy(batch *gocql.Batch, t int64, pk, sk []byte, seq int64, st *statsWrite) {
	if st == nil || st.d == nil || b.stats.skipCopy {
		return
	}
	batch.Query(insertCopy, t, st.sw, pk, sk, seq, st.d)
	b.noteCopied(t, st.sw)
}

// noteCopied has this process fold table t until slot s is folded.
func (b *Backend) noteCopied(t, s int64) {
	b.stats.mu.Lock()
	b.stats.dirty[t] = max(b.stats.dirty[t], s)
	b.stats.mu.Unlock()
}

// statsState is this process's view of the statistics: the tables it
// wrote deltas to (with the highest slot), the lo it last saw per table,
// the slots below which its own folds finished their removals, and one
// fold at a time per table.
type statsState struct {
	mu      sync.Mutex
	dirty   map[int64]int64
	lo      map[int64]int64
	cleaned map[int64]int64
	fold    map[int64]chan struct{}
	done    chan struct{}
	// closeAfter and orphanAge are slotClose and orphanAge (tests shorten
	// them); skipCopy leaves committed deltas uncopied (tests: a writer
	// that died after its LWT); skipClean stops a fold after its commit
	// (tests: a folder that died there); manual stops the background
	// folds (tests fold explicitly).
	closeAfter, orphanAge       time.Duration
	cleanGrace                  time.Duration
	skipCopy, skipClean, manual bool
	// failures counts background folds that failed (backend.Stats).
	failures atomic.Int64
	// queue: the copies waiting for copyLoop (wake: under mu); closed
	// stops the loop once the queue is sent.
	queue  []*copyReq
	wake   *sync.Cond
	closed bool
	copied chan struct{} // closed when copyLoop returns
}

func newStatsState() *statsState {
	s := &statsState{dirty: map[int64]int64{}, lo: map[int64]int64{}, cleaned: map[int64]int64{}, fold: map[int64]chan struct{}{}, done: make(chan struct{}),
		closeAfter: slotClose, orphanAge: orphanAge, cleanGrace: cleanGrace}
	s.wake = sync.NewCond(&s.mu)
	s.copied = make(chan struct{})
	return s
}

func (s *statsState) lock(t int64) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.fold[t]
	if c == nil {
		c = make(chan struct{}, 1)
		s.fold[t] = c
	}
	return c
}

func (s *statsState) forget(t int64) {
	s.mu.Lock()
	delete(s.dirty, t)
	delete(s.lo, t)
	delete(s.cleaned, t)
	delete(s.fold, t)
	s.mu.Unlock()
}

// statsRow is a table_stats row; at is when its last fold committed
// (the folder's clock, Unix ms).
type statsRow struct {
	n       int64
	fig     *figures
	lo, plo int64
	at      int64
	rc      *gocql.UUID
	rcAt    int64
}

// leased: a recount holds the row.
func (r *statsRow) leased() bool {
	return r.rc != nil && time.Now().UnixMilli()-r.rcAt < recountLease.Milliseconds()
}

// readStats reads a table's statistics row; nil when it has none.
func (b *Backend) readStats(ctx context.Context, t int64) (*statsRow, error) {
	r := &statsRow{}
	var n, lo, plo, at, rcAt *int64
	var fig []byte
	var rc gocql.UUID
	err := b.quorum(ctx, `SELECT n, fig, lo, plo, at, rc, rc_at FROM table_stats WHERE t = ?`, t).Scan(&n, &fig, &lo, &plo, &at, &rc, &rcAt)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(err, "table statistics")
	}
	if n == nil {
		return nil, nil // a row left by a removal
	}
	r.n, r.lo, r.plo, r.at, r.rcAt = *n, val(lo), val(plo), val(at), val(rcAt)
	if rc != (gocql.UUID{}) {
		r.rc = &rc
	}
	if r.fig, err = decodeFigures(fig); err != nil {
		return nil, backend.Wrap(backend.KindInternal, err, "cassandra: table statistics")
	}
	b.stats.mu.Lock()
	b.stats.lo[t] = max(b.stats.lo[t], r.lo)
	b.stats.mu.Unlock()
	return r, nil
}

// pendingCopy is a delta's copy in its slot.
type pendingCopy struct {
	s       int64
	pk, sk  []byte
	seq     int64
	d       *delta
	encoded []byte
}

// readSlots reads the copies of slots [from, to), foldSlots slots per
// query.
func (b *Backend) readSlots(ctx context.Context, t, from, to int64) ([]pendingCopy, error) {
	var out []pendingCopy
	for lo := from; lo < to; lo += foldSlots {
		slots := make([]int64, 0, foldSlots)
		for s := lo; s < min(lo+foldSlots, to); s++ {
			slots = append(slots, s)
		}
		iter := b.quorum(ctx, `SELECT s, pk, sk, seq, d FROM stats_pending WHERE t = ? AND s IN ?`, t, slots).PageSize(1000).Iter()
		var c pendingCopy
		for iter.Scan(&c.s, &c.pk, &c.sk, &c.seq, &c.encoded) {
			d, err := decodeDelta(c.encoded)
			if err != nil {
				iter.Close()
				return nil, backend.Wrap(backend.KindInternal, err, "cassandra: table statistics delta")
			}
			c.d, c.sk = d, skOf(c.sk)
			out = append(out, c)
			c = pendingCopy{}
		}
		if err := iter.Close(); err != nil {
			return nil, mapErr(err, "table statistics deltas")
		}
	}
	return out, nil
}

// cleanSlots removes the kind-4 rows of the copies in slots [from, to)
// (read again when copies is nil), then the slots that had copies (an
// empty slot has nothing to remove).
func (b *Backend) cleanSlots(ctx context.Context, t, from, to int64, copies []pendingCopy) error {
	if to <= from {
		return nil
	}
	if copies == nil {
		var err error
		if copies, err = b.readSlots(ctx, t, from, to); err != nil {
			return err
		}
	}
	// Unlogged batches of deleteGroup rows: one request each (a request
	// costs the node far more than the row), few enough partitions for
	// Cassandra not to warn about the batch.
	groups := (len(copies) + deleteGroup - 1) / deleteGroup
	err := parallel(groups, publishConc, func(g int) error {
		batch := b.s.NewBatch(gocql.UnloggedBatch).WithContext(ctx)
		batch.SetConsistency(b.cl)
		for _, c := range copies[g*deleteGroup : min((g+1)*deleteGroup, len(copies))] {
			batch.Query(`DELETE FROM items WHERE t = ? AND pk = ? AND kind = 4 AND sk = ? AND seq = ?`, t, c.pk, c.sk, c.seq)
		}
		return mapErr(b.s.ExecuteBatch(batch), "table statistics delta")
	})
	if err != nil {
		return err
	}
	return b.dropSlots(ctx, t, copies)
}

// dropSlots removes the slot partitions that copies were read from (a
// slot's copies come together: readSlots reads partition by partition).
func (b *Backend) dropSlots(ctx context.Context, t int64, copies []pendingCopy) error {
	var slots []int64
	for _, c := range copies {
		if len(slots) == 0 || slots[len(slots)-1] != c.s {
			slots = append(slots, c.s)
		}
	}
	return parallel(len(slots), publishConc, func(i int) error {
		return mapErr(b.query(ctx, `DELETE FROM stats_pending WHERE t = ? AND s = ?`, t, slots[i]).Exec(), "table statistics slot")
	})
}

// fold adds the table's closed slots to its figures, up to now (several
// commits of foldSlots slots when it is behind).
func (b *Backend) fold(ctx context.Context, t int64) error {
	mu := b.stats.lock(t)
	select {
	case mu <- struct{}{}:
	case <-ctx.Done():
		return mapErr(ctx.Err(), "table statistics fold")
	}
	defer func() { <-mu }()
	for attempt := 0; attempt < 50; attempt++ {
		st, err := b.readStats(ctx, t)
		if err != nil || st == nil || st.leased() {
			return err
		}
		b.stats.mu.Lock()
		cleaned := st.plo >= st.lo || b.stats.cleaned[t] >= st.lo
		b.stats.mu.Unlock()
		if !cleaned {
			if time.Now().UnixMilli()-st.at < b.stats.cleanGrace.Milliseconds() {
				return nil // its folder may still be removing its rows
			}
			if err := b.cleanSlots(ctx, t, st.plo, st.lo, nil); err != nil {
				return err
			}
			b.stats.mu.Lock()
			b.stats.cleaned[t] = max(b.stats.cleaned[t], st.lo)
			b.stats.mu.Unlock()
		}
		hi := min(slotOf(time.Now().Add(-b.stats.closeAfter)), st.lo+foldSlots)
		if hi <= st.lo {
			return nil
		}
		view, err := b.byID(ctx, t)
		if err != nil || view == nil {
			return err
		}
		copies, err := b.readSlots(ctx, t, st.lo, hi)
		if err != nil {
			return err
		}
		fig := st.fig.clone()
		for _, c := range copies {
			fig.add(c.d, 1, view.dropped)
		}
		applied, err := b.query(ctx, `UPDATE table_stats SET n = ?, fig = ?, lo = ?, plo = ?, at = ?, rc = null, rc_at = null WHERE t = ? IF n = ? AND rc = ?`,
			st.n+1, fig.encode(), hi, st.lo, time.Now().UnixMilli(), t, st.n, st.rc).MapScanCAS(map[string]any{})
		if err != nil {
			return mapErr(err, "table statistics fold")
		}
		if !applied {
			if err := backoff(ctx, min(attempt+1, 6)); err != nil {
				return err
			}
			continue
		}
		b.stats.mu.Lock()
		b.stats.lo[t] = max(b.stats.lo[t], hi)
		b.stats.mu.Unlock()
		if b.stats.skipClean {
			return nil
		}
		if err := b.cleanSlots(ctx, t, st.lo, hi, copies); err != nil {
			return err
		}
		b.stats.mu.Lock()
		b.stats.cleaned[t] = max(b.stats.cleaned[t], hi)
		b.stats.mu.Unlock()
		if hi < slotOf(time.Now().Add(-b.stats.closeAfter)) {
			continue // behind: fold the next slots
		}
		return nil
	}
	return backend.Errorf(backend.KindUnavailable, "cassandra: table statistics: fold did not settle (contention)")
}

// foldLoop folds, every foldEvery, the tables this process wrote deltas
// to, until their slots are folded.
func (b *Backend) foldLoop() {
	defer close(b.stats.done)
	tick := time.NewTicker(foldEvery)
	defer tick.Stop()
	for {
		select {
		case <-b.closing:
			return
		case <-tick.C:
		}
		b.stats.mu.Lock()
		var ts []int64
		for t := range b.stats.dirty {
			if !b.stats.manual {
				ts = append(ts, t)
			}
		}
		b.stats.mu.Unlock()
		for _, t := range ts {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			go func() {
				select {
				case <-b.closing:
					cancel()
				case <-ctx.Done():
				}
			}()
			err := b.fold(ctx, t)
			cancel()
			if err != nil && !backend.IsKind(err, backend.KindTableNotFound) {
				select {
				case <-b.closing:
				default:
					b.stats.failures.Add(1)
				}
			}
			b.stats.mu.Lock()
			if err == nil && b.stats.lo[t] > b.stats.dirty[t] {
				delete(b.stats.dirty, t)
			}
			b.stats.mu.Unlock()
		}
	}
}

// startFigures gives a new table its statistics row (zero figures).
func (b *Backend) startFigures(ctx context.Context, t int64) error {
	s := slotOf(time.Now())
	return mapErr(b.quorum(ctx, `INSERT INTO table_stats (t, n, fig, lo, plo) VALUES (?, 0, ?, ?, ?)`, t, (&figures{}).encode(), s, s).Exec(), "table statistics")
}

// forgetFigures removes a dead table's statistics (its kind-4 rows go
// with its item partitions).
func (b *Backend) forgetFigures(ctx context.Context, t int64) error {
	st, err := b.readStats(ctx, t)
	if err != nil {
		return err
	}
	if st != nil {
		// The slots that may hold copies: those after the last fold's
		// first, up to now (the slots of a table idle for long are read
		// near lo and near now only: copies in between would be a
		// writer's that died long ago, left as they are).
		hi := slotOf(time.Now()) + slotAhead + 1
		for from := st.plo; from < hi; from += foldSlots {
			if from >= st.lo+foldSlots && from < hi-2*foldSlots {
				from = hi - 2*foldSlots
			}
			copies, err := b.readSlots(ctx, t, from, min(from+foldSlots, hi))
			if err != nil {
				return err
			}
			if err := b.dropSlots(ctx, t, copies); err != nil {
				return err
			}
		}
	}
	b.stats.forget(t)
	return mapErr(b.query(ctx, `DELETE FROM table_stats WHERE t = ?`, t).Exec(), "table statistics")
}

// Counts answers the folded figures plus the copies not folded yet.
func (b *Backend) Counts(ctx context.Context, p backend.CountsParams) (*backend.CountsResult, error) {
	t := p.Table.ID
	folded := false
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := backoff(ctx, min(attempt, 6)); err != nil {
				return nil, err
			}
		}
		view, err := b.byID(ctx, t)
		if err != nil {
			return nil, err
		}
		if view == nil {
			return nil, backend.Errorf(backend.KindTableNotFound, "table %q not found", p.Table.Name)
		}
		st, err := b.readStats(ctx, t)
		if err != nil {
			return nil, err
		}
		if st == nil {
			return &backend.CountsResult{Stats: backend.TableStatsResult{Indexes: map[string]backend.IndexStats{}}}, nil
		}
		now := slotOf(time.Now())
		if now-st.lo > foldSlots/2 && !st.leased() && !folded {
			// Far behind (nobody folded the table lately): fold first
			// (once: a fold may have to wait for the last one's removals).
			folded = true
			if err := b.fold(ctx, t); err != nil {
				return nil, err
			}
			continue
		}
		copies, err := b.readSlots(ctx, t, st.lo, now+slotAhead+1)
		if err != nil {
			return nil, err
		}
		again, err := b.readStats(ctx, t)
		if err != nil {
			return nil, err
		}
		if again == nil || again.n != st.n {
			continue // a fold or a recount committed meanwhile
		}
		fig := st.fig
		if len(copies) > 0 {
			fig = fig.clone()
			for _, c := range copies {
				fig.add(c.d, 1, view.dropped)
			}
			b.stats.mu.Lock()
			b.stats.dirty[t] = max(b.stats.dirty[t], copies[len(copies)-1].s)
			b.stats.mu.Unlock()
		}
		return &backend.CountsResult{Counted: true, Stats: fig.result(view.dropped)}, nil
	}
}

// Recount counts the table partition by partition under a lease that
// stops folds from committing (so lo, plo and the folded figures stay as
// they are), minus the deltas of the kind-4 rows not folded yet, and
// commits that as the folded figures. Writes go on: a write committed
// before its partition was read is in the count and its delta is
// subtracted (a fold adds it later), one committed after is not in the
// count and is folded later.
func (b *Backend) Recount(ctx context.Context, p backend.CountsParams) (*backend.CountsResult, error) {
	t := p.Table.ID
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	id := gocql.TimeUUID()
	st, err := b.takeLease(ctx, t, id)
	if err != nil {
		return nil, err
	}
	view, err := b.byID(ctx, t)
	if err != nil {
		return nil, err
	}
	if view == nil {
		return nil, backend.Errorf(backend.KindTableNotFound, "table %q not found", p.Table.Name)
	}
	size := b.opt.ItemSize.SizeOf
	fig := &figures{idx: map[string]ixFig{}}
	legacy := false
	beat := time.Now()
	err = b.eachPartition(ctx, t, 0, 0xFFFFFFFF, nil, func(pk []byte) (bool, error) {
		if time.Since(beat) > recountLease/3 {
			ok, err := b.query(ctx, `UPDATE table_stats SET rc_at = ? WHERE t = ? IF rc = ?`, time.Now().UnixMilli(), t, id).MapScanCAS(map[string]any{})
			if err != nil {
				return false, mapErr(err, "recount lease")
			}
			if !ok {
				return false, backend.Errorf(backend.KindUnavailable, "cassandra: recount of table %q lost its lease", p.Table.Name)
			}
			beat = time.Now()
		}
		iter := b.quorum(ctx, `SELECT kind, sk, seq, item, isz, ob, sw FROM items WHERE t = ? AND pk = ? AND kind IN (0, 4)`, t, pk).PageSize(500).Iter()
		type r4 struct {
			sk  []byte
			seq int64
			ob  []byte
			sw  int64
		}
		var rows4 []r4
		var kind int8
		var sk, item, isz, ob []byte
		var seq int64
		var sw *int64
		for iter.Scan(&kind, &sk, &seq, &item, &isz, &ob, &sw) {
			switch kind {
			case 0:
				if item == nil {
					break
				}
				fig.items++
				fig.size += size(item)
				if isz == nil {
					legacy = true
					break
				}
				m, err := decodeIsz(isz, view.dropped)
				if err != nil {
					iter.Close()
					return false, backend.Wrap(backend.KindInternal, err, "cassandra: item index sizes")
				}
				for n, e := range m {
					x := fig.idx[n]
					x.count++
					x.size += e.size
					x.m = max(x.m, e.v)
					fig.idx[n] = x
				}
			case 4:
				rows4 = append(rows4, r4{skOf(sk), seq, ob, val(sw)})
			}
			sk, item, isz, ob, sw = nil, nil, nil, nil, nil
		}
		if err := iter.Close(); err != nil {
			return false, mapErr(err, "recount")
		}
		for _, r := range rows4 {
			folded, err := b.deltaFolded(ctx, t, pk, r.sk, r.seq, r.sw, st)
			if err != nil {
				return false, err
			}
			if folded {
				continue
			}
			d, err := decodeDelta(r.ob)
			if err != nil {
				return false, backend.Wrap(backend.KindInternal, err, "cassandra: table statistics delta")
			}
			fig.add(d, -1, view.dropped)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	if legacy {
		// Items written before the statistics have no isz: their index
		// figures are those of a full count of the entries (ADR 0009's,
		// not from one instant).
		ix, err := b.indexStats(ctx, t, size)
		if err != nil {
			return nil, err
		}
		fig.idx = map[string]ixFig{}
		for n, s := range ix {
			fig.idx[n] = ixFig{count: s.ItemCount, size: s.SizeBytes, m: view.version}
		}
	}
	applied, err := b.query(ctx, `UPDATE table_stats SET n = ?, fig = ?, rc = null, rc_at = null WHERE t = ? IF n = ? AND rc = ?`,
		st.n+1, fig.encode(), t, st.n, id).MapScanCAS(map[string]any{})
	if err != nil {
		return nil, mapErr(err, "recount")
	}
	if !applied {
		return nil, backend.Errorf(backend.KindUnavailable, "cassandra: recount of table %q lost its lease", p.Table.Name)
	}
	return b.Counts(ctx, p)
}

// takeLease gives the recount id the table's statistics row (creating it
// for a table that has none) and answers the row under the lease.
func (b *Backend) takeLease(ctx context.Context, t int64, id gocql.UUID) (*statsRow, error) {
	deadline := time.Now().Add(recountLease + 5*time.Second)
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if time.Now().After(deadline) {
				return nil, backend.Errorf(backend.KindUnavailable, "cassandra: another recount holds the table's statistics")
			}
			if err := backend.Backoff(ctx, min(attempt, 8), pendingWaitCeiling); err != nil {
				return nil, mapErr(err, "recount lease")
			}
		}
		st, err := b.readStats(ctx, t)
		if err != nil {
			return nil, err
		}
		now := time.Now()
		var applied bool
		if st == nil {
			s := slotOf(now)
			applied, err = b.query(ctx, `INSERT INTO table_stats (t, n, fig, lo, plo, rc, rc_at) VALUES (?, 0, ?, ?, ?, ?, ?) IF NOT EXISTS`,
				t, (&figures{}).encode(), s, s, id, now.UnixMilli()).MapScanCAS(map[string]any{})
		} else {
			if st.leased() {
				continue
			}
			applied, err = b.query(ctx, `UPDATE table_stats SET rc = ?, rc_at = ? WHERE t = ? IF n = ? AND rc = ?`,
				id, now.UnixMilli(), t, st.n, st.rc).MapScanCAS(map[string]any{})
		}
		if err != nil {
			return nil, mapErr(err, "recount lease")
		}
		if !applied {
			continue
		}
		if st, err = b.readStats(ctx, t); err != nil {
			return nil, err
		}
		if st == nil || st.rc == nil || *st.rc != id {
			continue
		}
		return st, nil
	}
}

// deltaFolded tells whether the kind-4 row (pk, sk, seq) of slot sw that
// a recount read is already in the folded figures st: its slot was
// folded and its copy was there. Slots below plo finished their removals
// before the last commit, so a row still there was never folded; for
// [plo, lo) the copy is looked up, and when it is gone (the removals ran
// since) the row is read again: a folded one was removed before its slot.
func (b *Backend) deltaFolded(ctx context.Context, t int64, pk, sk []byte, seq, sw int64, st *statsRow) (bool, error) {
	if sw >= st.lo || sw < st.plo {
		return false, nil
	}
	var x int64
	err := b.quorum(ctx, `SELECT seq FROM stats_pending WHERE t = ? AND s = ? AND pk = ? AND sk = ? AND seq = ?`, t, sw, pk, sk, seq).Scan(&x)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, gocql.ErrNotFound) {
		return false, mapErr(err, "recount")
	}
	err = b.quorum(ctx, `SELECT seq FROM items WHERE t = ? AND pk = ? AND kind = 4 AND sk = ? AND seq = ?`, t, pk, sk, seq).Scan(&x)
	if errors.Is(err, gocql.ErrNotFound) {
		return true, nil
	}
	return false, mapErr(err, "recount")
}

// deltaRow is a kind-4 row as the sweep reads it (wt: its writetime).
type deltaRow struct {
	sk, ob  []byte
	seq, sw int64
	wt      int64
}

// rehome moves the partition's kind-4 rows that no fold will see (their
// slot is below plo, they are older than orphanAge) to a current slot and
// copies them there; the sweep calls it with the rows it read from every
// partition.
func (b *Backend) rehome(ctx context.Context, t int64, pk []byte, rows []deltaRow, st *statsRow) (int, error) {
	old := time.Now().Add(-b.stats.orphanAge).UnixMicro()
	n := 0
	for _, r := range rows {
		if r.sw >= st.plo || r.wt >= old {
			continue
		}
		s := b.slotFor(t)
		applied, err := b.query(ctx, `UPDATE items SET sw = ? WHERE t = ? AND pk = ? AND kind = 4 AND sk = ? AND seq = ? IF sw = ?`,
			s, t, pk, r.sk, r.seq, r.sw).MapScanCAS(map[string]any{})
		if err != nil {
			return n, mapErr(err, "table statistics sweep")
		}
		if applied {
			b.copyDelta(ctx, t, pk, r.sk, r.seq, &statsWrite{d: r.ob, sw: s})
			n++
		}
	}
	return n, nil
}

// addDelta adds the statistics delta's kind-4 row to an item's batch.
func addDelta(batch *gocql.Batch, t int64, pk, sk []byte, nv int64, stw *statsWrite) {
	if stw != nil && stw.d != nil {
		batch.Query(`INSERT INTO items (t, pk, kind, sk, seq, ob, sw) VALUES (?, ?, 4, ?, ?, ?, ?)`, t, pk, sk, nv, stw.d, stw.sw)
	}
}
