package mongodb

import (
	"context"
	"errors"
	"net/url"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/config"
)

// Config is the [storage.mongodb] section.
type Config struct {
	// URI is the MongoDB connection string (mongodb://host:port/...).
	URI string `toml:"uri"`
	// Database is the database that holds extenddb's collections.
	Database string `toml:"database"`
	// MaxPoolSize bounds the connections to the server.
	MaxPoolSize int `toml:"max_pool_size"`
	// Timeout bounds connecting and server selection.
	Timeout config.Duration `toml:"timeout"`
	// Lease is a writer's lease in a table's write fence (ADR 0017).
	Lease config.Duration `toml:"lease"`
	// TxLockTimeout is the transaction ledger's lock timeout
	// (txledger.Options.LockTimeout, ADR 0019).
	TxLockTimeout config.Duration `toml:"tx_lock_timeout"`

	// The deprecated keys in whole seconds (0: not set); one that is set
	// wins over its duration key (see legacy).
	TimeoutSeconds       int `toml:"timeout_seconds"`
	LeaseSeconds         int `toml:"lease_seconds"`
	TxLockTimeoutSeconds int `toml:"tx_lock_timeout_seconds"`
}

func defaultConfig() *Config {
	return &Config{Database: "extenddb", MaxPoolSize: DefaultMaxPoolSize, Timeout: config.Duration{Duration: 10 * time.Second},
		Lease: config.Duration{Duration: DefaultLease}, TxLockTimeout: config.Duration{Duration: DefaultTxLockTimeout}}
}

// legacy pairs each duration key with the deprecated key it replaced.
func (c *Config) legacy() (timeout, lease, txLock config.LegacyDuration) {
	return config.LegacyDuration{Key: "timeout_seconds", Replacement: "timeout", Value: c.TimeoutSeconds, Unit: time.Second, Duration: c.Timeout},
		config.LegacyDuration{Key: "lease_seconds", Replacement: "lease", Value: c.LeaseSeconds, Unit: time.Second, Duration: c.Lease},
		config.LegacyDuration{Key: "tx_lock_timeout_seconds", Replacement: "tx_lock_timeout", Value: c.TxLockTimeoutSeconds, Unit: time.Second, Duration: c.TxLockTimeout}
}

// Deprecations are the startup warnings of the deprecated keys set.
func (c *Config) Deprecations() []string {
	timeout, lease, txLock := c.legacy()
	return config.LegacyWarnings("storage.mongodb", timeout, lease, txLock)
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
	}
	timeout, lease, txLock := c.legacy()
	return errors.Join(timeout.Validate(), lease.Validate(), txLock.Validate())
}

func (c *Config) options() Options {
	timeout, lease, txLock := c.legacy()
	return Options{URI: c.URI, Database: c.Database, MaxPoolSize: uint64(c.MaxPoolSize),
		Timeout: timeout.Effective(), LeaseDuration: lease.Effective(), TxLockTimeout: txLock.Effective()}
}

func configOf(env backend.DriverEnv) *Config {
	if c, ok := env.Config.(*Config); ok && c != nil {
		return c
	}
	return defaultConfig()
}

// Driver is the MongoDB entry for the server's driver table. The backend
// has the snapshot capability (snapshot epochs with pre-images) and the
// backup catalogs, so a server on it takes backups.
func Driver() backend.Driver {
	return backend.Driver{
		Name:      "mongodb",
		Summary:   "a MongoDB-wire server (MongoDB, FerretDB); single-document atomicity only",
		NewConfig: func() any { return defaultConfig() },
		Flags: []backend.Flag{
			{Name: "mongodb-uri", Key: "uri", Usage: "MongoDB connection string (storage.mongodb.uri)"},
			{Name: "mongodb-database", Key: "database", Usage: "MongoDB database holding extenddb's collections (storage.mongodb.database)"},
			{Name: "mongodb-tx-lock-timeout", Key: "tx_lock_timeout", Usage: "transaction ledger lock timeout, a duration such as 15s (storage.mongodb.tx_lock_timeout)"},
			{Name: "mongodb-tx-lock-timeout-seconds", Key: "tx_lock_timeout_seconds", Usage: "deprecated: --mongodb-tx-lock-timeout in whole seconds"},
		},
		Keys: []backend.KeyDoc{
			{Key: "uri", Default: "", Doc: "MongoDB connection string, e.g. mongodb://127.0.0.1:27017/"},
			{Key: "database", Default: "extenddb", Doc: "database holding extenddb's collections"},
			{Key: "max_pool_size", Default: "16", Doc: "maximum connections to the server (any size is correct, FerretDB included: ADR 0017)"},
			{Key: "timeout", Default: "10s", Doc: "bound on connecting and server selection"},
			{Key: "lease", Default: "30s", Doc: "a writer's lease in a table's write fence (ADR 0017)"},
			{Key: "tx_lock_timeout", Default: "15s", Doc: "transaction ledger: a PENDING transaction older than this may be aborted by anyone meeting its locks (ADR 0019)"},
			{Key: "timeout_seconds", Default: "unset", Doc: "deprecated: timeout in whole seconds"},
			{Key: "lease_seconds", Default: "unset", Doc: "deprecated: lease in whole seconds"},
			{Key: "tx_lock_timeout_seconds", Default: "unset", Doc: "deprecated: tx_lock_timeout in whole seconds"},
		},
		Open: func(ctx context.Context, env backend.DriverEnv) (backend.Backend, error) {
			o := configOf(env).options()
			o.ItemSize = env.ItemSize
			return Open(ctx, o)
		},
		Migrate: func(ctx context.Context, env backend.DriverEnv) ([]string, error) {
			return Migrate(ctx, configOf(env).options())
		},
		Deprecations: func(env backend.DriverEnv) []string { return configOf(env).Deprecations() },
		Status: func(ctx context.Context, env backend.DriverEnv) (*backend.SchemaStatus, error) {
			applied, pending, err := Status(ctx, configOf(env).options())
			if err != nil {
				return nil, err
			}
			return &backend.SchemaStatus{Applied: applied, Pending: pending}, nil
		},
		Describe: func(env backend.DriverEnv) []any {
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
