// Package config loads extenddb's configuration: defaults, then a TOML
// file, then EXTENDDB__SECTION__KEY environment variables; command-line
// flags are applied last by the caller. Unknown keys are errors that name
// the key.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/extenddb/extenddb/internal/store"
)

// Config is the whole configuration.
type Config struct {
	Server  Server  `toml:"server"`
	Storage Storage `toml:"storage"`
	Log     Log     `toml:"log"`
	Auth    Auth    `toml:"auth"`
	Backup  Backup  `toml:"backup"`
}

// Backup configures where backups are kept.
type Backup struct {
	// Store is the [backup.store] section (see internal/store.Config):
	// kind = "filesystem" | "s3" | "disabled" (default).
	Store store.Config `toml:"store"`
	// MaxConcurrentJobs bounds backups and restores running at once on
	// this server (0: 4); over it, LimitExceededException.
	MaxConcurrentJobs int `toml:"max_concurrent_jobs"`
	// HeartbeatInterval is how often a job renews its claim (0: 15s);
	// StaleAfter is when a claim without heartbeat may be taken over
	// (0: 300s); ReconcileInterval paces the reconciler (0: 60s).
	HeartbeatInterval Duration `toml:"heartbeat_interval"`
	StaleAfter        Duration `toml:"stale_after"`
	ReconcileInterval Duration `toml:"reconcile_interval"`
	// MaxSnapshotAge bounds how long a backup keeps its table snapshot
	// open; past it the backup fails cleanly (0: no bound).
	MaxSnapshotAge Duration `toml:"max_snapshot_age"`
	// SpoolDir is where restores copy a backup before verifying it
	// (default: the system's temporary directory). Not inside a
	// filesystem store's root.
	SpoolDir string `toml:"spool_dir"`
}

// Auth configures request signing (AWS Signature Version 4).
type Auth struct {
	// Keys are the accepted access keys. With none, every request is
	// accepted as account 000000000000 (allowed on loopback only, unless
	// server.allow_unauthenticated).
	Keys []AccessKey `toml:"keys"`
}

// AccessKey is one access key and the account its requests belong to.
type AccessKey struct {
	AccessKeyID     string `toml:"access_key_id"`
	SecretAccessKey string `toml:"secret_access_key"`
	// Account is a 12-digit account id (default 000000000000).
	Account string `toml:"account"`
}

// Server configures the HTTP listener.
type Server struct {
	// Listen is the address to listen on.
	Listen string `toml:"listen"`
	// Region is the region reported in ARNs.
	Region string `toml:"region"`
	// ShutdownTimeout bounds how long in-flight requests may finish.
	ShutdownTimeout Duration `toml:"shutdown_timeout"`
	// PprofListen, when set, serves net/http/pprof on this address
	// (loopback only; for profiling).
	PprofListen string `toml:"pprof_listen"`
	// TLSCertFile and TLSKeyFile, when both set, serve HTTPS.
	TLSCertFile string `toml:"tls_cert_file"`
	TLSKeyFile  string `toml:"tls_key_file"`
	// AllowUnauthenticated permits a non-loopback listener although
	// request signatures are not verified yet (every request is accepted
	// as the default account). Off by default.
	AllowUnauthenticated bool `toml:"allow_unauthenticated"`
	// CORSAllowedOrigins are the browser origins allowed to call the API
	// ("https://app.example.com", or "*" for every origin). Unset: every
	// origin on the loopback development default (no auth.keys), none
	// otherwise; an empty list allows none.
	CORSAllowedOrigins []string `toml:"cors_allowed_origins"`
}

// CORSOrigins returns the origins CORS allows under this configuration
// (see Server.CORSAllowedOrigins).
func (c *Config) CORSOrigins() []string {
	if c.Server.CORSAllowedOrigins != nil {
		return c.Server.CORSAllowedOrigins
	}
	if len(c.Auth.Keys) == 0 && IsLoopback(c.Server.Listen) {
		return []string{"*"}
	}
	return nil
}

// Storage selects and configures the backend.
type Storage struct {
	// Backend is "sqlite" (more to come).
	Backend string `toml:"backend"`
	// DataDir holds the SQLite database file.
	DataDir string `toml:"data_dir"`
	// Memory keeps SQLite data in a temporary file removed at exit.
	Memory bool `toml:"memory"`
	// SQLite tunes the embedded backend.
	SQLite SQLite `toml:"sqlite"`
	// Postgres configures the PostgreSQL backend.
	Postgres Postgres `toml:"postgres"`
}

// SQLite tunes the embedded backend.
type SQLite struct {
	// ItemCacheMB bounds the in-memory item cache (0 disables it).
	ItemCacheMB int `toml:"item_cache_mb"`
	// WALLimitMB is the write-ahead log size at which the writer
	// checkpoints and empties it (at least 1).
	WALLimitMB int `toml:"wal_limit_mb"`
}

// Postgres configures the PostgreSQL backend.
type Postgres struct {
	// DSN is a postgres:// URL or a libpq connection string.
	DSN string `toml:"dsn"`
	// MaxConns bounds the connection pool (0: the driver's default).
	MaxConns int `toml:"max_conns"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `toml:"level"`
	// Format is text or json.
	Format string `toml:"format"`
	// SlowRequestThreshold: requests taking at least this long are logged
	// at info (0 disables).
	SlowRequestThreshold Duration `toml:"slow_request_threshold"`
}

// Duration is a time.Duration written as a string ("30s") in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses a duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText formats a duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Default returns the built-in defaults.
func Default() Config {
	return Config{
		Server:  Server{Listen: "127.0.0.1:8000", Region: "us-east-1", ShutdownTimeout: Duration{30 * time.Second}},
		Storage: Storage{Backend: "sqlite", DataDir: "extenddb-data", SQLite: SQLite{ItemCacheMB: 32, WALLimitMB: 32}},
		Log:     Log{Level: "info", Format: "text", SlowRequestThreshold: Duration{time.Second}},
	}
}

// EnvPrefix starts every environment override.
const EnvPrefix = "EXTENDDB__"

// Load builds the configuration from defaults, the file at path (skipped
// when path is empty) and the environment (environ as os.Environ gives it).
func Load(path string, environ []string) (Config, error) {
	c := Default()
	if path != "" {
		md, err := toml.DecodeFile(path, &c)
		if err != nil {
			return c, fmt.Errorf("config %s: %w", path, err)
		}
		if und := md.Undecoded(); len(und) > 0 {
			return c, fmt.Errorf("config %s: unknown key %q", path, und[0].String())
		}
	}
	if err := applyEnv(&c, environ); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// LoadDefault loads from path and the process environment.
func LoadDefault(path string) (Config, error) { return Load(path, os.Environ()) }

// Validate checks values; errors name the key.
func (c *Config) Validate() error {
	if c.Server.Listen == "" {
		return errors.New("config: server.listen must not be empty")
	}
	if !IsLoopback(c.Server.Listen) && len(c.Auth.Keys) == 0 && !c.Server.AllowUnauthenticated {
		return fmt.Errorf("config: server.listen %q is not a loopback address and no [[auth.keys]] are configured: "+
			"add access keys (extenddb init --generate-key), listen on 127.0.0.1, or set server.allow_unauthenticated = true", c.Server.Listen)
	}
	if (c.Server.TLSCertFile == "") != (c.Server.TLSKeyFile == "") {
		return errors.New("config: server.tls_cert_file and server.tls_key_file must be set together")
	}
	for i, o := range c.Server.CORSAllowedOrigins {
		if err := validOrigin(o); err != nil {
			return fmt.Errorf("config: server.cors_allowed_origins[%d] %q: %w", i, o, err)
		}
	}
	if c.Log.SlowRequestThreshold.Duration < 0 {
		return errors.New("config: log.slow_request_threshold must not be negative")
	}
	if err := c.Backup.Store.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if c.Backup.SpoolDir != "" && c.Backup.Store.Root != "" {
		if rel, err := filepath.Rel(c.Backup.Store.Root, c.Backup.SpoolDir); err == nil && !strings.HasPrefix(rel, "..") {
			return errors.New("config: backup.spool_dir must not be inside backup.store.root")
		}
	}
	if c.Backup.MaxConcurrentJobs < 0 {
		return errors.New("config: backup.max_concurrent_jobs must not be negative")
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"heartbeat_interval", c.Backup.HeartbeatInterval}, {"stale_after", c.Backup.StaleAfter},
		{"reconcile_interval", c.Backup.ReconcileInterval}, {"max_snapshot_age", c.Backup.MaxSnapshotAge}} {
		if d.v.Duration < 0 {
			return fmt.Errorf("config: backup.%s must not be negative", d.key)
		}
	}
	hb, stale := c.Backup.HeartbeatInterval.Duration, c.Backup.StaleAfter.Duration
	if hb == 0 {
		hb = 15 * time.Second
	}
	if stale == 0 {
		stale = 300 * time.Second
	}
	if hb >= stale {
		return errors.New("config: backup.heartbeat_interval must be shorter than backup.stale_after")
	}
	seen := map[string]bool{}
	for i, k := range c.Auth.Keys {
		if len(k.AccessKeyID) < 16 || len(k.AccessKeyID) > 128 || strings.ContainsAny(k.AccessKeyID, "/ ") {
			return fmt.Errorf("config: auth.keys[%d].access_key_id must be 16 to 128 characters without '/' or spaces", i)
		}
		if len(k.SecretAccessKey) < 16 {
			return fmt.Errorf("config: auth.keys[%d].secret_access_key must be at least 16 characters", i)
		}
		if k.Account != "" && !accountRE.MatchString(k.Account) {
			return fmt.Errorf("config: auth.keys[%d].account %q must be 12 digits", i, k.Account)
		}
		if seen[k.AccessKeyID] {
			return fmt.Errorf("config: auth.keys[%d].access_key_id %q is listed twice", i, k.AccessKeyID)
		}
		seen[k.AccessKeyID] = true
	}
	switch c.Storage.Backend {
	case "sqlite":
		if c.Storage.SQLite.ItemCacheMB < 0 {
			return fmt.Errorf("config: storage.sqlite.item_cache_mb must not be negative")
		}
		if c.Storage.SQLite.WALLimitMB < 1 {
			return fmt.Errorf("config: storage.sqlite.wal_limit_mb must be at least 1")
		}
	case "postgres":
		if c.Storage.Postgres.DSN == "" {
			return errors.New("config: storage.postgres.dsn is required when storage.backend is \"postgres\"")
		}
		if c.Storage.Postgres.MaxConns < 0 {
			return errors.New("config: storage.postgres.max_conns must not be negative")
		}
	default:
		return fmt.Errorf("config: storage.backend %q is not supported (supported: sqlite, postgres)", c.Storage.Backend)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("config: log.level %q must be one of debug, info, warn, error", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return fmt.Errorf("config: log.format %q must be text or json", c.Log.Format)
	}
	return nil
}

// applyEnv applies EXTENDDB__SECTION__KEY variables.
func applyEnv(c *Config, environ []string) error {
	for _, kv := range environ {
		if !strings.HasPrefix(kv, EnvPrefix) {
			continue
		}
		eq := strings.IndexByte(kv, '=')
		if eq < 0 {
			continue
		}
		name, val := kv[:eq], kv[eq+1:]
		path := strings.Split(strings.ToLower(strings.TrimPrefix(name, EnvPrefix)), "__")
		if err := setPath(reflect.ValueOf(c).Elem(), path, val, strings.Join(path, ".")); err != nil {
			return fmt.Errorf("environment %s: %w", name, err)
		}
	}
	return nil
}

var textUnmarshaler = reflect.TypeOf((*interface{ UnmarshalText([]byte) error })(nil)).Elem()

func setPath(v reflect.Value, path []string, val, full string) error {
	if len(path) == 0 {
		return errors.New("empty key")
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("toml"), ",")[0]
		if tag != path[0] {
			continue
		}
		fv := v.Field(i)
		if len(path) > 1 {
			if fv.Kind() != reflect.Struct {
				return fmt.Errorf("unknown key %q", full)
			}
			return setPath(fv, path[1:], val, full)
		}
		if fv.CanAddr() && fv.Addr().Type().Implements(textUnmarshaler) {
			return fv.Addr().Interface().(interface{ UnmarshalText([]byte) error }).UnmarshalText([]byte(val))
		}
		switch fv.Kind() {
		case reflect.Slice:
			if fv.Type().Elem().Kind() != reflect.String {
				return fmt.Errorf("key %q cannot be set from the environment", full)
			}
			// A comma-separated list; an empty value is an empty list.
			list := reflect.MakeSlice(fv.Type(), 0, 4)
			for _, p := range strings.Split(val, ",") {
				if p = strings.TrimSpace(p); p != "" {
					list = reflect.Append(list, reflect.ValueOf(p))
				}
			}
			fv.Set(list)
		case reflect.String:
			fv.SetString(val)
		case reflect.Bool:
			b, err := strconv.ParseBool(val)
			if err != nil {
				return fmt.Errorf("key %q: %w", full, err)
			}
			fv.SetBool(b)
		case reflect.Int, reflect.Int64, reflect.Int32:
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return fmt.Errorf("key %q: %w", full, err)
			}
			fv.SetInt(n)
		default:
			return fmt.Errorf("key %q cannot be set from the environment", full)
		}
		return nil
	}
	return fmt.Errorf("unknown key %q", full)
}

var accountRE = regexp.MustCompile(`^[0-9]{12}$`)

// IsLoopback reports whether a listen address (host:port) binds only to
// the loopback interface.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// validOrigin accepts "*" or a browser origin: scheme://host[:port], no
// path, query or credentials.
func validOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New(`must be "*" or an origin such as "https://app.example.com" or "http://localhost:3000"`)
	}
	return nil
}
