package backend

import (
	"context"
	"log/slog"
)

// Driver is a backend package's entry in the server's driver table
// (internal/server/drivers.go). Everything that depends on which backend
// is configured goes through it, so no code outside the table and the
// backend's own package names a backend. A new backend adds a Driver
// function to its package and one line to the table.
type Driver struct {
	// Name selects the backend (storage.backend) and names its config
	// section, [storage.<Name>].
	Name string
	// Summary is a few words for help texts ("embedded SQLite, the default").
	Summary string
	// NewConfig returns the backend's section with its defaults: a pointer
	// to a struct with toml tags. The config loader decodes the section into
	// it strictly (unknown keys are errors that name the key) and applies
	// EXTENDDB__STORAGE__<NAME>__<KEY> overrides; when the value implements
	// interface{ Validate() error }, the loader calls it for the configured
	// backend. Nil when the backend has no section.
	NewConfig func() any
	// Flags are command-line flags that set keys of the section.
	Flags []Flag
	// Keys documents the section's keys (docs/configuration.md lists them;
	// a test checks it).
	Keys []KeyDoc
	// Open opens the backend for serving. A backend whose schema must be
	// migrated by an operator refuses an unmigrated or newer schema with
	// KindSchema and says what to run.
	Open func(ctx context.Context, env DriverEnv) (Backend, error)
	// Migrate applies pending schema migrations and names them; nil when
	// the backend has no schema an operator migrates.
	Migrate func(ctx context.Context, env DriverEnv) ([]string, error)
	// Status reports applied and pending migrations without changing
	// anything; nil like Migrate.
	Status func(ctx context.Context, env DriverEnv) (*SchemaStatus, error)
	// Describe returns slog attributes for the startup log: what is really
	// in use (a path, a DSN without its password, memory), never a secret.
	Describe func(env DriverEnv) []any
	// Deprecations are warnings for the startup log about deprecated keys
	// the section sets (still honoured); nil when the backend has none.
	Deprecations func(env DriverEnv) []string
}

// DriverEnv is what a driver is given.
type DriverEnv struct {
	// Config is the backend's section as NewConfig typed it.
	Config any
	// DataDir is storage.data_dir, where embedded backends keep files.
	DataDir string
	// Memory is storage.memory: keep nothing after exit.
	Memory bool
	Logger *slog.Logger
	// ItemSize measures items and index entries for the table statistics
	// a backend keeps with its writes (TableCounter); nil: their length.
	ItemSize ItemSizeFunc
}

// Flag is a command-line flag (a string value) setting one key of a
// backend's section.
type Flag struct {
	Name  string // flag name without dashes: "dsn"
	Key   string // the section key it sets: "dsn" for storage.<name>.dsn
	Usage string
}

// KeyDoc documents one key of a backend's section.
type KeyDoc struct {
	Key, Default, Doc string
}

// SchemaStatus lists a database's applied and pending migrations.
type SchemaStatus struct {
	// Missing names the database (a file path) when it does not exist yet:
	// every migration is pending.
	Missing string
	Applied []string
	Pending []string
}
