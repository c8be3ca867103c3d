package mongodb

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

// Config is the [storage.mongodb] section.
type Config struct {
	// URI is the MongoDB connection string (mongodb://host:port/...).
	URI string `toml:"uri"`
	// Database is the database that holds extenddb's collections.
	Database string `toml:"database"`
	// MaxPoolSize bounds the connections to the server.
	MaxPoolSize int `toml:"max_pool_size"`
	// TimeoutSeconds bounds connecting and server selection.
	TimeoutSeconds int `toml:"timeout_seconds"`
	// LeaseSeconds is a writer's lease in a table's write fence (ADR 0017).
	LeaseSeconds int `toml:"lease_seconds"`
	// TxLockTimeoutSeconds is the transaction ledger's lock timeout
	// (txledger.Options.LockTimeout, ADR 0019).
	TxLockTimeoutSeconds int `toml:"tx_lock_timeout_seconds"`
}

func defaultConfig() *Config {
	return &Config{Database: "extenddb", MaxPoolSize: DefaultMaxPoolSize, TimeoutSeconds: 10, LeaseSeconds: int(DefaultLease / time.Second),
		TxLockTimeoutSeconds: int(DefaultTxLockTimeout / time.Second)}
}

// Validate checks the section; errors name the key.
func (c *Config) Validate() error {
	switch {
	case c.URI == "":
		return errors.New("uri must be set (mongodb://host:port/)")
	case c.Database == "":
		return errors.New("database must not be empty")
	case c.MaxPoolSize < 1:
		return errors.New("max_pool_size must be at least 1")
	case c.TimeoutSeconds < 1:
		return errors.New("timeout_seconds must be at least 1")
	case c.LeaseSeconds < 1:
		return errors.New("lease_seconds must be at least 1")
	case c.TxLockTimeoutSeconds < 1:
		return errors.New("tx_lock_timeout_seconds must be at least 1")
	}
	return nil
}

func (c *Config) options() Options {
	return Options{URI: c.URI, Database: c.Database, MaxPoolSize: uint64(c.MaxPoolSize),
		Timeout: time.Duration(c.TimeoutSeconds) * time.Second, LeaseDuration: time.Duration(c.LeaseSeconds) * time.Second,
		TxLockTimeout: time.Duration(c.TxLockTimeoutSeconds) * time.Second}
}

func configOf(env storage.DriverEnv) *Config {
	if c, ok := env.Config.(*Config); ok && c != nil {
		return c
	}
	return defaultConfig()
}

// Driver is the MongoDB entry for the server's driver table. The backend
// has no snapshot capability and no backup catalog (ADR 0017): the server
// answers backup operations with a ValidationException that says so.
func Driver() storage.Driver {
	return storage.Driver{
		Name:      "mongodb",
		Summary:   "a MongoDB-wire server (MongoDB, FerretDB); single-document atomicity only",
		NewConfig: func() any { return defaultConfig() },
		Flags: []storage.Flag{
			{Name: "mongodb-uri", Key: "uri", Usage: "MongoDB connection string (storage.mongodb.uri)"},
			{Name: "mongodb-database", Key: "database", Usage: "MongoDB database holding extenddb's collections (storage.mongodb.database)"},
			{Name: "mongodb-tx-lock-timeout-seconds", Key: "tx_lock_timeout_seconds", Usage: "transaction ledger lock timeout in seconds (storage.mongodb.tx_lock_timeout_seconds)"},
		},
		Keys: []storage.KeyDoc{
			{Key: "uri", Default: "", Doc: "MongoDB connection string, e.g. mongodb://127.0.0.1:27017/"},
			{Key: "database", Default: "extenddb", Doc: "database holding extenddb's collections"},
			{Key: "max_pool_size", Default: "16", Doc: "maximum connections to the server (any size is correct, FerretDB included: ADR 0017)"},
			{Key: "timeout_seconds", Default: "10", Doc: "bound on connecting and server selection"},
			{Key: "lease_seconds", Default: "30", Doc: "a writer's lease in a table's write fence (ADR 0017)"},
			{Key: "tx_lock_timeout_seconds", Default: "15", Doc: "transaction ledger: a PENDING transaction older than this may be aborted by anyone meeting its locks (ADR 0019)"},
		},
		Open: func(ctx context.Context, env storage.DriverEnv) (storage.Backend, error) {
			return Open(ctx, configOf(env).options())
		},
		Migrate: func(ctx context.Context, env storage.DriverEnv) ([]string, error) {
			return Migrate(ctx, configOf(env).options())
		},
		Status: func(ctx context.Context, env storage.DriverEnv) (*storage.SchemaStatus, error) {
			applied, pending, err := Status(ctx, configOf(env).options())
			if err != nil {
				return nil, err
			}
			return &storage.SchemaStatus{Applied: applied, Pending: pending}, nil
		},
		Describe: func(env storage.DriverEnv) []any {
			c := configOf(env)
			return []any{"backend", "mongodb", "server", redact(c.URI), "database", c.Database, "max_pool_size", c.MaxPoolSize}
		},
	}
}

// redact drops the credentials of a URI.
func redact(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" {
		return "(URI from storage.mongodb.uri)"
	}
	u.User = nil
	u.RawQuery = ""
	return u.String()
}
