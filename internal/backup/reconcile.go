package backup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// Reconcile runs the reconciler's backup duties once (docs/backup-design.md
// section 4), only on rows of the configured store and only while the store
// is healthy:
//
//  0. AVAILABLE backups past their expiry (SYSTEM backups) are deleted
//     as DeleteBackup does, unless a restore reads them; of several
//     servers, the one whose claim matches deletes (a plan's backups
//     are left to its retention);
//  1. CREATING backups whose claim is stale become FAILED under a new
//     generation, and their objects are removed;
//  2. DELETING rows whose claim is stale: the delete is finished;
//  3. DELETED and FAILED rows whose prefix still holds objects (a job
//     fenced after its owner was declared dead may upload late): removed.
//
// Restore duties (4-6) come with the restore job; duty 7, at most every
// ten minutes, prunes point-in-time recovery histories past their
// recovery window (pitr_prune.go).
//
// Duty 3 looks at every DELETED and FAILED row on the first pass of a
// process and afterwards only at rows whose last status write is recent
// (within 2×StaleAfter + 1 minute): a fenced job notices within one
// heartbeat interval, so late uploads come soon after the row changed.
func (m *Manager) Reconcile(ctx context.Context) error {
	full := !m.sweptOnce.Swap(true)
	if err := m.Healthy(ctx); err != nil {
		return err
	}
	p := m.storeID.Load()
	if p == nil {
		return errors.New("backup: store id unknown")
	}
	storeID := *p
	rows, err := m.cat.ListBackups(ctx, backend.ListBackupsParams{
		Statuses: []string{backend.BackupCreating, backend.BackupDeleting, backend.BackupDeleted, backend.BackupFailed}})
	if err != nil {
		return err
	}
	errs := []error{m.expire(ctx, storeID)}
	for _, r := range rows {
		if r.StoreID != storeID {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if m.ownLive(r.ARN, r.Owner, r.Generation) {
			continue // a job of this process: alive, whatever its heartbeat says
		}
		switch r.Status {
		case backend.BackupCreating:
			res, err := m.cat.ClaimBackup(ctx, backend.ClaimBackupParams{ARN: r.ARN, Owner: m.cfg.Owner, Generation: r.Generation,
				Status: backend.BackupCreating, NewStatus: backend.BackupFailed, StaleAfter: m.cfg.StaleAfter})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !res.Matched {
				continue
			}
			m.met.reconciled.WithLabelValues("failed_stale_backup").Inc()
			m.log.Warn("backup reconciler: a backup job's owner stopped; marked FAILED", "backup", r.ARN, "owner", r.Owner)
			if err := m.st.DeletePrefix(ctx, r.Prefix); err != nil {
				errs = append(errs, err)
			}
		case backend.BackupDeleting:
			res, err := m.cat.ClaimBackup(ctx, backend.ClaimBackupParams{ARN: r.ARN, Owner: m.cfg.Owner, Generation: r.Generation,
				Status: backend.BackupDeleting, StaleAfter: m.cfg.StaleAfter})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !res.Matched {
				continue
			}
			m.met.reconciled.WithLabelValues("finished_delete").Inc()
			m.log.Warn("backup reconciler: finishing an interrupted delete", "backup", r.ARN)
			if err := m.finishDelete(ctx, *res.Record); err != nil {
				errs = append(errs, err)
			}
		default:
			if !full && time.Since(r.Heartbeat) > 2*m.cfg.StaleAfter+time.Minute {
				continue
			}
			left, err := m.st.List(ctx, r.Prefix)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if len(left) > 0 {
				m.met.reconciled.WithLabelValues("removed_orphans").Inc()
				m.log.Warn("backup reconciler: removing objects of a backup that is gone", "backup", r.ARN, "status", r.Status, "objects", len(left))
				if err := m.st.DeletePrefix(ctx, r.Prefix); err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	errs = append(errs, m.reconcileRestores(ctx), m.reconcileImports(ctx))
	m.mu.Lock()
	x := m.exports
	m.mu.Unlock()
	if x != nil {
		errs = append(errs, x.reconcile(ctx))
	}
	if s := m.pitr.Load(); s != nil {
		errs = append(errs, s.maybePrune(ctx))
	}
	return errors.Join(errs...)
}

// reconcileRestores runs duties 4 to 6: RUNNING restore jobs whose claim
// is stale are taken over and resumed after their recorded progress (the
// claim keeps it; ADR 0027), or failed (and
// their target removed) when the backup is gone; a job whose target was
// never created (the row is written first) is failed, so no target ever
// exists without a job; spool directories of owners without a running
// job are removed.
func (m *Manager) reconcileRestores(ctx context.Context) error {
	if m.rcat == nil {
		return nil
	}
	rows, err := m.rcat.ListRestores(ctx, []string{backend.RestoreRunning})
	if err != nil {
		return err
	}
	live := map[string]bool{m.cfg.Owner: true}
	var errs []error
	for _, r := range rows {
		if m.ownLive(r.ID, r.Owner, r.Generation) {
			continue // a job of this process: alive, whatever its heartbeat says
		}
		res, err := m.rcat.ClaimRestore(ctx, backend.ClaimBackupParams{ARN: r.ID, Owner: m.cfg.Owner, Generation: r.Generation,
			Status: backend.RestoreRunning, StaleAfter: m.cfg.StaleAfter})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !res.Matched {
			live[r.Owner] = true
			continue
		}
		job := *res.Record
		m.met.reconciled.WithLabelValues("resumed_restore").Inc()
		m.log.Warn("backup reconciler: a restore job's owner stopped; taking it over", "target", r.TableName, "backup", r.BackupARN, "owner", r.Owner)
		fail := func(why string) {
			m.rcat.UpdateRestore(ctx, backend.UpdateBackupParams{ARN: job.ID, Generation: job.Generation,
				Status: backend.RestoreRunning, NewStatus: backend.RestoreFailed, Message: &why})
		}
		// The target is found by name and must be this backup's restore in
		// progress (its row may predate it: the job row is written first).
		cur, err := m.cfg.Backend.GetTable(ctx, backend.GetTableParams{Account: r.Account, Name: r.TableName})
		if err != nil || m.cfg.Restorer == nil || !m.cfg.Restorer.IsRestoreTarget(cur.Table, r.BackupARN) {
			fail("the target table is gone, or was never created")
			continue
		}
		var b *backend.BackupRecord
		if pb, ok := pitrJobRecord(r.BackupARN); ok {
			b = &pb // a point-in-time restore: the job plans it again from the store
		} else {
			b, err = m.cat.GetBackup(ctx, backend.GetBackupParams{ARN: r.BackupARN})
		}
		if err != nil || b == nil || b.Status != backend.BackupAvailable {
			fail("the backup is no longer available")
			m.dropTarget(ctx, cur.Table)
			continue
		}
		release, err := m.acquireSlot()
		if err != nil {
			continue // no slot: the claim goes stale again and is retried
		}
		// Fence the former owner: move the target's description version,
		// so its item writes (fenced on the version it loads at, ADR 0010)
		// and its flip to ACTIVE are refused from now on.
		up, err := m.cfg.Backend.UpdateTable(ctx, backend.UpdateTableParams{Account: r.Account, Name: r.TableName,
			Fn: func(old *backend.Table) ([]byte, error) {
				if old.ID != cur.Table.ID || !m.cfg.Restorer.IsRestoreTarget(old, r.BackupARN) {
					return nil, errors.New("restore: the target table changed during the takeover")
				}
				return old.Desc, nil
			}})
		if err != nil {
			release()
			errs = append(errs, err)
			continue // the claim goes stale again and is retried
		}
		m.startRestore(*b, up.Table, job, release)
	}
	// Duty 6: spool directories of this catalog's owners that run nothing.
	entries, _ := os.ReadDir(m.cfg.SpoolDir)
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || m.catalogID == "" || !strings.HasPrefix(name, m.spoolDirPrefix()) {
			continue // another catalog's (or an older version's): not ours to judge
		}
		rest := strings.TrimPrefix(name, m.spoolDirPrefix())
		i := strings.LastIndexByte(rest, '-')
		if i < 0 || live[rest[:i]] {
			continue
		}
		m.met.reconciled.WithLabelValues("removed_spool").Inc()
		os.RemoveAll(filepath.Join(m.cfg.SpoolDir, name))
	}
	return errors.Join(errs...)
}

// expire runs duty 0: AVAILABLE backups of this store whose expiry has
// passed are deleted.
func (m *Manager) expire(ctx context.Context, storeID string) error {
	rows, err := m.cat.ListBackups(ctx, backend.ListBackupsParams{Statuses: []string{backend.BackupAvailable}})
	if err != nil {
		return err
	}
	now := time.Now
	if m.cfg.Now != nil {
		now = m.cfg.Now
	}
	var errs []error
	for _, r := range rows {
		// A plan's backups are its retention's (which keeps a table's
		// last good backup whatever its age), not the expiry's.
		if r.StoreID != storeID || r.ExpiresAt.IsZero() || r.ExpiresAt.After(now()) || r.Plan != "" || m.RestoringFrom(r.ARN) {
			continue
		}
		res, err := m.DeleteBackup(ctx, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res.Matched {
			m.met.reconciled.WithLabelValues("expired").Inc()
			m.log.Info("backup reconciler: deleting an expired backup", "backup", r.ARN, "type", r.Type, "plan", r.Plan,
				"expired", r.ExpiresAt)
		}
	}
	return errors.Join(errs...)
}
