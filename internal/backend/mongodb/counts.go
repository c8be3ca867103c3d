package mongodb

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
)

// Table statistics kept with every write (backend.TableCounter, ADR 0058)
// on single-document atomicity.
//
// A document contributes one item and the size of its item bytes when it
// holds an item, and per index field X one entry and the size of its
// projection. A write changes the table's figures by the contribution of
// the new document minus the old one's, and that delta has to reach the
// figures exactly once although the only atomic unit is one document:
//
//   - The write appends its delta {r, w, t, n, b, x} to the document's
//     field sd (its pending deltas, one binary JSON value) in the same
//     single-document write as the item, r naming the write's hint: the
//     version claim it won (<item _id>@<version hex>@<generation>,
//     items.go), which a write that changes the figures leaves in place
//     instead of deleting it, or for a document's first version, which
//     needs no claim, a hint <item _id>@<16 zeros>@i<nonce> inserted
//     before it in the same collection c<ID>. A delta is real exactly
//     when a document holds it. w is the attempt's nonce, kept in the
//     hint too: a claim a fold deleted can be inserted again under the
//     same _id by a writer that read the document long before (its
//     write then fails); that claim is not the hint of the delta the
//     document still carries.
//   - The figures are documents of st<ID>: {_id: seqKey(n), n, c
//     (counted), i, b, x, t, h}; the one with the highest n is the
//     table's. A fold reads the latest, F(n), deletes the hints F(n)
//     consumed (h), reads the hints, then their documents, adds the deltas
//     the documents hold whose hints it read (the writes of this process
//     whose outcome it knows need no read: landed ones hold the delta
//     they sent), and inserts F(n+1) listing the hints it is done with.
//     Inserting a unique _id is the one conditional write FerretDB
//     applies atomically, so one fold alone
//     makes F(n+1); a hint is deleted only once a figures document that
//     consumed it exists, and every fold first deletes the latest one's
//     hints, so a delta whose hint is gone was folded and one whose hint
//     a fold reads was not.
//   - A fold is done with a hint once its document is past the hint's
//     version (the write it names made the next version, or lost it), or
//     a lease after the hint expired (its writer's lease ended without
//     the write).
//   - A document's pending deltas that were folded are dropped by its next
//     write, never by an update outside the version claim (FerretDB's
//     updates are not atomic across connections); carrying a folded one
//     on is harmless (its hint is gone, no fold adds it). A delta's t is
//     taken when its hint was acknowledged, and a fold's t is below the
//     time it started and below every hint it left pending (minus
//     clockMargin, the clock difference tolerated between servers), so a
//     delta older than the latest figures' t was folded; the writer keeps
//     its process's own younger ones and looks the others' hints up (one
//     query).
//   - A fold that inserted F(n+1) after F(n+1) had been made and deleted
//     (folds run on; older figures are deleted once a newer one exists)
//     finds a higher one, deletes its own and deletes no hint.
//
// A table created before this counted has no figures document: its
// figures are unknown until Recount, which counts its documents (minus
// the pending deltas whose hints are still there: a later fold adds them)
// and inserts the next figures document as a fold does.

// figIdx is one index field's figures, or a delta of them.
type figIdx struct {
	F string `bson:"f" json:"f"` // the index field suffix (hex of the index name)
	N int64  `bson:"n" json:"n"`
	B int64  `bson:"b" json:"b"`
}

// statDelta is a write's change of the figures, pending in its document
// (field sd) until a fold consumed it.
type statDelta struct {
	R string   `json:"r"` // the hint's _id
	W string   `json:"w"` // the hint's nonce (claimDoc.W)
	T int64    `json:"t"` // when the hint was acknowledged (ms)
	N int64    `json:"n,omitempty"`
	B int64    `json:"b,omitempty"`
	X []figIdx `json:"x,omitempty"`
}

// figDoc is a table's figures after the fold numbered N.
type figDoc struct {
	ID string   `bson:"_id"`
	N  int64    `bson:"n"`
	C  bool     `bson:"c"` // counted: the figures are known
	I  int64    `bson:"i"`
	B  int64    `bson:"b"`
	X  []figIdx `bson:"x,omitempty"`
	T  int64    `bson:"t"`           // every delta older (ms) is folded
	H  []string `bson:"h,omitempty"` // the hints this fold is done with
}

const (
	// foldBatch bounds the hints one fold reads (and one figures
	// document lists).
	foldBatch = 5000
	// maxPending: a write that would carry more pending deltas than this
	// folds the table first.
	maxPending = 16
	// foldEvery is the period of the background fold of the tables
	// written in this process.
	foldEvery = time.Second
	// clockMargin is the difference between servers' clocks a fold's
	// watermark tolerates.
	clockMargin = 2000 // ms
)

func (b *Backend) figures(id int64) *mongo.Collection {
	return b.db.Collection(fmt.Sprintf("st%d", id))
}

var hintNonce atomic.Uint64

func init() { hintNonce.Store(uint64(randomID())) }

// nonce names one write attempt.
func nonce() string { return strconv.FormatUint(hintNonce.Add(1), 36) }

// firstHintID names the hint of an attempt w to insert document id's
// first version (a claim's name with version 0 and a generation no claim
// has).
func firstHintID(id, w string) string {
	return fmt.Sprintf("%s@%016x@i%s", id, 0, w)
}

// hintBase splits a hint's _id (a claim's or a first version's) into the
// item _id and the version the write started from.
func hintBase(h string) (string, int64, bool) {
	i := strings.LastIndexByte(h, '@')
	if i < 0 {
		return "", 0, false
	}
	return hintVersion(h[:i])
}

// contribution is what a document adds to its table's figures.
type contribution struct {
	n, b int64
	x    map[string][2]int64
}

func (b *Backend) contributionOf(d *itemDoc) contribution {
	c := contribution{x: map[string][2]int64{}}
	if d == nil {
		return c
	}
	if d.hasItem {
		c.n, c.b = 1, b.size.SizeOf(d.item)
	}
	for f, e := range d.idx {
		c.x[f] = [2]int64{1, b.size.SizeOf(e.proj)}
	}
	return c
}

// deltaOf is the change of the figures from document old to nw; false
// when there is none.
func (b *Backend) deltaOf(old, nw *itemDoc) (statDelta, bool) {
	o, n := b.contributionOf(old), b.contributionOf(nw)
	d := statDelta{N: n.n - o.n, B: n.b - o.b}
	for f, v := range n.x {
		if w := o.x[f]; v != w {
			d.X = append(d.X, figIdx{F: f, N: v[0] - w[0], B: v[1] - w[1]})
		}
	}
	for f, w := range o.x {
		if _, ok := n.x[f]; !ok {
			d.X = append(d.X, figIdx{F: f, N: -w[0], B: -w[1]})
		}
	}
	sort.Slice(d.X, func(i, j int) bool { return d.X[i].F < d.X[j].F })
	return d, d.N != 0 || d.B != 0 || len(d.X) > 0
}

// unsent is an error of a write before anything of it could be applied.
type unsent struct {
	err  error
	what string
}

func (u unsent) Error() string { return u.err.Error() }
func (u unsent) Unwrap() error { return u.err }

// putDoc writes nd as the next version of cur (nil: absent) with the
// statistics deltas it carries: true when applied (or when there was
// nothing to write), false when another writer got there first.
func (b *Backend) putDoc(ctx context.Context, tid int64, cur, nd *itemDoc, exp time.Time) (bool, error) {
	carried, err := b.carried(ctx, tid, cur)
	if err != nil {
		return false, unsent{err, "mongodb: read statistics hints"}
	}
	nd.sd = carried
	delta, changes := b.deltaOf(cur, nd)
	coll := b.items(tid)
	w := nonce()
	if cur == nil {
		if !changes && len(nd.pl) == 0 && len(nd.pre) == 0 && nd.lock == nil {
			return true, nil // nothing to keep: not inserted
		}
		if changes {
			h := firstHintID(nd.id, w)
			if _, err := b.claims(tid).InsertOne(ctx, claimDoc{ID: h, Exp: exp.UnixMilli(), T: nowMs(), W: w}); err != nil {
				return false, unsent{err, "mongodb: record a statistics hint"}
			}
			delta.R, delta.W, delta.T = h, w, nowMs()
			nd.sd = append(nd.sd, delta)
			b.dirty(tid)
		}
		_, err := coll.InsertOne(ctx, nd.bson())
		if changes && (err == nil || isDup(err)) {
			b.outcome(tid, delta, err == nil)
		}
		if isDup(err) {
			return false, nil
		}
		if err != nil {
			return false, translate(err, "mongodb: write item")
		}
		return true, nil
	}
	ok, gen, err := b.claimVersion(ctx, tid, nd.id, cur.v, exp, w)
	if err != nil {
		// A claim won but not used expires with the lease: nothing of
		// this write was applied.
		return false, unsent{err, "mongodb: claim item version"}
	}
	if !ok {
		return false, nil
	}
	if changes {
		delta.R, delta.W, delta.T = claimID(nd.id, cur.v, gen), w, nowMs()
		nd.sd = append(nd.sd, delta)
		b.dirty(tid) // the fold deletes the claim
	}
	r, err := coll.ReplaceOne(ctx, bson.D{{Key: "_id", Value: nd.id}, {Key: "v", Value: cur.v}}, nd.bson())
	if err != nil {
		return false, translate(err, "mongodb: write item")
	}
	if changes {
		b.outcome(tid, delta, r.MatchedCount == 1)
	}
	if r.MatchedCount != 1 {
		return false, nil
	}
	if !changes {
		b.dropClaims(ctx, tid, nd.id, cur.v, gen)
	}
	return true, nil
}

// carried is the pending deltas of cur that are not known to be folded.
// A document written faster than the folds run folds its table first, so
// that documents do not grow.
func (b *Backend) carried(ctx context.Context, tid int64, cur *itemDoc) ([]statDelta, error) {
	if cur == nil || len(cur.sd) == 0 {
		return nil, nil
	}
	// Dropped without a lookup: the deltas older than the watermark and
	// the ones a fold this process saw consumed. Kept without one: this
	// process's own writes not seen folded (carrying a delta that another
	// server's fold consumed is harmless: no fold adds it again, its hint
	// being gone, and the next write looks it up).
	var keep, young []statDelta
	b.mu.Lock()
	mark := b.marks[tid]
	for _, d := range cur.sd {
		_, folded := b.folded[tid][d.R]
		o, mine := b.outcomes[tid][d.R]
		mine = mine && o.delta.W == d.W
		switch {
		case d.T < mark || folded:
		case mine:
			keep = append(keep, d)
		default:
			young = append(young, d)
		}
	}
	b.mu.Unlock()
	if len(young) > 0 {
		found, err := b.unfolded(ctx, tid, young)
		if err != nil {
			return nil, err
		}
		keep = append(keep, found...)
	}
	if len(keep) < maxPending {
		return keep, nil
	}
	if _, _, err := b.fold(ctx, tid); err != nil {
		return nil, err
	}
	return b.unfolded(ctx, tid, keep)
}

// unfolded returns the pending deltas whose hints are still there (the
// others were folded).
func (b *Backend) unfolded(ctx context.Context, tid int64, sd []statDelta) ([]statDelta, error) {
	in := make(bson.A, len(sd))
	for i, d := range sd {
		in[i] = d.R
	}
	cur, err := b.claims(tid).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "w", Value: 1}}))
	if err != nil {
		return nil, translate(err, "mongodb: read statistics hints")
	}
	var there []claimDoc
	if err := cur.All(ctx, &there); err != nil {
		return nil, translate(err, "mongodb: read statistics hints")
	}
	has := make(map[string]string, len(there))
	for _, h := range there {
		has[h.ID] = h.W
	}
	var out []statDelta
	for _, d := range sd {
		if w, ok := has[d.R]; ok && w == d.W {
			out = append(out, d)
		}
	}
	return out, nil
}

// writeOutcome is what a write of this process that changed the figures
// did: landed (its document holds delta) or lost (its document is past
// the version it started from).
type writeOutcome struct {
	delta  statDelta
	landed bool
	at     time.Time
}

// outcome records the outcome of the write whose hint is d.R.
func (b *Backend) outcome(tid int64, d statDelta, landed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.outcomes[tid]
	if m == nil {
		m = map[string]writeOutcome{}
		b.outcomes[tid] = m
	}
	m[d.R] = writeOutcome{delta: d, landed: landed, at: time.Now()}
}

// outcomesOf is a copy of the table's known outcomes; the ones older
// than foldedMemory (consumed by another server's fold) are forgotten.
func (b *Backend) outcomesOf(tid int64) map[string]writeOutcome {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]writeOutcome, len(b.outcomes[tid]))
	for h, o := range b.outcomes[tid] {
		if now.Sub(o.at) > foldedMemory {
			delete(b.outcomes[tid], h)
			continue
		}
		out[h] = o
	}
	return out
}

func (b *Backend) forgetOutcomes(tid int64, hints []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, h := range hints {
		delete(b.outcomes[tid], h)
	}
}

// foldedMemory is how long a process remembers the hints a figures
// document it read consumed: longer than the watermark lags behind.
const foldedMemory = 10 * time.Second

// sawFolded records hints a figures document consumed, so that this
// process's writers drop their deltas without looking the hints up (on a
// single server, always).
func (b *Backend) sawFolded(tid int64, hints []string) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.folded[tid]
	if m == nil {
		m = map[string]time.Time{}
		b.folded[tid] = m
	}
	for h, at := range m {
		if now.Sub(at) > foldedMemory {
			delete(m, h)
		}
	}
	for _, h := range hints {
		m[h] = now
	}
}

// sawFigures records a figures document's watermark.
func (b *Backend) sawFigures(tid int64, f *figDoc) {
	if f == nil {
		return
	}
	b.mu.Lock()
	b.marks[tid] = max(b.marks[tid], f.T)
	b.mu.Unlock()
}

// latestFigures is the table's figures document with the highest n, nil
// when it has none.
func (b *Backend) latestFigures(ctx context.Context, tid int64) (*figDoc, error) {
	var f figDoc
	err := b.figures(tid).FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&f)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(err, "mongodb: read table statistics")
	}
	b.sawFigures(tid, &f)
	return &f, nil
}

// finish deletes the hints figures document f consumed (idempotent).
func (b *Backend) finish(ctx context.Context, tid int64, f *figDoc) error {
	if f == nil || len(f.H) == 0 {
		return nil
	}
	b.mu.Lock()
	done := b.finished[tid] == f.ID
	b.mu.Unlock()
	if done {
		return nil
	}
	b.sawFolded(tid, f.H)
	for h := f.H; len(h) > 0; {
		n := min(len(h), 500)
		in := make(bson.A, n)
		for i, id := range h[:n] {
			in[i] = id
		}
		if _, err := b.claims(tid).DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: in}}}}); err != nil {
			return translate(err, "mongodb: delete statistics hints")
		}
		h = h[n:]
	}
	b.mu.Lock()
	b.finished[tid] = f.ID
	b.mu.Unlock()
	return nil
}

// commitFigures inserts next (numbered one above the latest the caller
// read) and finishes it: false when another fold made that number first,
// or made a higher one since (next is then deleted again, its hints
// kept).
func (b *Backend) commitFigures(ctx context.Context, tid int64, next *figDoc) (bool, error) {
	next.ID = seqKey(next.N)
	coll := b.figures(tid)
	if _, err := coll.InsertOne(ctx, next); err != nil {
		if isDup(err) {
			return false, nil
		}
		return false, translate(err, "mongodb: write table statistics")
	}
	n, err := coll.CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: next.ID}}}}, options.Count().SetLimit(1))
	if err != nil {
		return false, translate(err, "mongodb: read table statistics")
	}
	if n > 0 {
		if _, err := coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: next.ID}}); err != nil {
			return false, translate(err, "mongodb: delete stale table statistics")
		}
		return false, nil
	}
	if err := b.finish(ctx, tid, next); err != nil {
		return false, err
	}
	if _, err := coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: next.ID}}}}); err != nil {
		return false, translate(err, "mongodb: delete old table statistics")
	}
	b.sawFigures(tid, next)
	return true, nil
}

// addTo adds d to f (sign -1: subtracts it).
func addTo(f *figDoc, d statDelta, sign int64) {
	f.I += sign * d.N
	f.B += sign * d.B
	for _, x := range d.X {
		found := false
		for i := range f.X {
			if f.X[i].F == x.F {
				f.X[i].N += sign * x.N
				f.X[i].B += sign * x.B
				found = true
				break
			}
		}
		if !found {
			f.X = append(f.X, figIdx{F: x.F, N: sign * x.N, B: sign * x.B})
		}
	}
}

// tidy drops the index fields with no entry left and sorts the rest.
func tidy(f *figDoc) {
	out := f.X[:0]
	for _, x := range f.X {
		if x.N != 0 || x.B != 0 {
			out = append(out, x)
		}
	}
	f.X = out
	sort.Slice(f.X, func(i, j int) bool { return f.X[i].F < f.X[j].F })
}

// fold folds the table's pending deltas (serialized per table in this
// process; folds of several servers decide by the figures' unique _id)
// and answers the figures after it; settled is false when other folds
// kept it going (the figures are then to be read).
func (b *Backend) fold(ctx context.Context, tid int64) (fig *figDoc, settled bool, err error) {
	defer b.folds.lock(tid)()
	for range 20 {
		more, fig, err := b.foldOnce(ctx, tid, "")
		if err != nil || !more {
			return fig, err == nil, err
		}
	}
	return nil, false, nil
}

// foldOnce makes the next figures document from the hints it reads (at
// most foldBatch), dropping the index field drop when not empty. more:
// call again (hints left, or another fold got there first); otherwise fig
// is the table's figures once the hints it read are folded (nil: none).
func (b *Backend) foldOnce(ctx context.Context, tid int64, drop string) (more bool, fig *figDoc, err error) {
	start := nowMs()
	// Read on every pass, even one that finds no hint: reading forgets
	// the outcomes older than foldedMemory, which another server's fold
	// consumed (a server whose writes the others always fold first would
	// otherwise keep them all).
	known := b.outcomesOf(tid)
	f, err := b.latestFigures(ctx, tid)
	if err != nil {
		return false, nil, err
	}
	if err := b.finish(ctx, tid, f); err != nil {
		return false, nil, err
	}
	cur, err := b.claims(tid).Find(ctx, bson.D{}, options.Find().SetLimit(foldBatch))
	if err != nil {
		return false, nil, translate(err, "mongodb: read statistics hints")
	}
	var hints []claimDoc
	if err := cur.All(ctx, &hints); err != nil {
		return false, nil, translate(err, "mongodb: read statistics hints")
	}
	next := &figDoc{N: 1}
	if f != nil {
		next = &figDoc{N: f.N + 1, C: f.C, I: f.I, B: f.B, X: append([]figIdx{}, f.X...), T: f.T}
	}
	dropped := false
	if drop != "" && f != nil {
		for _, x := range f.X {
			dropped = dropped || x.F == drop
		}
	}
	if len(hints) == 0 && !dropped {
		return false, f, nil
	}
	// The writes of this process whose outcome it knows need no read of
	// their documents: a landed one's delta is in its document (its hint
	// is there, so nothing dropped it), a lost one's document is past
	// the hint's version. The others' documents are read.
	hinted := make(map[string]string, len(hints)) // _id -> nonce
	added := map[string]bool{}
	var ids []string
	done := map[string]bool{}
	for _, h := range hints {
		hinted[h.ID] = h.W
		if o, ok := known[h.ID]; ok && o.delta.W == h.W {
			if o.landed {
				addTo(next, o.delta, 1)
				added[h.ID] = true
			}
			done[h.ID] = true
			continue
		}
		if id, _, ok := hintBase(h.ID); ok {
			ids = append(ids, id)
		}
	}
	docs, err := b.readDocs(ctx, tid, ids)
	if err != nil {
		return false, nil, err
	}
	for _, d := range docs {
		if d != nil {
			for _, sd := range d.sd {
				if w, ok := hinted[sd.R]; ok && w == sd.W && !added[sd.R] {
					addTo(next, sd, 1)
					added[sd.R] = true
				}
			}
		}
	}
	mark := start
	for _, h := range hints {
		id, hv, ok := hintBase(h.ID)
		if d := docs[id]; done[h.ID] || !ok || (d != nil && d.v > hv) || h.Exp+b.lease.Milliseconds() < start {
			next.H = append(next.H, h.ID)
		} else {
			mark = min(mark, h.T) // still pending
		}
	}
	if len(hints) < foldBatch {
		// Every hint was read: a delta older than mark was folded.
		next.T = max(next.T, mark-clockMargin)
	}
	if len(next.H) == 0 && !dropped {
		return false, f, nil // only writes still in flight
	}
	if drop != "" {
		for i := range next.X {
			if next.X[i].F == drop {
				next.X[i] = figIdx{F: drop}
			}
		}
	}
	tidy(next)
	ok, err := b.commitFigures(ctx, tid, next)
	if err != nil {
		return false, nil, err
	}
	if !ok {
		return true, nil, nil
	}
	b.forgetOutcomes(tid, next.H)
	return len(hints) == foldBatch, next, nil
}

// dropIndexFigures forgets an index's figures. The caller holds the
// table's claim (no writer runs), so once the pending deltas are folded
// no delta of the index is left to come.
func (b *Backend) dropIndexFigures(ctx context.Context, tid int64, index string) error {
	defer b.folds.lock(tid)()
	field := indexField(index)[2:]
	for range 20 {
		more, _, err := b.foldOnce(ctx, tid, field)
		if err != nil || !more {
			return err
		}
	}
	return backend.Errorf(backend.KindUnavailable, "mongodb: drop index statistics: other folds kept winning")
}

// resultOf is the contract's answer for figures f.
func resultOf(f *figDoc) *backend.CountsResult {
	if f == nil {
		return &backend.CountsResult{}
	}
	res := &backend.CountsResult{Counted: f.C, Stats: backend.TableStatsResult{ItemCount: f.I, SizeBytes: f.B}}
	for _, x := range f.X {
		name, err := hex.DecodeString(x.F)
		if err != nil || x.N == 0 {
			continue
		}
		if res.Stats.Indexes == nil {
			res.Stats.Indexes = map[string]backend.IndexStats{}
		}
		res.Stats.Indexes[string(name)] = backend.IndexStats{ItemCount: x.N, SizeBytes: x.B}
	}
	return res
}

var _ backend.TableCounter = (*Backend)(nil)

// Counts implements backend.TableCounter: a fold of the pending deltas,
// whose figures are the answer.
func (b *Backend) Counts(ctx context.Context, p backend.CountsParams) (*backend.CountsResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	f, settled, err := b.fold(ctx, p.Table.ID)
	if err == nil && !settled {
		f, err = b.latestFigures(ctx, p.Table.ID)
	}
	if err != nil {
		return nil, err
	}
	return resultOf(f), nil
}

// Recount implements backend.TableCounter. A standalone server has no
// snapshot, so the documents are counted one by one as a cursor meets
// them: each document's contribution as read, minus its pending deltas
// whose hints are still there after the read (a later fold adds them),
// is its contribution once every write before the count's figures is
// folded; the writes after a document was read add their deltas later.
// The count is inserted as the next figures document, like a fold's, so
// no fold runs between reading the hints and it (it retries when one
// does).
func (b *Backend) Recount(ctx context.Context, p backend.CountsParams) (*backend.CountsResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	tid := p.Table.ID
	for range 5 {
		if _, _, err := b.fold(ctx, tid); err != nil {
			return nil, err
		}
		ok, f, err := b.recountOnce(ctx, tid)
		if err != nil {
			return nil, err
		}
		if ok {
			return resultOf(f), nil
		}
	}
	return b.Counts(ctx, p)
}

func (b *Backend) recountOnce(ctx context.Context, tid int64) (bool, *figDoc, error) {
	defer b.folds.lock(tid)()
	f, err := b.latestFigures(ctx, tid)
	if err != nil {
		return false, nil, err
	}
	if err := b.finish(ctx, tid, f); err != nil {
		return false, nil, err
	}
	next := &figDoc{N: 1, C: true}
	if f != nil {
		next.N, next.T = f.N+1, f.T
	}
	cur, err := b.items(tid).Find(ctx, bson.D{})
	if err != nil {
		return false, nil, translate(err, "mongodb: recount table statistics")
	}
	defer cur.Close(context.Background())
	pending := map[string]statDelta{}
	for cur.Next(ctx) {
		d, err := parseItemDoc(cur.Current)
		if err != nil {
			return false, nil, backend.Wrap(backend.KindInternal, err, "mongodb: decode item")
		}
		c := b.contributionOf(d)
		addTo(next, statDelta{N: c.n, B: c.b, X: xOf(c)}, 1)
		for _, sd := range d.sd {
			pending[sd.R] = sd
		}
	}
	if err := cur.Err(); err != nil {
		return false, nil, translate(err, "mongodb: recount table statistics")
	}
	if len(pending) > 0 {
		hc, err := b.claims(tid).Find(ctx, bson.D{}, options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "w", Value: 1}}))
		if err != nil {
			return false, nil, translate(err, "mongodb: read statistics hints")
		}
		var hints []claimDoc
		if err := hc.All(ctx, &hints); err != nil {
			return false, nil, translate(err, "mongodb: read statistics hints")
		}
		for _, h := range hints {
			if sd, ok := pending[h.ID]; ok && sd.W == h.W {
				addTo(next, sd, -1)
			}
		}
	}
	tidy(next)
	ok, err := b.commitFigures(ctx, tid, next)
	return ok, next, err
}

func xOf(c contribution) []figIdx {
	out := make([]figIdx, 0, len(c.x))
	for f, v := range c.x {
		out = append(out, figIdx{F: f, N: v[0], B: v[1]})
	}
	return out
}

// startFigures records that a new table's figures are known (zero). A
// table whose first figures document is missing (a crash right after its
// creation) is recounted.
func (b *Backend) startFigures(ctx context.Context, tid int64) error {
	_, err := b.figures(tid).InsertOne(ctx, figDoc{ID: seqKey(1), N: 1, C: true})
	if err != nil && !isDup(err) {
		return translate(err, "mongodb: write table statistics")
	}
	return nil
}

// folder runs the background fold: every foldEvery, the tables written
// in this process since the last pass.
type folder struct {
	mu       sync.Mutex
	pending  map[int64]bool
	failures atomic.Int64
}

func (b *Backend) dirty(tid int64) {
	b.bg.mu.Lock()
	if b.bg.pending == nil {
		b.bg.pending = map[int64]bool{}
	}
	b.bg.pending[tid] = true
	b.bg.mu.Unlock()
}

func (b *Backend) foldLoop(ctx context.Context) {
	t := time.NewTicker(foldEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.bg.mu.Lock()
		tables := b.bg.pending
		b.bg.pending = nil
		b.bg.mu.Unlock()
		for tid := range tables {
			fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, _, err := b.fold(fctx, tid)
			cancel()
			switch {
			case err == nil, ctx.Err() != nil:
			case backend.IsKind(err, backend.KindTableNotFound):
			default:
				b.bg.failures.Add(1)
				b.dirty(tid) // again next pass
			}
		}
	}
}

// Stats implements backend.StatsReporter: the background fold's failures.
func (b *Backend) Stats() backend.Stats {
	return backend.Stats{Retries: -1, HasBackground: true, BackgroundFailures: b.bg.failures.Load()}
}

// forgetFigures drops a deleted table's statistics (its claims
// collection, which holds the hints, is dropped with the table).
func (b *Backend) forgetFigures(ctx context.Context, tid int64) error {
	if err := b.figures(tid).Drop(ctx); err != nil {
		return translate(err, "mongodb: drop the table's statistics")
	}
	b.mu.Lock()
	delete(b.finished, tid)
	delete(b.marks, tid)
	delete(b.folded, tid)
	delete(b.outcomes, tid)
	b.mu.Unlock()
	b.bg.mu.Lock()
	delete(b.bg.pending, tid)
	b.bg.mu.Unlock()
	return nil
}
