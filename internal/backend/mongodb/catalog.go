package mongodb

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
)

func byName(account, name string) bson.D {
	return bson.D{{Key: "a", Value: account}, {Key: "n", Value: name}}
}

// CreateTable implements backend.Backend.
func (b *Backend) CreateTable(ctx context.Context, p backend.CreateTableParams) (*backend.CreateTableResult, error) {
	if err := b.tables.FindOne(ctx, byName(p.Account, p.Name)).Err(); err == nil {
		return nil, backend.Errorf(backend.KindTableExists, "table %q of account %q already exists", p.Name, p.Account)
	} else if !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, translate(err, "mongodb: create table")
	}
	desc := append([]byte{}, p.Desc...)
	for {
		// A random ID: the insert decides uniqueness (a counter would need
		// an atomic update, which FerretDB does not give over several
		// connections).
		d := tableDoc{ID: randomID(), Account: p.Account, Name: p.Name, Desc: desc, Version: 1,
			Created: time.Now().UTC().Truncate(time.Millisecond)}
		_, err := b.tables.InsertOne(ctx, d)
		if err == nil {
			// Best effort: a table without figures is recounted.
			_ = b.startFigures(ctx, d.ID)
			return &backend.CreateTableResult{Table: d.table()}, nil
		}
		if !isDup(err) {
			// An insert lost with its connection may have been applied: the
			// caller sees Unavailable and reads the table again.
			return nil, translate(err, "mongodb: create table")
		}
		if e := b.tables.FindOne(ctx, byName(p.Account, p.Name)).Err(); e == nil {
			return nil, backend.Errorf(backend.KindTableExists, "table %q of account %q already exists", p.Name, p.Account)
		} else if !errors.Is(e, mongo.ErrNoDocuments) {
			return nil, translate(e, "mongodb: create table")
		}
		// The ID was taken: draw another.
	}
}

// GetTable implements backend.Backend.
func (b *Backend) GetTable(ctx context.Context, p backend.GetTableParams) (*backend.GetTableResult, error) {
	var d tableDoc
	err := b.tables.FindOne(ctx, byName(p.Account, p.Name)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, notFoundByName(p.Account, p.Name)
	}
	if err != nil {
		return nil, translate(err, "mongodb: get table")
	}
	return &backend.GetTableResult{Table: d.table()}, nil
}

// ListTables implements backend.Backend.
func (b *Backend) ListTables(ctx context.Context, p backend.ListTablesParams) (*backend.ListTablesResult, error) {
	o := options.Find().SetSort(bson.D{{Key: "n", Value: 1}}).SetProjection(bson.D{{Key: "n", Value: 1}})
	if p.Limit > 0 {
		o.SetLimit(int64(p.Limit))
	}
	cur, err := b.tables.Find(ctx, bson.D{{Key: "a", Value: p.Account}, {Key: "n", Value: bson.D{{Key: "$gt", Value: p.StartAfter}}}}, o)
	if err != nil {
		return nil, translate(err, "mongodb: list tables")
	}
	var docs []struct {
		N string `bson:"n"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, translate(err, "mongodb: list tables")
	}
	res := &backend.ListTablesResult{Names: make([]string, 0, len(docs))}
	for _, d := range docs {
		res.Names = append(res.Names, d.N)
	}
	return res, nil
}

// UpdateTable implements backend.Backend: claim, drain the writers
// registered under the current version, run Fn, write the description
// with the next version and release the claim in one conditional update.
func (b *Backend) UpdateTable(ctx context.Context, p backend.UpdateTableParams) (*backend.UpdateTableResult, error) {
	if p.Fn == nil {
		return nil, backend.Errorf(backend.KindInternal, "mongodb: UpdateTable without Fn")
	}
	c, err := b.claimTable(ctx, byName(p.Account, p.Name), func() error { return notFoundByName(p.Account, p.Name) }, nil)
	if err != nil {
		return nil, err
	}
	defer b.unclaim(c)
	old := c.doc.table()
	desc, err := p.Fn(old) // backend.Checked recovers a panic of the function
	if err != nil {
		return nil, err
	}
	if desc == nil {
		desc = []byte{}
	}
	if err := c.valid(); err != nil {
		return nil, err
	}
	// The claim's holder is the only writer of the catalog document.
	res, err := b.tables.UpdateOne(ctx, bson.D{{Key: "_id", Value: old.ID}}, bson.D{
		{Key: "$set", Value: bson.D{{Key: "d", Value: desc}, {Key: "v", Value: old.Version + 1}}},
		{Key: "$unset", Value: bson.D{{Key: "x", Value: ""}}}})
	if err != nil {
		return nil, translate(err, "mongodb: update table")
	}
	if res.MatchedCount != 1 {
		return nil, notFoundByName(p.Account, p.Name)
	}
	nt := *old
	nt.Desc = append([]byte{}, desc...)
	nt.Version++
	return &backend.UpdateTableResult{Table: &nt}, nil
}

// DeleteTable implements backend.Backend: claim, drain, remove the catalog
// document (new writers and readers find the table gone), then drop the
// table's collection.
func (b *Backend) DeleteTable(ctx context.Context, p backend.DeleteTableParams) (*backend.DeleteTableResult, error) {
	c, err := b.claimTable(ctx, byName(p.Account, p.Name), func() error { return notFoundByName(p.Account, p.Name) }, nil)
	if err != nil {
		return nil, err
	}
	id := c.doc.ID
	if err := c.valid(); err != nil {
		b.unclaim(c)
		return nil, err
	}
	res, err := b.tables.DeleteOne(ctx, bson.D{{Key: "_id", Value: id}})
	if err != nil {
		b.unclaim(c)
		return nil, translate(err, "mongodb: delete table")
	}
	if res.DeletedCount != 1 {
		b.unclaim(c)
		return nil, notFoundByName(p.Account, p.Name)
	}
	// The table is gone from the catalog: what follows is garbage no
	// reader reaches (a failure leaves it for a later cleanup).
	if err := b.items(id).Drop(ctx); err != nil {
		return nil, translate(err, "mongodb: drop the table's collection")
	}
	if err := b.claims(id).Drop(ctx); err != nil {
		return nil, translate(err, "mongodb: drop the table's claims")
	}
	if err := b.logColl(id).Drop(ctx); err != nil {
		return nil, translate(err, "mongodb: drop the table's change log")
	}
	if err := b.hintsColl(id).Drop(ctx); err != nil {
		return nil, translate(err, "mongodb: drop the table's change log hints")
	}
	if err := b.forgetFigures(ctx, id); err != nil {
		return nil, err
	}
	if _, err := b.fence.DeleteMany(ctx, bson.D{{Key: "t", Value: id}}); err != nil {
		return nil, translate(err, "mongodb: delete the table's fence documents")
	}
	b.mu.Lock()
	for k := range b.indexed {
		if len(k) > len(itemsName(id)) && k[:len(itemsName(id))+1] == itemsName(id)+"/" {
			delete(b.indexed, k)
		}
	}
	delete(b.indexed, logName(id)+"/r")
	b.mu.Unlock()
	return &backend.DeleteTableResult{Table: c.doc.table()}, nil
}

// DropIndex implements backend.Backend, fenced on the version: the claim
// is taken only at p.Table.Version, and the entries are removed before
// the claim is released.
func (b *Backend) DropIndex(ctx context.Context, p backend.DropIndexParams) (*backend.DropIndexResult, error) {
	c, err := b.claimTable(ctx, bson.D{{Key: "_id", Value: p.Table.ID}},
		func() error { return tableNotFound(p.Table) },
		func(d *tableDoc) error {
			if d.Version != p.Table.Version {
				return backend.VersionChanged(p.Table, d.Version)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	defer b.unclaim(c)
	if err := c.valid(); err != nil {
		return nil, err
	}
	// The claim drained the writers: no item write runs while the
	// entries are removed (item documents are never deleted, see items.go)
	// and no delta of the index is left to come once the pending ones are
	// folded.
	if err := b.dropIndexFigures(ctx, p.Table.ID, p.Index); err != nil {
		return nil, err
	}
	ifield, pfield := indexField(p.Index), projField(p.Index)
	coll := b.items(p.Table.ID)
	if _, err := coll.UpdateMany(ctx, bson.D{{Key: ifield, Value: bson.D{{Key: "$exists", Value: true}}}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: ifield, Value: ""}, {Key: pfield, Value: ""}}}, {Key: "$inc", Value: bson.D{{Key: "v", Value: int64(1)}}}}); err != nil {
		return nil, translate(err, "mongodb: drop index")
	}
	return &backend.DropIndexResult{}, nil
}
