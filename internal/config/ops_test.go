package config

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// TestCORSOrigins: every origin on the loopback default without keys,
// none with keys or a non-loopback listener unless configured; an explicit
// empty list means none.
func TestCORSOrigins(t *testing.T) {
	c := Default()
	if got := c.CORSOrigins(); !reflect.DeepEqual(got, []string{"*"}) {
		t.Errorf("loopback default: %v", got)
	}
	c.Auth.Keys = []AccessKey{{AccessKeyID: "AKIDAKIDAKIDAKID", SecretAccessKey: "secretsecretsecret"}}
	if got := c.CORSOrigins(); len(got) != 0 {
		t.Errorf("with keys: %v", got)
	}
	c = Default()
	c.Server.Listen, c.Server.AllowUnauthenticated = "0.0.0.0:8000", true
	if got := c.CORSOrigins(); len(got) != 0 {
		t.Errorf("non-loopback: %v", got)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "x.toml")
	os.WriteFile(f, []byte("[server]\ncors_allowed_origins = []\n"), 0o600)
	c, err := Load(f, nil, testSections)
	if err != nil || c.CORSOrigins() == nil || len(c.CORSOrigins()) != 0 {
		t.Errorf("explicit empty: %v %v", c.CORSOrigins(), err)
	}
	os.WriteFile(f, []byte("[server]\ncors_allowed_origins = [\"https://app.example.com\", \"http://localhost:3000\"]\n"), 0o600)
	c, err = Load(f, nil, testSections)
	if err != nil || !reflect.DeepEqual(c.CORSOrigins(), []string{"https://app.example.com", "http://localhost:3000"}) {
		t.Errorf("file: %v %v", c.CORSOrigins(), err)
	}
	c, err = Load("", []string{"EXTENDDB__SERVER__CORS_ALLOWED_ORIGINS=https://a.example, https://b.example:8443"}, testSections)
	if err != nil || !reflect.DeepEqual(c.CORSOrigins(), []string{"https://a.example", "https://b.example:8443"}) {
		t.Errorf("env: %v %v", c.CORSOrigins(), err)
	}
	c, err = Load("", []string{"EXTENDDB__SERVER__CORS_ALLOWED_ORIGINS="}, testSections)
	if err != nil || c.CORSOrigins() == nil || len(c.CORSOrigins()) != 0 {
		t.Errorf("env empty: %v %v", c.CORSOrigins(), err)
	}
	for _, bad := range []string{"app.example.com", "https://a.example/path", "ftp://x", "https://u:p@x"} {
		if _, err := Load("", []string{"EXTENDDB__SERVER__CORS_ALLOWED_ORIGINS=" + bad}, testSections); err == nil || !strings.Contains(err.Error(), "server.cors_allowed_origins") {
			t.Errorf("origin %q accepted: %v", bad, err)
		}
	}
}

func TestSlowRequestThreshold(t *testing.T) {
	if d := Default().Log.SlowRequestThreshold.Duration; d != time.Second {
		t.Errorf("default %s", d)
	}
	c, err := Load("", []string{"EXTENDDB__LOG__SLOW_REQUEST_THRESHOLD=250ms"}, testSections)
	if err != nil || c.Log.SlowRequestThreshold.Duration != 250*time.Millisecond {
		t.Errorf("env: %v %v", c.Log.SlowRequestThreshold, err)
	}
	if _, err := Load("", []string{"EXTENDDB__LOG__SLOW_REQUEST_THRESHOLD=-1s"}, testSections); err == nil {
		t.Error("negative threshold accepted")
	}
}

// TestWrittenConfigLoads: a default configuration written as TOML (what
// init writes) loads back with CORS still unset.
func TestWrittenConfigLoads(t *testing.T) {
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(Default()); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "x.toml")
	os.WriteFile(f, buf.Bytes(), 0o600)
	c, err := Load(f, nil, testSections)
	if err != nil || c.Server.CORSAllowedOrigins != nil {
		t.Fatalf("%v %v\n%s", c.Server.CORSAllowedOrigins, err, buf.String())
	}
}
