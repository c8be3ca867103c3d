package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store"
)

// SyncOptions configure Sync.
type SyncOptions struct {
	// AdoptStore takes over a store whose identity names another catalog
	// (that catalog then finds the store unhealthy).
	AdoptStore bool
	// DryRun reports what a sync would do and changes nothing (no row, no
	// identity): complete backups without a row are "adoptable".
	DryRun bool
	// PruneMissing marks AVAILABLE rows of this store whose backup has
	// vanished from it DELETING (the reconciler then finishes them);
	// without it they are only reported "missing".
	PruneMissing bool
}

// SyncEntry is one backup prefix found in the store.
type SyncEntry struct {
	ARN     string
	Prefix  string
	Outcome string // adopted (adoptable with DryRun), known, incomplete, damaged, missing, pruned
	Detail  string
}

// Sync rebuilds the catalog's backup rows from the store
// (docs/backup-design.md section 4, `extenddb backup sync`): a complete
// backup without a row becomes an AVAILABLE row; an incomplete prefix (no
// sidecar) or one whose manifest does not check or misses a data file at
// its recorded size is reported and never adopted; an AVAILABLE row of
// this store whose backup is gone is reported "missing", and marked
// DELETING with PruneMissing. DryRun changes nothing.
func Sync(ctx context.Context, b storage.Backend, st store.Store, d Describer, opt SyncOptions) ([]SyncEntry, error) {
	cat, ok := storage.Backups(b)
	if !ok {
		return nil, fmt.Errorf("the %s backend has no backup catalog", b.Name())
	}
	var nb [16]byte
	rand.Read(nb[:])
	catalogID, err := cat.CatalogID(ctx, "cat-"+hex.EncodeToString(nb[:]))
	if err != nil {
		return nil, err
	}
	id, err := store.ReadIdentity(ctx, st)
	switch {
	case err == nil && id.CatalogID != catalogID:
		if !opt.AdoptStore {
			return nil, fmt.Errorf("store %s belongs to catalog %s, not to this catalog %s: run again with --adopt-store to take it over", st, id.CatalogID, catalogID)
		}
		if !opt.DryRun {
			id.CatalogID = catalogID
			data, _ := json.MarshalIndent(id, "", "  ")
			if err := st.Put(ctx, store.IdentityKey, bytes.NewReader(append(data, '\n'))); err != nil {
				return nil, err
			}
		}
	case err == nil:
	case opt.DryRun:
		id = store.Identity{}
	default:
		if id, err = store.EnsureIdentity(ctx, st, catalogID); err != nil {
			return nil, err
		}
	}
	objs, err := st.List(ctx, "")
	if err != nil {
		return nil, err
	}
	prefixes := map[string]bool{}
	var order []string
	for _, o := range objs {
		parts := strings.Split(o.Key, "/")
		if len(parts) < 4 {
			continue
		}
		p := strings.Join(parts[:3], "/")
		if _, seen := prefixes[p]; !seen {
			prefixes[p] = false
			order = append(order, p)
		}
		if strings.HasSuffix(o.Key, "/"+format.SidecarName) && len(parts) == 4 {
			prefixes[p] = true
		}
	}
	var out []SyncEntry
	for _, p := range order {
		e := SyncEntry{Prefix: p}
		if !prefixes[p] {
			e.Outcome, e.Detail = "incomplete", "no sidecar: never adopted"
			out = append(out, e)
			continue
		}
		bk, err := format.Open(ctx, StoreSource{st}, p+"/")
		if err == nil {
			err = bk.CheckSizes(ctx)
		}
		if err != nil {
			e.Outcome, e.Detail = "damaged", err.Error()
			out = append(out, e)
			continue
		}
		e.ARN = bk.BackupARN
		if r, err := cat.GetBackup(ctx, storage.GetBackupParams{ARN: bk.BackupARN}); err != nil {
			return out, err
		} else if r != nil {
			e.Outcome, e.Detail = "known", r.Status
			out = append(out, e)
			continue
		}
		a, err := format.ParseARN(bk.BackupARN)
		if err != nil {
			e.Outcome, e.Detail = "damaged", err.Error()
			out = append(out, e)
			continue
		}
		desc, err := d.StoredDescription(bk.SourceTable)
		if err != nil {
			e.Outcome, e.Detail = "damaged", err.Error()
			out = append(out, e)
			continue
		}
		if opt.DryRun {
			e.Outcome = "adoptable"
			out = append(out, e)
			continue
		}
		_, err = cat.InsertBackup(ctx, storage.InsertBackupParams{Record: storage.BackupRecord{
			ARN: bk.BackupARN, Account: a.Account, TableName: a.Table, BackupID: a.BackupID, Name: bk.BackupName,
			Type: "USER", Status: storage.BackupAvailable, CreatedAt: bk.BackupCreationDateTime.UTC().Truncate(time.Millisecond),
			SizeBytes: bk.UncompressedBytes, ItemCount: bk.ItemCount, TableDesc: desc, StoreID: id.StoreID, Prefix: p, Owner: "sync",
		}})
		if err != nil {
			return out, err
		}
		e.Outcome = "adopted"
		out = append(out, e)
	}
	// Rows of this store whose backup is no longer complete in it.
	rows, err := cat.ListBackups(ctx, storage.ListBackupsParams{Statuses: []string{storage.BackupAvailable}})
	if err != nil {
		return out, err
	}
	for _, r := range rows {
		if r.StoreID != id.StoreID || prefixes[r.Prefix] {
			continue
		}
		e := SyncEntry{ARN: r.ARN, Prefix: r.Prefix, Outcome: "missing", Detail: "the row is AVAILABLE but its backup is not complete in the store"}
		if opt.PruneMissing && !opt.DryRun {
			res, err := cat.UpdateBackup(ctx, storage.UpdateBackupParams{ARN: r.ARN, Generation: r.Generation,
				Status: storage.BackupAvailable, NewStatus: storage.BackupDeleting})
			if err != nil {
				return out, err
			}
			if res.Matched {
				e.Outcome, e.Detail = "pruned", "marked DELETING"
			}
		}
		out = append(out, e)
	}
	return out, nil
}
