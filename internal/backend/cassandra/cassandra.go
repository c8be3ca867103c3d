// Package cassandra is a storage backend on Apache Cassandra (5.0) through
// gocql. See docs/adr/0016-cassandra-backend.md for the data
// model, the table-version fence and the limits, and
// docs/adr/0021-cassandra-change-log-and-snapshots.md for the change log,
// the snapshot capability (pre-images of open epochs, snapshot.go) and the
// backup catalogs (backups.go).
//
// Data model: one Cassandra partition per DynamoDB item collection
// (table id, partition key bytes) with the sort key bytes as a blob
// clustering column, so Query reads in DynamoDB's order natively.
// Transactions run on the shared per-item ledger (txledger, ADR 0019). Item
// writes are lightweight transactions (LWT) conditioned on the row's
// version and on the partition's table-version fence. Scan walks a
// partition directory kept in (KeyHash(pk), pk) order, so the contract's
// Scan order holds without token order.
package cassandra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// Options configure the backend.
type Options struct {
	// Hosts are the contact points ("127.0.0.1:9042").
	Hosts []string
	// Keyspace holds the backend's tables; created when missing (with
	// Replication) unless RequireMigrated.
	Keyspace string
	// Replication is the CQL replication map of a keyspace created here;
	// empty means SimpleStrategy with replication_factor 1.
	Replication string
	// Consistency of plain reads and writes ("LOCAL_QUORUM" by default);
	// SerialConsistency of LWTs and their reads ("LOCAL_SERIAL").
	Consistency, SerialConsistency string
	// Timeout of one request (default 10 s); ConnectTimeout (default 5 s).
	Timeout, ConnectTimeout time.Duration
	// RequireMigrated refuses a keyspace with pending migrations instead of
	// applying them.
	RequireMigrated bool
	// OutboxSweep is how often every table's index outbox is drained in
	// the background (default 1 min; negative: never, e.g. in tests). The
	// same loop finishes transactions whose coordinator died.
	OutboxSweep time.Duration
	// Tx tunes the transaction ledger (lock timeout, waits; ADR 0019).
	Tx txledger.Options
	// ItemSize measures items and index entries for the table statistics
	// (counts.go); nil counts bytes.
	ItemSize backend.ItemSizeFunc
}

// Backend is the Cassandra backend.
type Backend struct {
	s        *gocql.Session
	opt      Options
	cl, scl  gocql.Consistency
	dirMu    sync.Mutex
	dirKnown map[dirKey]time.Time // partition directory rows known to exist, since when
	ixKnown  map[ixKey]struct{}   // index_names rows known to exist
	dirty    dirtyCache           // change log markers this process wrote (changelog.go)

	closing   chan struct{} // closed by Close: stops the outbox sweep
	sweepDone chan struct{} // closed when the sweep has stopped (nil: none)
	closeOnce sync.Once
	// skipApply leaves index changes in the outbox (tests: a writer that
	// died after its LWT).
	skipApply bool
	// obStats: index changes committed and not yet applied (outbox.go).
	obStats outboxStats
	// skipForget leaves published change log records pending (tests: a
	// publisher that died after its commit).
	skipForget bool
	// tx runs TransactWrite/TransactGet and settles item locks (ADR 0019).
	tx *txledger.Ledger
	// snapLim bounds the snapshots this process holds open (snapshot.go).
	snapLim *backend.SnapshotLimiter
	// sfSeen: the highest committed snapshot fence seen per table (under
	// dirMu; snapshot.go).
	sfSeen map[int64]int64
	// stats: the table statistics this process copies and folds
	// (counts.go).
	stats *statsState
}

type dirKey struct {
	t  int64
	pk string
}

type ixKey struct {
	t   int64
	idx string
}

const dirCacheMax = 1 << 16

var _ backend.Backend = (*Backend)(nil)

// Name is "cassandra".
func (b *Backend) Name() string { return "cassandra" }

// Capabilities implements backend.Backend: snapshots, the job catalogs, a
// change log, statistics (the index outbox) and table statistics kept
// with the writes (counts.go); TransactWrite runs on the
// transaction ledger, so writes that need no atomicity across items go
// item by item.
func (b *Backend) Capabilities() backend.Capabilities {
	return backend.Capabilities{Snapshots: b, Backups: b, Restores: b, Jobs: b, ChangeLog: b, PerItemAtomic: true, Stats: b, Counts: b}
}

func parseConsistency(s string, def gocql.Consistency) (gocql.Consistency, error) {
	if s == "" {
		return def, nil
	}
	var c gocql.Consistency
	if err := c.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, err
	}
	return c, nil
}

func (o *Options) defaults() error {
	if len(o.Hosts) == 0 {
		return errors.New("cassandra: no hosts")
	}
	if o.Keyspace == "" {
		o.Keyspace = "extenddb"
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	return nil
}

func (o Options) cluster(keyspace string) (*gocql.ClusterConfig, gocql.Consistency, gocql.Consistency, error) {
	cl, err := parseConsistency(o.Consistency, gocql.LocalQuorum)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("cassandra consistency: %w", err)
	}
	var scl gocql.Consistency
	switch strings.ToUpper(o.SerialConsistency) {
	case "", "LOCAL_SERIAL":
		scl = gocql.Consistency(gocql.LocalSerial)
	case "SERIAL":
		scl = gocql.Consistency(gocql.Serial)
	default:
		return nil, 0, 0, fmt.Errorf("cassandra serial_consistency %q: SERIAL or LOCAL_SERIAL", o.SerialConsistency)
	}
	c := gocql.NewCluster(o.Hosts...)
	c.Keyspace = keyspace
	c.Consistency = cl
	c.SerialConsistency = gocql.SerialConsistency(scl)
	c.Timeout = o.Timeout
	c.ConnectTimeout = o.ConnectTimeout
	c.ProtoVersion = 4
	c.DisableInitialHostLookup = false
	c.RetryPolicy = nil // retries are decided here (LWT outcomes are not idempotent)
	return c, cl, scl, nil
}

// Open connects, creates the keyspace when missing and applies pending
// migrations (or, with RequireMigrated, refuses a keyspace that has any).
func Open(ctx context.Context, opt Options) (*Backend, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if err := ensureKeyspace(ctx, opt, !opt.RequireMigrated); err != nil {
		return nil, err
	}
	c, cl, scl, err := opt.cluster(opt.Keyspace)
	if err != nil {
		return nil, err
	}
	s, err := c.CreateSession()
	if err != nil {
		return nil, mapErr(err, "connect")
	}
	b := &Backend{s: s, opt: opt, cl: cl, scl: scl, dirKnown: map[dirKey]time.Time{}, ixKnown: map[ixKey]struct{}{}, snapLim: backend.NewSnapshotLimiter(maxOpenSnapshots), stats: newStatsState()}
	b.tx = txledger.New(txStore{b}, opt.Tx)
	if opt.RequireMigrated {
		err = b.checkSchema(ctx)
	} else {
		_, err = b.migrate(ctx)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	b.closing = make(chan struct{})
	go b.foldLoop()
	go b.copyLoop()
	if opt.OutboxSweep >= 0 {
		iv := opt.OutboxSweep
		if iv == 0 {
			iv = time.Minute
		}
		b.sweepDone = make(chan struct{})
		go b.sweep(iv)
	}
	return b, nil
}

// ensureKeyspace creates the keyspace (when create) or checks it exists.
func ensureKeyspace(ctx context.Context, opt Options, create bool) error {
	c, _, _, err := opt.cluster("")
	if err != nil {
		return err
	}
	s, err := c.CreateSession()
	if err != nil {
		return mapErr(err, "connect")
	}
	defer s.Close()
	if !create {
		var n string
		err := s.Query(`SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?`, opt.Keyspace).WithContext(ctx).Scan(&n)
		if errors.Is(err, gocql.ErrNotFound) {
			return backend.Errorf(backend.KindSchema, "cassandra keyspace %q does not exist: run `extenddb migrate`", opt.Keyspace)
		}
		return mapErr(err, "keyspace")
	}
	if !validIdent(opt.Keyspace) {
		return fmt.Errorf("cassandra keyspace %q: letters, digits and underscores only", opt.Keyspace)
	}
	repl := opt.Replication
	if repl == "" {
		repl = defaultReplication
	}
	// Idempotent: a statement that timed out (schema changes are slow on a
	// loaded node) is run again.
	for attempt := 0; ; attempt++ {
		err := mapErr(s.Query(`CREATE KEYSPACE IF NOT EXISTS `+opt.Keyspace+` WITH replication = `+repl).WithContext(ctx).Exec(), "create keyspace")
		if attempt == 5 || !backend.IsKind(err, backend.KindUnavailable) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

func validIdent(s string) bool {
	if s == "" || len(s) > 48 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Ping (readiness) checks that the keyspace answers a read at the
// consistency the catalog needs (a quorum of its replicas, not just the
// node the driver talks to).
func (b *Backend) Ping(ctx context.Context) error {
	var v int
	err := b.quorum(ctx, `SELECT version FROM schema_migrations WHERE version = 1`).Scan(&v)
	if errors.Is(err, gocql.ErrNotFound) {
		return backend.Errorf(backend.KindSchema, "cassandra keyspace %q is not migrated: run `extenddb migrate`", b.opt.Keyspace)
	}
	return mapErr(err, "ping")
}

// Close stops the outbox sweep and closes the session.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		if b.closing != nil {
			close(b.closing)
		}
		if b.sweepDone != nil {
			<-b.sweepDone
		}
		if b.closing != nil {
			<-b.stats.done
			b.stats.mu.Lock()
			b.stats.closed = true
			b.stats.wake.Broadcast()
			b.stats.mu.Unlock()
			<-b.stats.copied
		}
		b.s.Close()
	})
	return nil
}

// query builds a statement at the plain consistency.
func (b *Backend) query(ctx context.Context, stmt string, args ...any) *gocql.Query {
	return b.s.Query(stmt, args...).WithContext(ctx).Consistency(b.cl)
}

// quorum builds a statement at the configured consistency, or
// LOCAL_QUORUM when that is weaker: catalog reads and the partition
// directory rely on reads seeing every acknowledged write (ADR 0016).
func (b *Backend) quorum(ctx context.Context, stmt string, args ...any) *gocql.Query {
	cl := b.cl
	switch cl {
	case gocql.Quorum, gocql.LocalQuorum, gocql.All, gocql.EachQuorum:
	default:
		cl = gocql.LocalQuorum
	}
	return b.s.Query(stmt, args...).WithContext(ctx).Consistency(cl)
}

// serial builds a read at the serial consistency (linearizable with LWTs).
func (b *Backend) serial(ctx context.Context, stmt string, args ...any) *gocql.Query {
	return b.s.Query(stmt, args...).WithContext(ctx).Consistency(b.scl)
}

// mapErr translates gocql errors at the backend's edge.
func mapErr(err error, what string) error {
	if err == nil {
		return nil
	}
	var se *backend.Error
	if errors.As(err, &se) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, gocql.ErrNoConnections) || errors.Is(err, gocql.ErrTimeoutNoResponse) ||
		errors.Is(err, gocql.ErrConnectionClosed) || errors.Is(err, gocql.ErrSessionClosed) {
		return backend.Wrap(backend.KindUnavailable, err, "cassandra: "+what)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return backend.Wrap(backend.KindUnavailable, err, "cassandra: "+what)
	}
	var re gocql.RequestError
	if errors.As(err, &re) {
		switch re.Code() {
		case gocql.ErrCodeUnavailable, gocql.ErrCodeOverloaded, gocql.ErrCodeBootstrapping,
			gocql.ErrCodeWriteTimeout, gocql.ErrCodeReadTimeout, gocql.ErrCodeReadFailure, gocql.ErrCodeWriteFailure:
			return backend.Wrap(backend.KindUnavailable, err, "cassandra: "+what)
		}
	}
	if strings.Contains(err.Error(), "no hosts available") || strings.Contains(err.Error(), "unable to create session") {
		return backend.Wrap(backend.KindUnavailable, err, "cassandra: "+what)
	}
	return backend.Wrap(backend.KindInternal, err, "cassandra: "+what)
}
