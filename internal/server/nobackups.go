package server

import (
	"context"

	"github.com/extenddb/extenddb/internal/engine"
	"github.com/extenddb/extenddb/internal/storage"
)

// backupsAbsent is why the backend cannot serve backups, "" when it can:
// backups need the snapshot capability (one table as of one instant) and
// the backup catalog (docs/backup-design.md).
func backupsAbsent(b storage.Backend) string {
	_, snaps := storage.Snapshots(b)
	_, cat := storage.Backups(b)
	switch {
	case !snaps && !cat:
		return "it cannot read a table as of one instant (no snapshot capability) and keeps no backup catalog"
	case !snaps:
		return "it cannot read a table as of one instant (no snapshot capability)"
	case !cat:
		return "it keeps no backup catalog"
	}
	return ""
}

// noBackups answers the backup operations of a server whose backend lacks
// what backups need, with a storage error of kind KindUnsupported that the
// engine answers as a ValidationException naming the reason. ListBackups
// lists none: no backup can exist on such a backend.
type noBackups struct{ msg string }

var _ engine.BackupService = noBackups{}

func newNoBackups(backend, reason string) noBackups {
	return noBackups{msg: "Backups are not supported on the " + backend + " storage backend: " + reason +
		" (see docs/compatibility.md)"}
}

func (n noBackups) err() error { return storage.Errorf(storage.KindUnsupported, "%s", n.msg) }

func (n noBackups) CreateBackup(context.Context, string, string, string) (*storage.BackupRecord, error) {
	return nil, n.err()
}

func (n noBackups) GetBackup(context.Context, string) (*storage.BackupRecord, error) {
	return nil, n.err()
}

func (n noBackups) ListBackups(context.Context, storage.ListBackupsParams) ([]storage.BackupRecord, error) {
	return nil, nil
}

func (n noBackups) DeleteBackup(context.Context, storage.BackupRecord) (*storage.BackupWriteResult, error) {
	return nil, n.err()
}

func (n noBackups) RestoreTable(context.Context, storage.BackupRecord, string, string, func(context.Context) (*storage.Table, error)) error {
	return n.err()
}

func (n noBackups) RestoringFrom(string) bool { return false }
