package cassandra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
	"github.com/extenddb/extenddb/internal/config"
)

// Config is the [storage.cassandra] section.
type Config struct {
	// Hosts are the contact points, comma-separated ("127.0.0.1:9042").
	Hosts string `toml:"hosts"`
	// Keyspace holds the backend's tables.
	Keyspace string `toml:"keyspace"`
	// Replication is the CQL replication map used when `extenddb migrate`
	// creates the keyspace.
	Replication string `toml:"replication"`
	// Consistency of plain reads and writes; SerialConsistency of LWTs.
	Consistency       string `toml:"consistency"`
	SerialConsistency string `toml:"serial_consistency"`
	// Timeout bounds one request; ConnectTimeout one connection attempt.
	Timeout        config.Duration `toml:"timeout"`
	ConnectTimeout config.Duration `toml:"connect_timeout"`
	// TxLockTimeout is the transaction ledger's lock timeout
	// (txledger.Options.LockTimeout, ADR 0019).
	TxLockTimeout config.Duration `toml:"tx_lock_timeout"`

	// The deprecated keys in whole milliseconds (0: not set); one that is
	// set wins over its duration key (see legacy).
	TimeoutMS        int `toml:"timeout_ms"`
	ConnectTimeoutMS int `toml:"connect_timeout_ms"`
	TxLockTimeoutMS  int `toml:"tx_lock_timeout_ms"`
}

// defaultReplication is the replication map of a keyspace that
// `extenddb migrate` creates when none is configured (one node, tests).
const defaultReplication = "{'class': 'SimpleStrategy', 'replication_factor': 1}"

func defaultConfig() *Config {
	return &Config{Hosts: "127.0.0.1:9042", Keyspace: "extenddb", Replication: defaultReplication, Consistency: "LOCAL_QUORUM", SerialConsistency: "LOCAL_SERIAL",
		Timeout: config.Duration{Duration: 10 * time.Second}, ConnectTimeout: config.Duration{Duration: 5 * time.Second},
		TxLockTimeout: config.Duration{Duration: 5 * time.Second}}
}

// legacy pairs each duration key with the deprecated key it replaced.
func (c *Config) legacy() (timeout, connect, txLock config.LegacyDuration) {
	return config.LegacyDuration{Key: "timeout_ms", Replacement: "timeout", Value: c.TimeoutMS, Unit: time.Millisecond, Duration: c.Timeout},
		config.LegacyDuration{Key: "connect_timeout_ms", Replacement: "connect_timeout", Value: c.ConnectTimeoutMS, Unit: time.Millisecond, Duration: c.ConnectTimeout},
		config.LegacyDuration{Key: "tx_lock_timeout_ms", Replacement: "tx_lock_timeout", Value: c.TxLockTimeoutMS, Unit: time.Millisecond, Duration: c.TxLockTimeout}
}

// Deprecations are the startup warnings of the deprecated keys set.
func (c *Config) Deprecations() []string {
	timeout, connect, txLock := c.legacy()
	return config.LegacyWarnings("storage.cassandra", timeout, connect, txLock)
}

// Validate checks the section; errors name the key.
func (c *Config) Validate() error {
	if strings.TrimSpace(c.Hosts) == "" {
		return errors.New("hosts must name at least one contact point")
	}
	if !validIdent(c.Keyspace) {
		return fmt.Errorf("keyspace %q: letters, digits and underscores, at most 48", c.Keyspace)
	}
	if _, _, _, err := c.options().cluster(c.Keyspace); err != nil {
		return err
	}
	timeout, connect, txLock := c.legacy()
	return errors.Join(timeout.Validate(), connect.Validate(), txLock.Validate())
}

func (c *Config) options() Options {
	var hosts []string
	for _, h := range strings.Split(c.Hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	timeout, connect, txLock := c.legacy()
	return Options{Hosts: hosts, Keyspace: c.Keyspace, Replication: c.Replication, Consistency: c.Consistency,
		SerialConsistency: c.SerialConsistency, Timeout: timeout.Effective(), ConnectTimeout: connect.Effective(),
		Tx: txledger.Options{LockTimeout: txLock.Effective()}}
}

func configOf(env backend.DriverEnv) *Config {
	if c, ok := env.Config.(*Config); ok && c != nil {
		return c
	}
	return defaultConfig()
}

// Driver is the Cassandra entry for the server's driver table
// (internal/server/drivers.go). It has the snapshot capability and the
// backup catalogs (ADR 0021), so a server on it takes backups.
func Driver() backend.Driver {
	return backend.Driver{
		Name:      "cassandra",
		Summary:   "Apache Cassandra 5 (experimental)",
		NewConfig: func() any { return defaultConfig() },
		Flags: []backend.Flag{
			{Name: "cassandra-hosts", Key: "hosts", Usage: "Cassandra contact points (host:port, comma-separated)"},
			{Name: "cassandra-keyspace", Key: "keyspace", Usage: "Cassandra keyspace of the backend's tables"},
			{Name: "cassandra-tx-lock-timeout", Key: "tx_lock_timeout", Usage: "transaction ledger lock timeout, a duration such as 5s (storage.cassandra.tx_lock_timeout)"},
			{Name: "cassandra-tx-lock-timeout-ms", Key: "tx_lock_timeout_ms", Usage: "deprecated: --cassandra-tx-lock-timeout in whole milliseconds"},
		},
		Keys: []backend.KeyDoc{
			{Key: "hosts", Default: "127.0.0.1:9042", Doc: "contact points, comma-separated host:port"},
			{Key: "keyspace", Default: "extenddb", Doc: "keyspace of the backend's tables"},
			{Key: "replication", Default: defaultReplication, Doc: "replication map of a keyspace created by `extenddb migrate`"},
			{Key: "consistency", Default: "LOCAL_QUORUM", Doc: "consistency level of plain reads and writes"},
			{Key: "serial_consistency", Default: "LOCAL_SERIAL", Doc: "serial consistency of lightweight transactions (SERIAL or LOCAL_SERIAL)"},
			{Key: "timeout", Default: "10s", Doc: "timeout of one request"},
			{Key: "connect_timeout", Default: "5s", Doc: "timeout of one connection attempt"},
			{Key: "tx_lock_timeout", Default: "5s", Doc: "transaction ledger: a PENDING transaction older than this may be aborted by anyone meeting its locks (ADR 0019)"},
			{Key: "timeout_ms", Default: "unset", Doc: "deprecated: timeout in whole milliseconds"},
			{Key: "connect_timeout_ms", Default: "unset", Doc: "deprecated: connect_timeout in whole milliseconds"},
			{Key: "tx_lock_timeout_ms", Default: "unset", Doc: "deprecated: tx_lock_timeout in whole milliseconds"},
		},
		Open: func(ctx context.Context, env backend.DriverEnv) (backend.Backend, error) {
			o := configOf(env).options()
			o.RequireMigrated = true
			o.ItemSize = env.ItemSize
			return Open(ctx, o)
		},
		Migrate: func(ctx context.Context, env backend.DriverEnv) ([]string, error) {
			o := configOf(env).options()
			if err := o.defaults(); err != nil {
				return nil, err
			}
			if err := ensureKeyspace(ctx, o, true); err != nil {
				return nil, err
			}
			b, err := connect(o)
			if err != nil {
				return nil, err
			}
			defer b.Close()
			return b.migrate(ctx)
		},
		Status: func(ctx context.Context, env backend.DriverEnv) (*backend.SchemaStatus, error) {
			o := configOf(env).options()
			if err := o.defaults(); err != nil {
				return nil, err
			}
			if err := ensureKeyspace(ctx, o, false); err != nil {
				if backend.IsKind(err, backend.KindSchema) {
					shipped, lerr := loadMigrations()
					if lerr != nil {
						return nil, lerr
					}
					st := &backend.SchemaStatus{Missing: "keyspace " + o.Keyspace}
					for _, m := range shipped {
						st.Pending = append(st.Pending, m.name)
					}
					return st, nil
				}
				return nil, err
			}
			b, err := connect(o)
			if err != nil {
				return nil, err
			}
			defer b.Close()
			return b.status(ctx)
		},
		Deprecations: func(env backend.DriverEnv) []string { return configOf(env).Deprecations() },
		Describe: func(env backend.DriverEnv) []any {
			c := configOf(env)
			return []any{"backend", "cassandra", "hosts", c.Hosts, "keyspace", c.Keyspace, "consistency", c.Consistency}
		},
	}
}

// connect opens a session on an existing keyspace without checking or
// changing its schema.
func connect(o Options) (*Backend, error) {
	c, cl, scl, err := o.cluster(o.Keyspace)
	if err != nil {
		return nil, err
	}
	s, err := c.CreateSession()
	if err != nil {
		return nil, mapErr(err, "connect")
	}
	return &Backend{s: s, opt: o, cl: cl, scl: scl, dirKnown: map[dirKey]time.Time{}, ixKnown: map[ixKey]struct{}{}, snapLim: backend.NewSnapshotLimiter(maxOpenSnapshots), stats: newStatsState()}, nil
}
