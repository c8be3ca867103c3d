package backend

import (
	"context"
	"slices"
	"strings"
	"time"
)

// BackupCatalog is the optional capability of keeping the catalog rows of
// backups with their job claims (docs/backup-design.md section 4): a
// backup's status and the claim of the job working on it (owner,
// generation, heartbeat on the database's clock). Every status write is
// conditioned on the generation and the expected status, so a job that
// lost its claim can no longer write (fencing). A backend without it
// cannot serve backups (Capabilities.Backups is nil).
type BackupCatalog interface {
	// InsertBackup inserts a new row with a claim by Record.Owner:
	// generation 1, heartbeat now on the database's clock. The ARN is
	// unique; a second insert of one ARN is KindInternal.
	InsertBackup(ctx context.Context, p InsertBackupParams) (*BackupRecord, error)
	// GetBackup reads one row by ARN; nil (no error) when absent.
	GetBackup(ctx context.Context, p GetBackupParams) (*BackupRecord, error)
	// ListBackups lists rows in ascending ARN byte order, filtered as
	// the params say.
	ListBackups(ctx context.Context, p ListBackupsParams) ([]BackupRecord, error)
	// UpdateBackup writes a new status (and counters) if and only if the
	// row is at Generation and in Status; the heartbeat is renewed with
	// it. Matched is false (and nothing is written) otherwise.
	UpdateBackup(ctx context.Context, p UpdateBackupParams) (*BackupWriteResult, error)
	// RemoveBackup deletes the row for good (no DELETED tombstone, which
	// would make the reconciler delete the backup's objects) if and only
	// if it is at Generation and in Status; Matched false otherwise. The
	// objects in the store are not touched (`backup sync --forget-*`).
	RemoveBackup(ctx context.Context, p RemoveBackupParams) (*BackupWriteResult, error)
	// HeartbeatBackup renews the claim of Owner at Generation; Matched is
	// false when the claim is no longer theirs (the job must stop).
	HeartbeatBackup(ctx context.Context, p HeartbeatBackupParams) (*BackupWriteResult, error)
	// ClaimBackup takes the row over for Owner under generation+1 if and
	// only if it is still at Generation and in Status and its heartbeat is
	// older than StaleAfter on the database's clock (StaleAfter 0: any
	// heartbeat, for a new job on an idle row such as a delete). Among
	// concurrent claimers of one generation exactly one matches.
	ClaimBackup(ctx context.Context, p ClaimBackupParams) (*BackupWriteResult, error)
	// CatalogID answers this catalog's identity, creating it (from
	// NewID) the first time; concurrent first calls agree on one id.
	CatalogID(ctx context.Context, newID string) (string, error)
}

// Backup row statuses.
const (
	BackupCreating  = "CREATING"
	BackupAvailable = "AVAILABLE"
	BackupFailed    = "FAILED"
	BackupDeleting  = "DELETING"
	BackupDeleted   = "DELETED"
)

// BackupRecord is one backup's catalog row.
type BackupRecord struct {
	ARN       string
	Account   string
	TableName string
	// TableID is the source table incarnation.
	TableID  int64
	BackupID string
	Name     string
	// Type is the DynamoDB BackupType ("USER").
	Type   string
	Status string
	// CreatedAt is the snapshot instant (millisecond precision).
	CreatedAt time.Time
	SizeBytes int64
	ItemCount int64
	// TableDesc is the source table's description at the instant (owned
	// by the engine, opaque here).
	TableDesc []byte
	// StoreID names the store that holds the backup; Prefix its objects.
	StoreID string
	Prefix  string
	// Message is why a backup FAILED ("" otherwise).
	Message string
	// ExpiresAt, when not zero, is when the reconciler deletes the
	// backup (BackupExpiryDateTime): SYSTEM backups and those of backup
	// plans expire; USER backups do not.
	ExpiresAt time.Time
	// Plan names the backup plan that took the backup ("" for others).
	Plan string
	// The claim.
	Owner      string
	Generation int64
	Heartbeat  time.Time
}

type InsertBackupParams struct{ Record BackupRecord }

type GetBackupParams struct{ ARN string }

type ListBackupsParams struct {
	// Account limits to one account ("" = every account, for the
	// reconciler).
	Account string
	// TableName limits to one source table ("" = all).
	TableName string
	// Statuses limits to these statuses (empty = all).
	Statuses []string
	// Types limits to these backup types (empty = all).
	Types []string
	// CreatedFrom and CreatedTo bound CreatedAt inclusively (zero: open).
	CreatedFrom, CreatedTo time.Time
	// StartAfter resumes strictly after this ARN.
	StartAfter string
	// Limit bounds the rows (0 = all).
	Limit int
}

type UpdateBackupParams struct {
	ARN        string
	Generation int64
	Status     string
	NewStatus  string
	// SizeBytes and ItemCount replace the counters when not nil; Message
	// likewise.
	SizeBytes, ItemCount *int64
	Message              *string
	// StoreID, when not nil, re-points the row at another store (`backup
	// sync --move-store`; the prefix is the same in every store).
	StoreID *string
}

// RemoveBackupParams name the row RemoveBackup deletes and the state it
// must be in.
type RemoveBackupParams struct {
	ARN        string
	Generation int64
	Status     string
}

type HeartbeatBackupParams struct {
	ARN        string
	Owner      string
	Generation int64
}

type ClaimBackupParams struct {
	ARN        string
	Owner      string
	Generation int64
	Status     string
	StaleAfter time.Duration
	// NewStatus, when not "", is written with the claim.
	NewStatus string
}

// BackupWriteResult tells whether a conditional write matched, and the
// row after it (nil when the row does not exist).
type BackupWriteResult struct {
	Matched bool
	Record  *BackupRecord
}

// Selects tells whether the filters of p select r (its account, table,
// status and creation instant, and StartAfter; CreatedAt has millisecond
// precision, so CreatedFrom counts from its millisecond).
func (p ListBackupsParams) Selects(r *BackupRecord) bool {
	switch {
	case p.Account != "" && r.Account != p.Account,
		p.TableName != "" && r.TableName != p.TableName,
		len(p.Statuses) > 0 && !slices.Contains(p.Statuses, r.Status),
		len(p.Types) > 0 && !slices.Contains(p.Types, r.Type),
		!p.CreatedFrom.IsZero() && r.CreatedAt.Before(p.CreatedFrom.Truncate(time.Millisecond)),
		!p.CreatedTo.IsZero() && r.CreatedAt.After(p.CreatedTo),
		p.StartAfter != "" && r.ARN <= p.StartAfter:
		return false
	}
	return true
}

// FilterBackups answers ListBackups from every row of a catalog: the rows
// p selects, in ascending ARN order, at most p.Limit. For a backend that
// reads its catalog whole (it holds backups, not items).
func FilterBackups(rows []BackupRecord, p ListBackupsParams) []BackupRecord {
	out := slices.DeleteFunc(rows, func(r BackupRecord) bool { return !p.Selects(&r) })
	slices.SortFunc(out, func(a, b BackupRecord) int { return strings.Compare(a.ARN, b.ARN) })
	if p.Limit > 0 && len(out) > p.Limit {
		out = out[:p.Limit]
	}
	return out
}

// RestoreCatalog keeps the rows of restore jobs with their claims, as
// BackupCatalog does for backups. Part of the backup capability: a
// backend with a BackupCatalog has it too.
type RestoreCatalog interface {
	// InsertRestore inserts a RUNNING job claimed by Record.Owner
	// (generation 1, heartbeat now on the database's clock).
	InsertRestore(ctx context.Context, r RestoreRecord) (*RestoreRecord, error)
	// ListRestores lists jobs in the given statuses (all when empty), by id.
	ListRestores(ctx context.Context, statuses []string) ([]RestoreRecord, error)
	// UpdateRestore writes NewStatus (and Message) iff the job is at
	// Generation and in Status.
	UpdateRestore(ctx context.Context, p UpdateBackupParams) (*RestoreWriteResult, error)
	// HeartbeatRestore renews Owner's claim at Generation.
	HeartbeatRestore(ctx context.Context, p HeartbeatBackupParams) (*RestoreWriteResult, error)
	// ClaimRestore takes a job over as ClaimBackup does.
	ClaimRestore(ctx context.Context, p ClaimBackupParams) (*RestoreWriteResult, error)
	// RecordRestoreProgress writes Loaded iff the job is RUNNING, claimed
	// by Owner at Generation, and its recorded progress is not ahead of
	// Loaded (progress never moves back). The heartbeat is left alone.
	RecordRestoreProgress(ctx context.Context, p RestoreProgressParams) (*RestoreWriteResult, error)
}

// RestoreProgressParams: the restore job ID's owner at Generation records
// that the first Loaded items of the backup (in its item order) are
// durable in the target (ADR 0027).
type RestoreProgressParams struct {
	ID         string
	Owner      string
	Generation int64
	Loaded     int64
}

// Restore job statuses.
const (
	RestoreRunning = "RUNNING"
	RestoreDone    = "DONE"
	RestoreFailed  = "FAILED"
)

// RestoreRecord is one restore job's row. The params types of the backup
// rows are reused for its conditional writes, their ARN field holding the
// job's ID.
type RestoreRecord struct {
	ID string
	// The target table. TableID is 0 when the row is written before the
	// target exists (the restore job identifies its target by name).
	Account   string
	TableName string
	TableID   int64
	BackupARN string
	Status    string
	Message   string
	// Loaded is the recorded progress: the first Loaded items of the
	// backup, in its item order, are durable in the target (ADR 0027).
	// A claim keeps it; a job that takes over resumes after it.
	Loaded int64
	// The claim.
	Owner      string
	Generation int64
	Heartbeat  time.Time
}

// RestoreWriteResult tells whether a conditional write matched, and the
// row after it (nil when absent).
type RestoreWriteResult struct {
	Matched bool
	Record  *RestoreRecord
}

// FilterRestores answers ListRestores from every row of a catalog: the
// rows in one of statuses (all when empty), in ascending id order.
func FilterRestores(rows []RestoreRecord, statuses []string) []RestoreRecord {
	out := slices.DeleteFunc(rows, func(r RestoreRecord) bool {
		return len(statuses) > 0 && !slices.Contains(statuses, r.Status)
	})
	slices.SortFunc(out, func(a, b RestoreRecord) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// ExpiryMillis is how a backend stores BackupRecord.ExpiresAt: Unix
// milliseconds, 0 for never.
func ExpiryMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// ExpiryTime reads ExpiryMillis back.
func ExpiryTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
