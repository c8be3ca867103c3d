package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the migration runner

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/migrations"
)

// Config is the [storage.postgres] section.
type Config struct {
	// DSN is a postgres:// URL or a libpq connection string.
	DSN string `toml:"dsn"`
	// MaxConns bounds the connection pool (0: the driver's default).
	MaxConns int `toml:"max_conns"`
	// ReadLanes is the number of read lanes pipelining concurrent
	// GetItems (0: max(1, cores/2); negative: none).
	ReadLanes int `toml:"read_lanes"`
	// WriteLanes is the number of write lanes committing concurrent
	// speculative writes together (0: max(1, cores/2); negative: none).
	WriteLanes int `toml:"write_lanes"`
	// ReadCacheMB bounds the cache answering eventually consistent
	// GetItems while this server is the only one attached (ADR 0037; 0:
	// none).
	ReadCacheMB int `toml:"read_cache_mb"`
}

// newConfig is the section with its defaults.
func newConfig() *Config { return &Config{ReadCacheMB: defaultReadCacheBytes >> 20} }

// readCacheBytes is Options.ReadCacheBytes for the section.
func (c *Config) readCacheBytes() int {
	if c.ReadCacheMB <= 0 {
		return -1
	}
	return c.ReadCacheMB << 20
}

// Validate checks the section of the configured backend.
func (c *Config) Validate() error {
	if c.DSN == "" {
		return errors.New(`dsn is required when storage.backend is "postgres"`)
	}
	if c.MaxConns < 0 {
		return errors.New("max_conns must not be negative")
	}
	if c.ReadCacheMB < 0 || c.ReadCacheMB > 1<<20 {
		return errors.New("read_cache_mb must be between 0 and 1048576")
	}
	return nil
}

func configOf(env backend.DriverEnv) *Config {
	if c, ok := env.Config.(*Config); ok && c != nil {
		return c
	}
	return newConfig()
}

// Driver is the PostgreSQL entry of the server's driver table.
func Driver() backend.Driver {
	return backend.Driver{
		Name:      "postgres",
		Summary:   "PostgreSQL, one database shared by one or several servers",
		NewConfig: func() any { return newConfig() },
		Flags:     []backend.Flag{{Name: "dsn", Key: "dsn", Usage: "PostgreSQL DSN (storage.postgres.dsn)"}},
		Keys: []backend.KeyDoc{
			{Key: "dsn", Default: `""`, Doc: "postgres:// URL or libpq connection string (required with this backend)"},
			{Key: "max_conns", Default: "0", Doc: "connection pool bound (0: max(8, 4 × cores))"},
			{Key: "read_lanes", Default: "0", Doc: "read lanes that pipeline concurrent GetItems on one connection each (0: max(1, cores/2); negative: none)"},
			{Key: "write_lanes", Default: "0", Doc: "write lanes that commit concurrent writes together, one transaction per batch (0: max(1, cores/2); negative: none)"},
			{Key: "read_cache_mb", Default: "16", Doc: "cache answering eventually consistent GetItems while no other server is attached to the database (0: none)"},
		},
		Open: func(ctx context.Context, env backend.DriverEnv) (backend.Backend, error) {
			c := configOf(env)
			b, err := Open(ctx, Options{DSN: c.DSN, MaxConns: int32(c.MaxConns), ReadLanes: c.ReadLanes, WriteLanes: c.WriteLanes, ReadCacheBytes: c.readCacheBytes(), RequireMigrated: true,
				ItemSize: env.ItemSize})
			if backend.IsKind(err, backend.KindUnavailable) {
				return nil, fmt.Errorf("storage backend unreachable: postgres at %s: %w", RedactDSN(c.DSN), err)
			}
			return b, err
		},
		Migrate: func(ctx context.Context, env backend.DriverEnv) ([]string, error) {
			db, err := openSQL(ctx, configOf(env))
			if err != nil {
				return nil, err
			}
			defer db.Close()
			done, err := migrations.Apply(ctx, db, migrations.Postgres)
			return migrations.Names(done), err
		},
		Status: func(ctx context.Context, env backend.DriverEnv) (*backend.SchemaStatus, error) {
			db, err := openSQL(ctx, configOf(env))
			if err != nil {
				return nil, err
			}
			defer db.Close()
			applied, pending, err := migrations.Status(ctx, db, migrations.Postgres)
			if err != nil {
				return nil, err
			}
			return &backend.SchemaStatus{Applied: applied, Pending: pending}, nil
		},
		Describe: func(env backend.DriverEnv) []any {
			return []any{"backend", "postgres", "dsn", RedactDSN(configOf(env).DSN)}
		},
	}
}

// openSQL opens the database with database/sql for the migration runner.
func openSQL(ctx context.Context, c *Config) (*sql.DB, error) {
	db, err := sql.Open("pgx", c.DSN)
	if err != nil {
		return nil, fmt.Errorf("storage.postgres.dsn: %w", err)
	}
	db.SetMaxOpenConns(2)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: storage backend unreachable: %w", err)
	}
	return db, nil
}

// RedactDSN removes the password from a postgres:// URL or a libpq
// key=value connection string.
func RedactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(unparsable DSN)"
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	return libpqPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

var libpqPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)
