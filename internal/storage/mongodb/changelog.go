package mongodb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/storage"
)

// The change log (storage.ChangeLog) on single-document atomicity
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
//     {_id: Seq, r, at, d}, with a unique index on r. Seq is the previous
//     highest Seq plus one, so Seq values are contiguous; an insert on a
//     taken Seq or an already published r is refused by the server
//     atomically (FerretDB included), so concurrent publishers (several
//     servers) never publish a record twice nor leave a hole, and each
//     publisher handles a document's records in order, so one item's
//     records keep their commit order. A Seq can only be inserted once its
//     predecessor exists: no record appears later below one already read
//     (no late gaps). ReadLog and LogInfo publish first. In one process a
//     mutex per table serializes publishers.
//   - A published record stays in its document until the item's next
//     write, which drops the records it finds published (it holds the
//     item's version claim, so no update of a live document is needed:
//     FerretDB's updates are not atomic across connections).
//   - A hint is deleted once its document is at or past its version (every
//     record the document held was then published), or once it expired
//     (the write never happened: its writer's lease ended).
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

type logRec struct {
	Seq int64  `bson:"_id"`
	R   string `bson:"r"`
	At  int64  `bson:"at"` // Unix microseconds
	D   []byte `bson:"d"`
	X   bool   `bson:"x,omitempty"`
}

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

// unpublished returns the pending records of cur that are not in the log
// yet (the rest are dropped by the write that carries them over).
func (b *Backend) unpublished(ctx context.Context, tid int64, pl []pending) ([]pending, error) {
	if len(pl) == 0 {
		return nil, nil
	}
	rs := make(bson.A, len(pl))
	for i, p := range pl {
		rs[i] = p.R
	}
	cur, err := b.logColl(tid).Find(ctx, bson.D{{Key: "r", Value: bson.D{{Key: "$in", Value: rs}}}},
		options.Find().SetProjection(bson.D{{Key: "r", Value: 1}}))
	if err != nil {
		return nil, translate(err, "mongodb: read published records")
	}
	var done []struct {
		R string `bson:"r"`
	}
	if err := cur.All(ctx, &done); err != nil {
		return nil, translate(err, "mongodb: read published records")
	}
	pub := map[string]bool{}
	for _, d := range done {
		pub[d.R] = true
	}
	var out []pending
	for _, p := range pl {
		if !pub[p.R] {
			out = append(out, p)
		}
	}
	return out, nil
}

// publishers serializes the publisher per table in this process.
type publishers struct {
	mu sync.Mutex
	m  map[int64]*sync.Mutex
}

func (p *publishers) lock(id int64) func() {
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

// lastRec is the record with the highest Seq (a trim marker included),
// nil when the log is empty.
func (b *Backend) lastRec(ctx context.Context, tid int64) (*logRec, error) {
	var r logRec
	err := b.logColl(tid).FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&r)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(err, "mongodb: read the change log")
	}
	return &r, nil
}

// publish moves every pending record of an acknowledged write to the log.
func (b *Backend) publish(ctx context.Context, tid int64) error {
	defer b.pubs.lock(tid)()
	if err := b.ensureLogIndex(ctx, tid); err != nil {
		return err
	}
	cur, err := b.hintsColl(tid).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "t", Value: 1}, {Key: "_id", Value: 1}}))
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
	last, err := b.lastRec(ctx, tid)
	if err != nil {
		return err
	}
	// Each hint's record is published with the unpublished records its
	// document holds before it (one item's records in commit order); the
	// hints' order is the writes' order. A document is read once per pass:
	// a write acknowledged before the pass read the hints is in it.
	docs := map[string]*itemDoc{}
	published := map[string]bool{}
	for _, h := range hints {
		id, hv, ok := hintVersion(h.ID)
		if !ok {
			continue
		}
		d, seen := docs[id]
		if !seen {
			if d, err = b.readDoc(ctx, b.items(tid), id); err != nil {
				return err
			}
			docs[id] = d
		}
		at := -1
		if d != nil {
			for i, p := range d.pl {
				if p.R == h.ID {
					at = i
				}
			}
		}
		for i := 0; i <= at; i++ {
			if published[d.pl[i].R] {
				continue
			}
			if last, err = b.publishOne(ctx, tid, last, d.pl[i]); err != nil {
				return err
			}
			published[d.pl[i].R] = true
		}
		// Done with the hint once its document is at or past its version
		// (its record, if the write carried one, is published now), or
		// once it expired (the write never happened).
		if (d != nil && d.v >= hv) || h.Exp < time.Now().UnixMilli() {
			if _, err := b.hintsColl(tid).DeleteOne(ctx, bson.D{{Key: "_id", Value: h.ID}}); err != nil {
				return translate(err, "mongodb: delete a change log hint")
			}
		}
	}
	return nil
}

// publishOne inserts one record at the next Seq unless it is published;
// last is the highest record known, returned updated.
func (b *Backend) publishOne(ctx context.Context, tid int64, last *logRec, p pending) (*logRec, error) {
	coll := b.logColl(tid)
	for {
		rec := logRec{Seq: 1, R: p.R, At: time.Now().UnixMicro(), D: nz(p.D)}
		if last != nil {
			rec.Seq = last.Seq + 1
			rec.At = max(rec.At, last.At) // At never decreases with Seq
		}
		_, err := coll.InsertOne(ctx, rec)
		if err == nil {
			return &rec, nil
		}
		if !isDup(err) {
			return last, translate(err, "mongodb: publish a change record")
		}
		// Either the record is published (by another publisher) or the
		// Seq is taken: read again.
		n, err := coll.CountDocuments(ctx, bson.D{{Key: "r", Value: p.R}})
		if err != nil {
			return last, translate(err, "mongodb: read the change log")
		}
		if last, err = b.lastRec(ctx, tid); err != nil {
			return nil, err
		}
		if n > 0 {
			return last, nil
		}
	}
}

// ReadLog implements storage.ChangeLog.
func (b *Backend) ReadLog(ctx context.Context, p storage.ReadLogParams) (*storage.ReadLogResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	if err := b.publish(ctx, p.Table.ID); err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1
	}
	cur, err := b.logColl(p.Table.ID).Find(ctx,
		bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: p.After}}}, {Key: "x", Value: bson.D{{Key: "$ne", Value: true}}}},
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)))
	if err != nil {
		return nil, translate(err, "mongodb: read the change log")
	}
	defer cur.Close(ctx)
	res := &storage.ReadLogResult{}
	size := 0
	for cur.Next(ctx) {
		var r logRec
		if err := cur.Decode(&r); err != nil {
			return nil, translate(err, "mongodb: decode a change record")
		}
		if p.MaxBytes > 0 && len(res.Records) > 0 && size+len(r.D) > p.MaxBytes {
			break
		}
		size += len(r.D)
		res.Records = append(res.Records, storage.LogRecord{Seq: r.Seq, At: time.UnixMicro(r.At), Data: nz(r.D)})
	}
	if err := cur.Err(); err != nil {
		return nil, translate(err, "mongodb: read the change log")
	}
	return res, nil
}

// LogInfo implements storage.ChangeLog.
func (b *Backend) LogInfo(ctx context.Context, p storage.LogInfoParams) (*storage.LogInfoResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	if err := b.publish(ctx, p.Table.ID); err != nil {
		return nil, err
	}
	coll := b.logColl(p.Table.ID)
	last, err := b.lastRec(ctx, p.Table.ID)
	if err != nil || last == nil {
		return &storage.LogInfoResult{}, err
	}
	live := bson.D{{Key: "x", Value: bson.D{{Key: "$ne", Value: true}}}}
	n, err := coll.CountDocuments(ctx, live)
	if err != nil {
		return nil, translate(err, "mongodb: count the change log")
	}
	res := &storage.LogInfoResult{Last: last.Seq, Count: n}
	if n > 0 {
		var first logRec
		if err := coll.FindOne(ctx, live, options.FindOne().SetSort(bson.D{{Key: "_id", Value: 1}})).Decode(&first); err != nil {
			return nil, translate(err, "mongodb: read the change log")
		}
		res.First = first.Seq
	}
	return res, nil
}

// TrimLog implements storage.ChangeLog.
func (b *Backend) TrimLog(ctx context.Context, p storage.TrimLogParams) (*storage.TrimLogResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	defer b.pubs.lock(p.Table.ID)()
	coll := b.logColl(p.Table.ID)
	last, err := b.lastRec(ctx, p.Table.ID)
	if err != nil || last == nil {
		return &storage.TrimLogResult{}, err
	}
	before := p.Before.UnixMicro()
	dr, err := coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$lt", Value: last.Seq}}},
		{Key: "at", Value: bson.D{{Key: "$lt", Value: before}}}})
	if err != nil {
		return nil, translate(err, "mongodb: trim the change log")
	}
	res := &storage.TrimLogResult{Removed: dr.DeletedCount}
	if !last.X && last.At < before {
		// The highest record becomes a marker: its Seq stays the highest
		// ever assigned. Only trims and publishers of this table write
		// the log, and publishers only insert.
		ur, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: last.Seq}, {Key: "x", Value: bson.D{{Key: "$ne", Value: true}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: true}, {Key: "d", Value: []byte{}}}}})
		if err != nil {
			return nil, translate(err, "mongodb: trim the change log")
		}
		res.Removed += ur.ModifiedCount
	}
	return res, nil
}

var _ storage.ChangeLog = (*Backend)(nil)
