package config

import (
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
	c, err := Load(p, []string{"EXTENDDB__SERVER__REGION=eu-west-1", "EXTENDDB__LOG__LEVEL=debug", "OTHER=1"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:9000" || !c.Storage.Memory || c.Server.Region != "eu-west-1" || c.Log.Level != "debug" || c.Server.ShutdownTimeout.Duration != 5*time.Second {
		t.Fatalf("unexpected config %+v", c)
	}
	if err := os.WriteFile(p, []byte("[server]\nlisten_addr = \"x\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p, nil); err == nil || !strings.Contains(err.Error(), "server.listen_addr") {
		t.Fatalf("unknown file key: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__SERVER__NOPE=1"}); err == nil || !strings.Contains(err.Error(), "server.nope") {
		t.Fatalf("unknown env key: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__STORAGE__BACKEND=oracle"}); err == nil || !strings.Contains(err.Error(), "storage.backend") {
		t.Fatalf("bad backend: %v", err)
	}
}

func TestNonLoopbackNeedsExplicitOptIn(t *testing.T) {
	if _, err := Load("", []string{"EXTENDDB__SERVER__LISTEN=0.0.0.0:8000"}); err == nil || !strings.Contains(err.Error(), "allow_unauthenticated") {
		t.Fatalf("0.0.0.0 accepted without opt-in: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__SERVER__LISTEN=0.0.0.0:8000", "EXTENDDB__SERVER__ALLOW_UNAUTHENTICATED=true"}); err != nil {
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
	c, err := Load(p, nil)
	if err != nil || c.Backup.Store.Kind != "filesystem" || c.Backup.Store.Root != "/var/backups/extenddb" {
		t.Fatalf("%+v %v", c.Backup, err)
	}
	if _, err := Load(p, []string{"EXTENDDB__BACKUP__STORE__ROOT=relative"}); err == nil || !strings.Contains(err.Error(), "backup.store.root") {
		t.Fatalf("relative root: %v", err)
	}
	if _, err := Load("", []string{"EXTENDDB__BACKUP__STORE__KIND=s3"}); err == nil || !strings.Contains(err.Error(), "backup.store.bucket") {
		t.Fatalf("s3 without bucket: %v", err)
	}
}

func TestConnectionBudgetKeys(t *testing.T) {
	c, err := Load("", nil)
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
	c, err = Load(p, []string{"EXTENDDB__SERVER__WRITE_TIMEOUT=4s", "EXTENDDB__SERVER__INFLIGHT_WAIT=250ms"})
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
		if _, err := Load("", []string{env}); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", env, err)
		}
	}
}
