// Package server assembles a running extenddb: backend, engine, HTTP
// front end, and their lifecycle.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/extenddb/extenddb/internal/api"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/postgres"
	"github.com/extenddb/extenddb/internal/backup"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/buildinfo"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/console"
	"github.com/extenddb/extenddb/internal/engine"
)

// The restore job loads items through the engine's index rules without
// importing the engine: the server hands the engine over as a
// backup.Indexer.
var _ backup.Indexer = (*engine.Engine)(nil)

// Options are the process-wide things a server is given rather than
// building itself.
type Options struct {
	// Logger receives every log line (nil: discard).
	Logger *slog.Logger
	// Build identifies the binary (startup log, extenddb_build_info).
	Build buildinfo.Info
	// Ready, when not nil, receives the bound address once the listener
	// accepts.
	Ready func(addr net.Addr)
}

// Run serves until ctx is cancelled (see Serve).
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, ready func(addr net.Addr)) error {
	return Serve(ctx, cfg, Options{Logger: log, Ready: ready, Build: buildinfo.New("", "", "")})
}

// Serve serves until ctx is cancelled, then finishes in-flight requests
// (bounded by server.shutdown_timeout), stops background work and closes
// the backend. Its steps: open the backend (under the contract checks),
// the metrics registry, the engine, the backup jobs, the HTTP server;
// then wait, and shut down in the reverse order.
func Serve(ctx context.Context, cfg config.Config, opt Options) error {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	be, err := OpenBackend(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := be.Close(); cerr != nil {
			log.Warn("closing storage", "err", cerr)
		}
		log.Info("extenddb stopped")
	}()
	reg := newRegistry(be, opt.Build)
	eng := newEngine(cfg, be, reg, log)
	keys, accounts := accessKeys(cfg)
	reg.MustRegister(newTablesCollector(be, accounts))
	reg.MustRegister(newTableStatsCollector(eng, accounts))
	eng.Start(ctx, accounts)
	defer eng.Stop()
	bk, err := startBackupStore(ctx, cfg, be, eng, opt.Build.Version, reg, log)
	if err != nil {
		return err
	}
	if bk.jobs != nil {
		defer bk.jobs.Close()
	}
	registerServerInfo(reg, be, bk)
	auth := api.NewAuthenticator(keys)
	handler := api.New(eng, api.Options{Logger: log, Registry: reg, Gatherer: reg, Ready: bk.ready, Auth: auth,
		Limits: api.Limits{
			MaxInflightBodyBytes: cfg.Server.MaxInflightBodyBytes,
			InflightWait:         cfg.Server.InflightWait.Duration,
			BodyReadTimeout:      cfg.Server.BodyReadTimeout.Duration,
			WriteTimeout:         cfg.Server.WriteTimeout.Duration,
		}})
	if cfg.Server.PprofListen != "" {
		if err := servePprof(cfg.Server.PprofListen, log); err != nil {
			return err
		}
	}
	srv, ln, errc, err := listen(cfg, handler, log)
	if err != nil {
		return err
	}
	attrs := []any{"addr", ln.Addr().String(), "version", opt.Build.Version, "commit", opt.Build.ShortCommit()}
	attrs = append(attrs, storageAttrs(cfg)...)
	if sr := be.Capabilities().Stats; sr != nil && sr.Stats().PoolMax > 0 {
		attrs = append(attrs, "pool_max", sr.Stats().PoolMax)
	}
	attrs = append(attrs, "auth", authDesc(auth.Enabled(), len(keys)), "tls", cfg.Server.TLSCertFile != "", "backup_store", bk.desc,
		"cors", corsDesc(cfg.CORSOrigins()))
	log.Info("extenddb serving", attrs...)
	if opt.Ready != nil {
		opt.Ready(ln.Addr())
	}
	return serveUntilDone(ctx, cfg, srv, errc, log)
}

// newRegistry is the metrics registry: the Go runtime and process
// collectors, the build and the backend's statistics.
func newRegistry(be backend.Backend, build buildinfo.Info) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerBuildInfo(reg, build)
	registerStorageMetrics(reg, be)
	return reg
}

// newEngine builds the engine over backend with the configured region and
// stream timings.
func newEngine(cfg config.Config, be backend.Backend, reg prometheus.Registerer, log *slog.Logger) *engine.Engine {
	return engine.New(be, engine.Options{Region: cfg.Server.Region, Logger: log, Registerer: reg,
		StreamShardInterval: cfg.Streams.ShardRollover.Duration, StreamRetention: cfg.Streams.Retention.Duration,
		StreamCheckInterval:    min(10*time.Second, cfg.Streams.ShardRollover.Duration/4),
		StreamTrimInterval:     min(time.Minute, cfg.Streams.Retention.Duration/4),
		StreamIteratorLifetime: cfg.Streams.IteratorLifetime.Duration})
}

// accessKeys are the configured access keys and the accounts served: the
// default account and every key's.
func accessKeys(cfg config.Config) ([]api.AccessKey, []string) {
	accounts := []string{api.DefaultAccount}
	var keys []api.AccessKey
	for _, k := range cfg.Auth.Keys {
		keys = append(keys, api.AccessKey{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey, Account: k.Account})
		if k.Account != "" {
			accounts = append(accounts, k.Account)
		}
	}
	return keys, accounts
}

// backupStore is what the server's backup step set up: the jobs (nil
// without a store, or on a backend that cannot take backups), the
// readiness check (the backend, and the store when jobs run) and the
// store's description for the startup log.
type backupStore struct {
	jobs  *backup.Manager
	ready func(context.Context) error
	desc  string
}

// startBackupStore opens the configured backup store and starts the
// backup jobs over it. The store is part of readiness: /ready answers 503
// while it is unreachable (the server still serves tables). A backend
// that lacks a capability backups need says so, loudly at startup and on
// the wire to every backup operation.
func startBackupStore(ctx context.Context, cfg config.Config, be backend.Backend, eng *engine.Engine, version string,
	reg prometheus.Registerer, log *slog.Logger) (backupStore, error) {
	bk := backupStore{ready: be.Ping, desc: "disabled"}
	if cfg.Backup.Store.Kind == "" || cfg.Backup.Store.Kind == blobstore.KindDisabled {
		if len(cfg.Backup.Plans) > 0 {
			return bk, errors.New("backup.plans: backup plans need a backup store ([backup.store])")
		}
		return bk, nil
	}
	st, err := blobstore.Open(ctx, cfg.Backup.Store)
	if err != nil {
		return bk, fmt.Errorf("backup.store: %w", err)
	}
	bk.desc = st.String()
	if err := st.Validate(ctx); err != nil {
		log.Warn("backup store not reachable", "store", st.String(), "err", err)
	}
	if reason := backupsUnsupported(be); reason != "" {
		log.Warn("backups unavailable on this backend although backup.store is set", "backend", be.Name(), "reason", reason)
		eng.SetBackupsUnavailable(reason)
		bk.desc += " (backups unavailable: " + be.Name() + " backend)"
		return bk, nil
	}
	jobs, err := startBackups(ctx, cfg, be, eng, st, version, reg, log)
	if err != nil {
		return bk, err
	}
	bk.jobs = jobs
	bk.ready = func(ctx context.Context) error {
		if err := be.Ping(ctx); err != nil {
			return err
		}
		// Reachable, and its identity is this catalog's; /ready says why
		// not when the identity is wrong (those messages are written for
		// operators: owner catalogs, the command to run). An unreachable
		// store's driver error stays in the log. A positive store check
		// is reused for a few seconds (backup.DefaultReadyCache): one
		// identity GET per probe is a cost on S3.
		if err := jobs.Ready(ctx); err != nil {
			reason := "the backup store cannot be reached (the server log says why)"
			if errors.Is(err, blobstore.ErrUnhealthy) {
				reason = err.Error()
			}
			return &api.NotReady{Reason: reason, Err: err}
		}
		return nil
	}
	return bk, nil
}

// listen binds server.listen and serves handler on it (TLS when a
// certificate is configured); errc receives the serving loop's end.
func listen(cfg config.Config, handler http.Handler, log *slog.Logger) (*http.Server, net.Listener, chan error, error) {
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("server.listen: %w", err)
	}
	// Request log outermost, so preflights answered by CORS are logged too.
	h := api.WithCORS(console.Wrap(handler), cfg.CORSOrigins())
	h = api.WithRequestLog(h, api.RequestLogOptions{Logger: log, SlowThreshold: cfg.Log.SlowRequestThreshold.Duration})
	srv := &http.Server{
		Handler: h,
		// The body deadline and the write deadline are set per request by
		// the handler (api.Limits); these bound the headers and idle
		// kept-alive connections.
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout.Duration,
		IdleTimeout:       cfg.Server.IdleTimeout.Duration,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	if cfg.Server.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.Server.TLSCertFile, cfg.Server.TLSKeyFile)
		if err != nil {
			ln.Close()
			return nil, nil, nil, fmt.Errorf("server.tls_cert_file/tls_key_file: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		// Plain HTTP: net/http's own answers to unparseable requests are
		// rewritten into DynamoDB errors (api.WrapListener).
		go func() { errc <- srv.Serve(api.WrapListener(ln)) }()
	}
	return srv, ln, errc, nil
}

// serveUntilDone waits for ctx to end (or the server to fail), then stops
// accepting connections and finishes in-flight requests, bounded by
// server.shutdown_timeout.
func serveUntilDone(ctx context.Context, cfg config.Config, srv *http.Server, errc <-chan error, log *slog.Logger) error {
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: refusing new connections, finishing in-flight requests", "timeout", cfg.Server.ShutdownTimeout.Duration.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("in-flight requests finished; stopping background work")
	return nil
}

// backupsUnsupported says why the backend cannot take backups ("" when it
// can): a backup needs the snapshot capability (one consistent instant of
// a table) and a backup catalog (ADR 0006, ADR 0015).
func backupsUnsupported(b backend.Backend) string {
	var missing []string
	if b.Capabilities().Snapshots == nil {
		missing = append(missing, "it cannot read a table as of one instant (no snapshot capability)")
	}
	if b.Capabilities().Backups == nil {
		missing = append(missing, "it keeps no backup catalog")
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("the %s storage backend does not support backups: %s", b.Name(), strings.Join(missing, "; "))
}

// startBackups starts the backup jobs over the configured store and hands
// them to the engine (which never imports internal/backup).
func startBackups(ctx context.Context, cfg config.Config, be backend.Backend, eng *engine.Engine, st blobstore.Store, version string, reg prometheus.Registerer, log *slog.Logger) (*backup.Manager, error) {
	m, err := backup.New(backup.Config{
		Backend: be, Store: st, Describer: eng, Restorer: eng, Region: eng.Region(), Version: version,
		MaxConcurrentJobs: cfg.Backup.MaxConcurrentJobs,
		ImportMaxErrors:   cfg.Backup.ImportMaxErrors,
		HeartbeatInterval: cfg.Backup.HeartbeatInterval.Duration,
		StaleAfter:        cfg.Backup.StaleAfter.Duration,
		ReconcileInterval: cfg.Backup.ReconcileInterval.Duration,
		MaxSnapshotAge:    cfg.Backup.MaxSnapshotAge.Duration,
		SpoolDir:          cfg.Backup.SpoolDir,
		Buckets:           cfg.S3,
		Importer:          eng,
		Logger:            log,
		Registerer:        reg,
		Hook:              killHook(log),
	})
	if err != nil {
		return nil, fmt.Errorf("backup.store: %w", err)
	}
	if err := m.Start(ctx); err != nil {
		return nil, fmt.Errorf("backup.store: %w", err)
	}
	eng.SetBackups(m)
	if be.Capabilities().Jobs != nil {
		eng.SetImports(importService{m})
	}
	// Point-in-time recovery ships change logs to the same store; a
	// backend without a change log cannot have it (enabling it then
	// answers ContinuousBackupsUnavailableException naming why).
	if be.Capabilities().ChangeLog != nil {
		p := cfg.Backup.PITR
		sh, err := backup.NewShipper(m, pitrSource{eng}, backup.PITRConfig{ShipInterval: p.ShipInterval.Duration,
			SegmentMaxBytes: p.SegmentMaxBytes, BaseInterval: p.BaseInterval.Duration, BaseAfterBytes: p.BaseAfterBytes}, reg)
		if err != nil {
			return nil, fmt.Errorf("backup.pitr: %w", err)
		}
		eng.SetPITR(pitrWindow{s: sh, m: m})
		m.Go(sh.Run)
		// Exports read the point-in-time history and keep their rows in
		// the job catalog; they write to the buckets of [s3].
		if jobs := be.Capabilities().Jobs; jobs != nil {
			eng.SetExports(exportService{backup.NewExports(m, backup.ExportsConfig{Jobs: jobs, Buckets: cfg.S3,
				Latest: func(ref backend.TableRef, days int64) time.Time { _, l, _ := sh.Window(ref, days); return l }})})
		}
	}
	if err := startPlans(cfg, be, eng, m, reg, log); err != nil {
		return nil, err
	}
	return m, nil
}

// startPlans runs the configured backup plans ([[backup.plans]]) beside
// the backup jobs; they need the backend's job catalog.
func startPlans(cfg config.Config, be backend.Backend, eng *engine.Engine, m *backup.Manager, reg prometheus.Registerer, log *slog.Logger) error {
	plans, err := cfg.BackupPlans()
	if err != nil || len(plans) == 0 {
		return err
	}
	jobs := be.Capabilities().Jobs
	if jobs == nil {
		return fmt.Errorf("backup.plans: the %s backend has no job catalog", be.Name())
	}
	runner := backup.NewPlans(m, backup.PlansConfig{Plans: plans, Jobs: jobs, Concurrency: cfg.Backup.MaxConcurrentJobs,
		Tick:   cfg.Backup.PlansCheckInterval.Duration,
		Tables: func(ctx context.Context, account string) ([]string, error) { return eng.ActiveTables(ctx, account) }}, reg)
	names := make([]string, len(plans))
	for i, p := range plans {
		names[i] = p.Name
	}
	reg.MustRegister(newPlanInfoCollector(plans))
	log.Info("backup plans", "plans", strings.Join(names, ","))
	m.Go(runner.Run)
	return nil
}

// killHook is the tests' job hook (never set in production):
// EXTENDDB_TEST_KILL_AT naming a job step (backup.Point*) makes the server
// kill itself with SIGKILL there; EXTENDDB_TEST_HOLD_AT makes jobs wait
// there while the file EXTENDDB_TEST_HOLD_FILE exists (writing
// EXTENDDB_TEST_HOLD_FILE + ".reached" when a job gets there).
func killHook(log *slog.Logger) func(string) {
	kill, hold, holdFile := os.Getenv("EXTENDDB_TEST_KILL_AT"), os.Getenv("EXTENDDB_TEST_HOLD_AT"), os.Getenv("EXTENDDB_TEST_HOLD_FILE")
	if kill == "" && (hold == "" || holdFile == "") {
		return nil
	}
	log.Warn("test hook armed at job steps", "kill_at", kill, "hold_at", hold)
	return func(point string) {
		if point == kill {
			p, _ := os.FindProcess(os.Getpid())
			p.Signal(syscall.SIGKILL)
			select {}
		}
		if point == hold {
			// Tell the test the job is here (it may stop the process now).
			_ = os.WriteFile(holdFile+".reached", []byte(point), 0o600)
			for {
				if _, err := os.Stat(holdFile); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}
}

func corsDesc(origins []string) string {
	if len(origins) == 0 {
		return "off"
	}
	return strings.Join(origins, ",")
}

func authDesc(verified bool, keys int) string {
	if !verified {
		return "none (any credentials accepted as account " + api.DefaultAccount + ")"
	}
	return fmt.Sprintf("sigv4 (%d access keys)", keys)
}

// RedactDSN removes the password from a PostgreSQL DSN.
func RedactDSN(dsn string) string { return postgres.RedactDSN(dsn) }

// servePprof serves the runtime profiles on a loopback address.
func servePprof(addr string, log *slog.Logger) error {
	if !config.IsLoopback(addr) {
		return fmt.Errorf("server.pprof_listen: %q is not a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("server.pprof_listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()
	log.Info("pprof serving", "addr", ln.Addr().String())
	return nil
}
