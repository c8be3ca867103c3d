package mongodb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/storage"
)

// The table-version fence without multi-document transactions (ADR 0015).
// A single-document write cannot check another document, so the catalog
// document works as a readers-writer lock with leases:
//
//   - an item write first registers itself in the table's catalog
//     document, by one conditional update that checks the version it was
//     computed from and that no catalog change is waiting
//     ({_id, v: ref.Version, x < now} → $set f.<token>: lease expiry);
//     that update is the fence check. It then writes the item (abandoning
//     the write at its lease's end) and unregisters ($unset f.<token>).
//   - a catalog change that must be ordered after the writes (UpdateTable,
//     DeleteTable, DropIndex) first claims the document ($set x: claim
//     expiry, when no other claim is live), which refuses new
//     registrations, waits until every registration is gone or its lease
//     has expired, then applies its change and clears the claim in one
//     update conditioned on its claim.
//
// So every write that passed the check finishes before the version moves
// on, and no write checks against a version once a change is claimed.
// Limits: leases trust the servers' clocks to within a fraction of the
// lease, and a writer killed while registered delays catalog changes of
// that table until its lease expires.

type tableDoc struct {
	ID      int64            `bson:"_id"`
	Account string           `bson:"a"`
	Name    string           `bson:"n"`
	Desc    []byte           `bson:"d"`
	Version int64            `bson:"v"`
	Created time.Time        `bson:"c"`
	Writers map[string]int64 `bson:"f"` // token → lease expiry (Unix ms)
	Claim   int64            `bson:"x"` // exclusive claim expiry (Unix ms), 0 = none
}

func (d *tableDoc) table() *storage.Table {
	desc := d.Desc
	if desc == nil {
		desc = []byte{}
	}
	return &storage.Table{Account: d.Account, Name: d.Name, ID: d.ID, Desc: desc, Version: d.Version, CreatedAt: d.Created.UTC()}
}

func nowMs() int64 { return time.Now().UnixMilli() }

func token() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// backoff sleeps a little longer each attempt, or returns the context's error.
func backoff(ctx context.Context, attempt int) error {
	d := time.Millisecond << min(attempt, 5) // 1..32 ms
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// lease is a writer's registration in a table's fence.
type lease struct {
	b      *Backend
	id     int64
	tok    string
	expiry time.Time
}

// register checks ref.Version and registers a writer, waiting while a
// catalog change is claimed.
func (b *Backend) register(ctx context.Context, ref storage.TableRef) (*lease, error) {
	tok := token()
	for attempt := 0; ; attempt++ {
		now := time.Now()
		exp := now.Add(b.lease)
		res, err := b.tables.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: ref.ID}, {Key: "v", Value: ref.Version}, {Key: "x", Value: bson.D{{Key: "$lt", Value: now.UnixMilli()}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "f." + tok, Value: exp.UnixMilli()}}}})
		if err != nil {
			return nil, translate(err, "mongodb: table fence")
		}
		if res.MatchedCount == 1 {
			return &lease{b: b, id: ref.ID, tok: tok, expiry: exp}, nil
		}
		d, err := b.tableByID(ctx, ref.ID)
		if err != nil {
			return nil, err
		}
		if d == nil {
			return nil, tableNotFound(ref)
		}
		if d.Version != ref.Version {
			return nil, storage.VersionChanged(ref, d.Version)
		}
		// A catalog change is claimed: wait for it.
		if err := backoff(ctx, attempt); err != nil {
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
	_, _ = l.b.tables.UpdateOne(ctx, bson.D{{Key: "_id", Value: l.id}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "f." + l.tok, Value: ""}}}})
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
func (b *Backend) live(ctx context.Context, ref storage.TableRef) error {
	err := b.tables.FindOne(ctx, bson.D{{Key: "_id", Value: ref.ID}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return tableNotFound(ref)
	}
	return translate(err, "mongodb: read table")
}

// claim is an exclusive catalog change in progress.
type claim struct {
	doc *tableDoc // the table as of after the drain
	x   int64
	id  int64
}

// claimTable claims the table found by lookup (with the extra conditions
// pin, e.g. a version) and waits until its registered writers are gone.
// notFound builds the error for a missing table; stale, when non-nil,
// checks a found document that pin refused and may refuse the change (the
// version fence of DropIndex).
func (b *Backend) claimTable(ctx context.Context, lookup, pin bson.D, notFound func() error, stale func(*tableDoc) error) (*claim, error) {
	var x, id int64
	for attempt := 0; ; attempt++ {
		now := nowMs()
		x = now + (3 * b.lease).Milliseconds()
		f := append(append(append(bson.D{}, lookup...), pin...), bson.E{Key: "x", Value: bson.D{{Key: "$lt", Value: now}}})
		var d tableDoc
		err := b.tables.FindOneAndUpdate(ctx, f, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: x}}}},
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
		if err == nil {
			id = d.ID
			break
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return nil, translate(err, "mongodb: claim table")
		}
		err = b.tables.FindOne(ctx, lookup).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return nil, notFound()
		}
		if err != nil {
			return nil, translate(err, "mongodb: read table")
		}
		if stale != nil {
			if err := stale(&d); err != nil {
				return nil, err
			}
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, translate(err, "mongodb: waiting for another catalog change of the table")
		}
	}
	c := &claim{x: x, id: id}
	// Drain: wait until every registration is gone or expired.
	for attempt := 0; ; attempt++ {
		var d tableDoc
		err := b.tables.FindOne(ctx, bson.D{{Key: "_id", Value: id}, {Key: "x", Value: x}}).Decode(&d)
		if err != nil {
			b.unclaim(c)
			if errors.Is(err, mongo.ErrNoDocuments) {
				return nil, storage.Errorf(storage.KindUnavailable, "mongodb: the catalog claim was lost (it outlived its lease)")
			}
			return nil, translate(err, "mongodb: read table")
		}
		now := nowMs()
		busy := false
		for _, exp := range d.Writers {
			if exp >= now {
				busy = true
				break
			}
		}
		if !busy {
			c.doc = &d
			return c, nil
		}
		if err := backoff(ctx, attempt); err != nil {
			b.unclaim(c)
			return nil, translate(err, "mongodb: waiting for the table's writers")
		}
	}
}

// filter selects the claimed document while the claim holds.
func (c *claim) filter() bson.D { return bson.D{{Key: "_id", Value: c.id}, {Key: "x", Value: c.x}} }

// unclaim gives the claim up without a change.
func (b *Backend) unclaim(c *claim) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = b.tables.UpdateOne(ctx, c.filter(), bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: int64(0)}}}})
}
