package mongodb

import (
	"strings"
	"testing"

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
