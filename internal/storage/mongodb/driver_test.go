package mongodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

// TestDriverConfig: the section's defaults, its validation (errors name
// the key), and the startup description without credentials.
func TestDriverConfig(t *testing.T) {
	d := Driver()
	c := d.NewConfig().(*Config)
	if c.Database != "extenddb" || c.MaxPoolSize != DefaultMaxPoolSize || c.TimeoutSeconds != 10 || c.LeaseSeconds != 30 {
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
		"database":        func(c *Config) { c.Database = "" },
		"max_pool_size":   func(c *Config) { c.MaxPoolSize = 0 },
		"timeout_seconds": func(c *Config) { c.TimeoutSeconds = 0 },
		"lease_seconds":   func(c *Config) { c.LeaseSeconds = 0 },
	} {
		cc := *c
		mut(&cc)
		if err := cc.Validate(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", key, err)
		}
	}
	attrs := d.Describe(storage.DriverEnv{Config: c})
	for _, a := range attrs {
		if s, ok := a.(string); ok && strings.Contains(s, "secret") {
			t.Fatalf("Describe leaks the password: %v", attrs)
		}
	}
	keys := map[string]bool{}
	for _, k := range d.Keys {
		keys[k.Key] = true
	}
	for _, k := range []string{"uri", "database", "max_pool_size", "timeout_seconds", "lease_seconds"} {
		if !keys[k] {
			t.Errorf("key %s not documented by the driver", k)
		}
	}
}

// TestTxLockTimeoutKey: storage.mongodb.tx_lock_timeout_seconds (and its
// flag) reaches the transaction ledger of the opened backend.
func TestTxLockTimeoutKey(t *testing.T) {
	d := Driver()
	c := d.NewConfig().(*Config)
	if c.TxLockTimeoutSeconds != int(DefaultTxLockTimeout/time.Second) {
		t.Fatalf("default tx_lock_timeout_seconds %d", c.TxLockTimeoutSeconds)
	}
	c.URI = "mongodb://127.0.0.1:1/"
	c.TxLockTimeoutSeconds = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "tx_lock_timeout_seconds") {
		t.Fatalf("tx_lock_timeout_seconds 0: %v", err)
	}
	flag := false
	for _, f := range d.Flags {
		flag = flag || (f.Name == "mongodb-tx-lock-timeout-seconds" && f.Key == "tx_lock_timeout_seconds")
	}
	if !flag {
		t.Fatal("no --mongodb-tx-lock-timeout-seconds flag for tx_lock_timeout_seconds")
	}
	need(t)
	c.URI, c.Database, c.TxLockTimeoutSeconds = uri, testDB, 42
	sb, err := d.Open(context.Background(), storage.DriverEnv{Config: c})
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
