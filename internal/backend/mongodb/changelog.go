package mongodb

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
)

// The change log (backend.ChangeLog) on single-document atomicity
// (ADR 0017, "Change log"):
//
//   - A write whose Change carries a Log keeps the record in the item
//     document, in the same single-document write as the item: the field
//     pl, an array of {r, d} in write order, r the record's identity
//     "<item _id>@<document version>" (versions never repeat) and d its
//     bytes. Before the write, the writer inserts a hint {_id: r, exp}
//     into the table's hint collection h<ID>, so the publisher knows which
//     documents hold pending records without scanning the table.
//   - The publisher moves pending records to the log collection l<ID>:
//     {_id: seqKey(Seq), s: Seq, r, at, d}, with a unique index on r. Seq
//     is the previous highest Seq plus one, so Seq values are contiguous;
//     an insert on a taken Seq or an already published r is refused by the
//     server atomically (FerretDB included), so concurrent publishers
//     (several servers) never publish a record twice nor leave a hole, and
//     each publisher handles a document's records in order, so one item's
//     records keep their commit order. A Seq can only be inserted once its
//     predecessor exists: no record appears later below one already read
//     (no late gaps). ReadLog and LogInfo publish first. In one process a
//     mutex per table serializes publishers; a pass reads the documents in
//     parallel and inserts its records in ordered batches.
//   - Every read of the log, the hints and the documents on these paths is
//     an _id equality (FerretDB's SQLite handler runs any other filter over
//     the whole collection): the highest and lowest Seq are found by point
//     lookups (the present Seqs are one interval), ReadLog looks records up
//     by Seq, and "is this record published" is "is its hint gone".
//   - A published record stays in its document until the item's next
//     write, which drops the records whose hint is gone (it holds the
//     item's version claim, so no update of a live document is needed:
//     FerretDB's updates are not atomic across connections).
//   - A hint is deleted once its document is at or past its version (every
//     record the document held up to it was then published), or once it
//     expired (the write never happened: its writer's lease ended).
//   - TrimLog deletes a prefix by At but turns the highest record into a
//     marker {x: true} instead of deleting it, so the highest Seq ever
//     assigned survives (LogInfo.Last, and the next Seq).

type logHint struct {
	ID  string `bson:"_id"`
	Exp int64  `bson:"exp"`
	T   int64  `bson:"t"` // when the hint was written (hintClock): the publishing order
}

// hintClock returns Unix nanoseconds, strictly increasing in this process,
// so a process's sequential writes are published in their order.
var hintClock = func() func() int64 {
	var mu sync.Mutex
	var last int64
	return func() int64 {
		mu.Lock()
		defer mu.Unlock()
		last = max(last+1, time.Now().UnixNano())
		return last
	}
}()

// logRec is a published record. Its _id is seqKey(Seq), a string: an _id
// equality is the one filter FerretDB's SQLite handler runs as a primary
// key lookup (every other filter, ranges and sorts included, reads the
// whole collection), so every read of the log on the hot paths is a point
// lookup of a Seq.
type logRec struct {
	ID  string `bson:"_id"`
	Seq int64  `bson:"s"`
	R   string `bson:"r"`
	At  int64  `bson:"at"` // Unix microseconds
	D   []byte `bson:"d"`
	X   bool   `bson:"x,omitempty"` // a trim marker (the highest Seq, trimmed)
}

// seqKey is the _id of the record with Seq s: fixed-width hex, so the
// string order is the Seq order.
func seqKey(s int64) string { return fmt.Sprintf("%016x", s) }

// pending is a record kept in an item document (field pl).
type pending struct {
	R string `bson:"r"`
	D []byte `bson:"d"`
}

func logName(id int64) string { return fmt.Sprintf("l%d", id) }

func (b *Backend) logColl(id int64) *mongo.Collection { return b.db.Collection(logName(id)) }
func (b *Backend) hintsColl(id int64) *mongo.Collection {
	return b.db.Collection(fmt.Sprintf("h%d", id))
}

func recordID(id string, v int64) string { return id + "@" + fmt.Sprintf("%016x", v) }

// hintVersion splits a hint's _id into the item _id and the version.
func hintVersion(h string) (string, int64, bool) {
	i := strings.LastIndexByte(h, '@')
	if i < 0 {
		return "", 0, false
	}
	v, err := strconv.ParseInt(h[i+1:], 16, 64)
	return h[:i], v, err == nil
}

// logCache keeps, per table, where the searches of the log start: a Seq
// that was present (at most the highest) and the lowest Seq known
// present. Both only grow, so a stale value is still a valid start.
type logCache struct {
	mu          sync.Mutex
	last, first map[int64]int64
}

func (c *logCache) get(tid int64) (last, first int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[tid], c.first[tid]
}

func (c *logCache) setLast(tid, s int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[int64]int64{}
	}
	c.last[tid] = max(c.last[tid], s)
}

func (c *logCache) setFirst(tid, s int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first == nil {
		c.first = map[int64]int64{}
	}
	c.first[tid] = max(c.first[tid], s)
}

// each runs f(0..n-1) with at most width calls at a time and returns the
// first error.
func each(n, width int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	errs := make([]error, n)
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = f(i)
		}(i)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lookups bounds the concurrent point lookups of one call (the pool is
// shared with the writers).
const lookups = 8

// readDocs reads the item documents ids name (repeats read once), up to
// lookups at a time; an absent document maps to nil.
func (b *Backend) readDocs(ctx context.Context, tid int64, ids []string) (map[string]*itemDoc, error) {
	docs := make(map[string]*itemDoc, len(ids))
	var uniq []string
	for _, id := range ids {
		if _, dup := docs[id]; !dup {
			docs[id] = nil
			uniq = append(uniq, id)
		}
	}
	read := make([]*itemDoc, len(uniq))
	if err := each(len(uniq), lookups, func(i int) (err error) {
		read[i], err = b.readDoc(ctx, b.items(tid), uniq[i])
		return err
	}); err != nil {
		return nil, err
	}
	for i, id := range uniq {
		docs[id] = read[i]
	}
	return docs, nil
}

// ensureLogIndex creates the unique index on r of the table's log once
// per process.
func (b *Backend) ensureLogIndex(ctx context.Context, id int64) error {
	k := logName(id) + "/r"
	b.mu.Lock()
	done := b.indexed[k]
	b.mu.Unlock()
	if done {
		return nil
	}
	_, err := b.logColl(id).Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: "r", Value: 1}}, Options: options.Index().SetName("r").SetUnique(true)})
	if err != nil {
		return translate(err, "mongodb: create the change log index")
	}
	b.mu.Lock()
	b.indexed[k] = true
	b.mu.Unlock()
	return nil
}

// hint records, before a write of document id to version v with a log
// record, that the document will hold a pending record.
func (b *Backend) hint(ctx context.Context, tid int64, id string, v int64, exp time.Time) error {
	_, err := b.hintsColl(tid).InsertOne(ctx, logHint{ID: recordID(id, v), Exp: exp.Add(b.lease).UnixMilli(), T: hintClock()})
	if err != nil && !isDup(err) {
		return translate(err, "mongodb: record a change log hint")
	}
	return nil
}

// hinted reports whether the hint of record r is still there. A record a
// document holds whose hint is gone is published: a hint is deleted only
// after its document's records up to it are in the log (or once its write
// can no longer happen, and then the document never held it).
func (b *Backend) hinted(ctx context.Context, tid int64, r string) (bool, error) {
	err := b.hintsColl(tid).FindOne(ctx, bson.D{{Key: "_id", Value: r}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, translate(err, "mongodb: read a change log hint")
	}
	return true, nil
}

// unpublished returns the pending records of a document that may not be
// in the log yet: those whose hint is still there (one point lookup each;
// a record published but whose hint is not deleted yet is kept, and the
// publisher finds it published). The rest are dropped by the write that
// carries the list over.
func (b *Backend) unpublished(ctx context.Context, tid int64, pl []pending) ([]pending, error) {
	if len(pl) == 0 {
		return nil, nil
	}
	keep := make([]bool, len(pl))
	if err := each(len(pl), lookups, func(i int) (err error) {
		keep[i], err = b.hinted(ctx, tid, pl[i].R)
		return err
	}); err != nil {
		return nil, err
	}
	var out []pending
	for i, p := range pl {
		if keep[i] {
			out = append(out, p)
		}
	}
	return out, nil
}

// tableLocks serializes one kind of work per table in this process (the
// change log publisher, the statistics fold).
type tableLocks struct {
	mu sync.Mutex
	m  map[int64]*sync.Mutex
}

func (p *tableLocks) lock(id int64) func() {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[int64]*sync.Mutex{}
	}
	m := p.m[id]
	if m == nil {
		m = &sync.Mutex{}
		p.m[id] = m
	}
	p.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// rec reads the record (or trim marker) with Seq s; nil when absent.
func (b *Backend) rec(ctx context.Context, tid, s int64) (*logRec, error) {
	if s <= 0 {
		return nil, nil
	}
	var r logRec
	err := b.logColl(tid).FindOne(ctx, bson.D{{Key: "_id", Value: seqKey(s)}}).Decode(&r)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(err, "mongodb: read the change log")
	}
	return &r, nil
}

// The present Seqs of a log are always one interval [first, last]:
// publishers insert Seq s only after s-1 exists, trims delete a prefix (in
// Seq order) and never the highest record (it becomes a marker), and a
// marker is only ever the lowest present record. So the highest and the
// lowest are found by point lookups: a gallop and a binary search.

// lastRec is the record with the highest Seq (a trim marker included),
// nil when the log is empty.
func (b *Backend) lastRec(ctx context.Context, tid int64) (*logRec, error) {
	from, _ := b.logc.get(tid)
	lo, err := b.rec(ctx, tid, max(from, 1))
	if err != nil {
		return nil, err
	}
	if lo == nil {
		// No known start (a new process, or trimmed past it): read the
		// whole log once (a range read on MongoDB, a scan on FerretDB).
		var r logRec
		err := b.logColl(tid).FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&r)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, nil
		}
		if err != nil {
			return nil, translate(err, "mongodb: read the change log")
		}
		lo = &r
	}
	// lo is present, so every Seq from lo to the highest is: gallop up,
	// then halve the gap.
	hi := int64(0)
	for step := int64(1); hi == 0; step *= 2 {
		r, err := b.rec(ctx, tid, lo.Seq+step)
		if err != nil {
			return nil, err
		}
		if r == nil {
			hi = lo.Seq + step
		} else {
			lo = r
		}
	}
	for hi-lo.Seq > 1 {
		mid := lo.Seq + (hi-lo.Seq)/2
		r, err := b.rec(ctx, tid, mid)
		if err != nil {
			return nil, err
		}
		if r != nil {
			lo = r
		} else {
			hi = mid
		}
	}
	b.logc.setLast(tid, lo.Seq)
	return lo, nil
}

// firstRec is the present record (or marker) with the lowest Seq, given
// the highest, last.
func (b *Backend) firstRec(ctx context.Context, tid int64, last *logRec) (*logRec, error) {
	_, f := b.logc.get(tid)
	lo := int64(0) // absent (or 0)
	if f > 0 && f <= last.Seq {
		r, err := b.rec(ctx, tid, f)
		if err != nil {
			return nil, err
		}
		if r != nil {
			return r, nil // the lowest Seq only grows: f still is
		}
		lo = f
	}
	hi := last
	if hi.Seq-lo > 1 {
		// Mostly nothing was trimmed since: try lo+1 first.
		r, err := b.rec(ctx, tid, lo+1)
		if err != nil {
			return nil, err
		}
		if r != nil {
			hi = r
		} else {
			lo++
		}
	}
	for hi.Seq-lo > 1 {
		mid := lo + (hi.Seq-lo)/2
		r, err := b.rec(ctx, tid, mid)
		if err != nil {
			return nil, err
		}
		if r != nil {
			hi = r
		} else {
			lo = mid
		}
	}
	b.logc.setFirst(tid, hi.Seq)
	return hi, nil
}

// publish moves every pending record of an acknowledged write to the log:
// it reads the hints, then (in parallel) their documents, and inserts the
// documents' unpublished records up to each hint's record, in hint order
// and in each document's order, in ordered batches at the next Seqs. The
// hints done with are deleted last.
func (b *Backend) publish(ctx context.Context, tid int64) error {
	defer b.pubs.lock(tid)()
	if err := b.ensureLogIndex(ctx, tid); err != nil {
		return err
	}
	start := time.Now().UnixMilli()
	cur, err := b.hintsColl(tid).Find(ctx, bson.D{})
	if err != nil {
		return translate(err, "mongodb: read change log hints")
	}
	var hints []logHint
	if err := cur.All(ctx, &hints); err != nil {
		return translate(err, "mongodb: read change log hints")
	}
	if len(hints) == 0 {
		return nil
	}
	sort.Slice(hints, func(i, j int) bool {
		if hints[i].T != hints[j].T {
			return hints[i].T < hints[j].T
		}
		return hints[i].ID < hints[j].ID
	})
	// The documents, read after the hints: a write acknowledged before the
	// hints were read is in them.
	hinted := map[string]bool{}
	var ids []string
	for _, h := range hints {
		hinted[h.ID] = true
		if id, _, ok := hintVersion(h.ID); ok {
			ids = append(ids, id)
		}
	}
	docs, err := b.readDocs(ctx, tid, ids)
	if err != nil {
		return err
	}
	var todo []pending
	var done []string
	seen := map[string]bool{}
	for _, h := range hints {
		id, hv, ok := hintVersion(h.ID)
		if !ok {
			done = append(done, h.ID)
			continue
		}
		d := docs[id]
		at := -1
		if d != nil {
			for i, p := range d.pl {
				if p.R == h.ID {
					at = i
				}
			}
		}
		for i := 0; i <= at; i++ {
			p := d.pl[i]
			if seen[p.R] {
				continue
			}
			seen[p.R] = true
			if !hinted[p.R] {
				// An earlier record of the document whose hint was not
				// read: published (hint gone), or hinted after the read.
				still, err := b.hinted(ctx, tid, p.R)
				if err != nil {
					return err
				}
				if !still {
					continue
				}
			}
			todo = append(todo, p)
		}
		// Done with the hint once its document is at or past its version
		// (its record, if the write carried one, is published now), or
		// once it expired before the documents were read (the write
		// never happened).
		if (d != nil && d.v >= hv) || h.Exp < start {
			done = append(done, h.ID)
		}
	}
	if err := b.insertRecs(ctx, tid, todo); err != nil {
		return err
	}
	for len(done) > 0 {
		n := min(len(done), 500)
		in := make(bson.A, n)
		for i, h := range done[:n] {
			in[i] = h
		}
		if _, err := b.hintsColl(tid).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}}); err != nil {
			return translate(err, "mongodb: delete change log hints")
		}
		done = done[n:]
	}
	return nil
}

// publishBatch bounds one insert of records (count and bytes). At most
// 100 records: FerretDB v1.24 splits an insert into batches of 100 and,
// for an ordered insert, goes on with the next batch after a failed one
// (handler/msg_insert.go), which would insert Seqs above a hole; within
// one batch it stops at the first error, as MongoDB does.
const (
	publishBatch      = 100
	publishBatchBytes = 4 << 20
)

// insertRecs inserts the records, in order, at the next Seqs, skipping
// those already in the log (published by another publisher: the unique
// index on r refuses them).
func (b *Backend) insertRecs(ctx context.Context, tid int64, todo []pending) error {
	if len(todo) == 0 {
		return nil
	}
	coll := b.logColl(tid)
	last, err := b.lastRec(ctx, tid)
	if err != nil {
		return err
	}
	for conflicts := 0; len(todo) > 0; {
		n, size := 0, 0
		for n < len(todo) && n < publishBatch && (n == 0 || size+len(todo[n].D) <= publishBatchBytes) {
			size += len(todo[n].D)
			n++
		}
		seq, at := int64(1), time.Now().UnixMicro()
		if last != nil {
			seq = last.Seq + 1
			at = max(at, last.At) // At never decreases with Seq
		}
		recs := make([]logRec, n)
		docs := make([]any, n)
		for i := range recs {
			recs[i] = logRec{ID: seqKey(seq + int64(i)), Seq: seq + int64(i), R: todo[i].R, At: at, D: nz(todo[i].D)}
			docs[i] = recs[i]
		}
		_, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
		ok := n
		if err != nil {
			var bwe mongo.BulkWriteException
			if !isDup(err) || !errors.As(err, &bwe) || len(bwe.WriteErrors) == 0 {
				return translate(err, "mongodb: publish change records")
			}
			ok = n
			for _, we := range bwe.WriteErrors {
				ok = min(ok, we.Index)
			}
		}
		if ok > 0 {
			last = &recs[ok-1]
			b.logc.setLast(tid, last.Seq)
			todo = todo[ok:]
		}
		if err == nil {
			continue
		}
		// todo[0] was refused at Seq s: the Seq is taken (another
		// publisher), or its record is in the log already.
		if conflicts++; conflicts > 10000 {
			return backend.Errorf(backend.KindUnavailable, "mongodb: change log publication keeps conflicting")
		}
		s := seq + int64(ok)
		taken, err := b.rec(ctx, tid, s)
		if err != nil {
			return err
		}
		if taken != nil {
			if taken.R == todo[0].R {
				todo = todo[1:]
			}
			last = taken
			continue
		}
		// Seq s is free now. If s-1 is present, s was never inserted (a
		// trim deletes s-1 before s, and s-1 is there after s was seen
		// missing): the refused key was r, the record is published.
		prev, err := b.rec(ctx, tid, s-1)
		if err != nil {
			return err
		}
		if prev != nil {
			todo = todo[1:]
			last = prev
			continue
		}
		// Trimmed meanwhile: find the highest again and retry.
		if last, err = b.lastRec(ctx, tid); err != nil {
			return err
		}
	}
	return nil
}

// ReadLog implements backend.ChangeLog. After publishing, the records are
// point lookups from After+1 (in parallel, in growing windows) up to the
// highest Seq, Limit or MaxBytes; a read of a large share of the log is
// one range read instead.
func (b *Backend) ReadLog(ctx context.Context, p backend.ReadLogParams) (*backend.ReadLogResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	tid := p.Table.ID
	if err := b.publish(ctx, tid); err != nil {
		return nil, err
	}
	res := &backend.ReadLogResult{}
	last, err := b.lastRec(ctx, tid)
	if err != nil || last == nil || last.Seq <= p.After {
		return res, err
	}
	limit := max(p.Limit, 1)
	if n := min(int64(limit), last.Seq-p.After); n >= 32 {
		// A large share of the log (a reader far behind, a short log):
		// one range read costs less than n lookups, even as a scan.
		first, err := b.firstRec(ctx, tid, last)
		if err != nil {
			return nil, err
		}
		if n*4 >= last.Seq-first.Seq+1 {
			return b.readLogRange(ctx, tid, p, limit)
		}
	}
	next, size, width := p.After+1, 0, 4
	for len(res.Records) < limit && next <= last.Seq {
		n := min(int64(width), last.Seq-next+1, int64(limit-len(res.Records)))
		recs := make([]*logRec, n)
		if err := each(int(n), lookups, func(i int) (err error) {
			recs[i], err = b.rec(ctx, tid, next+int64(i))
			return err
		}); err != nil {
			return nil, err
		}
		from := next
		next += n
		for i, r := range recs {
			if r == nil {
				// Trimmed: continue at the lowest record present.
				first, err := b.firstRec(ctx, tid, last)
				if err != nil {
					return nil, err
				}
				if first.Seq <= from+int64(i) {
					return res, nil // a trim in progress; the next read goes on
				}
				next = first.Seq
				break
			}
			if r.X {
				continue // a trim marker
			}
			if p.MaxBytes > 0 && len(res.Records) > 0 && size+len(r.D) > p.MaxBytes {
				return res, nil
			}
			size += len(r.D)
			res.Records = append(res.Records, backend.LogRecord{Seq: r.Seq, At: time.UnixMicro(r.At), Data: nz(r.D)})
		}
		width = min(width*2, 64)
	}
	return res, nil
}

// readLogRange is ReadLog as one range read of the log in Seq order (an _id
// index range on MongoDB; on FerretDB/SQLite a read of the whole log).
func (b *Backend) readLogRange(ctx context.Context, tid int64, p backend.ReadLogParams, limit int) (*backend.ReadLogResult, error) {
	cur, err := b.logColl(tid).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: seqKey(p.After)}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, translate(err, "mongodb: read the change log")
	}
	defer cur.Close(ctx)
	res := &backend.ReadLogResult{}
	size := 0
	for cur.Next(ctx) {
		var r logRec
		if err := cur.Decode(&r); err != nil {
			return nil, translate(err, "mongodb: decode a change record")
		}
		if r.X {
			continue
		}
		if p.MaxBytes > 0 && len(res.Records) > 0 && size+len(r.D) > p.MaxBytes {
			break
		}
		size += len(r.D)
		res.Records = append(res.Records, backend.LogRecord{Seq: r.Seq, At: time.UnixMicro(r.At), Data: nz(r.D)})
	}
	if err := cur.Err(); err != nil {
		return nil, translate(err, "mongodb: read the change log")
	}
	return res, nil
}

// LogInfo implements backend.ChangeLog. The present records are the
// interval from the lowest to the highest Seq (less a marker at its
// start).
func (b *Backend) LogInfo(ctx context.Context, p backend.LogInfoParams) (*backend.LogInfoResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	if err := b.publish(ctx, p.Table.ID); err != nil {
		return nil, err
	}
	last, err := b.lastRec(ctx, p.Table.ID)
	if err != nil || last == nil {
		return &backend.LogInfoResult{}, err
	}
	first, err := b.firstRec(ctx, p.Table.ID, last)
	if err != nil {
		return nil, err
	}
	f := first.Seq
	if first.X {
		f++
	}
	res := &backend.LogInfoResult{Last: last.Seq}
	if f <= last.Seq {
		res.First, res.Count = f, last.Seq-f+1
	}
	return res, nil
}

// TrimLog implements backend.ChangeLog: the records before the first one
// at or after Before (found by halving: At never decreases with Seq) are
// deleted as one _id range, and the highest record, when it is that old,
// becomes a marker {x: true}, so its Seq stays the highest ever assigned.
func (b *Backend) TrimLog(ctx context.Context, p backend.TrimLogParams) (*backend.TrimLogResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	tid := p.Table.ID
	defer b.pubs.lock(tid)()
	last, err := b.lastRec(ctx, tid)
	if err != nil || last == nil {
		return &backend.TrimLogResult{}, err
	}
	first, err := b.firstRec(ctx, tid, last)
	if err != nil {
		return nil, err
	}
	before := p.Before.UnixMicro()
	// cut: the lowest Seq kept, at most last.Seq.
	cut := last.Seq
	if first.At >= before {
		cut = first.Seq
	} else if last.At >= before {
		lo, hi := first.Seq, last.Seq // At(lo) < before <= At(hi)
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			r, err := b.rec(ctx, tid, mid)
			if err != nil {
				return nil, err
			}
			if r == nil || r.At < before {
				lo = mid
			} else {
				hi = mid
			}
		}
		cut = hi
	}
	res := &backend.TrimLogResult{}
	if cut > first.Seq {
		dr, err := b.logColl(tid).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{
			{Key: "$gte", Value: seqKey(first.Seq)}, {Key: "$lt", Value: seqKey(cut)}}}})
		if err != nil {
			return nil, translate(err, "mongodb: trim the change log")
		}
		res.Removed = dr.DeletedCount
		if first.X && res.Removed > 0 {
			res.Removed-- // the marker was not a record
		}
		b.logc.setFirst(tid, cut)
	}
	if !last.X && last.At < before {
		// Only trims write a present record; publishers only insert.
		m := logRec{ID: last.ID, Seq: last.Seq, R: last.R, At: last.At, D: []byte{}, X: true}
		ur, err := b.logColl(tid).ReplaceOne(ctx, bson.D{{Key: "_id", Value: last.ID}}, m)
		if err != nil {
			return nil, translate(err, "mongodb: trim the change log")
		}
		res.Removed += ur.MatchedCount
	}
	return res, nil
}

var _ backend.ChangeLog = (*Backend)(nil)
