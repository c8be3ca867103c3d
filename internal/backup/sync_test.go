package backup

import (
	"context"
	"testing"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store"
)

func outcomes(es []SyncEntry) map[string]int {
	m := map[string]int{}
	for _, e := range es {
		m[e.Outcome]++
	}
	return m
}

// TestSyncRebuildsDryRunAndPrune: a second catalog over a store adopts its
// complete backups (not with --dry-run, which changes nothing); a row whose
// backup vanished from the store is reported, and marked DELETING only
// with --prune-missing.
func TestSyncRebuildsDryRunAndPrune(t *testing.T) {
	forEach(t, func(t *testing.T, b storage.Backend) {
		ctx := context.Background()
		st, err := store.NewFS(t.TempDir() + "/store")
		if err != nil {
			t.Fatal(err)
		}
		ref := createTable(t, b, "synced")
		for i := range 20 {
			put(t, b, ref, i, "v")
		}
		m := newManager(t, b, st, nil)
		var arns []string
		for range 2 {
			rec, err := m.CreateBackup(ctx, account, "synced", "b")
			if err != nil {
				t.Fatal(err)
			}
			waitStatus(t, m, rec.ARN, storage.BackupAvailable)
			arns = append(arns, rec.ARN)
		}
		m.Close()

		// A fresh catalog (another database) over the same store.
		other := backends(t)[0].open(t)
		if b.Name() == "postgres" {
			other = backends(t)[1].open(t)
		}
		if _, err := Sync(ctx, other, st, descJSON{}, SyncOptions{}); err == nil {
			t.Fatal("sync over a store owned by another catalog succeeded without --adopt-store")
		}
		dry, err := Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if o := outcomes(dry); o["adoptable"] != 2 || o["adopted"] != 0 {
			t.Fatalf("dry run: %+v", dry)
		}
		cat, _ := storage.Backups(other)
		if r, _ := cat.GetBackup(ctx, storage.GetBackupParams{ARN: arns[0]}); r != nil {
			t.Fatalf("--dry-run wrote a row: %+v", r)
		}
		if id, err := store.ReadIdentity(ctx, st); err != nil || id.CatalogID == mustCatalogID(t, other) {
			t.Fatalf("--dry-run took the store over: %+v %v", id, err)
		}
		got, err := Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true})
		if err != nil {
			t.Fatal(err)
		}
		if o := outcomes(got); o["adopted"] != 2 {
			t.Fatalf("sync: %+v", got)
		}
		// One backup vanishes from the store.
		r, _ := cat.GetBackup(ctx, storage.GetBackupParams{ARN: arns[1]})
		if err := st.DeletePrefix(ctx, r.Prefix); err != nil {
			t.Fatal(err)
		}
		got, err = Sync(ctx, other, st, descJSON{}, SyncOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if o := outcomes(got); o["missing"] != 1 || o["known"] != 1 {
			t.Fatalf("after the loss: %+v", got)
		}
		if r, _ := cat.GetBackup(ctx, storage.GetBackupParams{ARN: arns[1]}); r.Status != storage.BackupAvailable {
			t.Fatalf("a missing backup changed without --prune-missing: %s", r.Status)
		}
		got, err = Sync(ctx, other, st, descJSON{}, SyncOptions{PruneMissing: true, DryRun: true})
		if err != nil || outcomes(got)["missing"] != 1 {
			t.Fatalf("dry-run prune: %+v %v", got, err)
		}
		got, err = Sync(ctx, other, st, descJSON{}, SyncOptions{PruneMissing: true})
		if err != nil || outcomes(got)["pruned"] != 1 {
			t.Fatalf("prune: %+v %v", got, err)
		}
		if r, _ := cat.GetBackup(ctx, storage.GetBackupParams{ARN: arns[1]}); r.Status != storage.BackupDeleting {
			t.Fatalf("pruned backup: %s, want DELETING", r.Status)
		}
	})
}

func mustCatalogID(t *testing.T, b storage.Backend) string {
	cat, _ := storage.Backups(b)
	id, err := cat.CatalogID(context.Background(), "unused")
	if err != nil {
		t.Fatal(err)
	}
	return id
}
