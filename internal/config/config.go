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
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/extenddb/extenddb/internal/backup/plan"
	"github.com/extenddb/extenddb/internal/blobstore"
)

// Config is the whole configuration.
type Config struct {
	Server  Server  `toml:"server"`
	Storage Storage `toml:"storage"`
	Log     Log     `toml:"log"`
	Auth    Auth    `toml:"auth"`
	Backup  Backup  `toml:"backup"`
	// S3 says where the buckets named by exports and imports live.
	S3      blobstore.BucketConfig `toml:"s3"`
	Streams Streams                `toml:"streams"`
}

// Streams configures DynamoDB Streams.
type Streams struct {
	// ShardRollover is how long a stream shard stays open before it is
	// closed and a child shard opened (DynamoDB: about 4 hours).
	ShardRollover Duration `toml:"shard_rollover"`
	// Retention is how long stream records are kept (DynamoDB: 24 hours).
	Retention Duration `toml:"retention"`
	// IteratorLifetime is how long a shard iterator may be used
	// (DynamoDB: 15 minutes).
	IteratorLifetime Duration `toml:"iterator_lifetime"`
}

// Backup configures where backups are kept.
type Backup struct {
	// Store is the [backup.store] section (see internal/blobstore.Config):
	// kind = "filesystem" | "s3" | "disabled" (default).
	Store blobstore.Config `toml:"store"`
	// MaxConcurrentJobs bounds backups and restores running at once on
	// this server (0: 4); over it, LimitExceededException.
	MaxConcurrentJobs int `toml:"max_concurrent_jobs"`
	// ImportMaxErrors is how many items an ImportTable may fail to import
	// before it stops, FAILED, and removes its table (0: 1000).
	ImportMaxErrors int `toml:"import_max_errors"`
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
	// PITR is the [backup.pitr] section: shipping of point-in-time
	// recovery history to the store.
	PITR PITR `toml:"pitr"`
	// Plans are the [[backup.plans]]: scheduled backups with retention
	// (docs/backup.md, "Backup plans").
	Plans []Plan `toml:"plans"`
	// PlansCheckInterval is how often each server looks for due plan
	// slots (0: 30s); a run starts at most this long after its slot.
	PlansCheckInterval Duration `toml:"plans_check_interval"`
}

// Plan is one [[backup.plans]] entry; plan.Spec says what each key means.
type Plan struct {
	Name        string   `toml:"name"`
	Account     string   `toml:"account"`
	Tables      []string `toml:"tables"`
	Cron        string   `toml:"cron"`
	TimeZone    string   `toml:"timezone"`
	Every       Span     `toml:"every"`
	Window      Span     `toml:"window"`
	KeepLast    int      `toml:"keep_last"`
	KeepDaily   int      `toml:"keep_daily"`
	KeepWeekly  int      `toml:"keep_weekly"`
	KeepMonthly int      `toml:"keep_monthly"`
	MaxAge      Span     `toml:"max_age"`
}

// DefaultPlanAccount is the account of a plan that names none (the
// account of unsigned requests).
const DefaultPlanAccount = "000000000000"

// BackupPlans compiles the configured plans; an error names the plan's
// place, its name and the key at fault.
func (c *Config) BackupPlans() ([]*plan.Plan, error) {
	var out []*plan.Plan
	seen := map[string]bool{}
	for i, p := range c.Backup.Plans {
		acct := p.Account
		if acct == "" {
			acct = DefaultPlanAccount
		}
		pl, err := plan.Compile(plan.Spec{Name: p.Name, Account: acct, Tables: p.Tables, Cron: p.Cron, TimeZone: p.TimeZone,
			Every: p.Every.Duration, Window: p.Window.Duration, KeepLast: p.KeepLast,
			KeepDaily: p.KeepDaily, KeepWeekly: p.KeepWeekly, KeepMonthly: p.KeepMonthly, MaxAge: p.MaxAge.Duration})
		if err == nil && seen[p.Name] {
			err = fmt.Errorf("name %q: another plan has it", p.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("config: backup.plans[%d] (%q): %w", i, p.Name, err)
		}
		seen[p.Name] = true
		out = append(out, pl)
	}
	return out, nil
}

// Span is a duration written as a string that also takes whole days and
// weeks: "90m", "36h", "30d", "2w".
type Span struct{ time.Duration }

// UnmarshalText parses a span.
func (s *Span) UnmarshalText(b []byte) error {
	str := string(b)
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(str, suffix); ok {
			v, err := strconv.Atoi(n)
			if err != nil || v < 0 {
				return fmt.Errorf("%q: a whole number of %s", str, map[string]string{"d": "days", "w": "weeks"}[suffix])
			}
			s.Duration = time.Duration(v) * unit
			return nil
		}
	}
	v, err := time.ParseDuration(str)
	if err != nil {
		return err
	}
	s.Duration = v
	return nil
}

// MarshalText formats a span as a duration.
func (s Span) MarshalText() ([]byte, error) { return []byte(s.Duration.String()), nil }

// PITR configures point-in-time recovery shipping (docs/backup.md).
type PITR struct {
	// ShipInterval paces shipping of change logs to the store (0: 1s).
	ShipInterval Duration `toml:"ship_interval"`
	// SegmentMaxBytes closes a segment at this many bytes of records
	// (0: 16 MiB).
	SegmentMaxBytes int `toml:"segment_max_bytes"`
	// BaseInterval is the most time between two base snapshots (0: 24h).
	BaseInterval Duration `toml:"base_interval"`
	// BaseAfterBytes takes a base once this many bytes of records were
	// shipped since the last one (0: 1 GiB).
	BaseAfterBytes int64 `toml:"base_after_bytes"`
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
	// ReadHeaderTimeout bounds how long a client may take to send a
	// request's headers.
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	// BodyReadTimeout bounds how long a client may take to send a
	// request's body once its headers are read.
	BodyReadTimeout Duration `toml:"body_read_timeout"`
	// WriteTimeout bounds how long a client may take to read a response.
	WriteTimeout Duration `toml:"write_timeout"`
	// IdleTimeout closes kept-alive connections idle for this long.
	IdleTimeout Duration `toml:"idle_timeout"`
	// MaxInflightBodyBytes bounds the request and response bodies held
	// in memory at once, server-wide.
	MaxInflightBodyBytes int64 `toml:"max_inflight_body_bytes"`
	// InflightWait is how long a request waits for room in that bound
	// before it is answered ThrottlingException.
	InflightWait Duration `toml:"inflight_wait"`
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
	// Backend names the storage driver (internal/server/drivers.go).
	Backend string `toml:"backend"`
	// DataDir holds the files of embedded backends.
	DataDir string `toml:"data_dir"`
	// Memory keeps no data after exit: the native in-memory backend
	// (storage.memory_engine = "native", the default) or the configured
	// backend's own memory mode ("sqlite": SQLite in a temporary file
	// removed at exit).
	Memory bool `toml:"memory"`
	// MemoryEngine chooses what Memory runs on: "native" or "sqlite".
	MemoryEngine string `toml:"memory_engine"`
	// Sections are the backends' own sections, [storage.<name>], each of
	// the type its driver declares (storage.Driver.NewConfig), decoded
	// strictly by Load.
	Sections map[string]any `toml:"-"`
	// Backends are the backend names Load was given (for validation).
	Backends []string `toml:"-"`
}

// The engines of storage.memory.
const (
	// MemoryNative is the in-memory backend (the "memory" driver,
	// internal/backend/memory).
	MemoryNative = "native"
	// MemorySQLite is the configured backend's own memory mode: for
	// SQLite, a database in a temporary file removed at exit.
	MemorySQLite = "sqlite"
)

// Section returns a backend's section, nil when it has none.
func (s *Storage) Section(name string) any { return s.Sections[name] }

// SectionTypes declares the backends and their sections: name -> a
// function returning the section with its defaults (a pointer to a struct
// with toml tags), nil for a backend without a section. The server's
// driver table provides it.
type SectionTypes map[string]func() any

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
		Server: Server{Listen: "127.0.0.1:8000", Region: "us-east-1", ShutdownTimeout: Duration{30 * time.Second},
			ReadHeaderTimeout: Duration{10 * time.Second}, BodyReadTimeout: Duration{30 * time.Second},
			WriteTimeout: Duration{30 * time.Second}, IdleTimeout: Duration{120 * time.Second},
			MaxInflightBodyBytes: 128 << 20, InflightWait: Duration{time.Second}},
		Storage: Storage{Backend: "sqlite", DataDir: "extenddb-data", MemoryEngine: MemoryNative},
		Log:     Log{Level: "info", Format: "text", SlowRequestThreshold: Duration{time.Second}},
		Streams: Streams{ShardRollover: Duration{4 * time.Hour}, Retention: Duration{24 * time.Hour}, IteratorLifetime: Duration{15 * time.Minute}},
	}
}

// EnvPrefix starts every environment override.
const EnvPrefix = "EXTENDDB__"

// Load builds the configuration from defaults, the file at path (skipped
// when path is empty) and the environment (environ as os.Environ gives it).
// sections declares the backends' sections; a [storage.<name>] section of
// a backend not declared is an unknown key.
func Load(path string, environ []string, sections SectionTypes) (Config, error) {
	c := Default()
	c.Storage.Sections = map[string]any{}
	for name, mk := range sections {
		c.Storage.Backends = append(c.Storage.Backends, name)
		if mk != nil {
			c.Storage.Sections[name] = mk()
		}
	}
	sort.Strings(c.Storage.Backends)
	if path != "" {
		if err := c.decodeFile(path); err != nil {
			return c, err
		}
	}
	if err := applyEnv(&c, environ); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// decodeFile decodes the TOML file: the sections of this package's types,
// then each backend's section into its driver's type. Every key must be
// decoded by one of them.
func (c *Config) decodeFile(path string) error {
	md, err := toml.DecodeFile(path, c)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	var raw struct {
		Storage map[string]toml.Primitive `toml:"storage"`
	}
	md2, err := toml.DecodeFile(path, &raw)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	for name, sec := range c.Storage.Sections {
		// A backend's section is a table; a key of [storage] itself
		// that happens to share the name (memory = true) is not one.
		if p, ok := raw.Storage[name]; ok && isTable(md2.Type("storage", name)) {
			if err := md2.PrimitiveDecode(p, sec); err != nil {
				return fmt.Errorf("config %s: storage.%s: %w", path, name, err)
			}
		}
	}
	for _, k := range md.Undecoded() {
		if len(k) >= 2 && k[0] == "storage" && c.Storage.Sections[k[1]] != nil {
			continue // a backend's section: checked below
		}
		return fmt.Errorf("config %s: unknown key %q", path, k.String())
	}
	for _, k := range md2.Undecoded() {
		if len(k) >= 3 && k[0] == "storage" && c.Storage.Sections[k[1]] != nil {
			return fmt.Errorf("config %s: unknown key %q", path, k.String())
		}
	}
	return nil
}

// LoadDefault loads from path and the process environment.
func LoadDefault(path string, sections SectionTypes) (Config, error) {
	return Load(path, os.Environ(), sections)
}

// Set sets one key ("storage.postgres.dsn", "server.listen") from its text,
// as an environment override would; command-line flags use it.
func (c *Config) Set(key, val string) error {
	return c.setPath(strings.Split(key, "."), val, key)
}

// Validate checks values; errors name the key.
func (c *Config) Validate() error {
	if c.Server.Listen == "" {
		return errors.New("config: server.listen must not be empty")
	}
	if !IsLoopback(c.Server.Listen) && len(c.Auth.Keys) == 0 && !c.Server.AllowUnauthenticated {
		return fmt.Errorf("config: server.listen %q is not a loopback address and no [[auth.keys]] are configured: "+
			"add access keys (extenddb init --generate-key), listen on 127.0.0.1, or set server.allow_unauthenticated = true", c.Server.Listen)
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"read_header_timeout", c.Server.ReadHeaderTimeout}, {"body_read_timeout", c.Server.BodyReadTimeout},
		{"write_timeout", c.Server.WriteTimeout}, {"idle_timeout", c.Server.IdleTimeout}, {"inflight_wait", c.Server.InflightWait}} {
		if d.v.Duration <= 0 {
			return fmt.Errorf("config: server.%s must be a positive duration", d.key)
		}
	}
	if c.Server.MaxInflightBodyBytes < 1<<20 {
		return fmt.Errorf("config: server.max_inflight_body_bytes must be at least 1048576 (1 MiB)")
	}
	if (c.Server.TLSCertFile == "") != (c.Server.TLSKeyFile == "") {
		return errors.New("config: server.tls_cert_file and server.tls_key_file must be set together")
	}
	for i, o := range c.Server.CORSAllowedOrigins {
		if err := validOrigin(o); err != nil {
			return fmt.Errorf("config: server.cors_allowed_origins[%d] %q: %w", i, o, err)
		}
	}
	if c.Streams.ShardRollover.Duration <= 0 || c.Streams.Retention.Duration <= 0 || c.Streams.IteratorLifetime.Duration <= 0 {
		return errors.New("config: streams.shard_rollover, streams.retention and streams.iterator_lifetime must be positive durations")
	}
	if c.Log.SlowRequestThreshold.Duration < 0 {
		return errors.New("config: log.slow_request_threshold must not be negative")
	}
	if err := c.Backup.Store.Validate(); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := c.S3.Validate(); err != nil {
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
	if c.Backup.ImportMaxErrors < 0 {
		return errors.New("config: backup.import_max_errors must not be negative")
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
	if _, err := c.BackupPlans(); err != nil {
		return err
	}
	if p := c.Backup.PITR; p.ShipInterval.Duration < 0 || p.BaseInterval.Duration < 0 || p.SegmentMaxBytes < 0 || p.BaseAfterBytes < 0 {
		return errors.New("config: backup.pitr.ship_interval, segment_max_bytes, base_interval and base_after_bytes must not be negative")
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
	switch c.Storage.MemoryEngine {
	case "", MemoryNative, MemorySQLite: // "": the default, native
	default:
		return fmt.Errorf("config: storage.memory_engine %q must be %q or %q", c.Storage.MemoryEngine, MemoryNative, MemorySQLite)
	}
	if len(c.Storage.Backends) > 0 {
		if !slices.Contains(c.Storage.Backends, c.Storage.Backend) {
			return fmt.Errorf("config: storage.backend %q is not supported (supported: %s)", c.Storage.Backend, strings.Join(c.Storage.Backends, ", "))
		}
		if v, ok := c.Storage.Sections[c.Storage.Backend].(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("config: storage.%s.%w", c.Storage.Backend, err)
			}
		}
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
		if err := c.setPath(path, val, strings.Join(path, ".")); err != nil {
			return fmt.Errorf("environment %s: %w", name, err)
		}
	}
	return nil
}

// setPath sets a key of this package's sections or of a backend's section.
func (c *Config) setPath(path []string, val, full string) error {
	if len(path) >= 3 && path[0] == "storage" {
		if sec, ok := c.Storage.Sections[path[1]]; ok {
			v := reflect.ValueOf(sec)
			if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
				return fmt.Errorf("unknown key %q", full)
			}
			return setPath(v.Elem(), path[2:], val, full)
		}
	}
	return setPath(reflect.ValueOf(c).Elem(), path, val, full)
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
		case reflect.Pointer:
			// An optional boolean (unset means "the default").
			if fv.Type().Elem().Kind() != reflect.Bool {
				return fmt.Errorf("key %q cannot be set from the environment", full)
			}
			b, err := strconv.ParseBool(val)
			if err != nil {
				return fmt.Errorf("key %q: %w", full, err)
			}
			fv.Set(reflect.ValueOf(&b))
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

// isTable reports whether a TOML type name (toml.MetaData.Type) is a table.
func isTable(typ string) bool { return typ == "Hash" || typ == "Table" }
