package backup

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// SyncOptions configure Sync. MoveStore, ForgetStore and ForgetBackups
// each select a subcommand of their own (at most one of them); without
// them Sync rebuilds the rows from the configured store.
type SyncOptions struct {
	// AdoptStore takes over a store whose identity names another catalog
	// (that catalog then finds the store unhealthy).
	AdoptStore bool
	// Force, with AdoptStore, takes the store over even while its owner's
	// heartbeat is live (that owner's servers then refuse to write
	// backups there).
	Force bool
	// DryRun reports what a sync would do and changes nothing (no row, no
	// identity): outcomes are "adoptable", "movable", "forgettable".
	DryRun bool
	// PruneMissing marks AVAILABLE rows of this store whose backup has
	// vanished from it DELETING (the reconciler then finishes them);
	// without it they are only reported "missing".
	PruneMissing bool
	// MoveStore is the store id of a store that was copied to the
	// configured one: every AVAILABLE row of it is verified in the
	// configured store (every data file read: size, sha256, md5, items)
	// and, only if all verify, every row of it is re-pointed here.
	MoveStore string
	// ForgetStore is a store id whose rows are removed from the catalog;
	// no object is touched.
	ForgetStore string
	// ForgetBackups are ARNs whose rows are removed from the catalog; no
	// object is touched.
	ForgetBackups []string
	// Progress, when not nil, is told what is being listed and verified.
	Progress SyncProgress
}

// SyncProgress receives a sync's progress: a phase starts with its total
// (-1 when unknown), advances, and finishes.
type SyncProgress interface {
	Start(phase string, total int)
	Add(n int)
	Finish()
}

type noProgress struct{}

func (noProgress) Start(string, int) {}
func (noProgress) Add(int)           {}
func (noProgress) Finish()           {}

// Sync outcomes (SyncEntry.Outcome).
const (
	OutcomeAdopted     = "adopted"
	OutcomeAdoptable   = "adoptable"
	OutcomeKnown       = "known"
	OutcomeIncomplete  = "incomplete"
	OutcomeDamaged     = "damaged"
	OutcomeMissing     = "missing"
	OutcomePruned      = "pruned"
	OutcomeOtherStore  = "other-store"
	OutcomeMoved       = "moved"
	OutcomeMovable     = "movable"
	OutcomeForgotten   = "forgotten"
	OutcomeForgettable = "forgettable"
	OutcomeNotFound    = "not-found"
	// The store itself (entry of extenddb-store.json) with AdoptStore.
	OutcomeStoreAdopted   = "store-taken-over"
	OutcomeStoreAdoptable = "store-takeover"         // dry run: the store would be taken over
	OutcomeStoreRefused   = "store-takeover-refused" // dry run: it would be refused (live owner, no --force)
)

// Unfixed reports whether an outcome is a problem left for the operator
// (the CLI exits non-zero when any entry has one).
func Unfixed(outcome string) bool {
	switch outcome {
	case OutcomeIncomplete, OutcomeDamaged, OutcomeMissing, OutcomeOtherStore, OutcomeNotFound, OutcomeStoreRefused:
		return true
	}
	return false
}

// SyncEntry is one backup prefix found in the store, or one row.
type SyncEntry struct {
	ARN     string
	Prefix  string
	Outcome string
	Detail  string
}

// rowPage bounds the rows read at once.
const rowPage = 500

// Sync runs `extenddb backup sync` (docs/backup-design.md section 4).
//
// Without MoveStore or Forget*, it rebuilds the catalog's backup rows from
// the store: a complete backup without a row becomes an AVAILABLE row; an
// incomplete prefix (no sidecar) or one whose manifest does not check or
// misses a data file at its recorded size is reported and never adopted;
// an AVAILABLE row of this store whose backup is gone is reported
// "missing", and marked DELETING with PruneMissing; a row of another store
// is reported "other-store" (see MoveStore and ForgetStore).
//
// DryRun changes nothing. The entries are answered with the error, if any.
func Sync(ctx context.Context, b backend.Backend, st blobstore.Store, d Describer, opt SyncOptions) ([]SyncEntry, error) {
	cat := b.Capabilities().Backups
	if cat == nil {
		return nil, fmt.Errorf("the %s backend has no backup catalog", b.Name())
	}
	if opt.Progress == nil {
		opt.Progress = noProgress{}
	}
	n := 0
	for _, set := range []bool{opt.MoveStore != "", opt.ForgetStore != "", len(opt.ForgetBackups) > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("--move-store, --forget-store and --forget-backup are separate subcommands: give one at a time")
	}
	if opt.Force && !opt.AdoptStore {
		return nil, errors.New("--force only applies with --adopt-store (it takes over a store whose owner's heartbeat is live)")
	}
	if n == 1 && opt.PruneMissing {
		return nil, errors.New("--prune-missing belongs to a plain sync; it cannot be combined with --move-store or --forget-*")
	}
	s := &syncer{ctx: ctx, cat: cat, st: st, d: d, opt: opt}
	switch {
	case len(opt.ForgetBackups) > 0:
		return s.forgetBackups()
	case opt.ForgetStore != "":
		return s.forgetStore()
	}
	var nb [16]byte
	rand.Read(nb[:])
	catalogID, err := cat.CatalogID(ctx, "cat-"+hex.EncodeToString(nb[:]))
	if err != nil {
		return nil, err
	}
	if err := s.identity(catalogID); err != nil {
		return nil, err
	}
	if opt.MoveStore != "" {
		return s.moveStore()
	}
	return s.rebuild()
}

type syncer struct {
	ctx context.Context
	cat backend.BackupCatalog
	st  blobstore.Store
	d   Describer
	opt SyncOptions
	id  blobstore.Identity // of the configured store; StoreID "" in a dry run over a store without one
	out []SyncEntry
}

func (s *syncer) add(e SyncEntry) { s.out = append(s.out, e) }

// identity binds the configured store to this catalog (creating its
// identity, or adopting it with AdoptStore) and records it.
func (s *syncer) identity(catalogID string) error {
	id, err := blobstore.ReadIdentity(s.ctx, s.st)
	switch {
	case err == nil && id.CatalogID != catalogID:
		if !s.opt.AdoptStore {
			return fmt.Errorf("store %s belongs to catalog %s, not to this catalog %s: run again with --adopt-store to take it over", s.st, id.CatalogID, catalogID)
		}
		if err := s.adopt(&id, catalogID); err != nil {
			return err
		}
	case err == nil:
	case !errors.Is(err, blobstore.ErrNotFound):
		return err
	case s.opt.DryRun:
		id = blobstore.Identity{}
	default:
		if id, err = blobstore.EnsureIdentity(s.ctx, s.st, catalogID); err != nil {
			return err
		}
	}
	s.id = id
	return nil
}

// adopt takes the store over from the catalog its identity names (id is
// rewritten in place), unless that catalog's heartbeat is live and Force
// is not set. In a dry run it only reports.
func (s *syncer) adopt(id *blobstore.Identity, catalogID string) error {
	prev := id.CatalogID
	now := time.Now()
	live := false
	var about string
	hb, err := blobstore.ReadHeartbeat(s.ctx, s.st)
	switch {
	case errors.Is(err, blobstore.ErrNotFound), err == nil && hb.CatalogID != prev:
		about = fmt.Sprintf("no heartbeat of catalog %s in the store (written by an older server, or none of its servers ran here)", prev)
	case err != nil:
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		live = true // cannot tell: treated as alive
		about = fmt.Sprintf("the heartbeat of catalog %s cannot be read (%v)", prev, err)
	default:
		live = hb.Live(now)
		about = describeHeartbeat(hb, now, s.st.String())
	}
	if live && !s.opt.Force {
		if s.opt.DryRun {
			s.add(SyncEntry{Prefix: blobstore.IdentityKey, Outcome: OutcomeStoreRefused, Detail: fmt.Sprintf(
				"--adopt-store would be refused: the store belongs to catalog %s and %s; --force would take it over anyway", prev, about)})
			return nil
		}
		return fmt.Errorf("store %s belongs to catalog %s, whose servers look alive: %s. "+
			"Stop that catalog's servers first (a clean stop marks the heartbeat stopped; after a crash, wait until it is older than its bound), "+
			"or run again with --adopt-store --force to take the store over anyway (that catalog's servers then refuse to write backups there)",
			s.st, prev, about)
	}
	verb := "taken over"
	if s.opt.DryRun {
		verb = "would be taken over"
	}
	detail := fmt.Sprintf("%s from catalog %s: %s", verb, prev, about)
	if live {
		detail += "; a live owner was overridden with --force: its servers refuse to write backups here from now on"
		if s.opt.DryRun {
			detail = fmt.Sprintf("%s from catalog %s: %s; a live owner would be overridden (--force)", verb, prev, about)
		}
	}
	if s.opt.DryRun {
		s.add(SyncEntry{Prefix: blobstore.IdentityKey, Outcome: OutcomeStoreAdoptable, Detail: detail})
		return nil
	}
	// The adoption's time is taken just before the write: an old owner's
	// beat that began after it can only have read the old identity within
	// the write's own time.
	at := time.Now().UTC().Truncate(time.Millisecond)
	host, _ := os.Hostname()
	id.CatalogID, id.AdoptedFrom, id.AdoptedAt, id.AdoptedOn = catalogID, prev, &at, host
	if err := s.writeIdentity(*id); err != nil {
		return err
	}
	s.add(SyncEntry{Prefix: blobstore.IdentityKey, Outcome: OutcomeStoreAdopted, Detail: detail})
	return nil
}

// describeHeartbeat says who wrote hb, when and where, and whether it is
// live at now.
func describeHeartbeat(hb blobstore.Heartbeat, now time.Time, here string) string {
	host, owner := hb.Host, hb.Owner
	if host == "" {
		host = "(unknown)"
	}
	if owner == "" {
		owner = "(unknown)"
	}
	age := hb.Age(now).Round(time.Second)
	out := fmt.Sprintf("its last heartbeat was at %s (%s ago) from host %s, server %s, ", hb.Time.UTC().Format(time.RFC3339), age, host, owner)
	switch {
	case hb.Stopped:
		out += "which stopped cleanly"
	case hb.Live(now):
		out += fmt.Sprintf("younger than %s (%d × its %s interval): live", hb.StaleAfter(), blobstore.HeartbeatStaleFactor, hb.Interval)
	default:
		out += fmt.Sprintf("older than %s (%d × its %s interval): stale", hb.StaleAfter(), blobstore.HeartbeatStaleFactor, hb.Interval)
	}
	if hb.Store != "" && hb.Store != here {
		out += fmt.Sprintf(" (written to %s: if this store is a copy of that one, its owner writes there, not here)", hb.Store)
	}
	return out
}

func (s *syncer) writeIdentity(id blobstore.Identity) error {
	data, _ := json.MarshalIndent(id, "", "  ")
	return s.st.Put(s.ctx, blobstore.IdentityKey, bytes.NewReader(append(data, '\n')))
}

// eachRow calls fn for every row in the given statuses (all when empty),
// a page at a time.
func (s *syncer) eachRow(statuses []string, fn func(r backend.BackupRecord) error) error {
	after := ""
	for {
		rows, err := s.cat.ListBackups(s.ctx, backend.ListBackupsParams{Statuses: statuses, StartAfter: after, Limit: rowPage})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(rows) < rowPage {
			return nil
		}
		after = rows[len(rows)-1].ARN
	}
}

// walkBackups walks the store once and calls fn for every backup prefix
// ("account/table/backup-id"), in key order, with whether its sidecar
// exists, as soon as the prefix's objects end: the objects of one backup
// are contiguous in key order (every key between two keys under P + "/"
// is under it too), so nothing but the current prefix and its flag is
// held, never the listing.
func (s *syncer) walkBackups(fn func(prefix string, complete bool) error) error {
	cur, complete := "", false
	err := s.st.Walk(s.ctx, "", func(o blobstore.ObjectInfo) error {
		parts := strings.SplitN(o.Key, "/", 5)
		if len(parts) < 4 || parts[2] == format.PITRDir {
			// Point-in-time recovery histories are not backups.
			return nil
		}
		p := o.Key[:len(parts[0])+len(parts[1])+len(parts[2])+2]
		if p != cur {
			if cur != "" {
				if err := fn(cur, complete); err != nil {
					return err
				}
			}
			cur, complete = strings.Clone(p), false
		}
		if len(parts) == 4 && parts[3] == format.SidecarName {
			complete = true
		}
		return nil
	})
	if err == nil && cur != "" {
		err = fn(cur, complete)
	}
	return err
}

func (s *syncer) rebuild() ([]SyncEntry, error) {
	// The entries the walk adds are in key order of prefix + "/" (at most
	// one per prefix); those not "incomplete" are the prefixes with a
	// sidecar, which the row pass below looks up instead of keeping a set.
	from := len(s.out)
	s.opt.Progress.Start("verifying backups", -1)
	err := s.walkBackups(func(p string, complete bool) error {
		err := s.rebuildOne(p, complete)
		s.opt.Progress.Add(1)
		return err
	})
	s.opt.Progress.Finish()
	if err != nil {
		return s.out, err
	}
	walked := s.out[from:]
	hasSidecar := func(p string) bool {
		i, found := slices.BinarySearchFunc(walked, p+"/", func(e SyncEntry, t string) int { return strings.Compare(e.Prefix+"/", t) })
		return found && walked[i].Outcome != OutcomeIncomplete
	}
	// Rows whose backup is no longer complete in this store, and rows of
	// other stores.
	err = s.eachRow(nil, func(r backend.BackupRecord) error {
		if r.Status == backend.BackupDeleted {
			return nil
		}
		if r.StoreID != s.id.StoreID {
			s.add(SyncEntry{ARN: r.ARN, Prefix: r.Prefix, Outcome: OutcomeOtherStore, Detail: fmt.Sprintf(
				"%s row of store %s, not of the configured store: --move-store %s after copying it here, or --forget-store %s",
				r.Status, r.StoreID, r.StoreID, r.StoreID)})
			return nil
		}
		if r.Status != backend.BackupAvailable || hasSidecar(r.Prefix) {
			return nil
		}
		e := SyncEntry{ARN: r.ARN, Prefix: r.Prefix, Outcome: OutcomeMissing, Detail: "the row is AVAILABLE but its backup is not complete in the store"}
		if s.opt.PruneMissing && !s.opt.DryRun {
			res, err := s.cat.UpdateBackup(s.ctx, backend.UpdateBackupParams{ARN: r.ARN, Generation: r.Generation,
				Status: backend.BackupAvailable, NewStatus: backend.BackupDeleting})
			if err != nil {
				return err
			}
			if res.Matched {
				e.Outcome, e.Detail = OutcomePruned, "marked DELETING"
			}
		}
		s.add(e)
		return nil
	})
	return s.out, err
}

func (s *syncer) rebuildOne(p string, complete bool) error {
	e := SyncEntry{Prefix: p}
	if !complete {
		e.Outcome, e.Detail = OutcomeIncomplete, "no sidecar: never adopted"
		s.add(e)
		return nil
	}
	bk, err := format.Open(s.ctx, StoreSource{s.st}, p+"/")
	if err == nil {
		err = bk.CheckSizes(s.ctx)
	}
	if err != nil {
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		e.Outcome, e.Detail = OutcomeDamaged, err.Error()
		s.add(e)
		return nil
	}
	e.ARN = bk.BackupARN
	r, err := s.cat.GetBackup(s.ctx, backend.GetBackupParams{ARN: bk.BackupARN})
	if err != nil {
		return err
	}
	if r != nil {
		e.Outcome, e.Detail = OutcomeKnown, r.Status
		if r.StoreID != s.id.StoreID {
			// Reported with the rows of other stores below.
			return nil
		}
		s.add(e)
		return nil
	}
	desc, err := s.d.StoredDescription(bk.SourceTable)
	if err != nil {
		e.Outcome, e.Detail = OutcomeDamaged, err.Error()
		s.add(e)
		return nil
	}
	if s.opt.DryRun {
		e.Outcome = OutcomeAdoptable
		s.add(e)
		return nil
	}
	a := bk.ARN
	_, err = s.cat.InsertBackup(s.ctx, backend.InsertBackupParams{Record: backend.BackupRecord{
		ARN: bk.BackupARN, Account: a.Account, TableName: a.Table, BackupID: a.BackupID, Name: bk.BackupName,
		Type: "USER", Status: backend.BackupAvailable, CreatedAt: bk.BackupCreationDateTime.UTC().Truncate(time.Millisecond),
		SizeBytes: bk.UncompressedBytes, ItemCount: bk.ItemCount, TableDesc: desc, StoreID: s.id.StoreID, Prefix: p, Owner: "sync",
	}})
	if err != nil {
		return err
	}
	e.Outcome = OutcomeAdopted
	s.add(e)
	return nil
}

// moveStore re-points the rows of store opt.MoveStore at the configured
// store, all or nothing: every AVAILABLE row's backup is verified in full
// in the configured store first; one that does not verify (a flipped
// byte, a missing or short file) stops the move before any row changes.
// When the configured store carries the old store's id (its identity file
// was copied with it), it gets a fresh store id first, so that the copy
// and the original are two stores.
func (s *syncer) moveStore() ([]SyncEntry, error) {
	old := s.opt.MoveStore
	var rows []backend.BackupRecord
	err := s.eachRow(nil, func(r backend.BackupRecord) error {
		if r.StoreID == old && r.Status != backend.BackupDeleted {
			r.TableDesc = nil // not needed here: keep only what the move needs
			rows = append(rows, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("--move-store %s: the catalog has no backup rows of that store (%s)", old, s.storeIDsHint())
	}
	var verify int
	for _, r := range rows {
		if r.Status == backend.BackupAvailable {
			verify++
		}
	}
	bad := 0
	s.opt.Progress.Start("verifying backups", verify)
	for _, r := range rows {
		if r.Status != backend.BackupAvailable {
			continue
		}
		_, err := Verify(s.ctx, s.st, r.ARN)
		s.opt.Progress.Add(1)
		if err != nil {
			if s.ctx.Err() != nil {
				s.opt.Progress.Finish()
				return s.out, s.ctx.Err()
			}
			bad++
			outcome := OutcomeDamaged
			if errors.Is(err, blobstore.ErrNotFound) {
				outcome = OutcomeMissing
			}
			s.add(SyncEntry{ARN: r.ARN, Prefix: r.Prefix, Outcome: outcome, Detail: "in the configured store: " + err.Error()})
		}
	}
	s.opt.Progress.Finish()
	if bad > 0 {
		return s.out, fmt.Errorf("--move-store %s: %d of %d backups do not verify in %s: nothing was re-pointed", old, bad, verify, s.st)
	}
	if s.opt.DryRun {
		for _, r := range rows {
			s.add(SyncEntry{ARN: r.ARN, Prefix: r.Prefix, Outcome: OutcomeMovable, Detail: r.Status})
		}
		return s.out, nil
	}
	if s.id.StoreID == old {
		s.id.StoreID = blobstore.NewStoreID()
		if err := s.writeIdentity(s.id); err != nil {
			return s.out, err
		}
	}
	newID := s.id.StoreID
	for _, r := range rows {
		res, err := s.cat.UpdateBackup(s.ctx, backend.UpdateBackupParams{ARN: r.ARN, Generation: r.Generation,
			Status: r.Status, NewStatus: r.Status, StoreID: &newID})
		if err != nil {
			return s.out, err
		}
		if !res.Matched {
			return s.out, fmt.Errorf("--move-store: backup %s changed while it was being moved (now %+v); run the move again", r.ARN, res.Record)
		}
		s.add(SyncEntry{ARN: r.ARN, Prefix: r.Prefix, Outcome: OutcomeMoved, Detail: fmt.Sprintf("%s, store %s -> %s", r.Status, old, newID)})
	}
	return s.out, nil
}

// storeIDsHint names the store ids the catalog's rows use.
func (s *syncer) storeIDsHint() string {
	var ids []string
	_ = s.eachRow(nil, func(r backend.BackupRecord) error {
		if r.Status != backend.BackupDeleted && !slices.Contains(ids, r.StoreID) {
			ids = append(ids, r.StoreID)
		}
		return nil
	})
	if len(ids) == 0 {
		return "it has no backup rows at all"
	}
	slices.Sort(ids)
	return "its rows name " + strings.Join(ids, ", ")
}

// forget removes one row (any status) without touching objects.
func (s *syncer) forget(r backend.BackupRecord) error {
	e := SyncEntry{ARN: r.ARN, Prefix: r.Prefix, Outcome: OutcomeForgettable, Detail: r.Status + " row of store " + r.StoreID}
	if !s.opt.DryRun {
		res, err := s.cat.RemoveBackup(s.ctx, backend.RemoveBackupParams{ARN: r.ARN, Generation: r.Generation, Status: r.Status})
		if err != nil {
			return err
		}
		if !res.Matched {
			return fmt.Errorf("backup %s changed while it was being forgotten; run again", r.ARN)
		}
		e.Outcome = OutcomeForgotten
	}
	s.add(e)
	return nil
}

func (s *syncer) forgetBackups() ([]SyncEntry, error) {
	s.opt.Progress.Start("forgetting rows", len(s.opt.ForgetBackups))
	defer s.opt.Progress.Finish()
	for _, arn := range s.opt.ForgetBackups {
		if _, err := format.ParseARN(arn); err != nil {
			return s.out, fmt.Errorf("--forget-backup %q: %w", arn, err)
		}
		r, err := s.cat.GetBackup(s.ctx, backend.GetBackupParams{ARN: arn})
		if err != nil {
			return s.out, err
		}
		s.opt.Progress.Add(1)
		if r == nil {
			s.add(SyncEntry{ARN: arn, Outcome: OutcomeNotFound, Detail: "the catalog has no row for it"})
			continue
		}
		if err := s.forget(*r); err != nil {
			return s.out, err
		}
	}
	return s.out, nil
}

func (s *syncer) forgetStore() ([]SyncEntry, error) {
	gone := s.opt.ForgetStore
	if id, err := blobstore.ReadIdentity(s.ctx, s.st); err == nil && id.StoreID == gone {
		return nil, fmt.Errorf("--forget-store %s is the configured store %s: its rows are rebuilt by a plain sync; use --forget-backup ARN for single rows", gone, s.st)
	}
	var rows []backend.BackupRecord
	err := s.eachRow(nil, func(r backend.BackupRecord) error {
		if r.StoreID == gone {
			rows = append(rows, backend.BackupRecord{ARN: r.ARN, Prefix: r.Prefix, Status: r.Status, StoreID: r.StoreID, Generation: r.Generation})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("--forget-store %s: the catalog has no backup rows of that store (%s)", gone, s.storeIDsHint())
	}
	s.opt.Progress.Start("forgetting rows", len(rows))
	defer s.opt.Progress.Finish()
	for _, r := range rows {
		if err := s.forget(r); err != nil {
			return s.out, err
		}
		s.opt.Progress.Add(1)
	}
	return s.out, nil
}
