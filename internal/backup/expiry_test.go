package backup

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

// TestExpiredBackupsAreDeleted: the reconciler deletes an AVAILABLE
// backup once its expiry has passed on the injected clock, and only then;
// a USER backup (no expiry), a backup not yet expired and a plan's backup
// (its retention's to delete) stay; of two managers reconciling one
// catalog at once, the backup is deleted once.
func TestExpiredBackupsAreDeleted(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ref := createTable(t, b, "tbl")
		for i := range 50 {
			put(t, b, ref, i, "v")
		}
		st := memstore.New()
		var clock atomic.Int64
		clock.Store(time.Now().UnixMilli())
		now := func() time.Time { return time.UnixMilli(clock.Load()) }
		m := newManager(t, b, st, func(c *Config) { c.Now = now })
		m2 := newManager(t, b, st, func(c *Config) { c.Now = now })
		mk := func(name string, o Origin) *backend.BackupRecord {
			t.Helper()
			rec, err := m.CreateBackupAs(t.Context(), account, "tbl", name, o)
			if err != nil {
				t.Fatal(err)
			}
			return waitStatus(t, m, rec.ARN, backend.BackupAvailable)
		}
		start := now()
		user := mk("user", Origin{Type: "USER"})
		soon := mk("soon", Origin{Type: "SYSTEM", ExpiresAt: start.Add(time.Hour)})
		later := mk("later", Origin{Type: "SYSTEM", ExpiresAt: start.Add(48 * time.Hour)})
		planned := mk("planned", Origin{Type: "AWS_BACKUP", Plan: "nightly", ExpiresAt: start.Add(time.Hour)})
		if planned.Plan != "nightly" || planned.Type != "AWS_BACKUP" || !planned.ExpiresAt.Equal(start.Add(time.Hour).Truncate(time.Millisecond)) {
			t.Fatalf("the plan backup's row: %+v", planned)
		}
		reconcileBoth := func() {
			t.Helper()
			var wg sync.WaitGroup
			for _, x := range []*Manager{m, m2} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := x.Reconcile(t.Context()); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
		}
		reconcileBoth()
		for _, r := range []*backend.BackupRecord{user, soon, later, planned} {
			if got, _ := m.GetBackup(t.Context(), r.ARN); got == nil || got.Status != backend.BackupAvailable {
				t.Fatalf("backup %s before its expiry: %+v", r.Name, got)
			}
		}
		clock.Add((2 * time.Hour).Milliseconds())
		reconcileBoth()
		waitStatus(t, m, soon.ARN, backend.BackupDeleted)
		if left, _ := st.List(t.Context(), soon.Prefix); len(left) != 0 {
			t.Fatalf("%d objects of the expired backup left", len(left))
		}
		for _, r := range []*backend.BackupRecord{user, later, planned} {
			if got, _ := m.GetBackup(t.Context(), r.ARN); got == nil || got.Status != backend.BackupAvailable {
				t.Fatalf("backup %s deleted: %+v", r.Name, got)
			}
		}
		clock.Add((100 * 24 * time.Hour).Milliseconds())
		reconcileBoth()
		waitStatus(t, m, later.ARN, backend.BackupDeleted)
		if got, _ := m.GetBackup(t.Context(), user.ARN); got == nil || got.Status != backend.BackupAvailable {
			t.Fatalf("a USER backup expired: %+v", got)
		}
	})
}
