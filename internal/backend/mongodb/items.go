package mongodb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// entry is one secondary index entry kept in an item document.
type entry struct {
	key  string // i_X
	proj []byte // j_X
}

// itemDoc is an item document as read.
type itemDoc struct {
	id      string
	item    []byte // nil: no item (a document that only keeps index entries)
	hasItem bool
	v       int64
	idx     map[string]entry    // by index field suffix (hex of the index name)
	pl      []pending           // change records not known to be published (changelog.go)
	sd      []statDelta         // statistics deltas not known to be folded (counts.go)
	lock    *txledger.Lock      // the transaction holding the item (transact.go), nil when none
	pre     map[string]preImage // per snapshot epoch, the item as of its instant (snapshot.go)
}

func binaryOf(rv bson.RawValue) ([]byte, bool) {
	if rv.Type != bson.TypeBinary {
		return nil, false
	}
	_, data, ok := rv.BinaryOK()
	if data == nil {
		data = []byte{}
	}
	return data, ok
}

func parseItemDoc(raw bson.Raw) (*itemDoc, error) {
	d := &itemDoc{idx: map[string]entry{}}
	els, err := raw.Elements()
	if err != nil {
		return nil, err
	}
	var lk, lc bson.RawValue
	defer func() {
		if lk.Type != 0 && d != nil {
			if l, lerr := parseLock(lk, lc); lerr == nil {
				d.lock = l
			}
		}
	}()
	for _, el := range els {
		k, v := el.Key(), el.Value()
		switch {
		case k == "lk":
			lk = v
		case strings.HasPrefix(k, "s_"):
			if d.pre == nil {
				d.pre = map[string]preImage{}
			}
			item, ok := binaryOf(v)
			d.pre[k[2:]] = preImage{item: item, has: ok}
		case k == "lc":
			lc = v
		case k == "_id":
			d.id, _ = v.StringValueOK()
		case k == "it":
			d.item, d.hasItem = binaryOf(v)
		case k == "v":
			if n, ok := v.AsInt64OK(); ok {
				d.v = n
			}
		case k == "sd":
			if data, ok := binaryOf(v); ok && len(data) > 0 {
				if err := json.Unmarshal(data, &d.sd); err != nil {
					return nil, err
				}
			}
		case k == "pl":
			arr, ok := v.ArrayOK()
			if !ok {
				continue
			}
			vals, err := arr.Values()
			if err != nil {
				return nil, err
			}
			for _, pv := range vals {
				pd, ok := pv.DocumentOK()
				if !ok {
					continue
				}
				var pr pending
				pr.R, _ = pd.Lookup("r").StringValueOK()
				pr.D, _ = binaryOf(pd.Lookup("d"))
				d.pl = append(d.pl, pr)
			}
		case strings.HasPrefix(k, "i_"):
			e := d.idx[k[2:]]
			e.key, _ = v.StringValueOK()
			d.idx[k[2:]] = e
		case strings.HasPrefix(k, "j_"):
			e := d.idx[k[2:]]
			e.proj, _ = binaryOf(v)
			d.idx[k[2:]] = e
		}
	}
	return d, nil
}

// ensureIndex creates the MongoDB index of a secondary index's key field
// once per process (createIndexes is idempotent on the server).
func (b *Backend) ensureIndex(ctx context.Context, id int64, index string) error {
	field := indexField(index)
	k := itemsName(id) + "/" + field
	b.mu.Lock()
	done := b.indexed[k]
	b.mu.Unlock()
	if done {
		return nil
	}
	_, err := b.items(id).Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys: bson.D{{Key: field, Value: 1}}, Options: options.Index().SetName(field)})
	if err != nil {
		return translate(err, "mongodb: create index "+field)
	}
	b.mu.Lock()
	b.indexed[k] = true
	b.mu.Unlock()
	return nil
}

// GetItem implements backend.Backend.
func (b *Backend) GetItem(ctx context.Context, p backend.GetItemParams) (*backend.GetItemResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	d, err := b.readDoc(ctx, b.items(p.Table.ID), itemID(p.PK, p.SK))
	if err != nil {
		return nil, err
	}
	if d != nil && d.lock != nil {
		// A committed transaction's change not applied yet is visible.
		item, err := b.ledger.Visible(ctx, txledger.Key{Table: p.Table, PK: p.PK, SK: p.SK}, recordOf(d))
		if err != nil {
			return nil, err
		}
		return &backend.GetItemResult{Item: item}, nil
	}
	if d == nil || !d.hasItem {
		return &backend.GetItemResult{}, nil
	}
	return &backend.GetItemResult{Item: d.item}, nil
}

func (b *Backend) readDoc(ctx context.Context, coll *mongo.Collection, id string) (*itemDoc, error) {
	raw, err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(err, "mongodb: read item")
	}
	d, err := parseItemDoc(raw)
	if err != nil {
		return nil, translate(err, "mongodb: decode item")
	}
	return d, nil
}

// WriteItem implements backend.Backend: register in the table fence, then
// read the item document, run Fn and apply its change by one
// single-document write decided by a unique insert: the document's first
// version by inserting it, every later version by inserting the claim
// <_id>@<version>@<generation> into the table's claims collection, whose
// winner alone replaces the document. Inserts are the one conditional
// write FerretDB applies atomically over several connections (its updates
// check the filter in a read and then write by _id). Documents are never
// deleted (a deleted item keeps {_id, v}), so versions never repeat.
func (b *Backend) WriteItem(ctx context.Context, p backend.WriteItemParams) (*backend.WriteItemResult, error) {
	if p.Fn == nil {
		return nil, backend.Errorf(backend.KindInternal, "mongodb: WriteItem without Fn")
	}
	for {
		l, err := b.register(ctx, p.Table)
		if err != nil {
			return nil, err
		}
		wctx, cancel := l.context(context.WithValue(ctx, regCtxKey{p.Table.ID}, l))
		res, err := b.writeLoop(wctx, p, l.expiry)
		cancel()
		l.release()
		// The lease ended while waiting for another writer, with nothing
		// of this write sent: register again (the version is checked
		// again) and go on, while the caller's context lasts.
		if errors.Is(err, errLeaseEnded) && ctx.Err() == nil {
			continue
		}
		return res, err
	}
}

// errLeaseEnded: a write's lease ended before it sent anything that could
// have been applied.
var errLeaseEnded = errors.New("mongodb: the write's lease ended while it waited")

// waited maps a timeout of a phase that wrote nothing to errLeaseEnded:
// the lease's deadline passed, or the driver refused to send an operation
// that could not end before it (it does so once less than a round trip is
// left, while ctx.Err() is still nil).
func waited(ctx context.Context, err error, what string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errLeaseEnded
	}
	if _, ok := ctx.Deadline(); ok && errors.Is(err, context.DeadlineExceeded) {
		return errLeaseEnded
	}
	return translate(err, what)
}

// claimDoc is a version claim, or the statistics hint of a document's
// first version (counts.go).
type claimDoc struct {
	ID  string `bson:"_id"`
	Exp int64  `bson:"exp"`
	T   int64  `bson:"t,omitempty"` // when it was inserted (ms): the folds' watermark
	// W is the inserting attempt's nonce: a claim deleted and inserted
	// again under the same _id (by a writer that read the document long
	// before) is not the hint a pending delta names.
	W string `bson:"w,omitempty"`
}

func claimID(id string, v int64, gen int) string { return fmt.Sprintf("%s@%016x@%d", id, v, gen) }

// claimVersion tries to become the only writer of version v+1 of document
// id. A claim whose writer's lease ended without a new version is taken
// over by the next generation. ok is false when another writer holds the
// version (or wrote it): read again. gen is the generation won.
func (b *Backend) claimVersion(ctx context.Context, tid int64, id string, v int64, exp time.Time, w string) (ok bool, gen int, err error) {
	coll := b.claims(tid)
	for gen := 0; ; gen++ {
		_, err := coll.InsertOne(ctx, claimDoc{ID: claimID(id, v, gen), Exp: exp.UnixMilli(), T: nowMs(), W: w})
		if err == nil {
			if gen == 0 {
				return true, 0, nil
			}
			// A takeover: the document must still be at v (the former
			// holder may have written before its lease ended).
			cur, err := b.readDoc(ctx, b.items(tid), id)
			if err != nil {
				return false, gen, err
			}
			return cur != nil && cur.v == v, gen, nil
		}
		if !isDup(err) {
			return false, gen, translate(err, "mongodb: claim item version")
		}
		var held claimDoc
		err = coll.FindOne(ctx, bson.D{{Key: "_id", Value: claimID(id, v, gen)}}).Decode(&held)
		if errors.Is(err, mongo.ErrNoDocuments) {
			// Dropped since: the document is past v.
			return false, gen, nil
		}
		if err != nil {
			return false, gen, translate(err, "mongodb: read item claim")
		}
		if held.Exp > time.Now().UnixMilli() {
			return false, gen, nil
		}
	}
}

// dropClaimsTimeout bounds the deletes of a version's claims.
const dropClaimsTimeout = 5 * time.Second

// dropClaims deletes the claims of version v once the document is past it.
// That is safe at once: a late writer that wins a claim of v again
// replaces with the filter {_id, v}, which matches nothing, since a
// document's version never goes back. A failure leaves garbage only. The
// write is applied by then, so the deletes are not bounded by its lease
// (on a slow server they would often be cut off with little of it
// left), only by dropClaimsTimeout.
func (b *Backend) dropClaims(ctx context.Context, tid int64, id string, v int64, upto int) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropClaimsTimeout)
	defer cancel()
	for g := 0; g <= upto; g++ {
		if _, err := b.claims(tid).DeleteOne(ctx, bson.D{{Key: "_id", Value: claimID(id, v, g)}}); err != nil {
			return
		}
	}
}

func (b *Backend) writeLoop(ctx context.Context, p backend.WriteItemParams, exp time.Time) (*backend.WriteItemResult, error) {
	coll := b.items(p.Table.ID)
	id := itemID(p.PK, p.SK)
	for attempt := 0; ; attempt++ {
		cur, err := b.readDoc(ctx, coll, id)
		if err != nil {
			return nil, waited(ctx, err, "mongodb: read item")
		}
		// A transaction's lock is settled first: rolled forward or back,
		// or waited for while its transaction is live (transact.go).
		if cur, err = b.settleDoc(ctx, p.Table, p.PK, p.SK, cur); err != nil {
			return nil, err
		}
		var old []byte
		if cur != nil && cur.hasItem {
			old = cur.item
		}
		ch, err := p.Fn(old)
		if err != nil {
			return nil, err
		}
		res := &backend.WriteItemResult{Old: old, Change: ch}
		if ch.Op == backend.Keep {
			return res, nil
		}
		for _, e := range ch.PutIndex {
			if err := b.ensureIndex(ctx, p.Table.ID, e.Index); err != nil {
				return nil, err
			}
		}
		// Change records: the ones the document holds that are not
		// published yet are carried over, this write's is appended, and a
		// hint tells the publisher (changelog.go).
		var pl []pending
		if cur != nil {
			if pl, err = b.unpublished(ctx, p.Table.ID, cur.pl); err != nil {
				return nil, waited(ctx, err, "mongodb: read published records")
			}
		}
		if ch.Log != nil {
			var v int64 = 1
			if cur != nil {
				v = cur.v + 1
			}
			pl = append(pl, pending{R: recordID(id, v), D: append([]byte{}, ch.Log...)})
			if err := b.hint(ctx, p.Table.ID, id, v, exp); err != nil {
				return nil, waited(ctx, err, "mongodb: record a change log hint")
			}
		}
		nd := nextDoc(cur, id, p.PK, p.SK, ch)
		nd.pl = pl
		// Open snapshot epochs keep the item as it was at their instant.
		if l := registered(ctx, p.Table.ID); l != nil {
			nd.pre = preImages(cur, l.epochs)
		}
		applied, err := b.putDoc(ctx, p.Table.ID, cur, nd, exp)
		var u unsent
		if errors.As(err, &u) {
			return nil, waited(ctx, u.err, u.what)
		}
		if err != nil {
			return nil, err
		}
		if applied {
			return res, nil
		}
		if err := backend.Backoff(ctx, attempt/4, retryCeiling); err != nil {
			return nil, waited(ctx, err, "mongodb: write item (contended)")
		}
	}
}

// nextDoc is the next version of document cur (nil: absent) after ch,
// without its change records, statistics deltas and pre-images; a
// document that keeps neither an item nor an index entry is not inserted
// when absent, and an existing one keeps {_id, v} so its versions never
// repeat.
func nextDoc(cur *itemDoc, id string, pk, sk []byte, ch backend.Change) *itemDoc {
	nd := &itemDoc{id: id, v: 1, idx: map[string]entry{}}
	if cur != nil {
		for k, e := range cur.idx {
			nd.idx[k] = e
		}
		nd.v = cur.v + 1
	}
	nd.applyChange(pk, sk, ch)
	return nd
}

func nz(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// TransactWrite implements backend.Backend: one operation is a WriteItem;
// more run on the transaction ledger (transact.go).
func (b *Backend) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	for i := range p.Ops {
		if p.Ops[i].Fn == nil {
			return nil, backend.Errorf(backend.KindInternal, "mongodb: TransactWrite operation %d without Fn", i)
		}
	}
	switch len(p.Ops) {
	case 0:
		return &backend.TransactWriteResult{}, nil
	case 1:
	default:
		// One fence registration per table for the whole transaction
		// (checked at the operations' version), instead of one per lock
		// and per release: fewer writes on the server.
		seen := map[int64]bool{}
		var leases []*lease
		defer func() {
			for _, l := range leases {
				l.release()
			}
		}()
		tctx := ctx
		for _, op := range p.Ops {
			if seen[op.Table.ID] {
				continue
			}
			seen[op.Table.ID] = true
			l, err := b.register(ctx, op.Table)
			if err != nil {
				return nil, err
			}
			leases = append(leases, l)
			tctx = context.WithValue(tctx, regCtxKey{op.Table.ID}, l)
		}
		return b.ledger.TransactWrite(tctx, p)
	}
	var fnErr error
	op := p.Ops[0]
	fn := op.Fn
	op.Fn = func(old []byte) (backend.Change, error) {
		ch, err := fn(old)
		fnErr = err
		return ch, err
	}
	r, err := b.WriteItem(ctx, op)
	if err != nil {
		if fnErr != nil && errors.Is(err, fnErr) {
			return nil, &backend.Error{Kind: backend.KindTransactionCanceled, Message: "1 of 1 operations failed", Reasons: []error{fnErr}}
		}
		return nil, err
	}
	return &backend.TransactWriteResult{Results: []backend.WriteItemResult{*r}}, nil
}

// TransactGet implements backend.Backend: one key is a GetItem; more are
// read from one instant by the transaction ledger (transact.go).
func (b *Backend) TransactGet(ctx context.Context, p backend.TransactGetParams) (*backend.TransactGetResult, error) {
	switch len(p.Keys) {
	case 0:
		return &backend.TransactGetResult{}, nil
	case 1:
		r, err := b.GetItem(ctx, p.Keys[0])
		if err != nil {
			return nil, err
		}
		return &backend.TransactGetResult{Items: [][]byte{r.Item}}, nil
	}
	return b.ledger.TransactGet(ctx, p)
}
