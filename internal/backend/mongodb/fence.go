package mongodb

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
)

// The table-version fence without multi-document transactions (ADR 0017).
// Every decision is an insert of a unique _id, the one write FerretDB
// applies atomically over any number of connections (its updates check
// their filter in a read before writing by _id). In the collection fence:
//
//   - a writer inserts its registration w/<table>/<token> (with a lease
//     expiry), then reads the catalog document: table gone →
//     TableNotFound; another version → KindTableVersion; marked with a
//     claim that is live → it withdraws and waits. Otherwise
//     it writes the item under a context that ends before its lease, then
//     deletes its registration.
//   - a catalog change (UpdateTable, DeleteTable, DropIndex) inserts the
//     claim x/<table>/<generation> after the latest one, when that one is
//     released or expired, marks the catalog document with it, then waits
//     until no live registration is left,
//     applies its change (it is the only writer of the catalog document)
//     and marks its claim released.
//
// Each side writes its own document and then reads the other's: with the
// server's writes in one order, a writer that missed the claim registered
// before it and is seen by the claimant's drain. So every write that passed
// the check finishes before the version moves on. Limits: leases trust the
// servers' clocks, a killed writer or claimant holds the table until its
// lease ends, and a write sent before its deadline but applied after its
// lease is not fenced.

type tableDoc struct {
	ID      int64     `bson:"_id"`
	Account string    `bson:"a"`
	Name    string    `bson:"n"`
	Desc    []byte    `bson:"d"`
	Version int64     `bson:"v"`
	Created time.Time `bson:"c"`
	// Claim names the catalog claim whose holder is changing the table
	// ("" when none): set by the holder after winning the claim, so a
	// writer's one read of the catalog document sees it.
	Claim string `bson:"x,omitempty"`
	// Snaps are the table's open snapshot epochs (snapshot.go).
	Snaps []snapEpoch `bson:"se,omitempty"`
}

func (d *tableDoc) table() *backend.Table {
	desc := d.Desc
	if desc == nil {
		desc = []byte{}
	}
	return &backend.Table{Account: d.Account, Name: d.Name, ID: d.ID, Desc: desc, Version: d.Version, CreatedAt: d.Created.UTC()}
}

func nowMs() int64 { return time.Now().UnixMilli() }

func token() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// randomID draws a positive table ID (the insert of the catalog document
// decides uniqueness).
func randomID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:])>>2) + 1
}

// retryCeiling bounds the average pause between two attempts of a
// contended operation (backend.Backoff).
const retryCeiling = 32 * time.Millisecond

func regPrefix(id int64) string   { return fmt.Sprintf("w/%d/", id) }
func claimPrefix(id int64) string { return fmt.Sprintf("x/%d/", id) }

func prefixRange(p string) bson.D {
	return bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: p}, {Key: "$lt", Value: p + top}}}}
}

type fenceDoc struct {
	ID   string `bson:"_id"`
	T    int64  `bson:"t"`
	Exp  int64  `bson:"exp"`
	Gen  int64  `bson:"g"`
	Done bool   `bson:"done"`
}

// lease is a writer's registration in a table's fence.
type lease struct {
	b      *Backend
	id     string
	expiry time.Time
	epochs []string // the table's open snapshot epochs, as read at registration
	// version is the description version checked at registration
	// (checked false: registerLive, any version).
	version int64
	checked bool
}

// usable tells whether the lease still has time left for a write (the
// margin of context).
func (l *lease) usable() bool { return time.Now().Before(l.expiry.Add(-l.b.lease / 2)) }

// register checks ref.Version and registers a writer, waiting while a
// catalog change is claimed.
func (b *Backend) register(ctx context.Context, ref backend.TableRef) (*lease, error) {
	return b.registerAt(ctx, ref, true)
}

// registerLive registers a writer of a live table at any version (the
// release of a decided transaction's lock: its change always lands, and a
// catalog change still drains it).
func (b *Backend) registerLive(ctx context.Context, ref backend.TableRef) (*lease, error) {
	return b.registerAt(ctx, ref, false)
}

func (b *Backend) registerAt(ctx context.Context, ref backend.TableRef, checkVersion bool) (*lease, error) {
	for attempt := 0; ; attempt++ {
		exp := time.Now().Add(b.lease)
		l := &lease{b: b, id: regPrefix(ref.ID) + token(), expiry: exp, version: ref.Version, checked: checkVersion}
		if _, err := b.fence.InsertOne(ctx, fenceDoc{ID: l.id, T: ref.ID, Exp: exp.UnixMilli()}); err != nil {
			return nil, translate(err, "mongodb: table fence")
		}
		d, err := b.tableByID(ctx, ref.ID)
		if err == nil && d == nil {
			err = tableNotFound(ref)
		}
		if err == nil && checkVersion && d.Version != ref.Version {
			err = backend.VersionChanged(ref, d.Version)
		}
		var live bool
		if err == nil && d.Claim != "" {
			live, err = b.claimLive(ctx, d.Claim)
		}
		if err == nil && !live {
			l.epochs = openEpochs(d.Snaps)
			return l, nil
		}
		l.release()
		if err != nil {
			return nil, err
		}
		// A catalog change is claimed: wait for it.
		if err := backend.Backoff(ctx, attempt, retryCeiling); err != nil {
			return nil, translate(err, "mongodb: waiting for a catalog change of the table")
		}
	}
}

// context bounds a write to the lease (with a margin for the server).
func (l *lease) context(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, l.expiry.Add(-l.b.lease/4))
}

// release unregisters the writer (also when the caller's context ended).
func (l *lease) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = l.b.fence.DeleteOne(ctx, bson.D{{Key: "_id", Value: l.id}})
}

// claimLive tells whether a claim is held (not released, not expired).
func (b *Backend) claimLive(ctx context.Context, id string) (bool, error) {
	var d fenceDoc
	err := b.fence.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, translate(err, "mongodb: read the table's claim")
	}
	return !d.Done && d.Exp > nowMs(), nil
}

// latestClaim returns the table's latest claim generation (-1: none) and
// whether it is live (not released, not expired).
func (b *Backend) latestClaim(ctx context.Context, id int64) (int64, bool, error) {
	var d fenceDoc
	err := b.fence.FindOne(ctx, prefixRange(claimPrefix(id)), options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return -1, false, nil
	}
	if err != nil {
		return 0, false, translate(err, "mongodb: read the table's claim")
	}
	return d.Gen, !d.Done && d.Exp > nowMs(), nil
}

func (b *Backend) tableByID(ctx context.Context, id int64) (*tableDoc, error) {
	var d tableDoc
	err := b.tables.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(err, "mongodb: read table")
	}
	return &d, nil
}

// live checks that a table incarnation exists (reads answer
// KindTableNotFound for a deleted one).
func (b *Backend) live(ctx context.Context, ref backend.TableRef) error {
	err := b.tables.FindOne(ctx, bson.D{{Key: "_id", Value: ref.ID}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return tableNotFound(ref)
	}
	return translate(err, "mongodb: read table")
}

// claim is an exclusive catalog change in progress.
type claim struct {
	doc    *tableDoc // the table as of after the drain
	id     string    // the claim document
	expiry time.Time
	margin time.Duration
}

// claimTable claims the table found by lookup and waits until its
// registered writers are gone. notFound builds the error for a missing
// table; check, when non-nil, may refuse the change on the found table
// (the version fence of DropIndex).
func (b *Backend) claimTable(ctx context.Context, lookup bson.D, notFound func() error, check func(*tableDoc) error) (*claim, error) {
	var c *claim
	for attempt := 0; ; attempt++ {
		var d tableDoc
		err := b.tables.FindOne(ctx, lookup).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, notFound()
		}
		if err != nil {
			return nil, translate(err, "mongodb: read table")
		}
		if check != nil {
			if err := check(&d); err != nil {
				return nil, err
			}
		}
		gen, live, err := b.latestClaim(ctx, d.ID)
		if err != nil {
			return nil, err
		}
		if !live {
			exp := time.Now().Add(3 * b.lease)
			cid := fmt.Sprintf("%s%016d", claimPrefix(d.ID), gen+1)
			_, err := b.fence.InsertOne(ctx, fenceDoc{ID: cid, T: d.ID, Exp: exp.UnixMilli(), Gen: gen + 1})
			if err == nil {
				c = &claim{id: cid, expiry: exp, margin: b.lease}
				// Mark the catalog document (the holder is its only
				// writer), then read the table as of the claim: it may
				// have changed since the read above.
				_, err := b.tables.UpdateOne(ctx, bson.D{{Key: "_id", Value: d.ID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: cid}}}})
				if err != nil {
					b.unclaim(c)
					return nil, translate(err, "mongodb: mark table claimed")
				}
				cur, err := b.tableByID(ctx, d.ID)
				if err == nil && cur == nil {
					err = notFound()
				}
				if err == nil && check != nil {
					err = check(cur)
				}
				if err != nil {
					b.unclaim(c)
					return nil, err
				}
				c.doc = cur
				break
			}
			if !isDup(err) {
				return nil, translate(err, "mongodb: claim table")
			}
		}
		if err := backend.Backoff(ctx, attempt, retryCeiling); err != nil {
			return nil, translate(err, "mongodb: waiting for another catalog change of the table")
		}
	}
	// Drain: wait until every registration is gone or expired.
	for attempt := 0; ; attempt++ {
		f := append(prefixRange(regPrefix(c.doc.ID)), bson.E{Key: "exp", Value: bson.D{{Key: "$gt", Value: nowMs()}}})
		n, err := b.fence.CountDocuments(ctx, f)
		if err != nil {
			b.unclaim(c)
			return nil, translate(err, "mongodb: read the table's writers")
		}
		if n == 0 {
			return c, nil
		}
		if err := backend.Backoff(ctx, attempt, retryCeiling); err != nil {
			b.unclaim(c)
			return nil, translate(err, "mongodb: waiting for the table's writers")
		}
	}
}

// valid tells whether the claim still holds with a lease to spare (a
// change applied after its expiry could race with the next claimant). The
// claim lasts 3 leases; the drain takes at most about one.
func (c *claim) valid() error {
	if time.Now().After(c.expiry.Add(-c.margin)) {
		return backend.Errorf(backend.KindUnavailable, "mongodb: the catalog claim outlived its lease")
	}
	return nil
}

// unclaim releases the claim (and clears the catalog document's mark,
// unless the change already did or the table is gone).
func (b *Backend) unclaim(c *claim) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c.doc != nil {
		_, _ = b.tables.UpdateOne(ctx, bson.D{{Key: "_id", Value: c.doc.ID}, {Key: "x", Value: c.id}},
			bson.D{{Key: "$unset", Value: bson.D{{Key: "x", Value: ""}}}})
	}
	_, _ = b.fence.UpdateOne(ctx, bson.D{{Key: "_id", Value: c.id}}, bson.D{{Key: "$set", Value: bson.D{{Key: "done", Value: true}}}})
}
