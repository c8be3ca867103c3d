package backup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// Describer turns a table's catalog row into the DynamoDB
// TableDescription JSON recorded as the manifest's source_table. The
// engine satisfies it (engine.Engine.TableDescriptionJSON).
type Describer interface {
	TableDescriptionJSON(t *backend.Table) ([]byte, error)
	// StoredDescription is the reverse, for rows rebuilt from a store.
	StoredDescription(sourceTable []byte) ([]byte, error)
}

// Defaults of Config (docs/backup-design.md section 4).
const (
	DefaultMaxConcurrentJobs = 4
	DefaultHeartbeatInterval = 15 * time.Second
	DefaultStaleAfter        = 300 * time.Second
	DefaultReconcileInterval = 60 * time.Second
)

// Config configures a Manager.
type Config struct {
	// Backend must have the snapshot capability and a backup catalog.
	Backend backend.Backend
	// Store holds the backups.
	Store blobstore.Store
	// Describer gives the source table's description for manifests.
	Describer Describer
	// Restorer builds the index entries of restored items and the
	// description of a restored table once loaded (nil: no restores).
	Restorer Restorer
	// SpoolDir is where a restore copies a backup before verifying it
	// (default: the system's temporary directory); it must not be inside
	// a filesystem store's root.
	SpoolDir string
	// Partition and Region appear in backup ARNs (default aws, us-east-1).
	Partition, Region string
	// Owner names this server in job claims (default: random per process).
	Owner string
	// Version is the extenddb version written to manifests.
	Version string
	// MaxConcurrentJobs bounds backups and restores running at once on
	// this server (default 4); over it, KindLimitExceeded.
	MaxConcurrentJobs int
	// HeartbeatInterval and StaleAfter time the claims (defaults 15 s and
	// 300 s); ReconcileInterval paces the reconciler (default 60 s).
	HeartbeatInterval, StaleAfter, ReconcileInterval time.Duration
	// ReadyCache is how long Ready answers a positive store check without
	// checking again (default DefaultReadyCache; negative: never cached).
	ReadyCache time.Duration
	// TargetFileBytes is the uncompressed size of a data file
	// (format.DefaultTargetFileBytes when 0).
	TargetFileBytes int64
	// MaxSnapshotAge bounds how long a backup keeps its snapshot open; past
	// it the job fails cleanly (0: no bound).
	MaxSnapshotAge time.Duration
	// Logger receives job events (default: discard).
	Logger *slog.Logger
	// Registerer receives the jobs' metrics (nil: not exported).
	Registerer prometheus.Registerer
	// Buckets says where the buckets named by exports and imports live
	// ([s3]).
	Buckets blobstore.BucketConfig
	// Importer finishes imported tables (nil: no imports).
	Importer Importer
	// ImportMaxErrors is how many items an import may fail to import
	// before it stops FAILED and removes its table (0:
	// DefaultImportMaxErrors).
	ImportMaxErrors int
	// Now is the clock that decides when a backup has expired (default
	// time.Now; tests inject one).
	Now func() time.Time
	// Hook, when set (tests only), is called at each named step of a job
	// (see the Point* constants); a crash test kills the process there.
	Hook func(point string)
}

// Steps of the jobs where Config.Hook is called.
const (
	PointSnapshotOpen     = "backup.snapshot-open"    // the job runs, nothing uploaded
	PointMidData          = "backup.mid-data"         // a data file is open and partly written
	PointBeforeManifest   = "backup.before-manifest"  // every data file is uploaded
	PointBeforeSidecar    = "backup.before-sidecar"   // the manifests are uploaded
	PointBeforeAvailable  = "backup.before-available" // the sidecar is uploaded
	PointDeleteDeleting   = "delete.after-deleting"   // the row is DELETING
	PointDeleteNoManifest = "delete.after-manifest-gone"
)

// Manager runs the backup jobs of one server: it creates backups, deletes
// them and reconciles what crashed jobs left behind. It is safe for
// concurrent use.
type Manager struct {
	cfg   Config
	cat   backend.BackupCatalog
	rcat  backend.RestoreCatalog // nil: the backend keeps no restore jobs
	snaps backend.Snapshotter
	st    blobstore.Store
	log   *slog.Logger
	slots chan struct{}

	catalogID string
	storeID   atomic.Pointer[string]
	health    atomic.Pointer[error] // nil pointer: not checked yet

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	met       *metrics
	sweptOnce atomic.Bool // the reconciler made its full pass
	closeOnce sync.Once
	beatErr   string       // the last heartbeat's error, logged when it changes (heartbeat goroutine only)
	readyAt   atomic.Int64 // unix ns of the start of the last positive Healthy (0: none, or a failure since)

	mu        sync.Mutex
	restoring map[string]int // backup ARN -> restores running from it
	// done: restore jobs of this process that no longer use their backup
	// (the target flipped ACTIVE, or the job failed), while their row is
	// still RUNNING (its final write is on its way).
	done map[string]bool
	// targets: the restore jobs this process runs (started: their target
	// table exists) -> the target's table id.
	targets map[string]int64
	// running: the jobs this process runs, by catalog row (backup ARN or
	// restore job id) -> the claim's generation. The reconciler never
	// takes over a claim of its own that a job here still runs: its
	// heartbeat may lag behind stale_after on a slow or loaded backend,
	// but the process knows the job is alive (the heartbeat is how other
	// servers learn it).
	running map[string]int64
	// exports, when set (NewExports), has its stale jobs taken over by
	// the reconciler.
	exports *Exports
	// pitr, when set (NewShipper), has the reconciler prune the
	// point-in-time recovery histories of the store.
	pitr atomic.Pointer[Shipper]
}

// New checks the configuration. Start must be called before use.
func New(cfg Config) (*Manager, error) {
	if cfg.Backend == nil || cfg.Store == nil || cfg.Describer == nil {
		return nil, errors.New("backup: Backend, Store and Describer are required")
	}
	cat := cfg.Backend.Capabilities().Backups
	if cat == nil {
		return nil, fmt.Errorf("backup: the %s backend has no backup catalog", cfg.Backend.Name())
	}
	snaps := cfg.Backend.Capabilities().Snapshots
	if snaps == nil {
		return nil, fmt.Errorf("backup: the %s backend cannot take table snapshots", cfg.Backend.Name())
	}
	if cfg.Partition == "" {
		cfg.Partition = "aws"
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.Owner == "" {
		var b [8]byte
		rand.Read(b[:])
		cfg.Owner = "srv-" + hex.EncodeToString(b[:])
	}
	if cfg.MaxConcurrentJobs <= 0 {
		cfg.MaxConcurrentJobs = DefaultMaxConcurrentJobs
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = DefaultReconcileInterval
	}
	if cfg.ReadyCache == 0 {
		cfg.ReadyCache = DefaultReadyCache
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = os.TempDir()
	}
	rcat := cfg.Backend.Capabilities().Restores
	return &Manager{cfg: cfg, cat: cat, rcat: rcat, snaps: snaps, st: cfg.Store, log: cfg.Logger,
		slots: make(chan struct{}, cfg.MaxConcurrentJobs), restoring: map[string]int{}, done: map[string]bool{}, targets: map[string]int64{}, running: map[string]int64{}, met: newMetrics(cfg.Registerer)}, nil
}

// runs marks the job of catalog row id at generation gen as running in
// this process until the returned function is called.
func (m *Manager) runs(id string, gen int64) func() {
	m.mu.Lock()
	m.running[id] = gen
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if m.running[id] == gen {
			delete(m.running, id)
		}
		m.mu.Unlock()
	}
}

// ownLive tells whether a claim (owner, generation) on row id is one of
// this process's running jobs.
func (m *Manager) ownLive(id, owner string, gen int64) bool {
	if owner != m.cfg.Owner {
		return false
	}
	m.mu.Lock()
	g, ok := m.running[id]
	m.mu.Unlock()
	return ok && g == gen
}

// Owner is the name this server's claims carry.
func (m *Manager) Owner() string { return m.cfg.Owner }

// Store is the configured store.
func (m *Manager) Store() blobstore.Store { return m.st }

// Start binds the store to the catalog (checking its identity), runs the
// reconciler once and then every ReconcileInterval until Close. An
// unhealthy store is not an error here: it is reported by Healthy and by
// every operation, and the reconciler leaves it alone.
func (m *Manager) Start(ctx context.Context) error {
	newID := make([]byte, 16)
	rand.Read(newID)
	id, err := m.cat.CatalogID(ctx, "cat-"+hex.EncodeToString(newID))
	if err != nil {
		return fmt.Errorf("backup: catalog id: %w", err)
	}
	m.catalogID = id
	m.ctx, m.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := m.checkHealth(ctx); err != nil {
		m.log.Warn("backup store unhealthy", "store", m.st.String(), "err", err)
	} else {
		m.heartbeat(ctx)
		if err := m.Reconcile(ctx); err != nil {
			m.log.Warn("backup reconciler", "err", err)
		}
		// The first pass of the reconciler may take a while on a big
		// catalog: beat again, so Start returns with a fresh heartbeat.
		m.heartbeat(ctx)
	}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(m.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
				m.heartbeat(m.ctx)
			}
		}
	}()
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(m.cfg.ReconcileInterval)
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
				if err := m.Reconcile(m.ctx); err != nil && m.ctx.Err() == nil {
					m.log.Warn("backup reconciler", "err", err)
				}
			}
		}
	}()
	return nil
}

// Go runs fn in the background until Close, with a context that Close
// cancels (point-in-time recovery shipping runs this way).
func (m *Manager) Go(fn func(ctx context.Context)) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		fn(m.ctx)
	}()
}

// Close stops the reconciler and the running jobs and waits for them. A
// job stopped this way leaves its row CREATING; the reconciler of a later
// run fails it once its claim is stale.
//
// A clean Close marks the store's heartbeat stopped (when this catalog
// still owns the store), so that `backup sync --adopt-store` need not wait
// for it to go stale.
func (m *Manager) Close() {
	m.closeOnce.Do(func() {
		if m.cancel == nil {
			return
		}
		m.cancel()
		m.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if p := m.health.Load(); p != nil && *p == nil {
			if err := m.beat(ctx, true); err != nil {
				m.log.Warn("backup store heartbeat", "store", m.st.String(), "err", err)
			}
		}
	})
}

// heartbeat runs beat and logs when its outcome changes.
func (m *Manager) heartbeat(ctx context.Context) {
	err := m.beat(ctx, false)
	if ctx.Err() != nil {
		return
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != m.beatErr {
		if err != nil {
			m.log.Warn("backup store heartbeat stopped: backups are refused", "store", m.st.String(), "err", err)
		} else {
			m.log.Info("backup store heartbeat resumed", "store", m.st.String())
		}
		m.beatErr = msg
	}
}

// beat writes the store's heartbeat (docs/backup-design.md section 2) if
// this catalog still owns the store: the identity is read first, so a
// server whose store was taken over (`backup sync --adopt-store`) stops
// beating and records the store unhealthy.
func (m *Manager) beat(ctx context.Context, stopped bool) error {
	now := time.Now()
	if err := m.stillOwner(ctx); err != nil {
		m.readyAt.Store(0) // /ready reports it at once
		return err
	}
	host, _ := os.Hostname()
	return blobstore.WriteHeartbeat(ctx, m.st, blobstore.Heartbeat{CatalogID: m.catalogID, StoreID: *m.storeID.Load(),
		Owner: m.cfg.Owner, Host: host, Store: m.st.String(), Time: now, Interval: m.cfg.HeartbeatInterval, Stopped: stopped})
}

// stillOwner answers nil when the store's identity still names this
// catalog and the store id last checked; otherwise it checks the health
// again (recording the verdict) and answers its error.
func (m *Manager) stillOwner(ctx context.Context) error {
	if p := m.health.Load(); p != nil && *p == nil {
		sid := m.storeID.Load()
		id, err := blobstore.ReadIdentity(ctx, m.st)
		if err == nil && sid != nil && id.CatalogID == m.catalogID && id.StoreID == *sid {
			return nil
		}
	}
	return m.checkHealth(ctx)
}

// checkHealth applies the store identity rules and records the verdict.
func (m *Manager) checkHealth(ctx context.Context) error {
	rows, err := m.cat.ListBackups(ctx, backend.ListBackupsParams{})
	if err != nil {
		return err
	}
	var known []string
	for _, r := range rows {
		if r.Status != backend.BackupDeleted {
			known = append(known, r.StoreID)
		}
	}
	h, err := blobstore.CheckHealth(ctx, m.st, m.catalogID, known, true)
	if err == nil {
		err = h.Err()
	}
	if err != nil {
		err = fmt.Errorf("backup store %s: %w", m.st, err)
		m.health.Store(&err)
		return err
	}
	id := h.Identity.StoreID
	m.storeID.Store(&id)
	var ok error
	m.health.Store(&ok)
	return nil
}

// DefaultReadyCache is how long /ready trusts a positive store check
// (Ready): a probe every second then costs the store (S3: a GET of the
// identity, and the bucket check) one check per 5 s, not one per probe.
// A failed check is never cached, and any failed check (a job's, the
// reconciler's, the store heartbeat's) ends the cached one, so a store
// that becomes unhealthy is reported within this interval, at once when a
// job met it first.
const DefaultReadyCache = 5 * time.Second

// Ready is Healthy for readiness probes: a positive answer is reused for
// Config.ReadyCache.
func (m *Manager) Ready(ctx context.Context) error {
	if t := m.readyAt.Load(); t != 0 && m.cfg.ReadyCache > 0 && time.Since(time.Unix(0, t)) < m.cfg.ReadyCache {
		return nil
	}
	return m.Healthy(ctx)
}

// Healthy answers nil when the store is reachable and its identity is
// this catalog's, else an error that says what is wrong. The identity is
// read on every call, so a store taken over by another catalog is refused
// at once.
func (m *Manager) Healthy(ctx context.Context) error {
	start := time.Now()
	err := m.st.Validate(ctx)
	if err != nil {
		err = fmt.Errorf("backup store %s: %w", m.st, err)
	} else {
		err = m.stillOwner(ctx)
	}
	if err != nil {
		m.readyAt.Store(0)
	} else {
		m.readyAt.Store(start.UnixNano())
	}
	return err
}

func unavailable(err error) error {
	return backend.Wrap(backend.KindUnavailable, err, "the backup store cannot be used")
}

// acquireSlot takes a job slot without waiting.
func (m *Manager) acquireSlot() (func(), error) {
	select {
	case m.slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-m.slots }) }, nil
	default:
		return nil, backend.Errorf(backend.KindLimitExceeded,
			"Subscriber limit exceeded: at most %d backup and restore jobs run at once on this server (backup.max_concurrent_jobs)", cap(m.slots))
	}
}

// waitSlot waits for a job slot until the manager stops (false then).
func (m *Manager) waitSlot() bool {
	select {
	case m.slots <- struct{}{}:
		return true
	case <-m.ctx.Done():
		return false
	}
}

// releaseSlot gives back a slot taken by waitSlot.
func (m *Manager) releaseSlot() { <-m.slots }

func (m *Manager) hook(point string) {
	if m.cfg.Hook != nil {
		m.cfg.Hook(point)
	}
}

// GetBackup reads a backup row; nil when there is none.
func (m *Manager) GetBackup(ctx context.Context, arn string) (*backend.BackupRecord, error) {
	return m.cat.GetBackup(ctx, backend.GetBackupParams{ARN: arn})
}

// ListBackups lists backup rows.
func (m *Manager) ListBackups(ctx context.Context, p backend.ListBackupsParams) ([]backend.BackupRecord, error) {
	return m.cat.ListBackups(ctx, p)
}

// prefixKey is the store prefix of a backup (no trailing slash).
func prefixKey(account, table, id string) string {
	return strings.TrimSuffix(format.Prefix(account, table, id), "/")
}
