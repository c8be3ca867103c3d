package backup

import (
	"context"
	"errors"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/format"
)

// ErrNotAvailable: DeleteBackup found the row in another state than the
// one it was read in (a concurrent delete or job).
var ErrNotAvailable = errors.New("backup: the backup is not AVAILABLE")

// DeleteBackup deletes an AVAILABLE backup (docs/backup-design.md section
// 4): within the call it claims the row at the generation it was read with
// and writes DELETING; the objects are then removed in the background
// (sidecar and manifest first, so a half-deleted backup reads as
// incomplete) and the row becomes DELETED. The returned result's Matched
// is false when the row changed since it was read; the caller re-reads.
func (m *Manager) DeleteBackup(ctx context.Context, rec backend.BackupRecord) (*backend.BackupWriteResult, error) {
	if m.ctx == nil {
		return nil, backend.Errorf(backend.KindUnavailable, "backup: the manager is not started")
	}
	if err := m.Healthy(ctx); err != nil {
		return nil, unavailable(err)
	}
	res, err := m.cat.ClaimBackup(ctx, backend.ClaimBackupParams{ARN: rec.ARN, Owner: m.cfg.Owner, Generation: rec.Generation,
		Status: backend.BackupAvailable, NewStatus: backend.BackupDeleting})
	if err != nil || !res.Matched {
		return res, err
	}
	m.hook(PointDeleteDeleting)
	m.met.running.WithLabelValues(kindDelete).Inc()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		start := time.Now()
		if err := m.finishDelete(m.ctx, *res.Record); err != nil {
			m.met.end(kindDelete, start, cause(m.ctx, err))
			m.log.Warn("backup delete: left for the reconciler", "backup", rec.ARN, "err", err)
			return
		}
		m.met.end(kindDelete, start, "ok")
	}()
	return res, nil
}

// finishDelete removes a DELETING backup's objects and writes DELETED
// under the claim's generation.
func (m *Manager) finishDelete(ctx context.Context, rec backend.BackupRecord) error {
	p := rec.Prefix + "/"
	for _, k := range []string{format.SidecarKey(p), format.ManifestKey(p)} {
		if err := m.st.DeletePrefix(ctx, k); err != nil {
			return err
		}
	}
	m.hook(PointDeleteNoManifest)
	if err := m.st.DeletePrefix(ctx, rec.Prefix); err != nil {
		return err
	}
	left, err := m.st.List(ctx, rec.Prefix)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return errors.New("backup delete: objects remain under the prefix")
	}
	_, err = m.cat.UpdateBackup(ctx, backend.UpdateBackupParams{ARN: rec.ARN, Generation: rec.Generation,
		Status: backend.BackupDeleting, NewStatus: backend.BackupDeleted})
	return err
}
