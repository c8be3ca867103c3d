// Package postgres is the PostgreSQL storage backend over
// github.com/jackc/pgx/v5 (pgxpool).
//
// Layout of the database (migrations/postgres): a catalog table `tables`,
// the items in `items(t, h, pk, sk, item)` and secondary index entries in
// `idx(t, ix, h, ipk, isk, pk, sk, item)`, keyed like the SQLite backend so
// that GetItem, Query (one partition, a sort key range, either direction)
// and Scan (in (KeyHash(pk), pk, sk) order, a segment being a range of h)
// are ordered range scans of the primary key btree. Keys are bytea, which
// PostgreSQL compares bytewise: the byte order of attr.KeyBytes, never a
// collation. h is the uint32 KeyHash held in a bigint, so its order is the
// unsigned order.
//
// Writes. Every WriteItem and TransactWrite runs in one READ COMMITTED
// transaction that first takes, in ascending order, a transaction-scoped
// advisory lock per item key (pg_advisory_xact_lock of a 64-bit hash of
// table ID, partition key and sort key), then a FOR KEY SHARE lock on the
// catalog rows of its tables (so a concurrent DeleteTable waits for it, and
// it sees a deleted table as missing), and only then reads the items: each
// statement of a READ COMMITTED transaction reads a fresh snapshot, taken
// after the locks were granted, so every write function sees the latest
// committed item and no other writer of that key can commit until this
// transaction ends. The advisory lock is the item lock: unlike SELECT ...
// FOR UPDATE it also locks a key that has no row yet, so two concurrent
// inserts of one key (two pools, two servers) serialize and exactly one
// wins, and a TransactWrite's condition check on an absent item stays true
// until it commits (no write skew between two transactions). Since every
// writer of a key holds its advisory lock, a row lock on top would only
// add a tuple write. Ordered acquisition keeps writers free of deadlocks;
// the deadlocks still possible with DropIndex (40P01) and serialization
// failures (40001) are retried, which is safe because write functions are
// pure. Round trips per write on this locked path: two pipelined batches
// — (BEGIN, locks, catalog check, item reads) and (item write, index
// deletes then puts, COMMIT). A failure before the COMMIT batch was sent
// (a killed connection, a failover) is retried transparently on another
// connection; a connection lost while the COMMIT was in flight has an
// unknown outcome and answers KindUnavailable without retry (never a
// silent double apply). A write whose current items this process can
// guess runs first as one speculative batch (speculate.go, ADR 0028): the
// same locks, the fence and the writes guarded by the guesses, in one
// implicit transaction; a wrong guess writes nothing and falls back to the
// locked path.
//
// Reads. GetItem, Query and Scan are single statements that join the
// catalog row, so they answer KindTableNotFound for a dead table ID in the
// same snapshot as the data. TransactGet reads all its keys in one
// REPEATABLE READ READ ONLY transaction sent as one pipelined batch.
//
// Errors. Connection failures, admin shutdown (57P01..57P03), too many
// connections and other resource shortages (class 53), a read-only server,
// pool acquire timeouts and context ends are KindUnavailable (retryable);
// deadlock/serialization failures that outlast the retries are
// KindTransactionConflict; a key too large for a btree entry (SQLSTATE
// 54000: partition plus sort key, or index keys plus table keys, of more
// than about 2650 incompressible bytes) is KindUnsupported; anything else
// is KindInternal with the cause.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/itemcache"
	"github.com/extenddb/extenddb/migrations"
)

// Options configure Open.
type Options struct {
	// DSN is a libpq connection string or postgres:// URL. Required.
	DSN string
	// MaxConns bounds the pool (default max(8, 4×GOMAXPROCS)). Overrides
	// pool_max_conns in the DSN when set.
	MaxConns int32
	// MinConns is the number of connections kept open (default 0).
	MinConns int32
	// AcquireTimeout bounds the wait for a pooled connection; when it
	// passes the call answers KindUnavailable (default 10s).
	AcquireTimeout time.Duration
	// MaxAttempts bounds the runs of one operation when it fails in a way
	// that is safe to retry: a deadlock or serialization failure, or a
	// connection lost before anything could have been committed (default 8).
	MaxAttempts int
	// RequireMigrated refuses (KindSchema) a database with pending
	// migrations instead of applying them on open.
	RequireMigrated bool
	// MaxSnapshots bounds the table snapshots open at once (default
	// backend.DefaultMaxSnapshots); each holds a pooled connection.
	MaxSnapshots int
	// WriteGuessBytes bounds the cache of items this process saw
	// committed, the guesses of speculative one-round-trip writes
	// (speculate.go; default 16 MiB, negative: no speculation).
	WriteGuessBytes int
	// ReadLanes is the number of read lanes that pipeline concurrent
	// GetItems on one connection each (lanes.go, ADR 0033; default
	// max(1, GOMAXPROCS/2), negative: none, every GetItem on its own
	// pooled connection).
	ReadLanes int
	// WriteLanes is the number of write lanes that commit concurrent
	// speculative writes together, one implicit transaction per batch
	// (writelanes.go, ADR 0038; default max(1, GOMAXPROCS/2), negative:
	// none, every write in a transaction of its own).
	WriteLanes int
	// ReadCacheBytes bounds the cache that answers eventually consistent
	// GetItems while no other server is attached to the database
	// (readcache.go, presence.go, ADR 0037; default 16 MiB, negative:
	// none, every GetItem reads the database).
	ReadCacheBytes int
	// ItemSize measures items and index entries for the table statistics
	// kept with every write (backend.TableCounter); nil: their length.
	ItemSize backend.ItemSizeFunc
}

// Backend is the PostgreSQL storage backend. It is safe for concurrent use.
type Backend struct {
	opts Options
	// foldStop ends the fold of statistics deltas (counts.go); foldDone
	// is closed when it has.
	foldStop, foldDone chan struct{}
	// purgeWake, purgeStop and purgeDone drive the purger of deleted
	// tables' rows (purge.go).
	purgeWake, purgeStop, purgeDone chan struct{}
	pool                            *pgxpool.Pool
	closed                          atomic.Bool
	// bgFailures counts failed passes of the fold, its vacuum and the
	// purger (Stats().BackgroundFailures).
	bgFailures atomic.Int64

	// retries counts transparent re-runs (tests and metrics).
	retries atomic.Int64

	snapOnce sync.Once
	snaps    *backend.SnapshotLimiter

	// Speculative writes (speculate.go).
	guess                    *itemcache.Cache
	tabVersions              sync.Map // table ID -> description version last seen current
	absent                   absentScore
	specApplied, specRefused atomic.Int64
	specCombinedRefused      atomic.Int64 // write-lane batches refused (their plans then sent alone)
	// Write lanes (writelanes.go); nil when Options.WriteLanes < 0 or
	// without speculation.
	wlanes *wlanes

	// Read lanes (lanes.go); nil when Options.ReadLanes < 0.
	lanes *lanes

	// The read cache (readcache.go) and what tells when it may answer
	// (presence.go); both nil when Options.ReadCacheBytes < 0.
	rcache   *itemcache.Cache
	presence *presence
}

var _ backend.Backend = (*Backend)(nil)

// migrateLock serializes Open's migration step across servers (session
// advisory lock; distinct from the runner's per-transaction lock key).
const migrateLock int64 = 7340851208526215002

// Open connects, applies pending migrations unless RequireMigrated (then
// it refuses a database that is not fully migrated with KindSchema), and
// returns the backend.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	if opts.DSN == "" {
		return nil, backend.Errorf(backend.KindInternal, "postgres: Options.DSN is empty")
	}
	if opts.AcquireTimeout <= 0 {
		opts.AcquireTimeout = 10 * time.Second
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	cfg, err := pgxpool.ParseConfig(opts.DSN)
	if err != nil {
		return nil, backend.Wrap(backend.KindInternal, err, "postgres: parse DSN")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	} else if !strings.Contains(opts.DSN, "pool_max_conns") {
		cfg.MaxConns = int32(max(8, 4*runtime.GOMAXPROCS(0)))
	}
	if opts.MinConns > 0 {
		cfg.MinConns = opts.MinConns
	}
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheStatement
	// Every session of this server is named, so that presence can tell
	// other clients' sessions from its own (ADR 0037).
	id := newPresenceID()
	cfg.ConnConfig.RuntimeParams["application_name"] = appName(id)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr(err, "postgres: create pool")
	}
	b := &Backend{opts: opts, pool: pool}
	if opts.WriteGuessBytes == 0 {
		opts.WriteGuessBytes = defaultGuessBytes
	}
	b.guess = itemcache.New(opts.WriteGuessBytes, guessShards)
	if err := b.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if opts.ReadLanes == 0 {
		opts.ReadLanes = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if opts.ReadCacheBytes == 0 {
		opts.ReadCacheBytes = defaultReadCacheBytes
	}
	b.rcache = itemcache.New(opts.ReadCacheBytes, readShards)
	if b.rcache != nil {
		b.presence = newPresence(id, &b.pool.Config().ConnConfig.Config, b.rcache.Clear)
		err = b.presence.start(ctx)
	} else {
		// No cache of its own to keep, but the others' caches must learn
		// of this server before it serves.
		_, err = pool.Exec(ctx, `SELECT pg_notify($1, $2)`, presenceChannel, id)
		err = mapErr(err, "postgres: announce")
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	if opts.ReadLanes > 0 {
		b.lanes = newLanes(b, opts.ReadLanes)
	}
	if opts.WriteLanes == 0 {
		opts.WriteLanes = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if opts.WriteLanes > 0 && b.guess != nil {
		b.wlanes = newWriteLanes(b, opts.WriteLanes)
	}
	b.foldStop, b.foldDone = make(chan struct{}), make(chan struct{})
	go b.foldLoop(b.foldStop, b.foldDone)
	b.purgeWake, b.purgeStop, b.purgeDone = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go b.purgeLoop()
	return b, nil
}

func (b *Backend) migrate(ctx context.Context) error {
	if !b.opts.RequireMigrated {
		// Two servers opening a fresh database at once: the runner creates
		// schema_migrations outside its own lock, which PostgreSQL does not
		// make race-free; hold a session lock around the whole step, on a
		// connection of its own (not the pool's: a pool of one connection
		// must still be able to migrate).
		lc, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
		if err != nil {
			return mapErr(err, "postgres: connect")
		}
		defer lc.Close(context.WithoutCancel(ctx))
		if _, err := lc.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
			return mapErr(err, "postgres: migration lock")
		}
	}
	db := stdlib.OpenDBFromPool(b.pool)
	defer db.Close()
	if b.opts.RequireMigrated {
		return mapMigration(migrations.Check(ctx, db, migrations.Postgres))
	}
	_, err := migrations.Apply(ctx, db, migrations.Postgres)
	return mapMigration(err)
}

// mapMigration translates a migration error to its storage kind.
func mapMigration(err error) error {
	var me *migrations.Error
	if !errors.As(err, &me) {
		return mapErr(err, "postgres: schema")
	}
	kind := backend.KindUnavailable
	switch {
	case me.Schema:
		kind = backend.KindSchema
	case me.Internal:
		kind = backend.KindInternal
	}
	return backend.Wrap(kind, err, "")
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "postgres" }

// Capabilities implements backend.Backend: snapshots, the job catalogs, a
// change log, bulk loads (at the caller's batch size) and statistics.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Snapshots: b, Backups: b, Restores: b, Jobs: b, ChangeLog: b, Bulk: b, Stats: b, Counts: b}
}

// Ping implements backend.Backend.
func (b *Backend) Ping(ctx context.Context) error {
	return b.read(ctx, "postgres: ping", func(c *pgxpool.Conn) error {
		return c.Ping(ctx)
	})
}

// Close closes the pool. Calls after Close answer KindUnavailable.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	if b.lanes != nil {
		b.lanes.close()
	}
	if b.wlanes != nil {
		b.wlanes.close()
	}
	if b.foldStop != nil {
		close(b.foldStop)
		<-b.foldDone
	}
	if b.purgeStop != nil {
		close(b.purgeStop)
		<-b.purgeDone
	}
	b.pool.Close()
	if b.presence != nil {
		b.presence.close()
	}
	return nil
}

// Stat returns the pool's statistics.
func (b *Backend) Stat() *pgxpool.Stat { return b.pool.Stat() }

// Stats reports the connection pool, the read cache and the pipelining
// counters (backend.StatsReporter).
func (b *Backend) Stats() backend.Stats {
	ps := b.pool.Stat()
	st := backend.Stats{HasPool: true, PoolMax: int64(ps.MaxConns()), PoolInUse: int64(ps.AcquiredConns()),
		PoolIdle: int64(ps.IdleConns()), PoolWaits: ps.EmptyAcquireCount(), PoolWaitTime: ps.EmptyAcquireWaitTime(),
		Retries: b.retries.Load(), HasPipelining: true, HasBackground: true, BackgroundFailures: b.bgFailures.Load()}
	st.SpeculativeApplied, st.SpeculativeRefused = b.SpeculationStats()
	st.WriteBatches, st.WriteBatchWrites = b.WriteLaneStats()
	st.ReadPipelines, st.ReadPipelineGets = b.LaneStats()
	if b.rcache != nil {
		st.HasCache, st.CacheInUse = true, b.readCacheOn()
		cs := b.rcache.Stats()
		st.CacheHits, st.CacheMisses, st.CacheBytes, st.CacheEntries, st.CacheMaxBytes = cs.Hits, cs.Misses, cs.Bytes, cs.Entries, cs.MaxBytes
	}
	return st
}

// Retries returns how many operation runs were retried transparently.
func (b *Backend) Retries() int64 { return b.retries.Load() }

var errClosed = backend.Errorf(backend.KindUnavailable, "postgres: backend is closed")

// acquire takes a pooled connection within AcquireTimeout.
func (b *Backend) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	actx, cancel := context.WithTimeout(ctx, b.opts.AcquireTimeout)
	defer cancel()
	c, err := b.pool.Acquire(actx)
	if err != nil {
		if ctx.Err() == nil && actx.Err() != nil {
			return nil, backend.Wrap(backend.KindUnavailable, err,
				fmt.Sprintf("postgres: no connection within %s (pool of %d)", b.opts.AcquireTimeout, b.pool.Config().MaxConns))
		}
		if b.closed.Load() {
			return nil, errClosed
		}
		return nil, mapErr(err, "postgres: acquire connection")
	}
	return c, nil
}

// ---- retries ----

// ---- errors ----

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isConflict: the server aborted the transaction because of concurrency;
// nothing was committed.
func isConflict(err error) bool {
	switch pgCode(err) {
	case "40001", "40P01", "55P03":
		return true
	}
	return false
}

// isUnavailableCode: SQLSTATEs of a server that cannot serve now.
func isUnavailableCode(code string) bool {
	switch {
	case code == "":
		return false
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"), // insufficient resources (53300 too many connections)
		strings.HasPrefix(code, "57"), // operator intervention: 57P01 admin shutdown, 57P02, 57P03, 57014
		strings.HasPrefix(code, "58"), // system error (I/O)
		code == "25006":               // read-only transaction: a standby after failover
		return true
	}
	return false
}

// isConnErr: the connection failed or could not be made.
func isConnErr(err error) bool {
	if isUnavailableCode(pgCode(err)) {
		return true
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "conn closed") || strings.Contains(s, "closed pool") || strings.Contains(s, "unexpected EOF")
}

// retryableBeforeCommit: a failure of a run that committed nothing (reads,
// or a write transaction before its COMMIT was sent) that another run may
// not meet.
func retryableBeforeCommit(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var se *backend.Error
	if errors.As(err, &se) {
		return false
	}
	return isConflict(err) || isConnErr(err)
}

// mapErr translates an error at the backend's edge.
func mapErr(err error, msg string) error {
	if err == nil {
		return nil
	}
	var se *backend.Error
	if errors.As(err, &se) {
		return se
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return backend.Wrap(backend.KindUnavailable, err, msg)
	}
	if isConflict(err) {
		return backend.Wrap(backend.KindTransactionConflict, err, msg)
	}
	if pgCode(err) == "54000" {
		// program_limit_exceeded: an index row over the btree maximum
		// (about 2.7 KB) — keys near DynamoDB's limits that do not compress.
		return backend.Wrap(backend.KindUnsupported, err, msg+": keys too large for a PostgreSQL btree entry (at most about 2650 bytes of table keys, or of index plus table keys)")
	}
	if isConnErr(err) {
		return backend.Wrap(backend.KindUnavailable, err, msg)
	}
	return backend.Wrap(backend.KindInternal, err, msg)
}

func tableNotFound(ref backend.TableRef) error {
	return backend.Errorf(backend.KindTableNotFound, "table %q (id %d) of account %q not found", ref.Name, ref.ID, ref.Account)
}

// empty is the key of a hash-only table's sort key: pgx binds a nil
// []byte as NULL.
var empty = []byte{}

func nz(b []byte) []byte {
	if b == nil {
		return empty
	}
	return b
}

func hashOf(pk []byte) int64 { return int64(backend.KeyHash(pk)) }

// lockKey is the advisory lock key of an item: FNV-1a 64 of the table ID,
// the partition key's length, the partition key and the sort key. A
// collision only makes two keys' writers wait for each other.
func lockKey(t int64, pk, sk []byte) int64 {
	h := uint64(14695981039346656037)
	mix := func(c byte) {
		h ^= uint64(c)
		h *= 1099511628211
	}
	for i := 56; i >= 0; i -= 8 {
		mix(byte(uint64(t) >> i))
	}
	n := uint32(len(pk))
	for i := 24; i >= 0; i -= 8 {
		mix(byte(n >> i))
	}
	for _, c := range pk {
		mix(c)
	}
	for _, c := range sk {
		mix(c)
	}
	return int64(h)
}
