package server

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/cassandra"
	"github.com/extenddb/extenddb/internal/backend/memory"
	"github.com/extenddb/extenddb/internal/backend/mongodb"
	"github.com/extenddb/extenddb/internal/backend/postgres"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/engine"
)

// Drivers is the driver table: every storage backend the server can run
// on. It is the one place outside the backends' own packages that names
// them; a new backend adds its Driver here (see backend.Driver).
func Drivers() []backend.Driver {
	return []backend.Driver{
		sqlite.Driver(),
		postgres.Driver(),
		memory.Driver(),
		cassandra.Driver(),
		mongodb.Driver(),
	}
}

// driver finds the configured backend's driver.
func driver(name string) (backend.Driver, error) {
	var names []string
	for _, d := range Drivers() {
		if d.Name == name {
			return d, nil
		}
		names = append(names, d.Name)
	}
	sort.Strings(names)
	return backend.Driver{}, fmt.Errorf("storage.backend %q is not supported (supported: %s)", name, strings.Join(names, ", "))
}

// SectionTypes are the backends' config sections, for config.Load.
func SectionTypes() config.SectionTypes {
	out := config.SectionTypes{}
	for _, d := range Drivers() {
		out[d.Name] = d.NewConfig // nil: a backend without a section
	}
	return out
}

// LoadConfig loads the configuration (file, then environment) with every
// driver's section.
func LoadConfig(path string) (config.Config, error) {
	return config.LoadDefault(path, SectionTypes())
}

// backendName is the driver that runs: storage.backend, except that
// storage.memory selects the native memory backend unless
// storage.memory_engine = "sqlite" asks for the configured backend's own
// memory mode.
func backendName(cfg config.Config) string {
	if cfg.Storage.Memory && cfg.Storage.MemoryEngine != config.MemorySQLite {
		return memory.DriverName
	}
	return cfg.Storage.Backend
}

// driverEnv is what the configured driver is given.
func driverEnv(cfg config.Config, log *slog.Logger) (backend.Driver, backend.DriverEnv, error) {
	d, err := driver(backendName(cfg))
	if err != nil {
		return d, backend.DriverEnv{}, err
	}
	sec := cfg.Storage.Section(d.Name)
	if sec == nil && d.NewConfig != nil {
		sec = d.NewConfig()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return d, backend.DriverEnv{Config: sec, DataDir: cfg.Storage.DataDir, Memory: cfg.Storage.Memory, Logger: log,
		ItemSize: engine.ItemSize}, nil
}

// OpenBackend opens the configured storage backend through its driver,
// under the contract checks (backend.Checked, capabilities included): a
// broken promise is an internal error in the log, never a crash. Every
// caller (the server, `backup sync`) gets the checked backend; none holds
// the backend under it.
func OpenBackend(ctx context.Context, cfg config.Config, log *slog.Logger) (backend.Backend, error) {
	d, env, err := driverEnv(cfg, log)
	if err != nil {
		return nil, err
	}
	log = env.Logger
	if d.Deprecations != nil {
		for _, w := range d.Deprecations(env) {
			log.Warn("deprecated configuration key", "warning", w)
		}
	}
	b, err := d.Open(ctx, env)
	if err != nil {
		return nil, err
	}
	return backend.Checked(b, func(err error) { log.Error("storage contract violation", "err", err) }), nil
}

// MigrationStatus lists a database's applied and pending migrations.
type MigrationStatus struct {
	Backend string
	backend.SchemaStatus
}

// Migrate applies the pending migrations of the configured database and
// returns the ones it applied. It refuses a database where a shipped
// migration was edited or that is newer than this build.
func Migrate(ctx context.Context, cfg config.Config) ([]string, error) {
	d, env, err := driverEnv(cfg, nil)
	if err != nil {
		return nil, err
	}
	if d.Migrate == nil {
		return nil, fmt.Errorf("storage.backend %q keeps no schema to migrate", d.Name)
	}
	return d.Migrate(ctx, env)
}

// Status reports the applied and pending migrations without changing
// anything.
func Status(ctx context.Context, cfg config.Config) (*MigrationStatus, error) {
	d, env, err := driverEnv(cfg, nil)
	if err != nil {
		return nil, err
	}
	if d.Status == nil {
		return nil, fmt.Errorf("storage.backend %q keeps no schema", d.Name)
	}
	st, err := d.Status(ctx, env)
	if err != nil {
		return nil, err
	}
	return &MigrationStatus{Backend: d.Name, SchemaStatus: *st}, nil
}

// storageAttrs describe the storage really in use, for the startup log.
func storageAttrs(cfg config.Config) []any {
	d, env, err := driverEnv(cfg, nil)
	if err != nil || d.Describe == nil {
		return []any{"backend", cfg.Storage.Backend}
	}
	return d.Describe(env)
}

// StorageFlags are the drivers' command-line flags.
func StorageFlags() []StorageFlag {
	var out []StorageFlag
	for _, d := range Drivers() {
		for _, f := range d.Flags {
			out = append(out, StorageFlag{Flag: f, Key: "storage." + d.Name + "." + f.Key})
		}
	}
	return out
}

// StorageFlag is a driver's flag with the full key it sets.
type StorageFlag struct {
	backend.Flag
	Key string
}

// BackendNames lists the drivers, for help texts.
func BackendNames() string {
	var names []string
	for _, d := range Drivers() {
		names = append(names, d.Name)
	}
	return strings.Join(names, ", ")
}

// RecountResult is one table recounted by RecountStats.
type RecountResult struct {
	Account, Table string
	// Counted: the figures are known after the recount (false when the
	// table changed its description or was loaded in bulk meanwhile: run
	// it again).
	Counted   bool
	ItemCount int64
	SizeBytes int64
}

// RecountStats is the repair of the table statistics a backend keeps with
// its writes (backend.TableCounter): it recounts the named tables of an
// account (all of them when tables is empty) with a full read of each,
// writes going on, and reports each through done. A backend without the
// capability has nothing to repair.
func RecountStats(ctx context.Context, cfg config.Config, account string, tables []string, done func(RecountResult)) error {
	b, err := OpenBackend(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	tc := b.Capabilities().Counts
	if tc == nil {
		return fmt.Errorf("storage.backend %q does not keep table statistics with its writes: DescribeTable computes them", b.Name())
	}
	if len(tables) == 0 {
		res, err := b.ListTables(ctx, backend.ListTablesParams{Account: account})
		if err != nil {
			return err
		}
		tables = res.Names
	}
	for _, name := range tables {
		t, err := b.GetTable(ctx, backend.GetTableParams{Account: account, Name: name})
		if err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		rc, err := tc.Recount(ctx, backend.CountsParams{Table: t.Table.Ref()})
		if err != nil {
			return fmt.Errorf("table %s: %w", name, err)
		}
		done(RecountResult{Account: account, Table: name, Counted: rc.Counted, ItemCount: rc.Stats.ItemCount, SizeBytes: rc.Stats.SizeBytes})
	}
	return nil
}
