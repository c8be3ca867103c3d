package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/format"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/faultstore"
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
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		st, err := blobstore.NewFS(t.TempDir() + "/store")
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
			waitStatus(t, m, rec.ARN, backend.BackupAvailable)
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
		cat := other.Capabilities().Backups
		if r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[0]}); r != nil {
			t.Fatalf("--dry-run wrote a row: %+v", r)
		}
		if id, err := blobstore.ReadIdentity(ctx, st); err != nil || id.CatalogID == mustCatalogID(t, other) {
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
		r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[1]})
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
		if r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[1]}); r.Status != backend.BackupAvailable {
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
		if r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[1]}); r.Status != backend.BackupDeleting {
			t.Fatalf("pruned backup: %s, want DELETING", r.Status)
		}
	})
}

func mustCatalogID(t *testing.T, b backend.Backend) string {
	cat := b.Capabilities().Backups
	id, err := cat.CatalogID(context.Background(), "unused")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// copyTree copies a filesystem store (as rsync or cp -a would), keeping
// the 0700/0600 modes the store requires.
func copyTree(t *testing.T, from, to string, skip func(rel string) bool) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if skip != nil && skip(rel) {
			return nil
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// syncFixture: a catalog with n AVAILABLE backups of one table in a
// filesystem store under dir/store.
func syncFixture(t *testing.T, b backend.Backend, dir string, n int) (blobstore.Store, []string) {
	t.Helper()
	ctx := context.Background()
	st, err := blobstore.NewFS(dir + "/store")
	if err != nil {
		t.Fatal(err)
	}
	ref := createTable(t, b, "moved")
	for i := range 40 {
		put(t, b, ref, i, "v")
	}
	m := newManager(t, b, st, nil)
	var arns []string
	for range n {
		rec, err := m.CreateBackup(ctx, account, "moved", "b")
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, m, rec.ARN, backend.BackupAvailable)
		arns = append(arns, rec.ARN)
	}
	m.Close()
	return st, arns
}

func storeIDs(t *testing.T, b backend.Backend) map[string]int {
	t.Helper()
	cat := b.Capabilities().Backups
	rows, err := cat.ListBackups(context.Background(), backend.ListBackupsParams{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range rows {
		out[r.StoreID+" "+r.Status]++
	}
	return out
}

// snapshotTree answers every file under root with its bytes, to compare a
// store before and after.
//
// The owner's heartbeat (blobstore.HeartbeatKey) is left out: every running
// manager of the owning catalog rewrites it by design.
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != filepath.Join(root, blobstore.HeartbeatKey) {
			data, _ := os.ReadFile(p)
			out[p] = string(data)
		}
		return err
	})
	return out
}

// TestSyncMoveStore: a store copied to another root (without its
// identity file, as a copy of the account directories is) leaves the
// catalog's rows naming the old store: a plain sync reports them; one
// flipped byte in the copy makes --move-store fail with nothing
// re-pointed; --dry-run changes nothing; once the copy is right every row
// is re-pointed and the store is healthy for the manager.
func TestSyncMoveStore(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		dir := t.TempDir()
		old, arns := syncFixture(t, b, dir, 3)
		oldID, err := blobstore.ReadIdentity(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		copyTree(t, dir+"/store", dir+"/new", func(rel string) bool { return rel == blobstore.IdentityKey })
		st, err := blobstore.NewFS(dir + "/new")
		if err != nil {
			t.Fatal(err)
		}
		// A plain sync over the copy: the rows are another store's.
		got, err := Sync(ctx, b, st, descJSON{}, SyncOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if o := outcomes(got); o[OutcomeOtherStore] != 3 || o[OutcomeAdopted] != 0 {
			t.Fatalf("plain sync over the copy: %+v", got)
		}
		newID, err := blobstore.ReadIdentity(ctx, st)
		if err != nil || newID.StoreID == oldID.StoreID {
			t.Fatalf("the copy's identity: %+v %v", newID, err)
		}
		// One flipped byte in one data file of the copy.
		cat := b.Capabilities().Backups
		r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[1]})
		f := dir + "/new/" + r.Prefix + "/data/000001.json.zst"
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 0x01
		os.WriteFile(f, data, 0o600)
		before := storeIDs(t, b)
		got, err = Sync(ctx, b, st, descJSON{}, SyncOptions{MoveStore: oldID.StoreID})
		if err == nil || !strings.Contains(err.Error(), "nothing was re-pointed") {
			t.Fatalf("move over a damaged copy: %v %+v", err, got)
		}
		if o := outcomes(got); o[OutcomeDamaged] != 1 || o[OutcomeMoved] != 0 || got[0].ARN != arns[1] ||
			!strings.Contains(got[0].Detail, "data/000001.json.zst") {
			t.Fatalf("move over a damaged copy reported %+v", got)
		}
		if after := storeIDs(t, b); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("a failed move changed rows: %v -> %v", before, after)
		}
		data[len(data)/2] ^= 0x01
		os.WriteFile(f, data, 0o600)
		// A dry run verifies and changes nothing.
		tree := snapshotTree(t, dir+"/new")
		got, err = Sync(ctx, b, st, descJSON{}, SyncOptions{MoveStore: oldID.StoreID, DryRun: true})
		if err != nil || outcomes(got)[OutcomeMovable] != 3 {
			t.Fatalf("dry-run move: %+v %v", got, err)
		}
		if after := storeIDs(t, b); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("a dry-run move changed rows: %v -> %v", before, after)
		}
		if !maps.Equal(tree, snapshotTree(t, dir+"/new")) {
			t.Fatal("a dry-run move changed the store")
		}
		got, err = Sync(ctx, b, st, descJSON{}, SyncOptions{MoveStore: oldID.StoreID})
		if err != nil || outcomes(got)[OutcomeMoved] != 3 {
			t.Fatalf("move: %+v %v", got, err)
		}
		if ids := storeIDs(t, b); ids[newID.StoreID+" AVAILABLE"] != 3 || len(ids) != 1 {
			t.Fatalf("after the move: %v", ids)
		}
		got, err = Sync(ctx, b, st, descJSON{}, SyncOptions{})
		if err != nil || outcomes(got)[OutcomeKnown] != 3 || len(got) != 3 {
			t.Fatalf("sync after the move: %+v %v", got, err)
		}
		m := newManager(t, b, st, nil)
		if err := m.Healthy(ctx); err != nil {
			t.Fatalf("the moved store is unhealthy: %v", err)
		}
		if _, err := Verify(ctx, st, arns[2]); err != nil {
			t.Fatal(err)
		}
		// Moving again: no rows of the old store are left.
		if _, err := Sync(ctx, b, st, descJSON{}, SyncOptions{MoveStore: oldID.StoreID}); err == nil || !strings.Contains(err.Error(), newID.StoreID) {
			t.Fatalf("second move: %v", err)
		}
	})
}

// TestSyncMoveStoreWithCopiedIdentity: a copy that carries the identity
// file has the old store's id; the move gives it an id of its own first.
func TestSyncMoveStoreWithCopiedIdentity(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		dir := t.TempDir()
		old, _ := syncFixture(t, b, dir, 2)
		oldID, _ := blobstore.ReadIdentity(ctx, old)
		copyTree(t, dir+"/store", dir+"/new", nil)
		st, _ := blobstore.NewFS(dir + "/new")
		got, err := Sync(ctx, b, st, descJSON{}, SyncOptions{MoveStore: dir + "/store"})
		if err == nil {
			t.Fatalf("a path reached backup.Sync as a store id: %+v", got)
		}
		got, err = Sync(ctx, b, st, descJSON{}, SyncOptions{MoveStore: oldID.StoreID})
		if err != nil || outcomes(got)[OutcomeMoved] != 2 {
			t.Fatalf("move: %+v %v", got, err)
		}
		id, _ := blobstore.ReadIdentity(ctx, st)
		if id.StoreID == oldID.StoreID || id.CatalogID != oldID.CatalogID {
			t.Fatalf("the copy kept the old store id: %+v", id)
		}
		if ids := storeIDs(t, b); ids[id.StoreID+" AVAILABLE"] != 2 {
			t.Fatalf("after the move: %v", ids)
		}
		if still, _ := blobstore.ReadIdentity(ctx, old); still != oldID {
			t.Fatalf("the old store's identity changed: %+v", still)
		}
	})
}

// TestSyncForget: --forget-backup and --forget-store remove rows for good
// (no DELETED row, so no reconciler deletes the objects), touch no object,
// and --dry-run removes nothing.
func TestSyncForget(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		dir := t.TempDir()
		st, arns := syncFixture(t, b, dir, 3)
		cat := b.Capabilities().Backups
		tree := snapshotTree(t, dir+"/store")
		got, err := Sync(ctx, b, st, descJSON{}, SyncOptions{ForgetBackups: []string{arns[0]}, DryRun: true})
		if err != nil || outcomes(got)[OutcomeForgettable] != 1 {
			t.Fatalf("dry-run forget: %+v %v", got, err)
		}
		if r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[0]}); r == nil {
			t.Fatal("--dry-run forgot a row")
		}
		absent := arns[0][:len(arns[0])-8] + "00000000"
		if _, err := Sync(ctx, b, st, descJSON{}, SyncOptions{ForgetBackups: []string{arns[0] + "0"}}); err == nil {
			t.Fatal("--forget-backup of a malformed ARN succeeded")
		}
		got, err = Sync(ctx, b, st, descJSON{}, SyncOptions{ForgetBackups: []string{arns[0], absent}})
		if err != nil {
			t.Fatal(err)
		}
		if o := outcomes(got); o[OutcomeForgotten] != 1 || o[OutcomeNotFound] != 1 {
			t.Fatalf("forget: %+v", got)
		}
		if r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[0]}); r != nil {
			t.Fatalf("a forgotten row is still there: %+v", r)
		}
		// The manager's reconciler finds nothing to delete.
		m := newManager(t, b, st, nil)
		if err := m.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		m.Close()
		if !maps.Equal(tree, snapshotTree(t, dir+"/store")) {
			t.Fatal("forgetting a backup changed the store")
		}
		// The configured store's rows cannot be forgotten as a store.
		id, _ := blobstore.ReadIdentity(ctx, st)
		if _, err := Sync(ctx, b, st, descJSON{}, SyncOptions{ForgetStore: id.StoreID}); err == nil {
			t.Fatal("--forget-store of the configured store succeeded")
		}
		// A store that is gone: its rows are forgotten, the configured
		// store (another) is not touched.
		other, err := blobstore.NewFS(dir + "/other")
		if err != nil {
			t.Fatal(err)
		}
		got, err = Sync(ctx, b, other, descJSON{}, SyncOptions{ForgetStore: id.StoreID})
		if err != nil || outcomes(got)[OutcomeForgotten] != 2 {
			t.Fatalf("forget-store: %+v %v", got, err)
		}
		if ids := storeIDs(t, b); len(ids) != 0 {
			t.Fatalf("rows left after --forget-store: %v", ids)
		}
		if !maps.Equal(tree, snapshotTree(t, dir+"/store")) {
			t.Fatal("forgetting a store changed it")
		}
		if _, err := Sync(ctx, b, st, descJSON{}, SyncOptions{ForgetStore: "st-nope"}); err == nil {
			t.Fatal("--forget-store of an unknown store succeeded")
		}
		if _, err := Sync(ctx, b, st, descJSON{}, SyncOptions{ForgetStore: "st-x", MoveStore: "st-y"}); err == nil {
			t.Fatal("two subcommands at once were accepted")
		}
		// A plain sync adopts them back from the store.
		got, err = Sync(ctx, b, st, descJSON{}, SyncOptions{})
		if err != nil || outcomes(got)[OutcomeAdopted] != 3 {
			t.Fatalf("sync after forgetting: %+v %v", got, err)
		}
	})
}

// TestSyncNeverAdoptsPartialPrefixes: every state a backup job leaves its
// prefix in before the sidecar (data files only, manifests without
// sidecar), and damage after it (a data file gone or cut short, a bad
// sidecar), is reported and never adopted.
func TestSyncNeverAdoptsPartialPrefixes(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		dir := t.TempDir()
		st, arns := syncFixture(t, b, dir, 1)
		cat := b.Capabilities().Backups
		r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[0]})
		src := dir + "/store/" + r.Prefix
		// Job steps in write order: data files, the AWS manifests, our
		// manifest, the sidecar.
		cases := map[string]func(dst string){
			"data-only": func(dst string) {
				os.RemoveAll(dst + "/manifest-files.json")
				os.RemoveAll(dst + "/manifest-summary.json")
				os.RemoveAll(dst + "/" + format.ManifestName)
				os.RemoveAll(dst + "/" + format.SidecarName)
			},
			"first-data-file": func(dst string) {
				matches, _ := filepath.Glob(dst + "/data/*")
				for _, m := range matches[1:] {
					os.Remove(m)
				}
				for _, f := range []string{"manifest-files.json", "manifest-summary.json", format.ManifestName, format.SidecarName} {
					os.Remove(dst + "/" + f)
				}
			},
			"before-manifest": func(dst string) {
				os.Remove(dst + "/" + format.ManifestName)
				os.Remove(dst + "/" + format.SidecarName)
			},
			"before-sidecar":  func(dst string) { os.Remove(dst + "/" + format.SidecarName) },
			"data-file-gone":  func(dst string) { os.Remove(dst + "/data/000001.json.zst") },
			"data-file-short": func(dst string) { os.Truncate(dst+"/data/000001.json.zst", 10) },
			"sidecar-mismatch": func(dst string) {
				os.WriteFile(dst+"/"+format.SidecarName, []byte(strings.Repeat("0", 64)+"  "+format.ManifestName+"\n"), 0o600)
			},
		}
		// Forget the row, keep the intact backup aside, and put each
		// partial or damaged state of it in its place.
		if _, err := Sync(ctx, b, st, descJSON{}, SyncOptions{ForgetBackups: arns}); err != nil {
			t.Fatal(err)
		}
		orig := dir + "/orig"
		os.Rename(src, orig)
		for name, damage := range cases {
			copyTree(t, orig, src, nil)
			damage(src)
			got, err := Sync(ctx, b, st, descJSON{}, SyncOptions{})
			if err != nil {
				t.Fatal(err)
			}
			o := outcomes(got)
			if o[OutcomeAdopted] != 0 || o[OutcomeIncomplete]+o[OutcomeDamaged] != 1 {
				t.Fatalf("%s: %+v", name, got)
			}
			if r, _ := cat.GetBackup(ctx, backend.GetBackupParams{ARN: arns[0]}); r != nil {
				t.Fatalf("%s: adopted: %+v", name, r)
			}
			os.RemoveAll(src)
		}
		// The intact copy is adopted.
		os.Rename(orig, src)
		got, err := Sync(ctx, b, st, descJSON{}, SyncOptions{})
		if err != nil || outcomes(got)[OutcomeAdopted] != 1 {
			t.Fatalf("intact: %+v %v", got, err)
		}
	})
}

// TestSyncStreamsTheListing: sync adopts each backup as the store's walk
// leaves its prefix, not after listing the whole store: a listing that
// breaks inside the second backup fails the sync with that error after
// the first backup was adopted, and the broken one is not.
func TestSyncStreamsTheListing(t *testing.T) {
	forEach(t, func(t *testing.T, b backend.Backend) {
		ctx := context.Background()
		inner, _ := syncFixture(t, b, t.TempDir(), 3)
		objs, err := inner.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		first := ""
		n0 := 0
		for _, o := range objs {
			if parts := strings.Split(o.Key, "/"); len(parts) >= 4 {
				p := strings.Join(parts[:3], "/")
				if first == "" {
					first = p
				}
				if p != first {
					break
				}
				n0++
			}
		}
		other := backends(t)[0].open(t)
		if b.Name() == "postgres" {
			other = backends(t)[1].open(t)
		}
		st := faultstore.New(inner)
		boom := errors.New("listing connection reset")
		st.Inject(faultstore.Fault{Op: faultstore.OpWalk, Cut: true, CutAfter: int64(n0 + 1), Err: boom})
		got, err := Sync(ctx, other, st, descJSON{}, SyncOptions{AdoptStore: true})
		if !errors.Is(err, boom) {
			t.Fatalf("sync over a broken listing: %v (%+v)", err, got)
		}
		if o := outcomes(got); o[OutcomeAdopted] != 1 {
			t.Fatalf("sync over a broken listing: %+v, want the first backup adopted", got)
		}
		cat := other.Capabilities().Backups
		rows, err := cat.ListBackups(ctx, backend.ListBackupsParams{Limit: 10})
		if err != nil || len(rows) != 1 || rows[0].Prefix != first {
			t.Fatalf("rows after a broken listing: %+v %v, want only %s", rows, err, first)
		}
		// The listing whole again: the rest is adopted.
		st.Reset()
		got, err = Sync(ctx, other, st, descJSON{}, SyncOptions{})
		if o := outcomes(got); err != nil || o[OutcomeAdopted] != 2 || o[OutcomeKnown] != 1 {
			t.Fatalf("second sync: %+v %v", got, err)
		}
	})
}
