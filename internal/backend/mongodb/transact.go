package mongodb

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// Multi-item transactions run on the shared per-item compare-and-set
// ledger (internal/backend/txledger, ADR 0018); this file is its Store on
// MongoDB (ADR 0017, "Transactions"):
//
//   - An item's lock is two fields of its document: lk (the transaction
//     id) and lc (the change, txledger.EncodeChange). The record's Version
//     is the document version v. LockItem and ReleaseItem are the same
//     single-document write as WriteItem: for an absent document a unique
//     insert, otherwise the version claim <_id>@<v>@<generation> whose
//     winner alone replaces the document (filter {_id, v}). LockItem is
//     fenced on the table version like WriteItem; ReleaseItem registers in
//     the fence without the version check (a decided transaction's change
//     always lands, and a catalog change still drains it).
//   - Transaction records live in the collection txs: {_id: hex id, st:
//     started (ms), it: txledger.EncodeKeys}. The decision is a second
//     document {_id: "<hex id>/d", s: state} inserted once: the unique
//     insert is the compare-and-set PENDING -> COMMITTED or ABORTED
//     (FerretDB's updates are not atomic across connections).
//   - WriteItem settles a lock it meets (txledger.Ledger.Settle); GetItem
//     shows a committed lock's after-image (Visible); Query and Scan roll
//     forward the committed locks they meet and read again, so index reads
//     see committed transactions too. A background sweep finishes
//     transactions whose coordinator died.

const txColl = "txs"

// regCtxKey marks a context whose caller holds a fence registration for
// the table (WriteItem, LockItem): a release under it does not register
// again (a claim waiting for the outer registration would wait for it).
type regCtxKey struct{ table int64 }

func registered(ctx context.Context, tid int64) *lease {
	l, _ := ctx.Value(regCtxKey{tid}).(*lease)
	return l
}

// txStore is the Backend's txledger.Items.
type txStore struct{ b *Backend }

var _ txledger.Items = txStore{}

func (b *Backend) keyOf(k txledger.Key) string { return itemID(k.PK, k.SK) }

// recordOf is the ledger's view of a document (nil: absent).
func recordOf(d *itemDoc) txledger.Record {
	if d == nil {
		return txledger.Record{Token: (*itemDoc)(nil)}
	}
	r := txledger.Record{Version: d.v, Lock: d.lock, Token: d}
	if d.hasItem {
		r.Item = d.item
	}
	return r
}

func docOfRecord(r txledger.Record) *itemDoc {
	d, _ := r.Token.(*itemDoc)
	return d
}

// baseOf is the document a compare-and-set on r replaces: the one read,
// at r.Version (nil: absent, Version 0).
func baseOf(r txledger.Record) *itemDoc {
	d := docOfRecord(r)
	if d == nil || r.Version == 0 {
		return nil
	}
	c := *d
	c.v = r.Version
	return &c
}

// ReadItem implements txledger.Items.
func (s txStore) ReadItem(ctx context.Context, k txledger.Key) (txledger.Record, error) {
	if err := s.b.live(ctx, k.Table); err != nil {
		return txledger.Record{}, err
	}
	d, err := s.b.readDoc(ctx, s.b.items(k.Table.ID), s.b.keyOf(k))
	if err != nil {
		return txledger.Record{}, err
	}
	return recordOf(d), nil
}

// casWrite writes nd as the next version of cur (nil: absent): true when
// applied, false when the document moved on.
func (b *Backend) casWrite(ctx context.Context, tid int64, cur, nd *itemDoc, exp time.Time) (bool, error) {
	ok, err := b.putDoc(ctx, tid, cur, nd, exp)
	var u unsent
	if errors.As(err, &u) {
		return false, u.err
	}
	return ok, err
}

// LockItem implements txledger.Items.
func (s txStore) LockItem(ctx context.Context, k txledger.Key, cur txledger.Record, tx txledger.TxID, ch backend.Change) (txledger.Record, bool, error) {
	b := s.b
	// The transaction's registration for the table (TransactWrite), when
	// it was checked at this version and has time left; else its own.
	l := registered(ctx, k.Table.ID)
	if l == nil || !l.checked || l.version != k.Table.Version || !l.usable() {
		var err error
		if l, err = b.register(ctx, k.Table); err != nil {
			return txledger.Record{}, false, err
		}
		defer l.release()
	}
	wctx, cancel := l.context(context.WithValue(ctx, regCtxKey{k.Table.ID}, l))
	defer cancel()
	id := b.keyOf(k)
	cd := baseOf(cur)
	lock := &txledger.Lock{Tx: tx, Change: ch}
	nd := &itemDoc{id: id, v: 1, idx: map[string]entry{}, lock: lock}
	if cd != nil {
		nd.item, nd.hasItem, nd.v, nd.pl, nd.sd, nd.pre = cd.item, cd.hasItem, cd.v+1, cd.pl, cd.sd, cd.pre
		for f, e := range cd.idx {
			nd.idx[f] = e
		}
	}
	ok, err := b.casWrite(wctx, k.Table.ID, cd, nd, l.expiry)
	if err != nil || !ok {
		return txledger.Record{}, false, err
	}
	return recordOf(nd), true, nil
}

// ReleaseItem implements txledger.Items.
func (s txStore) ReleaseItem(ctx context.Context, k txledger.Key, cur txledger.Record, commit bool) (bool, error) {
	b := s.b
	cd := baseOf(cur)
	if cd == nil || cur.Lock == nil {
		return false, backend.Errorf(backend.KindInternal, "mongodb: release of an unlocked record")
	}
	l := registered(ctx, k.Table.ID)
	if l != nil && !l.usable() {
		l = nil // a transaction's registration that ran out: register again
	}
	if l == nil {
		var err error
		if l, err = b.registerLive(ctx, k.Table); err != nil {
			return false, err
		}
		defer l.release()
		var cancel context.CancelFunc
		ctx, cancel = l.context(ctx)
		defer cancel()
	}
	exp := l.expiry
	id := b.keyOf(k)
	nd := &itemDoc{id: id, v: cd.v + 1, item: cd.item, hasItem: cd.hasItem, idx: map[string]entry{}, pre: cd.pre}
	for f, e := range cd.idx {
		nd.idx[f] = e
	}
	pl, err := b.unpublished(ctx, k.Table.ID, cd.pl)
	if err != nil {
		return false, err
	}
	nd.pl = pl
	if ch := cur.Lock.Change; commit && ch.Op != backend.Keep {
		for _, e := range ch.PutIndex {
			if err := b.ensureIndex(ctx, k.Table.ID, e.Index); err != nil {
				return false, err
			}
		}
		if ch.Log != nil {
			nd.pl = append(nd.pl, pending{R: recordID(id, nd.v), D: ch.Log})
			if err := b.hint(ctx, k.Table.ID, id, nd.v, exp); err != nil {
				return false, err
			}
		}
		nd.pre = preImages(cd, l.epochs)
		nd.applyChange(k.PK, k.SK, ch)
	}
	return b.casWrite(ctx, k.Table.ID, cd, nd, exp)
}

// applyChange applies ch's item and index entries to d.
func (d *itemDoc) applyChange(pk, sk []byte, ch backend.Change) {
	for _, k := range ch.DeleteIndex {
		f := indexField(k.Index)[2:]
		if e, ok := d.idx[f]; ok && e.key == indexKey(k.PK, k.SK, pk, sk) {
			delete(d.idx, f)
		}
	}
	for _, e := range ch.PutIndex {
		d.idx[indexField(e.Index)[2:]] = entry{key: indexKey(e.PK, e.SK, pk, sk), proj: nz(e.Item)}
	}
	switch ch.Op {
	case backend.Put:
		d.item, d.hasItem = nz(ch.Item), true
	case backend.Delete:
		d.item, d.hasItem = nil, false
	}
}

// bson is the document as stored.
func (d *itemDoc) bson() bson.D {
	doc := bson.D{{Key: "_id", Value: d.id}, {Key: "v", Value: d.v}}
	if d.hasItem {
		doc = append(doc, bson.E{Key: "it", Value: nz(d.item)})
	}
	for f, e := range d.idx {
		doc = append(doc, bson.E{Key: "i_" + f, Value: e.key}, bson.E{Key: "j_" + f, Value: nz(e.proj)})
	}
	if len(d.pl) > 0 {
		arr := make(bson.A, len(d.pl))
		for i, p := range d.pl {
			arr[i] = bson.D{{Key: "r", Value: p.R}, {Key: "d", Value: nz(p.D)}}
		}
		doc = append(doc, bson.E{Key: "pl", Value: arr})
	}
	if len(d.sd) > 0 {
		// One binary field: FerretDB converts an array of documents at
		// every read and write of the document (a third more of its CPU
		// per write than the bytes cost).
		sd, _ := json.Marshal(d.sd)
		doc = append(doc, bson.E{Key: "sd", Value: sd})
	}
	if d.lock != nil {
		doc = append(doc, bson.E{Key: "lk", Value: d.lock.Tx[:]}, bson.E{Key: "lc", Value: txledger.EncodeChange(d.lock.Change)})
	}
	return append(doc, preFields(d.pre)...)
}

type txDoc struct {
	ID    string `bson:"_id"`
	St    int64  `bson:"st,omitempty"`
	Items []byte `bson:"it,omitempty"`
	S     int    `bson:"s,omitempty"`
}

func txKey(id txledger.TxID) string { return hex.EncodeToString(id[:]) }

// CreateTx implements txledger.Items.
func (s txStore) CreateTx(ctx context.Context, tx txledger.TxRecord) error {
	_, err := s.b.db.Collection(txColl).InsertOne(ctx, txDoc{ID: txKey(tx.ID), St: tx.Started.UnixMilli(), Items: txledger.EncodeKeys(tx.Items)})
	return translate(err, "mongodb: create transaction record")
}

// ReadTx implements txledger.Items.
func (s txStore) ReadTx(ctx context.Context, id txledger.TxID) (*txledger.TxRecord, error) {
	k := txKey(id)
	cur, err := s.b.db.Collection(txColl).Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{k, k + "/d"}}}}})
	if err != nil {
		return nil, translate(err, "mongodb: read transaction record")
	}
	var docs []txDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err, "mongodb: read transaction record")
	}
	return txRecordOf(id, docs)
}

func txRecordOf(id txledger.TxID, docs []txDoc) (*txledger.TxRecord, error) {
	var rec *txledger.TxRecord
	state := txledger.Pending
	for _, d := range docs {
		if len(d.ID) > 2 && d.ID[len(d.ID)-2:] == "/d" {
			state = txledger.State(d.S)
			continue
		}
		keys, err := txledger.DecodeKeys(d.Items)
		if err != nil {
			return nil, backend.Wrap(backend.KindInternal, err, "mongodb: decode transaction record")
		}
		rec = &txledger.TxRecord{ID: id, Started: time.UnixMilli(d.St), Items: keys}
	}
	if rec != nil {
		rec.State = state
	}
	return rec, nil
}

// SetTxState implements txledger.Items: a decision is one insert of
// "<id>/d", so only the first of PENDING -> COMMITTED and PENDING ->
// ABORTED applies.
func (s txStore) SetTxState(ctx context.Context, id txledger.TxID, from, to txledger.State) (bool, error) {
	rec, err := s.ReadTx(ctx, id)
	if err != nil || rec == nil || rec.State != from {
		return false, err
	}
	if from != txledger.Pending {
		return false, backend.Errorf(backend.KindInternal, "mongodb: transaction state change %v -> %v", from, to)
	}
	_, err = s.b.db.Collection(txColl).InsertOne(ctx, txDoc{ID: txKey(id) + "/d", S: int(to)})
	if isDup(err) {
		return false, nil
	}
	return err == nil, translate(err, "mongodb: decide transaction")
}

// TouchTx implements txledger.Items: the record's start time moves
// forward ($max), then the decision is read. The two are not one atomic
// step: a decision made between them is learned at the commit instead.
func (s txStore) TouchTx(ctx context.Context, id txledger.TxID, at time.Time) (bool, error) {
	res, err := s.b.db.Collection(txColl).UpdateOne(ctx, bson.D{{Key: "_id", Value: txKey(id)}},
		bson.D{{Key: "$max", Value: bson.D{{Key: "st", Value: at.UnixMilli()}}}})
	if err != nil {
		return false, translate(err, "mongodb: touch transaction record")
	}
	if res.MatchedCount == 0 {
		return false, nil
	}
	rec, err := s.ReadTx(ctx, id)
	if err != nil || rec == nil {
		return false, err
	}
	return rec.State == txledger.Pending, nil
}

// DeleteTx implements txledger.Items.
func (s txStore) DeleteTx(ctx context.Context, id txledger.TxID) error {
	k := txKey(id)
	// The record first: a record without its decision would read PENDING.
	if _, err := s.b.db.Collection(txColl).DeleteOne(ctx, bson.D{{Key: "_id", Value: k}}); err != nil {
		return translate(err, "mongodb: delete transaction record")
	}
	_, err := s.b.db.Collection(txColl).DeleteOne(ctx, bson.D{{Key: "_id", Value: k + "/d"}})
	return translate(err, "mongodb: delete transaction record")
}

// ListTx implements txledger.Items.
func (s txStore) ListTx(ctx context.Context, before time.Time, limit int) ([]txledger.TxRecord, error) {
	cur, err := s.b.db.Collection(txColl).Find(ctx, bson.D{{Key: "st", Value: bson.D{{Key: "$lt", Value: before.UnixMilli()}}}},
		options.Find().SetLimit(int64(limit)))
	if err != nil {
		return nil, translate(err, "mongodb: list transaction records")
	}
	var docs []txDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err, "mongodb: list transaction records")
	}
	var out []txledger.TxRecord
	for _, d := range docs {
		raw, err := hex.DecodeString(d.ID)
		if err != nil || len(raw) != 16 {
			continue
		}
		var id txledger.TxID
		copy(id[:], raw)
		rec, err := s.ReadTx(ctx, id)
		if err != nil {
			return nil, err
		}
		if rec != nil {
			out = append(out, *rec)
		}
	}
	return out, nil
}

// sweep finishes dead coordinators' transactions until ctx ends.
func (b *Backend) sweep(ctx context.Context) {
	every := b.ledger.Options().LockTimeout
	t := time.NewTicker(every)
	defer t.Stop()
	_, _ = b.ledger.Sweep(ctx) // at once: decided transactions a dead server left
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = b.ledger.Sweep(ctx)
		}
	}
}

// settleDoc returns d free of locks (WriteItem's path).
func (b *Backend) settleDoc(ctx context.Context, ref backend.TableRef, pk, sk []byte, d *itemDoc) (*itemDoc, error) {
	if d == nil || d.lock == nil {
		return d, nil
	}
	rec, err := b.ledger.Settle(ctx, txledger.Key{Table: ref, PK: pk, SK: sk}, recordOf(d))
	if err != nil {
		return nil, err
	}
	return docOfRecord(rec), nil
}

// lockOwner reads the record of d's lock's transaction: committed tells
// whether it committed, gone whether the record is missing (an aborted
// transaction's, or a committed one's whose coordinator released its locks
// and deleted it since d was read: the caller reads d again).
func (b *Backend) lockOwner(ctx context.Context, d *itemDoc) (committed, gone bool, err error) {
	if d == nil || d.lock == nil {
		return false, false, nil
	}
	tx, err := txStore{b}.ReadTx(ctx, d.lock.Tx)
	if err != nil {
		return false, false, err
	}
	return tx != nil && tx.State == txledger.Committed, tx == nil, nil
}

var errNoLock = errors.New("not locked")

// parseLock reads the lk and lc fields of a document.
func parseLock(lk, lc bson.RawValue) (*txledger.Lock, error) {
	tx, ok := binaryOf(lk)
	if !ok || len(tx) != 16 {
		return nil, errNoLock
	}
	raw, _ := binaryOf(lc)
	ch, err := txledger.DecodeChange(raw)
	if err != nil {
		return nil, err
	}
	l := &txledger.Lock{Change: ch}
	copy(l.Tx[:], tx)
	return l, nil
}

var _ = mongo.ErrNoDocuments
