package mongodb

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/snapepoch"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// The snapshot capability without server snapshots (ADR 0017,
// "Snapshots"): pre-images of an open epoch kept inside the item
// documents.
//
//   - Opening is a catalog change: the claim drains the table's writers,
//     the locks of transactions are settled (a PENDING one is aborted, a
//     COMMITTED one rolled forward), the epoch E is added to the catalog
//     document (se) and the claim released. The instant is then: every
//     write that passed the fence before it has finished, no lock of an
//     undecided transaction is left, and every later writer reads E in the
//     catalog document when it registers.
//   - A writer that knows open epochs keeps, in the same single-document
//     write, s_E = the item before its write (BSON null: absent) for each
//     open E the document does not hold yet. Writes of one document are
//     serialized by the version claims, so s_E is the item at the instant;
//     later writes carry it. A lock (LockItem) does not change the item;
//     the release of a committed transaction records s_E like a write.
//   - The reader scans the collection in _id order: s_E when present, else
//     the stored item (unchanged since the instant; a lock taken after the
//     instant shows the stored item, its transaction committed after it).
//   - Closing removes E from the catalog document (a catalog change);
//     stale s_ fields are dropped by each document's next write (never by
//     an update of a live document, which FerretDB does not apply
//     atomically). An epoch expires after snapshotTTL.

type snapEpoch struct {
	E   string `bson:"e"`
	Exp int64  `bson:"exp"`
}

// preImage is an item as of a snapshot's instant.
type preImage struct {
	item []byte
	has  bool
}

// snapshotTTL bounds an epoch whose holder died without closing it.
const snapshotTTL = 24 * time.Hour

// maxOpenSnapshots bounds the snapshots one process holds open.
const maxOpenSnapshots = 16

// epochMap is the catalog's epochs with their expiry, as package
// snapepoch (shared with the Cassandra backend) takes them.
func epochMap(snaps []snapEpoch) map[string]time.Time {
	m := make(map[string]time.Time, len(snaps))
	for _, s := range snaps {
		m[s.E] = time.UnixMilli(s.Exp)
	}
	return m
}

func openEpochs(snaps []snapEpoch) []string {
	return snapepoch.Open(epochMap(snaps), time.UnixMilli(nowMs()), 0)
}

// preImages is what a write of cur keeps for the open epochs: the
// document's own pre-image of each, or else the item before the write.
func preImages(cur *itemDoc, epochs []string) map[string]preImage {
	if len(epochs) == 0 {
		return nil
	}
	out := make(map[string]preImage, len(epochs))
	for _, e := range epochs {
		if cur != nil {
			if p, ok := cur.pre[e]; ok {
				out[e] = p
				continue
			}
			out[e] = preImage{item: cur.item, has: cur.hasItem}
			continue
		}
		out[e] = preImage{}
	}
	return out
}

func preFields(pre map[string]preImage) []bson.E {
	var out []bson.E
	for e, p := range pre {
		if p.has {
			out = append(out, bson.E{Key: "s_" + e, Value: nz(p.item)})
		} else {
			out = append(out, bson.E{Key: "s_" + e, Value: nil})
		}
	}
	return out
}

var openSnapshots atomic.Int64

// OpenTableSnapshot implements backend.Snapshotter.
func (b *Backend) OpenTableSnapshot(ctx context.Context, p backend.OpenSnapshotParams) (*backend.TableSnapshot, error) {
	if openSnapshots.Add(1) > maxOpenSnapshots {
		openSnapshots.Add(-1)
		return nil, backend.Errorf(backend.KindLimitExceeded, "mongodb: %d table snapshots are open in this server", maxOpenSnapshots)
	}
	snap, err := b.openSnapshot(ctx, p)
	if err != nil {
		openSnapshots.Add(-1)
	}
	return snap, err
}

func (b *Backend) openSnapshot(ctx context.Context, p backend.OpenSnapshotParams) (*backend.TableSnapshot, error) {
	c, err := b.claimTable(ctx, byName(p.Account, p.Name), func() error { return notFoundByName(p.Account, p.Name) }, nil)
	if err != nil {
		return nil, err
	}
	tbl := c.doc.table()
	ref := tbl.Ref()
	epoch := token()
	pinned := func() error {
		defer b.unclaim(c)
		// Settle every lock: no transaction decided after the instant
		// may hold an item locked before it.
		hold := &lease{b: b, expiry: c.expiry}
		sctx := context.WithValue(ctx, regCtxKey{ref.ID}, hold)
		if err := b.settleAllLocks(sctx, ref); err != nil {
			return err
		}
		if err := c.valid(); err != nil {
			return err
		}
		snaps := []snapEpoch{{E: epoch, Exp: time.Now().Add(snapshotTTL).UnixMilli()}}
		now := nowMs()
		for _, s := range c.doc.Snaps {
			if s.Exp > now {
				snaps = append(snaps, s)
			}
		}
		if _, err := b.tables.UpdateOne(ctx, bson.D{{Key: "_id", Value: ref.ID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "se", Value: snaps}}}}); err != nil {
			return translate(err, "mongodb: open a snapshot epoch")
		}
		return nil
	}
	if err := pinned(); err != nil {
		return nil, err
	}
	at := time.Now()
	if p.AfterPin != nil {
		p.AfterPin()
	}
	field := "s_" + epoch
	fetch := func(ctx context.Context, after *backend.Cursor, limit int) ([]backend.Row, bool, error) {
		d, err := b.tableByID(ctx, ref.ID)
		if err != nil {
			return nil, false, err
		}
		if d == nil || !containsEpoch(d.Snaps, epoch) {
			return nil, false, backend.Errorf(backend.KindSnapshotExpired, "mongodb: the snapshot of table %q ended (table deleted or epoch expired)", ref.Name)
		}
		conds := bson.A{bson.D{{Key: "$or", Value: bson.A{
			bson.D{{Key: "it", Value: bson.D{{Key: "$exists", Value: true}}}},
			bson.D{{Key: field, Value: bson.D{{Key: "$exists", Value: true}}}}}}}}
		if after != nil {
			conds = append(conds, bson.D{{Key: "_id", Value: bson.D{{Key: "$gt", Value: itemID(after.PK, after.SK)}}}})
		}
		o := options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(int32(min(limit+1, 10000))).
			SetProjection(bson.D{{Key: "it", Value: 1}, {Key: field, Value: 1}})
		cur, err := b.items(ref.ID).Find(ctx, bson.D{{Key: "$and", Value: conds}}, o)
		if err != nil {
			return nil, false, translate(err, "mongodb: read snapshot")
		}
		defer cur.Close(context.Background())
		var rows []backend.Row
		for cur.Next(ctx) {
			d, err := parseItemDoc(cur.Current)
			if err != nil {
				return nil, false, backend.Wrap(backend.KindInternal, err, "mongodb: decode snapshot row")
			}
			var pre *snapepoch.PreImage
			if pi, ok := d.pre[epoch]; ok {
				pre = &snapepoch.PreImage{Item: pi.item, Exists: pi.has}
			}
			item, has := snapepoch.Resolve(d.item, d.hasItem, pre)
			if !has {
				continue
			}
			if len(rows) == limit {
				return rows, true, nil
			}
			ks, err := splitKey(d.id, 2)
			if err != nil {
				return nil, false, backend.Wrap(backend.KindInternal, err, "mongodb: decode key")
			}
			rows = append(rows, backend.Row{PK: ks[0], SK: ks[1], BasePK: ks[0], BaseSK: ks[1], Item: nz(item)})
		}
		if err := cur.Err(); err != nil {
			return nil, false, translate(err, "mongodb: read snapshot")
		}
		return rows, false, nil
	}
	release := func() error {
		defer openSnapshots.Add(-1)
		ctx, cancel := context.WithTimeout(context.Background(), 4*b.lease)
		defer cancel()
		return b.closeEpoch(ctx, ref, epoch)
	}
	return &backend.TableSnapshot{Table: tbl, At: at,
		Descriptor: backend.SnapshotDescriptor{Kind: "mongodb_epoch_preimages", Marker: epoch},
		Items:      backend.NewSnapshotStream(fetch, p.PageSize, release)}, nil
}

func containsEpoch(snaps []snapEpoch, e string) bool {
	return snapepoch.Live(epochMap(snaps), e, time.UnixMilli(nowMs()))
}

// closeEpoch removes an epoch from the catalog document (a catalog
// change). A table deleted since has nothing to close.
func (b *Backend) closeEpoch(ctx context.Context, ref backend.TableRef, epoch string) error {
	c, err := b.claimTable(ctx, bson.D{{Key: "_id", Value: ref.ID}}, func() error { return tableNotFound(ref) }, nil)
	if backend.IsKind(err, backend.KindTableNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer b.unclaim(c)
	var keep []snapEpoch
	now := nowMs()
	for _, s := range c.doc.Snaps {
		if s.E != epoch && s.Exp > now {
			keep = append(keep, s)
		}
	}
	update := bson.D{{Key: "$set", Value: bson.D{{Key: "se", Value: keep}}}}
	if len(keep) == 0 {
		update = bson.D{{Key: "$unset", Value: bson.D{{Key: "se", Value: ""}}}}
	}
	_, err = b.tables.UpdateOne(ctx, bson.D{{Key: "_id", Value: ref.ID}}, update)
	return translate(err, "mongodb: close a snapshot epoch")
}

// settleAllLocks decides and releases every transaction lock in the table
// (under a catalog claim: no writer runs, no new lock is taken): a PENDING
// transaction is aborted, a COMMITTED one rolled forward.
func (b *Backend) settleAllLocks(ctx context.Context, ref backend.TableRef) error {
	cur, err := b.items(ref.ID).Find(ctx, bson.D{{Key: "lk", Value: bson.D{{Key: "$exists", Value: true}}}})
	if err != nil {
		return translate(err, "mongodb: read locked items")
	}
	var locked []*itemDoc
	for cur.Next(ctx) {
		d, err := parseItemDoc(cur.Current)
		if err != nil {
			cur.Close(ctx)
			return backend.Wrap(backend.KindInternal, err, "mongodb: decode item")
		}
		if d.lock != nil {
			locked = append(locked, d)
		}
	}
	if err := cur.Err(); err != nil {
		cur.Close(ctx)
		return translate(err, "mongodb: read locked items")
	}
	cur.Close(ctx)
	st := txStore{b}
	for _, d := range locked {
		if _, err := st.SetTxState(ctx, d.lock.Tx, txledger.Pending, txledger.Aborted); err != nil {
			return err
		}
		tx, err := st.ReadTx(ctx, d.lock.Tx)
		if err != nil {
			return err
		}
		ks, err := splitKey(d.id, 2)
		if err != nil {
			return backend.Wrap(backend.KindInternal, err, "mongodb: decode key")
		}
		commit := tx != nil && tx.State == txledger.Committed
		k := txledger.Key{Table: ref, PK: ks[0], SK: ks[1]}
		owner := d.lock.Tx
		// Until released: a killed writer's version claim holds the
		// document for up to one lease.
		for attempt := 0; ; attempt++ {
			ok, err := st.ReleaseItem(ctx, k, recordOf(d), commit)
			if err != nil {
				return err
			}
			if ok {
				break
			}
			if d, err = b.readDoc(ctx, b.items(ref.ID), d.id); err != nil {
				return err
			}
			if d == nil || d.lock == nil || d.lock.Tx != owner {
				break
			}
			if err := backend.Backoff(ctx, attempt, retryCeiling); err != nil {
				return translate(err, "mongodb: settle a lock for a snapshot")
			}
		}
	}
	return nil
}

var (
	_ backend.Snapshotter = (*Backend)(nil)
	_                     = errors.New
	_                     = mongo.ErrNoDocuments
)
