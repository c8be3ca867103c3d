package backup

import (
	"context"
	"errors"

	"github.com/extenddb/extenddb/internal/storage"
)

// Reconcile runs the reconciler's backup duties once (docs/backup-design.md
// section 4), only on rows of the configured store and only while the store
// is healthy:
//
//  1. CREATING backups whose claim is stale become FAILED under a new
//     generation, and their objects are removed;
//  2. DELETING rows whose claim is stale: the delete is finished;
//  3. DELETED and FAILED rows whose prefix still holds objects (a job
//     fenced after its owner was declared dead may upload late): removed.
//
// Restore duties (4-6) come with the restore job.
func (m *Manager) Reconcile(ctx context.Context) error {
	if err := m.Healthy(ctx); err != nil {
		return err
	}
	p := m.storeID.Load()
	if p == nil {
		return errors.New("backup: store id unknown")
	}
	storeID := *p
	rows, err := m.cat.ListBackups(ctx, storage.ListBackupsParams{
		Statuses: []string{storage.BackupCreating, storage.BackupDeleting, storage.BackupDeleted, storage.BackupFailed}})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rows {
		if r.StoreID != storeID {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		switch r.Status {
		case storage.BackupCreating:
			res, err := m.cat.ClaimBackup(ctx, storage.ClaimBackupParams{ARN: r.ARN, Owner: m.cfg.Owner, Generation: r.Generation,
				Status: storage.BackupCreating, NewStatus: storage.BackupFailed, StaleAfter: m.cfg.StaleAfter})
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
		case storage.BackupDeleting:
			res, err := m.cat.ClaimBackup(ctx, storage.ClaimBackupParams{ARN: r.ARN, Owner: m.cfg.Owner, Generation: r.Generation,
				Status: storage.BackupDeleting, StaleAfter: m.cfg.StaleAfter})
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
	return errors.Join(errs...)
}
