package backup

import (
	"os"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/faultstore"
)

// TestReadyCachesAPositiveCheck: /ready (Manager.Ready) reads the store's
// identity once per ReadyCache, not once per probe; a store that fails is
// reported by the first probe after the cached answer expires, by every
// probe while it fails (a failure is never cached), at once when a job's
// check met the failure first, and its recovery at the next probe.
func TestReadyCachesAPositiveCheck(t *testing.T) {
	b := backends(t)[0].open(t)
	createTable(t, b, "tbl")
	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	fs, err := blobstore.NewFS(root)
	if err != nil {
		t.Fatal(err)
	}
	st := faultstore.New(fs)
	const ttl = 300 * time.Millisecond
	m := newManager(t, b, st, func(c *Config) { c.ReadyCache, c.HeartbeatInterval = ttl, time.Hour }) // no store heartbeat reads in between
	ctx := t.Context()
	if err := m.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	gets, validates := st.Calls(faultstore.OpGet), st.Calls(faultstore.OpValidate)
	for range 50 {
		if err := m.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g, v := st.Calls(faultstore.OpGet)-gets, st.Calls(faultstore.OpValidate)-validates; g != 0 || v != 0 {
		t.Fatalf("50 probes within %s read the store: %d GETs, %d validations", ttl, g, v)
	}
	// The store fails: reported once the cached answer expired.
	st.Inject(faultstore.Fault{Op: faultstore.OpValidate})
	time.Sleep(ttl + 50*time.Millisecond)
	for range 3 {
		if err := m.Ready(ctx); err == nil {
			t.Fatal("a failing store is reported ready after the cache expired")
		}
	}
	// It recovers: the next probe says so.
	st.Reset()
	if err := m.Ready(ctx); err != nil {
		t.Fatalf("recovered store: %v", err)
	}
	// A job meets a failure within the cached interval: /ready reports it
	// at once.
	st.Inject(faultstore.Fault{Op: faultstore.OpValidate})
	if _, err := m.CreateBackup(ctx, account, "tbl", "fails"); err == nil {
		t.Fatal("CreateBackup on a failing store")
	}
	if err := m.Ready(ctx); err == nil {
		t.Fatal("a failure a job met is not reported by /ready")
	}
	// ReadyCache < 0: every probe checks.
	st.Reset()
	m2 := newManager(t, b, st, func(c *Config) { c.ReadyCache, c.HeartbeatInterval = -1, time.Hour })
	if err := m2.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	gets = st.Calls(faultstore.OpGet)
	for range 5 {
		if err := m2.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if g := st.Calls(faultstore.OpGet) - gets; g < 5 {
		t.Fatalf("uncached probes read the identity %d times, want 5", g)
	}
}
