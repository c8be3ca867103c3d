package server

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for migrations
	_ "modernc.org/sqlite"             // database/sql driver "sqlite" for migrations

	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/migrations"
)

// sqlitePath is the database file of the SQLite backend.
func sqlitePath(cfg config.Config) string {
	return filepath.Join(cfg.Storage.DataDir, "extenddb.sqlite")
}

// openSQL opens the configured database with database/sql for the
// migration runner.
func openSQL(cfg config.Config) (*sql.DB, migrations.Dialect, error) {
	switch cfg.Storage.Backend {
	case "sqlite":
		if cfg.Storage.Memory {
			return nil, migrations.Dialect{}, errors.New("storage.memory: an in-memory database is migrated when the server starts; there is nothing to migrate")
		}
		if err := os.MkdirAll(cfg.Storage.DataDir, 0o700); err != nil {
			return nil, migrations.Dialect{}, fmt.Errorf("storage.data_dir: %w", err)
		}
		db, err := sql.Open("sqlite", sqlitePath(cfg)+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
		if err != nil {
			return nil, migrations.Dialect{}, err
		}
		db.SetMaxOpenConns(1)
		return db, migrations.SQLite, nil
	case "postgres":
		db, err := sql.Open("pgx", cfg.Storage.Postgres.DSN)
		if err != nil {
			return nil, migrations.Dialect{}, fmt.Errorf("storage.postgres.dsn: %w", err)
		}
		db.SetMaxOpenConns(2)
		return db, migrations.Postgres, nil
	}
	return nil, migrations.Dialect{}, fmt.Errorf("storage.backend %q is not supported", cfg.Storage.Backend)
}

// MigrationStatus lists a database's applied and pending migrations.
type MigrationStatus struct {
	Backend string
	// Missing is the SQLite database path when no database exists there.
	Missing string
	Applied []string
	Pending []string
}

func migrationName(m migrations.Migration) string { return fmt.Sprintf("%04d_%s", m.Version, m.Name) }

// Migrate applies the pending migrations of the configured database and
// returns the ones it applied. It refuses a database where a shipped
// migration was edited or that is newer than this build.
func Migrate(ctx context.Context, cfg config.Config) ([]string, error) {
	db, d, err := openSQL(cfg)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("%s: storage backend unreachable: %w", cfg.Storage.Backend, err)
	}
	done, err := migrations.Apply(ctx, db, d)
	names := make([]string, len(done))
	for i, m := range done {
		names[i] = migrationName(m)
	}
	return names, err
}

// Status reports the applied and pending migrations without changing
// anything: it creates no directory, file or table (a SQLite database that
// does not exist yet is reported with every migration pending).
func Status(ctx context.Context, cfg config.Config) (*MigrationStatus, error) {
	st := &MigrationStatus{Backend: cfg.Storage.Backend}
	var db *sql.DB
	var d migrations.Dialect
	switch cfg.Storage.Backend {
	case "sqlite":
		if cfg.Storage.Memory {
			return nil, errors.New("storage.memory: an in-memory database exists only while the server runs; there is no status to show")
		}
		path := sqlitePath(cfg)
		if _, err := os.Stat(path); err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("storage.data_dir: %w", err)
			}
			ms, err := migrations.Load(migrations.SQLite)
			if err != nil {
				return nil, err
			}
			st.Missing = path
			for _, m := range ms {
				st.Pending = append(st.Pending, migrationName(m))
			}
			return st, nil
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		// Read-only. A database without a -wal file was closed cleanly and
		// no server has it open: read it as immutable, which creates no
		// -wal/-shm files. Otherwise read through the existing WAL.
		mode := "mode=ro"
		if _, err := os.Stat(path + "-wal"); errors.Is(err, os.ErrNotExist) {
			mode = "immutable=1"
		}
		u := url.URL{Scheme: "file", Path: abs, RawQuery: mode + "&_pragma=busy_timeout(5000)"}
		db, err = sql.Open("sqlite", u.String())
		if err != nil {
			return nil, err
		}
		d = migrations.SQLite
	default:
		var err error
		db, d, err = openSQL(cfg)
		if err != nil {
			return nil, err
		}
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return nil, fmt.Errorf("%s: storage backend unreachable: %w", cfg.Storage.Backend, err)
	}
	applied, pending, err := migrations.Inspect(ctx, db, d)
	if err != nil {
		return nil, err
	}
	for _, a := range applied {
		st.Applied = append(st.Applied, fmt.Sprintf("%04d_%s", a.Version, a.Name))
	}
	for _, m := range pending {
		st.Pending = append(st.Pending, migrationName(m))
	}
	return st, nil
}

// WriteConfig writes cfg as TOML to path, refusing to overwrite unless
// force. The file is created 0600 (it may hold a DSN with a password).
func WriteConfig(path string, cfg config.Config, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists; use --force to overwrite it", path)
		}
		return err
	}
	defer f.Close()
	if _, err := fmt.Fprintln(f, "# extenddb configuration, written by `extenddb init`. See docs/configuration.md."); err != nil {
		return err
	}
	if err := toml.NewEncoder(f).Encode(cfg); err != nil {
		return err
	}
	return f.Sync()
}

// Healthcheck asks a running server's /ready endpoint.
func Healthcheck(ctx context.Context, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+"/ready", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("not reachable: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable {
		return fmt.Errorf("not ready: HTTP 503 from %s/ready: the server runs but its storage backend (or backup store) is unreachable; its log says why (\"not ready\")", strings.TrimRight(endpoint, "/"))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("not ready: HTTP %d from %s/ready", resp.StatusCode, strings.TrimRight(endpoint, "/"))
	}
	return nil
}

// NewAccessKey mints an access key id ("EXDB" + 16 characters) and a
// 40-character secret for an account.
func NewAccessKey(account string) (config.AccessKey, error) {
	const idChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const secretChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	pick := func(chars string, n int) (string, error) {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		for i := range b {
			b[i] = chars[int(b[i])%len(chars)]
		}
		return string(b), nil
	}
	id, err := pick(idChars, 16)
	if err != nil {
		return config.AccessKey{}, err
	}
	secret, err := pick(secretChars, 40)
	if err != nil {
		return config.AccessKey{}, err
	}
	return config.AccessKey{AccessKeyID: "EXDB" + id, SecretAccessKey: secret, Account: account}, nil
}
