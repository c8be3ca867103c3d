// Package mongodb is a storage backend on a MongoDB-wire server, built for
// what a standalone server (or FerretDB) has: single-document atomicity
// and unique keys. It uses no multi-document transaction, no snapshot read
// and no change stream, and it decides every conditional transition by an
// insert of a unique _id, since FerretDB's conditional updates are not
// atomic across connections (ADR 0017).
//
// Layout in the database:
//
//   - tables: the catalog, one document per table: _id the table ID
//     (random, decided by the insert), a (account), n (name), d
//     (description), v (version), c (created). Unique index (a, n).
//   - fence: the table-version fence (fence.go): writers' registrations
//     and catalog changes' claims.
//   - schema_migrations: applied migrations with their checksums.
//   - t<ID>: one collection per table incarnation, one document per item:
//     _id the item key in the order-preserving text form (keys.go), it
//     (canonical item bytes; absent for a deleted item or one that only
//     keeps index entries), v (the document version), and per secondary
//     index X (hex of its name) i_X (the index key in the same text form)
//     and j_X (the projected item bytes), with a MongoDB index on i_X. An
//     item and its index entries change in one single-document write.
//   - c<ID>: the table's item version claims (items.go), which are also
//     the hints of the statistics deltas pending in item documents
//     (counts.go).
//   - st<ID>: the table's statistics, one document per fold (counts.go).
package mongodb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// Options configure Open.
type Options struct {
	// URI is the MongoDB connection string.
	URI string
	// Database is the database name (default "extenddb").
	Database string
	// MaxPoolSize bounds the client's connections (0: DefaultMaxPoolSize).
	MaxPoolSize uint64
	// Timeout bounds connecting and server selection (0: 10 s).
	Timeout time.Duration
	// LeaseDuration is how long a writer's registration in the table fence
	// lasts (0: DefaultLease). A write not finished within it is abandoned.
	LeaseDuration time.Duration
	// SkipSchemaCheck opens without checking the migrations (tests that
	// migrate themselves).
	SkipSchemaCheck bool
	// TxLockTimeout is the transaction ledger's LockTimeout (0:
	// DefaultTxLockTimeout): a PENDING transaction older than this may be
	// aborted by anyone (the sweep included), so it must exceed the time a
	// live coordinator takes to lock its items (up to 100 on a slow
	// server); MaxWait is twice it.
	TxLockTimeout time.Duration
	// ItemSize measures items and index entries for the table statistics
	// kept with every write (backend.TableCounter); nil: their length.
	ItemSize backend.ItemSizeFunc
}

// DefaultTxLockTimeout is the ledger's lock timeout on MongoDB: FerretDB
// takes several seconds to lock 100 items on a loaded machine.
const DefaultTxLockTimeout = 15 * time.Second

// DefaultMaxPoolSize is the connection pool size on MongoDB when none is
// configured.
const DefaultMaxPoolSize = 16

// DefaultLease is the default writer lease of the table fence.
const DefaultLease = 30 * time.Second

// Backend is the MongoDB backend.
type Backend struct {
	client *mongo.Client
	db     *mongo.Database
	tables *mongo.Collection
	fence  *mongo.Collection
	lease  time.Duration

	mu      sync.Mutex
	indexed map[string]bool // "t<ID>/<index field>" (and "l<ID>/r") whose MongoDB index exists

	pubs tableLocks // the change log publisher of each table, serialized in this process
	logc logCache   // where the change log searches start (changelog.go)

	ledger    *txledger.Ledger // multi-item transactions (transact.go)
	stopSweep context.CancelFunc
	swept     chan struct{} // closed when the sweep and the fold loop ended

	size     backend.ItemSizeFunc              // the table statistics' measure (counts.go)
	folds    tableLocks                        // the statistics fold of each table, serialized in this process
	finished map[int64]string                  // per table, the figures document whose hints were deleted last
	marks    map[int64]int64                   // per table, the highest figures watermark seen (ms)
	folded   map[int64]map[string]time.Time    // per table, hints lately consumed by a fold
	outcomes map[int64]map[string]writeOutcome // per table, this process's writes not folded yet
	bg       folder                            // the background fold
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "mongodb" }

// Capabilities implements backend.Backend: snapshots, the job catalogs
// and a change log; TransactWrite runs on the transaction ledger, so
// writes that need no atomicity across items go item by item.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Snapshots: b, Backups: b, Restores: b, Jobs: b, ChangeLog: b, PerItemAtomic: true, Counts: b, Stats: b}
}

func connect(ctx context.Context, opts Options) (*mongo.Client, *mongo.Database, error) {
	if opts.URI == "" {
		return nil, nil, backend.Errorf(backend.KindUnavailable, "mongodb: no URI configured (storage.mongodb.uri)")
	}
	if opts.Database == "" {
		opts.Database = "extenddb"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	pool := opts.MaxPoolSize
	if pool == 0 {
		pool = DefaultMaxPoolSize
	}
	client, err := dial(ctx, opts, pool)
	if err != nil {
		return nil, nil, err
	}
	return client, client.Database(opts.Database), nil
}

func dial(ctx context.Context, opts Options, pool uint64) (*mongo.Client, error) {
	co := options.Client().ApplyURI(opts.URI).
		SetMaxPoolSize(pool).
		SetServerSelectionTimeout(opts.Timeout).
		SetConnectTimeout(opts.Timeout).
		SetWriteConcern(writeconcern.Majority()).
		SetRetryWrites(false) // a retried write is decided by our own version checks
	client, err := mongo.Connect(co)
	if err != nil {
		return nil, backend.Wrap(backend.KindUnavailable, err, "mongodb: connect")
	}
	pctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := client.Ping(pctx, nil); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, backend.Wrap(backend.KindUnavailable, err, "mongodb: storage backend unreachable")
	}
	return client, nil
}

// Open connects to the server. Unless SkipSchemaCheck, it refuses a
// database whose migrations are missing, edited or newer (KindSchema).
func Open(ctx context.Context, opts Options) (*Backend, error) {
	client, db, err := connect(ctx, opts)
	if err != nil {
		return nil, err
	}
	if !opts.SkipSchemaCheck {
		if err := checkSchema(ctx, db); err != nil {
			_ = client.Disconnect(context.Background())
			return nil, err
		}
	}
	lease := opts.LeaseDuration
	if lease <= 0 {
		lease = DefaultLease
	}
	b := &Backend{client: client, db: db, tables: db.Collection("tables"), fence: db.Collection("fence"),
		lease: lease, indexed: map[string]bool{}, swept: make(chan struct{}), size: opts.ItemSize, finished: map[int64]string{}, marks: map[int64]int64{}, folded: map[int64]map[string]time.Time{}, outcomes: map[int64]map[string]writeOutcome{}}
	lt := opts.TxLockTimeout
	if lt <= 0 {
		lt = DefaultTxLockTimeout
	}
	b.ledger = txledger.New(txStore{b}, txledger.Options{LockTimeout: lt})
	sctx, stop := context.WithCancel(context.Background())
	b.stopSweep = stop
	go func() {
		defer close(b.swept)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.foldLoop(sctx)
		}()
		b.sweep(sctx)
		wg.Wait()
	}()
	return b, nil
}

// Ping implements backend.Backend.
func (b *Backend) Ping(ctx context.Context) error {
	if err := b.client.Ping(ctx, nil); err != nil {
		return translate(err, "mongodb: ping")
	}
	return nil
}

// Close implements backend.Backend.
func (b *Backend) Close() error {
	b.stopSweep()
	<-b.swept
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.client.Disconnect(ctx)
}

// ServerKind describes the server for test output: "replica set <name>",
// "standalone" or "FerretDB <version> (standalone)".
func (b *Backend) ServerKind(ctx context.Context) string {
	var hello bson.M
	if err := b.db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	kind := "standalone"
	if s, ok := hello["setName"].(string); ok && s != "" {
		kind = "replica set " + s
	}
	var info bson.M
	if err := b.db.RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err == nil {
		v, _ := info["version"].(string)
		if fv, ok := info["ferretdbVersion"].(string); ok {
			if fv == "" || fv == "unknown" {
				return "FerretDB (MongoDB " + v + " wire, " + kind + ")"
			}
			return "FerretDB " + fv + " (MongoDB " + v + " wire, " + kind + ")"
		}
		if fe, ok := info["ferretdbFeatures"]; ok && fe != nil {
			return "FerretDB (MongoDB " + v + " wire, " + kind + ")"
		}
		return "MongoDB " + v + " (" + kind + ")"
	}
	return kind
}

// translate maps a driver error to a storage error.
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	var se *backend.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return backend.Wrap(backend.KindUnavailable, err, what)
	}
	var ne net.Error
	if mongo.IsNetworkError(err) || mongo.IsTimeout(err) || errors.As(err, &ne) ||
		strings.Contains(err.Error(), "server selection") || errors.Is(err, mongo.ErrClientDisconnected) {
		return backend.Wrap(backend.KindUnavailable, err, what)
	}
	return backend.Wrap(backend.KindInternal, err, what)
}

func isDup(err error) bool { return err != nil && mongo.IsDuplicateKeyError(err) }

func tableNotFound(ref backend.TableRef) error {
	return backend.Errorf(backend.KindTableNotFound, "table %q (id %d) not found", ref.Name, ref.ID)
}

func notFoundByName(account, name string) error {
	return backend.Errorf(backend.KindTableNotFound, "table %q of account %q not found", name, account)
}

func itemsName(id int64) string { return fmt.Sprintf("t%d", id) }

func (b *Backend) items(id int64) *mongo.Collection { return b.db.Collection(itemsName(id)) }

// claims is a table's collection of item version claims (items.go).
func (b *Backend) claims(id int64) *mongo.Collection { return b.db.Collection(fmt.Sprintf("c%d", id)) }
