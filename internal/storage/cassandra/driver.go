package cassandra

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/txledger"
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
	// TimeoutMS bounds one request; ConnectTimeoutMS one connection attempt.
	TimeoutMS        int `toml:"timeout_ms"`
	ConnectTimeoutMS int `toml:"connect_timeout_ms"`
	// TxLockTimeoutMS is the transaction ledger's lock timeout
	// (txledger.Options.LockTimeout, ADR 0019).
	TxLockTimeoutMS int `toml:"tx_lock_timeout_ms"`
}

// defaultReplication is the replication map of a keyspace that
// `extenddb migrate` creates when none is configured (one node, tests).
const defaultReplication = "{'class': 'SimpleStrategy', 'replication_factor': 1}"

func defaultConfig() *Config {
	return &Config{Hosts: "127.0.0.1:9042", Keyspace: "extenddb", Replication: defaultReplication, Consistency: "LOCAL_QUORUM", SerialConsistency: "LOCAL_SERIAL",
		TimeoutMS: 10000, ConnectTimeoutMS: 5000, TxLockTimeoutMS: 5000}
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
	if c.TimeoutMS < 1 || c.ConnectTimeoutMS < 1 {
		return errors.New("timeout_ms and connect_timeout_ms must be positive")
	}
	if c.TxLockTimeoutMS < 1 {
		return errors.New("tx_lock_timeout_ms must be positive")
	}
	return nil
}

func (c *Config) options() Options {
	var hosts []string
	for _, h := range strings.Split(c.Hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	return Options{Hosts: hosts, Keyspace: c.Keyspace, Replication: c.Replication, Consistency: c.Consistency,
		SerialConsistency: c.SerialConsistency, Timeout: time.Duration(c.TimeoutMS) * time.Millisecond,
		ConnectTimeout: time.Duration(c.ConnectTimeoutMS) * time.Millisecond,
		Tx:             txledger.Options{LockTimeout: time.Duration(c.TxLockTimeoutMS) * time.Millisecond}}
}

func configOf(env storage.DriverEnv) *Config {
	if c, ok := env.Config.(*Config); ok && c != nil {
		return c
	}
	return defaultConfig()
}

// Driver is the Cassandra entry for the server's driver table
// (internal/server/drivers.go). It has the snapshot capability and the
// backup catalogs (ADR 0021), so a server on it takes backups.
func Driver() storage.Driver {
	return storage.Driver{
		Name:      "cassandra",
		Summary:   "Apache Cassandra 5 (experimental)",
		NewConfig: func() any { return defaultConfig() },
		Flags: []storage.Flag{
			{Name: "cassandra-hosts", Key: "hosts", Usage: "Cassandra contact points (host:port, comma-separated)"},
			{Name: "cassandra-keyspace", Key: "keyspace", Usage: "Cassandra keyspace of the backend's tables"},
			{Name: "cassandra-tx-lock-timeout-ms", Key: "tx_lock_timeout_ms", Usage: "transaction ledger lock timeout in milliseconds (storage.cassandra.tx_lock_timeout_ms)"},
		},
		Keys: []storage.KeyDoc{
			{Key: "hosts", Default: "127.0.0.1:9042", Doc: "contact points, comma-separated host:port"},
			{Key: "keyspace", Default: "extenddb", Doc: "keyspace of the backend's tables"},
			{Key: "replication", Default: defaultReplication, Doc: "replication map of a keyspace created by `extenddb migrate`"},
			{Key: "consistency", Default: "LOCAL_QUORUM", Doc: "consistency level of plain reads and writes"},
			{Key: "serial_consistency", Default: "LOCAL_SERIAL", Doc: "serial consistency of lightweight transactions (SERIAL or LOCAL_SERIAL)"},
			{Key: "timeout_ms", Default: "10000", Doc: "timeout of one request, in milliseconds"},
			{Key: "connect_timeout_ms", Default: "5000", Doc: "timeout of one connection attempt, in milliseconds"},
			{Key: "tx_lock_timeout_ms", Default: "5000", Doc: "transaction ledger: a PENDING transaction older than this may be aborted by anyone meeting its locks, in milliseconds (ADR 0019)"},
		},
		Open: func(ctx context.Context, env storage.DriverEnv) (storage.Backend, error) {
			o := configOf(env).options()
			o.RequireMigrated = true
			return Open(ctx, o)
		},
		Migrate: func(ctx context.Context, env storage.DriverEnv) ([]string, error) {
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
		Status: func(ctx context.Context, env storage.DriverEnv) (*storage.SchemaStatus, error) {
			o := configOf(env).options()
			if err := o.defaults(); err != nil {
				return nil, err
			}
			if err := ensureKeyspace(ctx, o, false); err != nil {
				if storage.IsKind(err, storage.KindSchema) {
					shipped, lerr := loadMigrations()
					if lerr != nil {
						return nil, lerr
					}
					st := &storage.SchemaStatus{Missing: "keyspace " + o.Keyspace}
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
		Describe: func(env storage.DriverEnv) []any {
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
	return &Backend{s: s, opt: o, cl: cl, scl: scl, dirKnown: map[dirKey]time.Time{}, ixKnown: map[ixKey]struct{}{}, snapLim: storage.NewSnapshotLimiter(maxOpenSnapshots)}, nil
}
