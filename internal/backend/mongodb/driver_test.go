package mongodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// TestDriverConfig: the section's defaults, its validation (errors name
// the key), and the startup description without credentials.
func TestDriverConfig(t *testing.T) {
	d := Driver()
	c := d.NewConfig().(*Config)
	if c.Database != "extenddb" || c.MaxPoolSize != DefaultMaxPoolSize || c.Timeout.Duration != 10*time.Second || c.Lease.Duration != 30*time.Second {
		t.Fatalf("defaults %+v", c)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "uri") {
		t.Fatalf("empty uri: %v", err)
	}
	c.URI = "mongodb://user:secret@db.example:27017/?authSource=admin"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for key, mut := range map[string]func(*Config){
		"database":             func(c *Config) { c.Database = "" },
		"max_pool_size":        func(c *Config) { c.MaxPoolSize = 0 },
		"timeout must":         func(c *Config) { c.Timeout.Duration = 0 },
		"lease must":           func(c *Config) { c.Lease.Duration = 0 },
		"timeout_seconds must": func(c *Config) { c.TimeoutSeconds = -1 },
		"lease_seconds must":   func(c *Config) { c.LeaseSeconds = -1 },
	} {
		cc := *c
		mut(&cc)
		if err := cc.Validate(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", key, err)
		}
	}
	attrs := d.Describe(backend.DriverEnv{Config: c})
	for _, a := range attrs {
		if s, ok := a.(string); ok && strings.Contains(s, "secret") {
			t.Fatalf("Describe leaks the password: %v", attrs)
		}
	}
	keys := map[string]bool{}
	for _, k := range d.Keys {
		keys[k.Key] = true
	}
	for _, k := range []string{"uri", "database", "max_pool_size", "timeout", "lease", "timeout_seconds", "lease_seconds"} {
		if !keys[k] {
			t.Errorf("key %s not documented by the driver", k)
		}
	}
}

// TestTxLockTimeoutKey: storage.mongodb.tx_lock_timeout (and its flag)
// reaches the transaction ledger of the opened backend.
func TestTxLockTimeoutKey(t *testing.T) {
	d := Driver()
	c := d.NewConfig().(*Config)
	if c.TxLockTimeout.Duration != DefaultTxLockTimeout {
		t.Fatalf("default tx_lock_timeout %s", c.TxLockTimeout)
	}
	c.URI = "mongodb://127.0.0.1:1/"
	c.TxLockTimeout.Duration = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "tx_lock_timeout") {
		t.Fatalf("tx_lock_timeout 0: %v", err)
	}
	flag := false
	for _, f := range d.Flags {
		flag = flag || (f.Name == "mongodb-tx-lock-timeout" && f.Key == "tx_lock_timeout")
	}
	if !flag {
		t.Fatal("no --mongodb-tx-lock-timeout flag for tx_lock_timeout")
	}
	need(t)
	c.URI, c.Database, c.TxLockTimeout.Duration = uri, testDB, 42*time.Second
	sb, err := d.Open(context.Background(), backend.DriverEnv{Config: c})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if got := sb.(*Backend).ledger.Options().LockTimeout; got != 42*time.Second {
		t.Fatalf("the ledger's lock timeout is %s, want 42s", got)
	}
}

// TestWaitedDriverRefusal: the driver refuses to send an operation once
// less than a round trip is left before the lease's deadline, while
// ctx.Err() is still nil; that refusal ends the lease like the deadline
// itself (the write registers again), and is never a 503.
func TestWaitedDriverRefusal(t *testing.T) {
	refusal := fmt.Errorf("operation not sent to server, as Timeout would be exceeded: %w", context.DeadlineExceeded)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := waited(ctx, refusal, "read item claim"); !errors.Is(err, errLeaseEnded) {
		t.Fatalf("driver refusal before the deadline: %v, want errLeaseEnded", err)
	}
	expired, cancel2 := context.WithTimeout(context.Background(), 0)
	defer cancel2()
	if err := waited(expired, errors.New("any"), "read item"); !errors.Is(err, errLeaseEnded) {
		t.Fatalf("after the deadline: %v, want errLeaseEnded", err)
	}
	// Without a lease deadline, a deadline error is the caller's, not ours.
	if err := waited(context.Background(), refusal, "read item"); errors.Is(err, errLeaseEnded) {
		t.Fatalf("no deadline: %v, want a storage error", err)
	}
	if err := waited(ctx, errors.New("boom"), "read item"); errors.Is(err, errLeaseEnded) {
		t.Fatalf("other error: %v, want a storage error", err)
	}
}

// TestDeprecatedSecondsKeys: the whole-second keys that the duration keys
// replaced are still honoured, each winning over its duration key, and
// each set one is a startup warning naming its replacement.
func TestDeprecatedSecondsKeys(t *testing.T) {
	c := Driver().NewConfig().(*Config)
	c.URI = "mongodb://127.0.0.1:1/"
	if w := c.Deprecations(); len(w) != 0 {
		t.Fatalf("warnings without deprecated keys: %v", w)
	}
	c.TimeoutSeconds, c.LeaseSeconds, c.TxLockTimeoutSeconds = 3, 7, 42
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	o := c.options()
	if o.Timeout != 3*time.Second || o.LeaseDuration != 7*time.Second || o.TxLockTimeout != 42*time.Second {
		t.Fatalf("options %+v", o)
	}
	w := c.Deprecations()
	if len(w) != 3 || !strings.Contains(w[0], "storage.mongodb.timeout_seconds is deprecated") || !strings.Contains(w[2], `tx_lock_timeout = "42s"`) {
		t.Fatalf("warnings %q", w)
	}
	if ws := Driver().Deprecations(backend.DriverEnv{Config: c}); len(ws) != 3 {
		t.Fatalf("the driver reports %q", ws)
	}
}
