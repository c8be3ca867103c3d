package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadFileEnvAndUnknownKeys(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "extenddb.toml")
	if err := os.WriteFile(p, []byte("[server]\nlisten = \"127.0.0.1:9000\"\nshutdown_timeout = \"5s\"\n[storage]\nmemory = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p, []string{"EXTENDDB__SERVER__REGION=eu-west-1", "EXTENDDB__LOG__LEVEL=debug", "OTHER=1"}, testSections)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:9000" || !c.Storage.Memory || c.Server.Region != "eu-west-1" || c.Log.Level != "debug" || c.Server.ShutdownTimeout.Duration != 5*time.Second {
		t.Fatalf("unexpected config %+v", c)
	}
	if err := os.WriteFile(p, []byte("[server]\nlisten_addr = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, nil, testSections); err == nil || !strings.Contains(err.Error(), "server.listen_addr") {
		t.Fatalf("unknown file key: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__SERVER__NOPE=1"}, testSections); err == nil || !strings.Contains(err.Error(), "server.nope") {
		t.Fatalf("unknown env key: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__STORAGE__BACKEND=oracle"}, testSections); err == nil || !strings.Contains(err.Error(), "storage.backend") {
		t.Fatalf("bad backend: %v", err)
	}
}

func TestSQLiteWALLimit(t *testing.T) {
	c, err := Load("", nil, testSections)
	if err != nil || c.Storage.Section("sqlite").(*testSQLite).WALLimitMB != 32 {
		t.Fatalf("default wal_limit_mb: %d %v", c.Storage.Section("sqlite").(*testSQLite).WALLimitMB, err)
	}
	c, err = Load("", []string{"EXTENDDB__STORAGE__SQLITE__WAL_LIMIT_MB=8"}, testSections)
	if err != nil || c.Storage.Section("sqlite").(*testSQLite).WALLimitMB != 8 {
		t.Fatalf("wal_limit_mb from env: %d %v", c.Storage.Section("sqlite").(*testSQLite).WALLimitMB, err)
	}
	if _, err := Load("", []string{"EXTENDDB__STORAGE__SQLITE__WAL_LIMIT_MB=0"}, testSections); err == nil || !strings.Contains(err.Error(), "storage.sqlite.wal_limit_mb") {
		t.Fatalf("wal_limit_mb 0 accepted: %v", err)
	}
}

func TestNonLoopbackNeedsExplicitOptIn(t *testing.T) {
	if _, err := Load("", []string{"EXTENDDB__SERVER__LISTEN=0.0.0.0:8000"}, testSections); err == nil || !strings.Contains(err.Error(), "allow_unauthenticated") {
		t.Fatalf("0.0.0.0 accepted without opt-in: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__SERVER__LISTEN=0.0.0.0:8000", "EXTENDDB__SERVER__ALLOW_UNAUTHENTICATED=true"}, testSections); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"127.0.0.1:8000", "localhost:1", "[::1]:8000", "127.0.0.1:0"} {
		if !IsLoopback(a) {
			t.Errorf("%s not loopback", a)
		}
	}
	for _, a := range []string{"0.0.0.0:8000", ":8000", "10.0.0.1:8000", "example.com:80"} {
		if IsLoopback(a) {
			t.Errorf("%s loopback", a)
		}
	}
}

func TestBackupStoreSection(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "extenddb.toml")
	if err := os.WriteFile(p, []byte("[backup.store]\nkind = \"filesystem\"\nroot = \"/var/backups/extenddb\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p, nil, testSections)
	if err != nil || c.Backup.Store.Kind != "filesystem" || c.Backup.Store.Root != "/var/backups/extenddb" {
		t.Fatalf("%+v %v", c.Backup, err)
	}
	if _, err := Load(p, []string{"EXTENDDB__BACKUP__STORE__ROOT=relative"}, testSections); err == nil || !strings.Contains(err.Error(), "backup.store.root") {
		t.Fatalf("relative root: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__BACKUP__STORE__KIND=s3"}, testSections); err == nil || !strings.Contains(err.Error(), "backup.store.bucket") {
		t.Fatalf("s3 without bucket: %v", err)
	}
}

func TestConnectionBudgetKeys(t *testing.T) {
	c, err := Load("", nil, testSections)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.ReadHeaderTimeout.Duration != 10*time.Second || c.Server.BodyReadTimeout.Duration != 30*time.Second ||
		c.Server.WriteTimeout.Duration != 30*time.Second || c.Server.IdleTimeout.Duration != 120*time.Second ||
		c.Server.MaxInflightBodyBytes != 128<<20 || c.Server.InflightWait.Duration != time.Second {
		t.Fatalf("defaults: %+v", c.Server)
	}
	p := filepath.Join(t.TempDir(), "extenddb.toml")
	if err := os.WriteFile(p, []byte("[server]\nbody_read_timeout = \"3s\"\nmax_inflight_body_bytes = 67108864\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err = Load(p, []string{"EXTENDDB__SERVER__WRITE_TIMEOUT=4s", "EXTENDDB__SERVER__INFLIGHT_WAIT=250ms"}, testSections)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.BodyReadTimeout.Duration != 3*time.Second || c.Server.MaxInflightBodyBytes != 64<<20 ||
		c.Server.WriteTimeout.Duration != 4*time.Second || c.Server.InflightWait.Duration != 250*time.Millisecond {
		t.Fatalf("file and env: %+v", c.Server)
	}
	for env, key := range map[string]string{
		"EXTENDDB__SERVER__MAX_INFLIGHT_BODY_BYTES=1000": "server.max_inflight_body_bytes",
		"EXTENDDB__SERVER__BODY_READ_TIMEOUT=0s":         "server.body_read_timeout",
		"EXTENDDB__SERVER__READ_HEADER_TIMEOUT=-1s":      "server.read_header_timeout",
	} {
		if _, err := Load("", []string{env}, testSections); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", env, err)
		}
	}
}

// testSQLite stands for a backend's section, declared by its driver.
type testSQLite struct {
	ItemCacheMB int `toml:"item_cache_mb"`
	WALLimitMB  int `toml:"wal_limit_mb"`
}

func (c *testSQLite) Validate() error {
	if c.WALLimitMB < 1 {
		return errors.New("wal_limit_mb must be at least 1")
	}
	return nil
}

var testSections = SectionTypes{
	"sqlite": func() any { return &testSQLite{ItemCacheMB: 32, WALLimitMB: 32} },
	"postgres": func() any {
		return &struct {
			DSN string `toml:"dsn"`
		}{}
	},
}

// TestBackendSections: a backend's section is decoded into its driver's
// type, strictly; its keys come from the file and the environment.
func TestBackendSections(t *testing.T) {
	p := filepath.Join(t.TempDir(), "extenddb.toml")
	if err := os.WriteFile(p, []byte("[storage.sqlite]\nitem_cache_mb = 7\n[storage.postgres]\ndsn = \"postgres://x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p, []string{"EXTENDDB__STORAGE__SQLITE__WAL_LIMIT_MB=9"}, testSections)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Storage.Section("sqlite").(*testSQLite); s.ItemCacheMB != 7 || s.WALLimitMB != 9 {
		t.Fatalf("sqlite section %+v", s)
	}
	if err := os.WriteFile(p, []byte("[storage.sqlite]\nitem_cache = 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, nil, testSections); err == nil || !strings.Contains(err.Error(), "storage.sqlite.item_cache") {
		t.Fatalf("unknown key in a backend section: %v", err)
	}
	if err := os.WriteFile(p, []byte("[storage.oracle]\nx = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, nil, testSections); err == nil || !strings.Contains(err.Error(), "storage.oracle") {
		t.Fatalf("section of an unknown backend: %v", err)
	}
	c = Default()
	c.Storage.Sections = map[string]any{"sqlite": &testSQLite{WALLimitMB: 1}}
	if err := c.Set("storage.sqlite.item_cache_mb", "3"); err != nil || c.Storage.Section("sqlite").(*testSQLite).ItemCacheMB != 3 {
		t.Fatalf("Set: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__STORAGE__BACKEND=oracle"}, testSections); err == nil || !strings.Contains(err.Error(), "supported: postgres, sqlite") {
		t.Fatalf("unknown backend: %v", err)
	}
}

func TestMemoryEngine(t *testing.T) {
	c, err := Load("", nil, testSections)
	if err != nil || c.Storage.MemoryEngine != MemoryNative {
		t.Fatalf("default memory engine %q %v", c.Storage.MemoryEngine, err)
	}
	c, err = Load("", []string{"EXTENDDB__STORAGE__MEMORY_ENGINE=sqlite"}, testSections)
	if err != nil || c.Storage.MemoryEngine != MemorySQLite {
		t.Fatalf("env memory engine %q %v", c.Storage.MemoryEngine, err)
	}
	_, err = Load("", []string{"EXTENDDB__STORAGE__MEMORY_ENGINE=btree"}, testSections)
	if err == nil || !strings.Contains(err.Error(), "storage.memory_engine") {
		t.Fatalf("bad memory engine: %v", err)
	}
}

// TestStorageKeyNamedLikeABackend: a backend without a section may share
// its name with a key of [storage] (the memory backend and storage.memory).
func TestStorageKeyNamedLikeABackend(t *testing.T) {
	p := filepath.Join(t.TempDir(), "extenddb.toml")
	if err := os.WriteFile(p, []byte("[storage]\nmemory = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sections := SectionTypes{"sqlite": testSections["sqlite"], "memory": nil}
	c, err := Load(p, nil, sections)
	if err != nil || !c.Storage.Memory {
		t.Fatalf("storage.memory = true: %v %+v", err, c.Storage)
	}
	if _, err := Load("", []string{"EXTENDDB__STORAGE__BACKEND=memory"}, sections); err != nil {
		t.Fatalf("a backend without a section: %v", err)
	}
}

func TestBackupPITRSection(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "extenddb.toml")
	if err := os.WriteFile(p, []byte("[backup.pitr]\nship_interval = \"2s\"\nsegment_max_bytes = 1048576\nbase_interval = \"6h\"\nbase_after_bytes = 1000000\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p, []string{"EXTENDDB__BACKUP__PITR__BASE_INTERVAL=12h"}, testSections)
	if err != nil {
		t.Fatal(err)
	}
	if q := c.Backup.PITR; q.ShipInterval.Duration != 2*time.Second || q.SegmentMaxBytes != 1<<20 || q.BaseInterval.Duration != 12*time.Hour || q.BaseAfterBytes != 1000000 {
		t.Fatalf("%+v", q)
	}
	if _, err := Load("", []string{"EXTENDDB__BACKUP__PITR__SHIP_INTERVAL=-1s"}, testSections); err == nil || !strings.Contains(err.Error(), "backup.pitr.ship_interval") {
		t.Fatalf("negative interval: %v", err)
	}
}

// TestLegacyDuration: a deprecated whole-unit key, when set, wins over
// the duration key that replaced it and asks for a warning; unset, the
// duration key is in force and nothing is said.
func TestLegacyDuration(t *testing.T) {
	l := LegacyDuration{Key: "timeout_ms", Replacement: "timeout", Unit: time.Millisecond, Duration: Duration{10 * time.Second}}
	if l.Effective() != 10*time.Second || l.Warning("storage.x") != "" || l.Validate() != nil {
		t.Fatalf("unset: %v %q %v", l.Effective(), l.Warning("storage.x"), l.Validate())
	}
	l.Value = 2500
	if l.Effective() != 2500*time.Millisecond || l.Validate() != nil {
		t.Fatalf("set: %v %v", l.Effective(), l.Validate())
	}
	if w := l.Warning("storage.x"); !strings.Contains(w, "storage.x.timeout_ms is deprecated") || !strings.Contains(w, `timeout = "2.5s"`) {
		t.Fatalf("warning %q", w)
	}
	l.Value = -1
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "timeout_ms") {
		t.Fatalf("negative deprecated key: %v", err)
	}
	l.Value, l.Duration = 0, Duration{}
	if err := l.Validate(); err == nil || !strings.Contains(err.Error(), "timeout must be positive") {
		t.Fatalf("zero duration: %v", err)
	}
}

func TestS3Section(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "extenddb.toml")
	if err := os.WriteFile(p, []byte("[s3]\nendpoint = \"http://127.0.0.1:5000\"\nregion = \"eu-west-1\"\npath_style = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p, nil, testSections)
	if err != nil || c.S3.Endpoint != "http://127.0.0.1:5000" || c.S3.Region != "eu-west-1" || c.S3.PathStyle == nil || *c.S3.PathStyle {
		t.Fatalf("%+v %v", c.S3, err)
	}
	c, err = Load("", []string{"EXTENDDB__S3__FILESYSTEM_ROOT=/srv/buckets", "EXTENDDB__S3__PATH_STYLE=true"}, testSections)
	if err != nil || c.S3.FilesystemRoot != "/srv/buckets" || c.S3.PathStyle == nil || !*c.S3.PathStyle {
		t.Fatalf("%+v %v", c.S3, err)
	}
	if _, err := Load("", []string{"EXTENDDB__S3__FILESYSTEM_ROOT=rel"}, testSections); err == nil || !strings.Contains(err.Error(), "s3.filesystem_root") {
		t.Fatalf("relative filesystem_root: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__S3__PATH_STYLE=maybe"}, testSections); err == nil || !strings.Contains(err.Error(), "s3.path_style") {
		t.Fatalf("bad path_style: %v", err)
	}
}

func TestBackupPlansConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "extenddb.toml")
	body := `
[[backup.plans]]
name = "nightly"
tables = ["orders", "users-*"]
cron = "0 3 * * *"
timezone = "Europe/Paris"
keep_last = 7
max_age = "30d"

[[backup.plans]]
name = "six"
tables = ["events"]
every = "6h"
window = "30m"
max_age = "2w"

[[backup.plans]]
name = "weekly"
tables = ["*"]
cron = "0 4 * * 0"
keep_weekly = 4
keep_monthly = 12
`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(p, nil, testSections)
	if err != nil {
		t.Fatal(err)
	}
	plans, err := cfg.BackupPlans()
	if err != nil || len(plans) != 3 {
		t.Fatalf("BackupPlans = %v, %v", plans, err)
	}
	if plans[0].MaxAge != 30*24*time.Hour || plans[0].Account != DefaultPlanAccount || plans[1].MaxAge != 14*24*time.Hour || plans[1].Window != 30*time.Minute {
		t.Fatalf("plans: %+v %+v", plans[0].Spec, plans[1].Spec)
	}
	if w := plans[2]; w.KeepWeekly != 4 || w.KeepMonthly != 12 || w.KeepDaily != 0 || w.KeepLast != 0 {
		t.Fatalf("weekly plan: %+v", w.Spec)
	}
	for bad, want := range map[string]string{
		"[[backup.plans]]\nname = \"n\"\ntables = [\"t\"]\ncron = \"0 25 * * *\"\nkeep_last = 1\n":                                                                           `backup.plans[0] ("n"): cron`,
		"[[backup.plans]]\nname = \"n\"\ntables = [\"t\"]\ncron = \"0 3 * * *\"\n":                                                                                           `backup.plans[0] ("n"): keep_last or max_age`,
		"[[backup.plans]]\nname = \"n\"\ntables = [\"t\"]\nevery = \"1h\"\nkeep_daily = -1\n":                                                                                `backup.plans[0] ("n"): keep_daily`,
		"[[backup.plans]]\nname = \"n\"\ntables = [\"t\"]\nevery = \"1h\"\nmax_age = \"3x\"\n":                                                                               `max_age`,
		"[[backup.plans]]\nname = \"n\"\ntables = [\"t\"]\nevery = \"1h\"\nkeep_last = 1\n[[backup.plans]]\nname = \"n\"\ntables = [\"u\"]\nevery = \"1h\"\nkeep_last = 1\n": `backup.plans[1] ("n"): name`,
	} {
		if err := os.WriteFile(p, []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p, nil, testSections)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(%q) = %v, want an error naming %s", bad, err, want)
		}
	}
}
