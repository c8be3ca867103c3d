package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/migrations"
)

// Config is the [storage.sqlite] section.
type Config struct {
	// ItemCacheMB bounds the in-memory item cache (0 disables it).
	ItemCacheMB int `toml:"item_cache_mb"`
	// WALLimitMB is the write-ahead log size at which the writer
	// checkpoints and empties it (at least 1).
	WALLimitMB int `toml:"wal_limit_mb"`
	// CommitWaitUS is how long, in microseconds, the writer waits for more
	// concurrent writes before committing a batch (0: never waits).
	CommitWaitUS int `toml:"commit_wait_us"`
	// MmapMB is each reader connection's memory-mapped window of the
	// database file, in MiB (0: reads by pread only).
	MmapMB int `toml:"mmap_mb"`
}

// Validate checks the section; errors name the key.
func (c *Config) Validate() error {
	if c.ItemCacheMB < 0 {
		return errors.New("item_cache_mb must not be negative")
	}
	if c.WALLimitMB < 1 {
		return errors.New("wal_limit_mb must be at least 1")
	}
	if c.CommitWaitUS < 0 || c.CommitWaitUS > 100_000 {
		return errors.New("commit_wait_us must be between 0 and 100000")
	}
	if c.MmapMB < 0 || c.MmapMB > maxMmapMB {
		return fmt.Errorf("mmap_mb must be between 0 and %d", maxMmapMB)
	}
	return nil
}

// DatabasePath is the database file in a data directory.
func DatabasePath(dataDir string) string { return filepath.Join(dataDir, "extenddb.sqlite") }

func configOf(env backend.DriverEnv) *Config {
	if c, ok := env.Config.(*Config); ok && c != nil {
		return c
	}
	return &Config{ItemCacheMB: defaultItemCacheMB, WALLimitMB: 32, CommitWaitUS: defaultCommitWaitUS}
}

// Driver is the SQLite entry of the server's driver table.
func Driver() backend.Driver {
	return backend.Driver{
		Name:    "sqlite",
		Summary: "embedded SQLite (the default; data in storage.data_dir, or none kept with storage.memory)",
		NewConfig: func() any {
			return &Config{ItemCacheMB: defaultItemCacheMB, WALLimitMB: 32, CommitWaitUS: defaultCommitWaitUS}
		},
		Keys: []backend.KeyDoc{
			{Key: "item_cache_mb", Default: "16", Doc: "in-memory cache of recently read and written items, in MiB (0 disables it)"},
			{Key: "wal_limit_mb", Default: "32", Doc: "write-ahead log size at which the writer checkpoints and empties it (at least 1)"},
			{Key: "mmap_mb", Default: "0", Doc: "memory-mapped window of the database file per reader connection, in MiB (0: reads by pread only)"},
			{Key: "commit_wait_us", Default: "2000", Doc: "microseconds the writer waits for more concurrent writes to commit with a batch, while writes arrive concurrently (0: never waits)"},
		},
		Open:     openDriver,
		Migrate:  migrateDriver,
		Status:   statusDriver,
		Describe: describeDriver,
	}
}

func openDriver(ctx context.Context, env backend.DriverEnv) (backend.Backend, error) {
	c := configOf(env)
	opt := Options{Memory: env.Memory, ItemSize: env.ItemSize, ItemCacheBytes: c.ItemCacheMB << 20, WALLimitBytes: int64(c.WALLimitMB) << 20,
		CommitWait: time.Duration(c.CommitWaitUS) * time.Microsecond, MmapBytes: int64(c.MmapMB) << 20}
	if c.CommitWaitUS == 0 {
		opt.CommitWait = -1
	}
	if c.ItemCacheMB == 0 {
		opt.ItemCacheBytes = -1
	}
	var pending []string
	if !env.Memory {
		if st, err := statusDriver(ctx, env); err == nil {
			pending = st.Pending
		}
		if err := os.MkdirAll(env.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("storage.data_dir: %w", err)
		}
		opt.Path = DatabasePath(env.DataDir)
	}
	log := env.Logger
	if log != nil && len(pending) > 0 {
		log.Info("applying schema migrations", "backend", "sqlite", "path", opt.Path, "pending", strings.Join(pending, ","))
	}
	start := time.Now()
	b, err := Open(ctx, opt)
	if err == nil && log != nil && len(pending) > 0 {
		log.Info("schema migrations applied", "backend", "sqlite", "applied", len(pending), "duration", time.Since(start).Round(time.Millisecond).String())
	}
	return b, err
}

func describeDriver(env backend.DriverEnv) []any {
	if env.Memory {
		return []any{"backend", "sqlite", "memory", true}
	}
	return []any{"backend", "sqlite", "path", DatabasePath(env.DataDir), "item_cache_mb", configOf(env).ItemCacheMB}
}

var errMemoryNoSchema = errors.New("storage.memory: an in-memory database exists only while the server runs; it has no schema to migrate or inspect")

func migrateDriver(ctx context.Context, env backend.DriverEnv) ([]string, error) {
	if env.Memory {
		return nil, errMemoryNoSchema
	}
	if err := os.MkdirAll(env.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("storage.data_dir: %w", err)
	}
	db, err := sql.Open("sqlite", DatabasePath(env.DataDir)+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: storage backend unreachable: %w", err)
	}
	done, err := migrations.Apply(ctx, db, migrations.SQLite)
	return migrations.Names(done), err
}

// statusDriver changes nothing: it creates no directory, file or table (a
// database that does not exist yet is reported with every migration
// pending).
func statusDriver(ctx context.Context, env backend.DriverEnv) (*backend.SchemaStatus, error) {
	if env.Memory {
		return nil, errMemoryNoSchema
	}
	path := DatabasePath(env.DataDir)
	if _, err := os.Stat(path); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("storage.data_dir: %w", err)
		}
		ms, err := migrations.Load(migrations.SQLite)
		if err != nil {
			return nil, err
		}
		return &backend.SchemaStatus{Missing: path, Pending: migrations.Names(ms)}, nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	// Read-only. A database without a -wal file was closed cleanly and no
	// server has it open: read it as immutable, which creates no -wal/-shm
	// files. Otherwise read through the existing WAL.
	mode := "mode=ro"
	if _, err := os.Stat(path + "-wal"); errors.Is(err, os.ErrNotExist) {
		mode = "immutable=1"
	}
	u := url.URL{Scheme: "file", Path: abs, RawQuery: mode + "&_pragma=busy_timeout(5000)"}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("sqlite: storage backend unreachable: %w", err)
	}
	applied, pending, err := migrations.Status(ctx, db, migrations.SQLite)
	if err != nil {
		return nil, err
	}
	return &backend.SchemaStatus{Applied: applied, Pending: pending}, nil
}

// defaultItemCacheMB is storage.sqlite.item_cache_mb's default. 16 MiB
// rather than 32: the cache's Go heap counts about twice in RSS (the
// collector's headroom), and at 32 MiB a server running the benchmark
// workloads peaks at 185–190 MiB, close to the 200 MiB target of
// docs/benchmarks.md; at 16 MiB at 129 MiB, with the same CPU per request.
const defaultItemCacheMB = 16

// maxMmapMB is the largest window SQLite maps (SQLITE_MAX_MMAP_SIZE,
// 0x7fff0000 bytes); a larger mmap_size is silently cut to it.
const maxMmapMB = 2047
