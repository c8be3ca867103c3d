package backup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/format"
)

// Restorer is what the restore job needs of DynamoDB's rules: the index
// entries of each item (Indexer) and the description of the target once
// loaded. The engine satisfies it.
type Restorer interface {
	Indexer
	FinishRestore(t *backend.Table) ([]byte, error)
	// IsRestoreTarget tells whether t is being restored from the backup.
	IsRestoreTarget(t *backend.Table, backupARN string) bool
}

// Steps of the restore job where Config.Hook is called.
const (
	PointRestoreBeforeTarget = "restore.before-target" // the job row exists, the target not yet
	PointRestoreMidSpool     = "restore.mid-spool"
	PointRestoreMidLoad      = "restore.mid-load"
	PointRestoreBeforeActive = "restore.before-active"
	PointRestoreAfterActive  = "restore.after-active" // the target is ACTIVE, the row not yet DONE
)

// spoolPrefix starts every spool directory's name, followed by the
// catalog's id, a dot and the owner's name (spoolDirPrefix): the spool
// directory is often the system's temporary directory, shared with other
// servers of other catalogs, so the reconciler removes only the spool
// directories of its own catalog's dead owners.
const spoolPrefix = "extenddb-restore-"

// spoolDirPrefix is the name prefix of this catalog's spool directories.
func (m *Manager) spoolDirPrefix() string { return spoolPrefix + m.catalogID + "." }

// newSpoolDir makes a spool directory of this server's (which the
// reconciler removes if the server dies before it does).
func (m *Manager) newSpoolDir() (string, error) {
	dir, err := os.MkdirTemp(m.cfg.SpoolDir, m.spoolDirPrefix()+m.cfg.Owner+"-")
	if err != nil {
		return "", fmt.Errorf("spool directory: %w", err)
	}
	return dir, nil
}

// restoreBatch is the number of items written per atomic batch (of
// restoreBulkBatch with a backend's bulk loader, ADR 0032: the batch's
// fixed costs, a round trip, the fence and a commit, are most of a bulk
// load's cost at 100 items), and restoreWriters the batches written at
// once by a restore.
const (
	restoreBatch     = 100
	restoreBulkBatch = 500
	restoreWriters   = 4
)

// restoreBatchFor is the batch size of a restore on b after its first
// batch (which holds restoreBatch items).
func restoreBatchFor(b backend.Backend) int {
	if caps := b.Capabilities(); caps.Bulk != nil && !caps.PerItemAtomic {
		if caps.BulkBatchItems > 0 {
			return caps.BulkBatchItems
		}
		return restoreBulkBatch
	}
	return restoreBatch
}

// progressEvery is the least time between two progress records of a
// restore while it loads (records coalesce: each writes the latest durable
// mark; the mid-load and before-active steps record synchronously).
const progressEvery = 100 * time.Millisecond

// restoreWork is one batch for a restore writer: the items [start, end)
// of the backup, in its item order.
type restoreWork struct {
	items      []backend.BulkItem
	bytes      int64
	start, end int64
}

// loadMark tracks how far a restore's load is durable (ADR 0027): batches
// complete in any order (restoreWriters in parallel), the mark is the end
// of the longest prefix of the backup's items whose batches all committed.
// It is recorded in the job row only after those commits, so recorded
// progress is never ahead of the data.
type loadMark struct {
	mu    sync.Mutex
	mark  int64
	ahead map[int64]int64 // start -> end of committed batches past mark

	recMu    sync.Mutex
	recorded int64
	last     time.Time
	kick     chan struct{}
}

func newLoadMark(from int64) *loadMark {
	return &loadMark{mark: from, recorded: from, ahead: map[int64]int64{}, kick: make(chan struct{}, 1)}
}

// done notes that the items [start, end) are durable.
func (l *loadMark) done(start, end int64) {
	l.mu.Lock()
	if start == l.mark {
		l.mark = end
		for {
			e, ok := l.ahead[l.mark]
			if !ok {
				break
			}
			delete(l.ahead, l.mark)
			l.mark = e
		}
	} else {
		l.ahead[start] = end
	}
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *loadMark) current() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mark
}

// recordProgress writes the job's durable mark into its row, when it moved
// since the last record; errFenced when the row is no longer this owner's
// at this generation.
func (m *Manager) recordProgress(ctx context.Context, job backend.RestoreRecord, l *loadMark) error {
	if m.rcat == nil || job.ID == "" {
		return nil
	}
	l.recMu.Lock()
	defer l.recMu.Unlock()
	mark := l.current()
	if mark <= l.recorded {
		return nil
	}
	res, err := m.rcat.RecordRestoreProgress(ctx, backend.RestoreProgressParams{ID: job.ID, Owner: m.cfg.Owner,
		Generation: job.Generation, Loaded: mark})
	if err != nil {
		return err
	}
	if !res.Matched {
		return errFenced
	}
	l.recorded, l.last = mark, time.Now()
	m.met.progressRecords.Inc()
	return nil
}

// recordLoop records the durable mark as batches commit, at most every
// progressEvery, until ctx ends. A failed record is only logged (the
// batches after the last record are loaded again after a crash, which is
// idempotent); a record refused because the claim moved stops the job.
func (m *Manager) recordLoop(ctx context.Context, stop context.CancelCauseFunc, job backend.RestoreRecord, l *loadMark) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		}
		l.recMu.Lock()
		wait := progressEvery - time.Since(l.last)
		l.recMu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		if err := m.recordProgress(ctx, job, l); err != nil {
			if errors.Is(err, errFenced) {
				stop(err)
				return
			}
			if ctx.Err() == nil {
				m.log.Warn("restore: recording progress", "restore", job.ID, "err", err)
			}
		}
	}
}

// RestoringFrom tells whether a restore from the backup runs (on any
// server sharing the catalog, when the backend keeps restore jobs). A job
// whose target is no longer this backup's restore in progress (it flipped
// ACTIVE and only its DONE write is left, or the table was replaced) no
// longer reads the backup: a client that saw the target ACTIVE can delete
// the backup at once.
func (m *Manager) RestoringFrom(arn string) bool {
	m.mu.Lock()
	n := m.restoring[arn]
	m.mu.Unlock()
	if m.rcat == nil {
		return n > 0
	}
	rows, err := m.rcat.ListRestores(context.Background(), []string{backend.RestoreRunning})
	if err != nil {
		return true // cannot tell: refuse the delete rather than lose the backup
	}
	for _, r := range rows {
		if r.BackupARN != arn {
			continue
		}
		m.mu.Lock()
		own := r.Owner == m.cfg.Owner
		over := own && m.done[r.ID]
		_, started := m.targets[r.ID]
		m.mu.Unlock()
		if over {
			continue // this process's job, past its use of the backup
		}
		cur, err := m.cfg.Backend.GetTable(context.Background(), backend.GetTableParams{Account: r.Account, Name: r.TableName})
		if own && started && backend.IsKind(err, backend.KindTableNotFound) {
			// This process's job created its target, and the target is
			// gone: a CREATING target cannot be deleted, so it flipped
			// ACTIVE and was deleted (the job has not seen its own
			// UpdateTable return yet), or the job dropped it on failure.
			// Either way the job no longer reads the backup.
			continue
		}
		if err != nil || m.cfg.Restorer == nil || m.cfg.Restorer.IsRestoreTarget(cur.Table, arn) {
			return true // not created yet (or cannot tell), or still loading
		}
	}
	return false
}

// restoreID names a restore job: the target's account and name and a
// random suffix (the target's incarnation does not exist yet when the row
// is written).
func restoreID(account, name string) string {
	var b [6]byte
	rand.Read(b[:])
	return account + "/" + name + "/" + hex.EncodeToString(b[:])
}

// RestoreTable starts restoring backup into the table account/name
// (docs/backup-design.md section 4): within the call it inserts the job
// row with this server's claim, then creates the target with create (in
// CREATING; the engine's description), so that a crash never leaves a
// target without a job. The job copies the backup into a spool directory,
// verifies all of it before writing an item, loads the items with their
// index entries in atomic batches (item by item on a backend whose only
// atomic write is one item's: writeEach) and flips the table ACTIVE with a
// conditional UpdateTable; when anything fails the target is deleted. A
// job whose owner dies is taken over by the reconciler and loaded again
// after its recorded progress (items are re-applied, then counted). Errors within the
// call: create's, KindLimitExceeded (job slots), KindUnavailable (store
// unhealthy), KindUnsupported (no Restorer).
//
// The job records its progress in its row as batches become durable (ADR
// 0027); a job taken over, or resumed after a restart, spools and verifies
// the whole backup again, then loads only the items after the recorded
// progress.
func (m *Manager) RestoreTable(ctx context.Context, backup backend.BackupRecord, account, name string, create func(context.Context) (*backend.Table, error)) error {
	if m.ctx == nil {
		return backend.Errorf(backend.KindUnavailable, "backup: the manager is not started")
	}
	if m.cfg.Restorer == nil {
		return backend.Errorf(backend.KindUnsupported, "restores are not configured on this server")
	}
	if err := m.Healthy(ctx); err != nil {
		return unavailable(err)
	}
	release, err := m.acquireSlot()
	if err != nil {
		return err
	}
	job := backend.RestoreRecord{ID: restoreID(account, name), Account: account, TableName: name,
		BackupARN: backup.ARN, Status: backend.RestoreRunning, Owner: m.cfg.Owner, Generation: 1}
	if m.rcat != nil {
		rec, err := m.rcat.InsertRestore(ctx, job)
		if err != nil {
			release()
			return err
		}
		job = *rec
	}
	// Running from now on (runRestore keeps the mark until the job ends):
	// creating the target can take longer than stale_after on a slow
	// backend, and this server's reconciler must not judge the job dead.
	notRunning := m.runs(job.ID, job.Generation)
	m.hook(PointRestoreBeforeTarget)
	target, err := create(ctx)
	if err != nil {
		notRunning()
		release()
		m.met.progress.fail(kindRestore, account, name, backup.BackupID, "the target table could not be created: "+err.Error(), time.Now())
		if m.rcat != nil {
			msg := "the target table could not be created: " + err.Error()
			m.rcat.UpdateRestore(context.WithoutCancel(ctx), backend.UpdateBackupParams{ARN: job.ID, Generation: job.Generation,
				Status: backend.RestoreRunning, NewStatus: backend.RestoreFailed, Message: &msg})
		}
		return err
	}
	m.startRestore(backup, target, job, release)
	return nil
}

// startRestore runs a restore job in the background; release frees its
// job slot at the end.
func (m *Manager) startRestore(backup backend.BackupRecord, target *backend.Table, job backend.RestoreRecord, release func()) {
	m.mu.Lock()
	m.restoring[backup.ARN]++
	m.targets[job.ID] = target.ID
	m.mu.Unlock()
	m.met.running.WithLabelValues(kindRestore).Inc()
	m.wg.Add(1)
	done := sync.OnceFunc(func() {
		m.mu.Lock()
		m.restoring[backup.ARN]--
		if m.restoring[backup.ARN] == 0 {
			delete(m.restoring, backup.ARN)
		}
		m.done[job.ID] = true
		m.mu.Unlock()
	})
	go func() {
		defer m.wg.Done()
		defer release()
		defer func() {
			done()
			m.mu.Lock()
			delete(m.done, job.ID) // its row is written: DONE, FAILED, or another owner's
			delete(m.targets, job.ID)
			m.mu.Unlock()
		}()
		m.runRestore(backup, target, job, done)
	}()
}

// finished ends the job's use of the backup (RestoringFrom): a job calls
// it once its target is ACTIVE, and a failed job before it removes its target, which may take a while on a
// backend that deletes a table's data after hiding it (Cassandra), so that
// the backup can be deleted as soon as the target is gone.
func (m *Manager) runRestore(b backend.BackupRecord, target *backend.Table, job backend.RestoreRecord, finished func()) {
	defer m.runs(job.ID, job.Generation)()
	log := m.log.With("backup", b.ARN, "target", target.Name)
	start := time.Now()
	ctx, cancel := context.WithCancelCause(m.ctx)
	defer cancel(nil)
	var beat func(context.Context) (bool, error)
	if m.rcat != nil {
		beat = func(ctx context.Context) (bool, error) {
			res, err := m.rcat.HeartbeatRestore(ctx, backend.HeartbeatBackupParams{ARN: job.ID, Owner: m.cfg.Owner, Generation: job.Generation})
			return err == nil && res.Matched, err
		}
		go m.keepAlive(ctx, cancel, beat)
	}
	prog := m.met.progress.start(kindRestore, target.Account, target.Name, b.BackupID, "spool")
	defer prog.done()
	n, skipped, err := m.restore(ctx, b, target, job, beat, prog)
	m.met.items.WithLabelValues(kindRestore).Add(float64(n))
	m.met.skipped.Add(float64(skipped))
	bg := context.WithoutCancel(ctx)
	if err == nil {
		// The target is ACTIVE: the backup is no longer used (a client that
		// saw the table ACTIVE can delete it before the row says DONE).
		finished()
		m.hook(PointRestoreAfterActive)
		if m.rcat != nil {
			m.rcat.UpdateRestore(bg, backend.UpdateBackupParams{ARN: job.ID, Generation: job.Generation,
				Status: backend.RestoreRunning, NewStatus: backend.RestoreDone})
		}
		m.met.end(kindRestore, start, "ok")
		log.Info("restore finished", "items", n, "skipped_items", skipped, "duration", time.Since(start))
		return
	}
	m.met.end(kindRestore, start, cause(ctx, err))
	if c := context.Cause(ctx); errors.Is(c, errFenced) || errors.Is(err, errFenced) {
		log.Warn("restore stopped: claim taken over")
		return
	}
	if m.ctx.Err() != nil {
		log.Warn("restore interrupted by shutdown; the reconciler resumes it", "err", err)
		return
	}
	if m.rcat != nil {
		msg := err.Error()
		res, uerr := m.rcat.UpdateRestore(bg, backend.UpdateBackupParams{ARN: job.ID, Generation: job.Generation,
			Status: backend.RestoreRunning, NewStatus: backend.RestoreFailed, Message: &msg})
		if uerr != nil || !res.Matched {
			log.Warn("restore failed but its claim is no longer ours; leaving the target to the new owner", "err", err)
			return
		}
	}
	log.Error("restore failed; removing the target table", "err", err)
	prog.fail(err)
	finished()
	m.dropTarget(bg, target)
}

// dropTarget deletes a restore target, only if it is still the same
// incarnation.
func (m *Manager) dropTarget(ctx context.Context, target *backend.Table) {
	if cur, gerr := m.cfg.Backend.GetTable(ctx, backend.GetTableParams{Account: target.Account, Name: target.Name}); gerr == nil && cur.Table.ID == target.ID {
		if _, derr := m.cfg.Backend.DeleteTable(ctx, backend.DeleteTableParams{Account: target.Account, Name: target.Name}); derr != nil {
			m.log.Warn("restore: removing the target table", "target", target.Name, "err", derr)
		}
	}
}

// errTargetMoved: the target's description version is not the one the
// job loads at. A takeover moves it (see reconcileRestores), so the writes
// of a job whose claim was taken over are refused by the write fence
// (ADR 0010), and so is its final flip to ACTIVE.
var errTargetMoved = errors.New("restore: the target table's description changed")

// refence is called when the target's version moved under the job: if the
// job still holds its claim (beat matches), no takeover happened (a
// takeover claims first, then moves the version), so the job goes on at
// the current version; otherwise it is fenced.
func (m *Manager) refence(ctx context.Context, target *backend.Table, backupARN string, beat func(context.Context) (bool, error)) (*backend.Table, error) {
	if beat == nil {
		return nil, errTargetMoved
	}
	ok, err := beat(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errFenced
	}
	cur, err := m.cfg.Backend.GetTable(ctx, backend.GetTableParams{Account: target.Account, Name: target.Name})
	if err != nil {
		return nil, err
	}
	if cur.Table.ID != target.ID || !m.cfg.Restorer.IsRestoreTarget(cur.Table, backupARN) {
		return nil, errors.New("restore: the target table was replaced")
	}
	return cur.Table, nil
}

// restore runs the job's steps; it answers the items it loaded and the
// items it skipped because the job's recorded progress covered them.
func (m *Manager) restore(ctx context.Context, b backend.BackupRecord, target *backend.Table, job backend.RestoreRecord, beat func(context.Context) (bool, error), prog *jobProgress) (n, skip int64, err error) {
	// A point-in-time restore (its job key names a history and an
	// instant, and its pinned base and last segment) loads the plan's
	// base, read from the store as planPITR verified it, then the plan's
	// replay.
	var bk *format.Backup
	var plan *PITRPlan
	if _, _, _, ok := parsePITRJob(b.ARN); ok {
		prog.setPhase("verify")
		var dir string
		if dir, err = m.newSpoolDir(); err != nil {
			return 0, 0, fmt.Errorf("restore: %w", err)
		}
		defer os.RemoveAll(dir)
		if plan, err = planJob(ctx, m.st, b.ARN, dir); err != nil {
			return 0, 0, err
		}
		defer plan.Close()
		bk = plan.Backup
		prog.setTotals(bk.ItemCount, bk.UncompressedBytes)
	} else {
		var dir string
		bk, dir, err = m.spoolBackup(ctx, b, prog)
		if dir != "" {
			defer os.RemoveAll(dir)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return m.load(ctx, b, bk, plan, target, job, beat, prog)
}

// spoolBackup copies a backup into a spool directory and verifies it;
// the caller removes the directory (dir, set once it exists) after the
// load, which reads the items from it.
func (m *Manager) spoolBackup(ctx context.Context, b backend.BackupRecord, prog *jobProgress) (bk *format.Backup, dir string, err error) {
	dir, err = m.newSpoolDir()
	if err != nil {
		return nil, "", fmt.Errorf("restore: %w", err)
	}
	// 1. Spool every object of the backup (again when resuming: a spool is
	// never trusted without being verified, and verifying it costs as much
	// as reading it).
	objs, err := m.st.List(ctx, b.Prefix)
	if err != nil {
		return nil, dir, err
	}
	for i, o := range objs {
		if i == 1 {
			m.hook(PointRestoreMidSpool)
		}
		if err := spool(ctx, m, dir, o.Key); err != nil {
			return nil, dir, err
		}
	}
	// 2. Verify all of it before writing anything.
	src := dirSource(dir)
	bk, err = format.Open(ctx, src, b.Prefix+"/")
	if err != nil {
		return nil, dir, err
	}
	if bk.BackupARN != b.ARN {
		return nil, dir, fmt.Errorf("restore: the manifest names backup %s, not %s", bk.BackupARN, b.ARN)
	}
	prog.setTotals(bk.ItemCount, bk.UncompressedBytes)
	prog.setPhase("verify")
	if err := bk.Verify(ctx); err != nil {
		return nil, dir, err
	}
	return bk, dir, nil
}

// blindPuts are the writes of a batch's items into table tr: blind puts
// of each item's change.
func blindPuts(tr backend.TableRef, items []backend.BulkItem) []backend.WriteItemParams {
	ops := make([]backend.WriteItemParams, len(items))
	for i := range items {
		ch := items[i].Change
		ops[i] = backend.WriteItemParams{Table: tr, PK: items[i].PK, SK: items[i].SK, Blind: true,
			Fn: func([]byte) (backend.Change, error) { return ch, nil }}
	}
	return ops
}

// A batch whose write fails with KindUnavailable is written again up to
// restoreRetries times, after 1, 2, 3... × restoreRetryPause.
const restoreRetries = 5

var restoreRetryPause = time.Second

// restoreItemWriters is the number of items a batch writes at once on a
// backend that writes item by item (backend.Capabilities.PerItemAtomic).
const restoreItemWriters = 4

// writeEach writes a batch item by item, restoreItemWriters at once, on
// a backend whose only atomic write is one item's: there a multi-item
// TransactWrite runs on the transaction ledger, several round trips per
// item that must all lock within the ledger's lock timeout (on FerretDB
// under load, 100 items took longer: the sweep aborted them, over and
// over, and the restore failed with TransactionConflict). A restore needs
// no atomicity across items: the target is not usable until the job
// flips it ACTIVE, a takeover loads again what the recorded progress does
// not cover (a batch counts only once all its writes returned), and each
// write is fenced on the target's version like a batch (ADR 0024). The
// first error is returned (others may have landed: the caller rewrites
// the whole batch, blind puts of the same items).
func (m *Manager) writeEach(ctx context.Context, batch []backend.WriteItemParams) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(restoreItemWriters)
	for i := range batch {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			_, err := m.cfg.Backend.WriteItem(gctx, batch[i])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return context.Cause(ctx)
}

// spool copies one object into the spool directory.
func spool(ctx context.Context, m *Manager, dir, key string) error {
	if strings.Contains(key, "..") {
		return fmt.Errorf("restore: refusing object key %q", key)
	}
	path := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	rc, err := m.st.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("restore: spooling %s: %w", key, err)
	}
	return f.Close()
}

// dirSource reads spooled objects for the format reader.
type dirSource string

func (d dirSource) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(string(d), filepath.FromSlash(key)))
}

func (d dirSource) Size(ctx context.Context, key string) (int64, error) {
	fi, err := os.Stat(filepath.Join(string(d), filepath.FromSlash(key)))
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
