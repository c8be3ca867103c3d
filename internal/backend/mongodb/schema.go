package mongodb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/extenddb/extenddb/internal/backend"
)

// A migration is a named, idempotent change of the database's collections
// and indexes. Its checksum is over Spec, the canonical text of what it
// creates: editing a shipped migration changes the checksum, and a
// database where it was applied refuses the build (KindSchema), as the SQL
// backends do with their migration files.
type migration struct {
	Name  string
	Spec  string
	Apply func(ctx context.Context, db *mongo.Database) error
}

func (m migration) checksum() string {
	s := sha256.Sum256([]byte(m.Name + "\n" + m.Spec))
	return hex.EncodeToString(s[:])
}

var migrationList = []migration{
	{
		Name: "0001_catalog",
		Spec: "collection tables; unique index account_name {a:1,n:1}; collection fence",
		Apply: func(ctx context.Context, db *mongo.Database) error {
			if err := createCollection(ctx, db, "tables"); err != nil {
				return err
			}
			if err := createCollection(ctx, db, "fence"); err != nil {
				return err
			}
			_, err := db.Collection("tables").Indexes().CreateOne(ctx, mongo.IndexModel{
				Keys:    bson.D{{Key: "a", Value: 1}, {Key: "n", Value: 1}},
				Options: options.Index().SetName("account_name").SetUnique(true),
			})
			return err
		},
	},
	{
		Name: "0002_txledger",
		Spec: "collection txs; index started {st:1}",
		Apply: func(ctx context.Context, db *mongo.Database) error {
			if err := createCollection(ctx, db, txColl); err != nil {
				return err
			}
			_, err := db.Collection(txColl).Indexes().CreateOne(ctx, mongo.IndexModel{
				Keys: bson.D{{Key: "st", Value: 1}}, Options: options.Index().SetName("started")})
			return err
		},
	},
	{
		Name: "0003_backup_catalog",
		Spec: "collections backups, restores, jobclaims, backupmeta",
		Apply: func(ctx context.Context, db *mongo.Database) error {
			for _, c := range []string{backupsColl, restoresColl, jobClaimsColl, backupMeta} {
				if err := createCollection(ctx, db, c); err != nil {
					return err
				}
			}
			return nil
		},
	},
	{
		Name:  "0004_changelog_seq_keys",
		Spec:  "collections l<table id>: records {_id: int Seq, ...} become {_id: 16-hex-digit Seq, s: Seq, ...}",
		Apply: migrateLogKeys,
	},
}

// migrateLogKeys rewrites the change log records of every table from the
// first layout (_id the Seq as a number) to string keys (changelog.go):
// it drops the unique index on r (the next publisher recreates it),
// inserts each old record under its new key, then deletes the old ones.
// Idempotent and safe to interrupt: a rerun finishes the copy. Run by
// `extenddb migrate`, while no server publishes.
func migrateLogKeys(ctx context.Context, db *mongo.Database) error {
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return err
	}
	for _, name := range names {
		if !isLogName(name) {
			continue
		}
		coll := db.Collection(name)
		cur, err := coll.Find(ctx, bson.D{})
		if err != nil {
			return err
		}
		var old []bson.M
		if err := cur.All(ctx, &old); err != nil {
			return err
		}
		var ids bson.A
		for _, d := range old {
			var seq int64
			switch v := d["_id"].(type) {
			case int64:
				seq = v
			case int32:
				seq = int64(v)
			default:
				continue // a record of the current layout
			}
			if len(ids) == 0 {
				if err := coll.Indexes().DropOne(ctx, "r"); err != nil {
					var ce mongo.CommandError
					if !errors.As(err, &ce) || (ce.Code != 27 && ce.Name != "IndexNotFound") {
						return err
					}
				}
			}
			ids = append(ids, d["_id"])
			d["_id"], d["s"] = seqKey(seq), seq
			if _, err := coll.InsertOne(ctx, d); err != nil && !isDup(err) {
				return err
			}
		}
		for len(ids) > 0 {
			n := min(len(ids), 500)
			if _, err := coll.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids[:n]}}}}); err != nil {
				return err
			}
			ids = ids[n:]
		}
	}
	return nil
}

// isLogName reports whether a collection name is a table's change log
// (l<decimal table id>).
func isLogName(name string) bool {
	if len(name) < 2 || name[0] != 'l' {
		return false
	}
	for _, c := range name[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

const migrationsColl = "schema_migrations"

func createCollection(ctx context.Context, db *mongo.Database, name string) error {
	err := db.CreateCollection(ctx, name)
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Code == 48 || ce.Name == "NamespaceExists") {
		return nil
	}
	return err
}

type appliedDoc struct {
	Name     string `bson:"_id"`
	Checksum string `bson:"checksum"`
}

// status returns the applied and pending migration names; an edited or
// unknown applied migration is a KindSchema error.
func status(ctx context.Context, db *mongo.Database) (applied, pending []string, err error) {
	cur, err := db.Collection(migrationsColl).Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, nil, translate(err, "mongodb: read schema_migrations")
	}
	var docs []appliedDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, nil, translate(err, "mongodb: read schema_migrations")
	}
	known := map[string]migration{}
	for _, m := range migrationList {
		known[m.Name] = m
	}
	done := map[string]bool{}
	for _, d := range docs {
		m, ok := known[d.Name]
		if !ok {
			return nil, nil, backend.Errorf(backend.KindSchema,
				"mongodb: the database has migration %s, unknown to this build (the database is newer than this build)", d.Name)
		}
		if d.Checksum != m.checksum() {
			return nil, nil, backend.Errorf(backend.KindSchema,
				"mongodb: migration %s was applied with checksum %s, this build has %s (a shipped migration was edited)", d.Name, d.Checksum, m.checksum())
		}
		done[d.Name] = true
		applied = append(applied, d.Name)
	}
	for _, m := range migrationList {
		if !done[m.Name] {
			pending = append(pending, m.Name)
		}
	}
	return applied, pending, nil
}

func checkSchema(ctx context.Context, db *mongo.Database) error {
	_, pending, err := status(ctx, db)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		return backend.Errorf(backend.KindSchema, "mongodb: database %q is not migrated (pending: %v); run `extenddb migrate`", db.Name(), pending)
	}
	return nil
}

// migrate applies the pending migrations in order and returns their names.
func migrate(ctx context.Context, db *mongo.Database) ([]string, error) {
	_, pending, err := status(ctx, db)
	if err != nil {
		return nil, err
	}
	todo := map[string]bool{}
	for _, p := range pending {
		todo[p] = true
	}
	var done []string
	for _, m := range migrationList {
		if !todo[m.Name] {
			continue
		}
		if err := m.Apply(ctx, db); err != nil {
			return done, translate(err, fmt.Sprintf("mongodb: migration %s", m.Name))
		}
		_, err := db.Collection(migrationsColl).InsertOne(ctx, bson.D{
			{Key: "_id", Value: m.Name}, {Key: "checksum", Value: m.checksum()}, {Key: "applied_at", Value: time.Now().UTC()}})
		if err != nil && !isDup(err) { // a concurrent migrate applied it too (migrations are idempotent)
			return done, translate(err, fmt.Sprintf("mongodb: record migration %s", m.Name))
		}
		done = append(done, m.Name)
	}
	return done, nil
}

// Migrate applies pending migrations on the database of opts.
func Migrate(ctx context.Context, opts Options) ([]string, error) {
	client, db, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer client.Disconnect(context.Background())
	return migrate(ctx, db)
}

// Status reports the applied and pending migrations of opts' database.
func Status(ctx context.Context, opts Options) ([]string, []string, error) {
	client, db, err := connect(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	defer client.Disconnect(context.Background())
	return status(ctx, db)
}
