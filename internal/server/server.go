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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/extenddb/extenddb/internal/api"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/engine"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/postgres"
	"github.com/extenddb/extenddb/internal/storage/sqlite"
	"github.com/extenddb/extenddb/internal/store"
)

// OpenBackend opens the configured storage backend. The embedded SQLite
// database is migrated on open; a PostgreSQL database must have been
// migrated with `extenddb migrate` (serve refuses an unmigrated or newer
// schema and says what to run).
func OpenBackend(ctx context.Context, cfg config.Config, log *slog.Logger) (storage.Backend, error) {
	switch cfg.Storage.Backend {
	case "sqlite":
		opt := sqlite.Options{Memory: cfg.Storage.Memory, ItemCacheBytes: cfg.Storage.SQLite.ItemCacheMB << 20}
		if cfg.Storage.SQLite.ItemCacheMB == 0 {
			opt.ItemCacheBytes = -1
		}
		if !cfg.Storage.Memory {
			if err := os.MkdirAll(cfg.Storage.DataDir, 0o700); err != nil {
				return nil, fmt.Errorf("storage.data_dir: %w", err)
			}
			opt.Path = sqlitePath(cfg)
		}
		return sqlite.Open(ctx, opt)
	case "postgres":
		return postgres.Open(ctx, postgres.Options{DSN: cfg.Storage.Postgres.DSN,
			MaxConns: int32(cfg.Storage.Postgres.MaxConns), RequireMigrated: true})
	}
	return nil, fmt.Errorf("storage.backend %q is not supported", cfg.Storage.Backend)
}

// Run serves until ctx is cancelled, then finishes in-flight requests
// (bounded by server.shutdown_timeout) and closes the backend. ready, when
// not nil, receives the bound address once the listener accepts.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, ready func(addr net.Addr)) error {
	backend, err := OpenBackend(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer backend.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	eng := engine.New(backend, engine.Options{Region: cfg.Server.Region, Logger: log})
	accounts := []string{api.DefaultAccount}
	var keys []api.AccessKey
	for _, k := range cfg.Auth.Keys {
		keys = append(keys, api.AccessKey{AccessKeyID: k.AccessKeyID, SecretAccessKey: k.SecretAccessKey, Account: k.Account})
		if k.Account != "" {
			accounts = append(accounts, k.Account)
		}
	}
	eng.Start(ctx, accounts)
	defer eng.Stop()
	auth := api.NewAuthenticator(keys)
	readiness := backend.Ping
	if cfg.Backup.Store.Kind != "" && cfg.Backup.Store.Kind != store.KindDisabled {
		// The backup store is part of readiness: /ready answers 503 while it
		// is unreachable (the server still serves tables).
		st, err := store.Open(ctx, cfg.Backup.Store)
		if err != nil {
			return fmt.Errorf("backup.store: %w", err)
		}
		if err := st.Validate(ctx); err != nil {
			log.Warn("backup store not reachable", "store", st.String(), "err", err)
		}
		readiness = func(ctx context.Context) error {
			if err := backend.Ping(ctx); err != nil {
				return err
			}
			if err := st.Validate(ctx); err != nil {
				return fmt.Errorf("backup store %s: %w", st, err)
			}
			return nil
		}
	}
	handler := api.New(eng, api.Options{Logger: log, Registry: reg, Gatherer: reg, Ready: readiness, Auth: auth,
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
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("server.listen: %w", err)
	}
	srv := &http.Server{
		Handler: handler,
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
			return fmt.Errorf("server.tls_cert_file/tls_key_file: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		// Plain HTTP: net/http's own answers to unparseable requests are
		// rewritten into DynamoDB errors (api.WrapListener).
		go func() { errc <- srv.Serve(api.WrapListener(ln)) }()
	}
	log.Info("extenddb serving", "addr", ln.Addr().String(), "backend", backend.Name(), "memory", cfg.Storage.Memory,
		"data_dir", cfg.Storage.DataDir, "signatures_verified", auth.Enabled(), "tls", cfg.Server.TLSCertFile != "")
	if ready != nil {
		ready(ln.Addr())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.Server.ShutdownTimeout.Duration)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

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
