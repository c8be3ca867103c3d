// Package sqlite is the embedded storage backend over modernc.org/sqlite
// (pure Go, driver name "sqlite").
//
// Layout of the database (migrations/sqlite): a catalog table `tables`,
// the items in `items(t, h, pk, sk, item)` and secondary index entries in
// `idx(t, ix, h, ipk, isk, pk, sk, item)`, both rowid tables with a UNIQUE
// index on their keys (items_key, idx_key; ADR 0022), so that GetItem,
// Query (one partition, a sort key range, either direction) and Scan (in
// (KeyHash(pk), pk, sk) order, a segment being a range of h) are ordered
// range scans of the key index. The index keeps the keys only, so its
// entries stay on their pages however large the item; the item lives in
// the table's B-tree under its rowid. Keys are BLOBs; SQLite compares
// BLOBs with memcmp, which is the byte order of attr.KeyBytes.
//
// Concurrency: the database runs in WAL mode with synchronous=NORMAL (a
// commit is durable against a process crash; a power loss may lose the
// last commits, never corrupt). One writer connection is owned by a writer
// goroutine that does group commit: WriteItem, TransactWrite and the
// catalog calls are queued on a channel; the writer takes everything
// queued (up to Options.MaxBatch), runs the operations one after the other
// in one transaction (each write function sees the state left by the
// earlier operations of the batch), commits once and answers every caller.
// A write function runs before its operation writes anything, so a failing
// function writes nothing and does not affect the other operations of the
// batch; a TransactWrite runs inside a SAVEPOINT. Should a statement fail
// (an SQLite error, not a write function's), the batch's transaction is
// rolled back and its operations are run again one transaction each, so
// one operation's SQL failure is answered to that operation only.
//
// Reads go through a pool of read-only connections (query_only); each
// statement reads one WAL snapshot, and TransactGet reads all its keys in
// one read transaction.
//
// Memory mode (Options.Memory) uses a database file in a fresh temporary
// directory that Close removes: it has exactly the concurrency of a file
// database (a shared-cache in-memory database would serialize readers and
// the writer on table locks). Data stays in the page cache unless memory
// is short.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/itemcache"
	"github.com/extenddb/extenddb/migrations"
)

// Options configure Open.
type Options struct {
	// Path is the database file. Required unless Memory.
	Path string
	// Memory keeps the data in a temporary database file removed by Close.
	Memory bool
	// Readers is the number of read-only connections (default
	// max(4, GOMAXPROCS)).
	Readers int
	// BusyTimeout bounds how long a statement waits for a lock held by
	// another process (default 5s).
	BusyTimeout time.Duration
	// MaxBatch bounds the number of write operations committed together
	// (default 128).
	MaxBatch int
	// CommitWait is how long the writer waits for more writes before it
	// commits a batch, while writes arrive concurrently (see writeLoop);
	// default DefaultCommitWait, negative: never waits.
	CommitWait time.Duration
	// CacheKiB is the page cache of the writer connection in KiB (default
	// 4096); each reader connection gets a quarter of it, at least 2048.
	CacheKiB int
	// MmapBytes is the memory-mapped window of the database file of each
	// reader connection (0 or negative: none, the default). A page within
	// it is read from the mapping instead of by a pread into the
	// connection's page cache, but every commit of the writer unmaps the
	// window of each reader at its next read, which then faults the pages
	// it touches in again: cheaper reads while nothing is written, dearer
	// ones under writes (ADR 0054). The mapped pages are the OS page
	// cache's and count in RSS once per reader that touched them.
	MmapBytes int64
	// ItemCacheBytes bounds the in-memory item cache (internal/backend/itemcache);
	// default 16 MiB, negative disables it.
	ItemCacheBytes int
	// WALLimitBytes bounds the write-ahead log: when the -wal file reaches
	// it, the writer runs a RESTART checkpoint between two batches
	// (default 32 MiB; negative: never, the WAL then grows without bound
	// under sustained writes). See checkpoint.go.
	WALLimitBytes int64
	// RequireMigrated refuses (KindSchema) a database with pending
	// migrations instead of applying them on open.
	RequireMigrated bool
	// MaxSnapshots bounds the table snapshots open at once (default
	// backend.DefaultMaxSnapshots); each holds a reader connection.
	MaxSnapshots int
	// ItemSize measures items and index entries for the table statistics
	// kept with every write (backend.TableCounter); nil: their length.
	ItemSize backend.ItemSizeFunc
}

// Backend is the SQLite storage backend. It is safe for concurrent use.
type Backend struct {
	opts   Options
	tmpDir string // memory mode: removed on Close
	path   string // the database file

	wdb      *sql.DB // one connection, owned by the writer goroutine
	cdb      *sql.DB // one connection for the background checkpointer
	stopCkpt chan struct{}
	ckptDone chan struct{}
	rdb      *sql.DB // reader pool
	w        *writer
	cache    *itemcache.Cache // nil when disabled
	lock     *os.File         // exclusive lock on <path>.lock while open

	// The purger of deleted tables' rows (purge.go); holdPurge keeps it
	// idle (tests).
	purgeWake, stopPurge, purgeDone chan struct{}
	// bgFailures counts failed purge passes (Stats().BackgroundFailures).
	bgFailures   atomic.Int64
	purgeStopped sync.Once
	holdPurge    bool

	mu     sync.RWMutex // guards closed and sends on ops
	closed bool
	ops    chan *wop
	done   chan struct{} // closed when the writer goroutine ends

	// tables is the set of live table IDs as of the writer's last commit
	// (copy on write). Readers use it to answer KindTableNotFound cheaply;
	// a miss is confirmed with SQL.
	tables atomic.Pointer[map[int64]struct{}]

	// The WAL bound (checkpoint.go): walPath is the -wal file; ckptMu
	// serializes the checkpointer's PASSIVE checkpoints and the writer's
	// RESTART ones; walRetryAt (writer goroutine only) delays the next
	// attempt after one that readers kept busy, by walBackoff;
	// walRestarts and walBusy count the writer's checkpoints and the
	// busy ones.
	walPath              string
	ckptMu               sync.Mutex
	walRetryAt           time.Time
	walBackoff           time.Duration
	walRestarts, walBusy atomic.Int64

	// batches and batchedOps count the writer's transactions and the
	// operations they carried (group commit factor = batchedOps/batches).
	batches, batchedOps atomic.Int64
	// commitWaits counts the writer's waits for more writes (writeLoop),
	// commitTimeouts those that ended at Options.CommitWait.
	commitWaits, commitTimeouts atomic.Int64

	getItem, getTable, listTables, tableByID *sql.Stmt
	statRead                                 *sql.Stmt
	readLog, logInfo                         *sql.Stmt
	variants                                 sync.Map // int -> *sql.Stmt

	// points are GetItem's raw connections (pointread.go).
	points *pointPool

	snapOnce sync.Once
	snaps    *backend.SnapshotLimiter
}

var (
	_ backend.Backend   = (*Backend)(nil)
	_ backend.ChangeLog = (*Backend)(nil)
)

// empty is the key of a hash-only table's sort key. It must be a non-nil
// slice: the driver binds a nil []byte as NULL.
var empty = []byte{}

func nz(b []byte) []byte {
	if b == nil {
		return empty
	}
	return b
}

// Open opens (creating when missing) the database, applies pending
// migrations unless RequireMigrated, and starts the writer.
func Open(ctx context.Context, opts Options) (*Backend, error) {
	if opts.Readers <= 0 {
		opts.Readers = max(4, runtime.GOMAXPROCS(0))
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 128
	}
	if opts.CommitWait == 0 {
		opts.CommitWait = DefaultCommitWait
	}
	if opts.CacheKiB <= 0 {
		opts.CacheKiB = 4 << 10
	}
	if opts.ItemCacheBytes == 0 {
		opts.ItemCacheBytes = 16 << 20
	}
	if opts.MmapBytes < 0 {
		opts.MmapBytes = 0
	}
	if opts.WALLimitBytes == 0 {
		opts.WALLimitBytes = DefaultWALLimitBytes
	}
	b := &Backend{opts: opts}
	path := opts.Path
	if opts.Memory {
		dir, err := os.MkdirTemp("", "extenddb-memory-*")
		if err != nil {
			return nil, backend.Wrap(backend.KindUnavailable, err, "sqlite: create temporary directory")
		}
		b.tmpDir = dir
		path = filepath.Join(dir, "extenddb.db")
	}
	if path == "" {
		return nil, backend.Errorf(backend.KindInternal, "sqlite: Options.Path is empty and Memory is false")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, backend.Errorf(backend.KindInternal, "sqlite: database path %q must not contain '?' or '#'", path)
	}
	// One server process per database file: the writer's group commit and
	// the item cache assume no other process writes.
	lock, err := lockFile(path + ".lock")
	if err != nil {
		if b.tmpDir != "" {
			os.RemoveAll(b.tmpDir)
		}
		return nil, err
	}
	b.lock = lock
	b.path = path
	if err := b.open(ctx, path); err != nil {
		b.closeDBs()
		b.lock.Close()
		if b.tmpDir != "" {
			os.RemoveAll(b.tmpDir)
		}
		return nil, err
	}
	return b, nil
}

// readerCacheSize is the cache_size of a reader connection: a quarter of
// the writer's page cache, at least 2 MiB (negative: KiB).
func (b *Backend) readerCacheSize() int { return -max(b.opts.CacheKiB/4, 2048) }

// lockFile takes an exclusive, non-blocking lock on path (created 0600);
// the lock lasts while the file stays open.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, backend.Wrap(backend.KindUnavailable, err, "sqlite: open lock file")
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, backend.Errorf(backend.KindUnavailable, "sqlite: the database %s is in use by another extenddb process (lock %s: %v)",
			strings.TrimSuffix(path, ".lock"), path, err)
	}
	return f, nil
}

func (b *Backend) open(ctx context.Context, path string) error {
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(0)&_pragma=temp_store(MEMORY)",
		b.opts.BusyTimeout.Milliseconds())
	// The writer does not checkpoint automatically (wal_autocheckpoint=0):
	// a background goroutine does, so that copying pages back and fsyncing
	// the database file stay off the commit path; the writer only steps in
	// when the WAL passes its limit (checkpoint.go).
	// journal_size_limit: after the writer's RESTART checkpoint the log
	// starts over at the beginning of the file, and the first commit trims
	// the file to the limit (checkpoint.go).
	sizeLimit := int64(-1)
	if b.opts.WALLimitBytes > 0 {
		sizeLimit = b.opts.WALLimitBytes
	}
	wdsn := fmt.Sprintf("%s?%s&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(%d)&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(%d)",
		path, common, -b.opts.CacheKiB, sizeLimit)
	cdsn := fmt.Sprintf("%s?%s&_pragma=synchronous(NORMAL)", path, common)
	rdsn := fmt.Sprintf("%s?%s&_pragma=cache_size(%d)&_pragma=mmap_size(%d)&_pragma=query_only(1)",
		path, common, b.readerCacheSize(), b.opts.MmapBytes)
	var err error
	if b.wdb, err = sql.Open("sqlite", wdsn); err != nil {
		return mapErr(err, "sqlite: open")
	}
	b.wdb.SetMaxOpenConns(1)
	b.wdb.SetMaxIdleConns(1)
	b.wdb.SetConnMaxLifetime(0)
	b.wdb.SetConnMaxIdleTime(0)
	var mode string
	if err := b.wdb.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return mapErr(err, "sqlite: open "+path)
	}
	if !strings.EqualFold(mode, "wal") {
		return backend.Errorf(backend.KindUnavailable, "sqlite: %s: journal mode is %q, WAL is required", path, mode)
	}
	if b.opts.RequireMigrated {
		err = migrations.Check(ctx, b.wdb, migrations.SQLite)
	} else {
		_, err = migrations.Apply(ctx, b.wdb, migrations.SQLite)
	}
	if err != nil {
		return mapErr(err, "sqlite: schema")
	}
	conn, err := b.wdb.Conn(ctx)
	if err != nil {
		return mapErr(err, "sqlite: writer connection")
	}
	b.cache = itemcache.New(b.opts.ItemCacheBytes, cacheShards)
	b.w = &writer{conn: conn, live: map[int64]int64{}, pend: map[int64]int64{}, cache: b.cache, pendIdx: map[string]int{},
		logs: map[int64]logPos{}, size: b.opts.ItemSize}
	if err := b.w.prepare(ctx); err != nil {
		return err
	}
	if err := b.w.loadTables(ctx); err != nil {
		return err
	}
	b.publish()

	if b.rdb, err = sql.Open("sqlite", rdsn); err != nil {
		return mapErr(err, "sqlite: open readers")
	}
	b.points = newPointPool(b.opts.Readers, b.openPointReader)
	b.rdb.SetMaxOpenConns(b.opts.Readers)
	b.rdb.SetMaxIdleConns(b.opts.Readers)
	b.rdb.SetConnMaxLifetime(0)
	b.rdb.SetConnMaxIdleTime(0)
	for _, s := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&b.getItem, `SELECT item FROM items WHERE t = ? AND h = ? AND pk = ? AND sk = ?`},
		{&b.getTable, `SELECT id, desc, version, created_at FROM tables WHERE account = ? AND name = ?`},
		{&b.listTables, `SELECT name FROM tables WHERE account = ? AND name > ? ORDER BY name LIMIT ?`},
		{&b.tableByID, `SELECT 1 FROM tables WHERE id = ?`},
		{&b.statRead, sqlStatRead},
		{&b.readLog, `SELECT seq, at, data FROM changelog WHERE t = ? AND seq > ? ORDER BY seq LIMIT ?`},
		{&b.logInfo, `SELECT coalesce((SELECT min(seq) FROM changelog WHERE t = ?1), 0),
			coalesce((SELECT max(seq) FROM changelog WHERE t = ?1), 0),
			coalesce((SELECT seq FROM changelog_last WHERE t = ?1), 0)`},
	} {
		if *s.dst, err = b.rdb.PrepareContext(ctx, s.sql); err != nil {
			return mapErr(err, "sqlite: prepare")
		}
	}
	if b.cdb, err = sql.Open("sqlite", cdsn); err != nil {
		return mapErr(err, "sqlite: open checkpointer")
	}
	b.cdb.SetMaxOpenConns(1)
	b.cdb.SetMaxIdleConns(1)
	b.cdb.SetConnMaxIdleTime(0)
	b.walPath = path + "-wal"
	b.stopCkpt = make(chan struct{})
	b.ckptDone = make(chan struct{})
	go b.checkpointLoop()
	b.ops = make(chan *wop, b.opts.MaxBatch)
	b.done = make(chan struct{})
	go b.writeLoop()
	b.purgeWake = make(chan struct{}, 1)
	b.stopPurge = make(chan struct{})
	b.purgeDone = make(chan struct{})
	b.holdPurge = testHoldPurge
	go b.purgeLoop()
	return nil
}

// testHoldPurge, set by tests, opens backends whose purger stays idle.
var testHoldPurge bool

func (b *Backend) closeDBs() {
	if b.points != nil {
		b.points.close()
	}
	if b.stopCkpt != nil {
		close(b.stopCkpt)
		<-b.ckptDone
		b.stopCkpt = nil
	}
	if b.cdb != nil {
		// Leave a small WAL behind: checkpoint everything now.
		b.cdb.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		b.cdb.Close()
	}
	if b.w != nil {
		b.w.close()
	}
	for _, s := range []*sql.Stmt{b.getItem, b.getTable, b.listTables, b.tableByID, b.statRead, b.readLog, b.logInfo} {
		if s != nil {
			s.Close()
		}
	}
	b.variants.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
	if b.rdb != nil {
		b.rdb.Close()
	}
	if b.wdb != nil {
		b.wdb.Close()
	}
}

// Name implements backend.Backend.
func (b *Backend) Name() string { return "sqlite" }

// Capabilities implements backend.Backend: snapshots, the job catalogs, a
// change log, bulk loads and statistics.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Snapshots: b, Backups: b, Restores: b, Jobs: b, ChangeLog: b,
		Bulk: b, BulkBatchItems: bulkBatchItems, Stats: b, Counts: b}
}

// Ping implements backend.Backend.
func (b *Backend) Ping(ctx context.Context) error {
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return errClosed
	}
	var one int
	if err := b.rdb.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return mapErr(err, "sqlite: ping")
	}
	return nil
}

// Close stops accepting writes, lets the writer finish what is queued,
// and closes the database; memory mode removes its files.
func (b *Backend) Close() error {
	// The purger first: its step in flight ends, what is left goes on
	// at the next open.
	b.purgeStopped.Do(func() {
		if b.stopPurge != nil {
			close(b.stopPurge)
			<-b.purgeDone
		}
	})
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.ops)
	b.mu.Unlock()
	<-b.done
	b.closeDBs()
	if b.lock != nil {
		b.lock.Close()
	}
	if b.tmpDir != "" {
		if err := os.RemoveAll(b.tmpDir); err != nil {
			return backend.Wrap(backend.KindInternal, err, "sqlite: remove memory database")
		}
	}
	return nil
}

var errClosed = backend.Errorf(backend.KindUnavailable, "sqlite: backend is closed")

// publish makes the writer's committed table set visible to readers.
func (b *Backend) publish() {
	m := make(map[int64]struct{}, len(b.w.live))
	for id := range b.w.live {
		m[id] = struct{}{}
	}
	b.tables.Store(&m)
}

// migrationKind is the storage kind of a migration error.
func migrationKind(e *migrations.Error) backend.Kind {
	switch {
	case e.Schema:
		return backend.KindSchema
	case e.Internal:
		return backend.KindInternal
	}
	return backend.KindUnavailable
}

// mapErr translates an error at the backend's edge: storage errors pass,
// context errors and lock/IO conditions are KindUnavailable, everything
// else KindInternal with the cause.
func mapErr(err error, msg string) error {
	if err == nil {
		return nil
	}
	var se *backend.Error
	if errors.As(err, &se) {
		return se
	}
	var me *migrations.Error
	if errors.As(err, &me) {
		return backend.Wrap(migrationKind(me), err, "")
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, sql.ErrConnDone) {
		return backend.Wrap(backend.KindUnavailable, err, msg)
	}
	var code int
	var le *sqlite.Error
	var re *rawError
	switch {
	case errors.As(err, &le):
		code = le.Code()
	case errors.As(err, &re):
		code = re.Code()
	}
	if code != 0 {
		switch code & 0xFF {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_NOMEM,
			sqlite3.SQLITE_INTERRUPT, sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_NOLFS:
			return backend.Wrap(backend.KindUnavailable, err, msg)
		}
	}
	return backend.Wrap(backend.KindInternal, err, msg)
}

// ---- catalog ----

// ---- writes ----

// ---- reads ----
