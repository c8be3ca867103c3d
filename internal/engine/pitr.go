package engine

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// Point-in-time recovery (docs/adr/0046-point-in-time-recovery.md,
// docs/backup-design.md section 7). The engine owns the setting (in the
// table's stored description), the wire shapes and the records: while
// the setting is on, every write of the table appends a change record
// with the full new and old images, whether or not a stream is enabled.
// Shipping the log to the store and restoring from it are the backup
// jobs', reached through PITRService.

const (
	minRecoveryDays = 1
	maxRecoveryDays = 35
)

// PITRWindow is what the store holds of a table's history.
type PITRWindow struct {
	// Earliest and Latest bound the instants a restore can reach; both
	// zero while nothing is restorable yet (no base shipped).
	Earliest, Latest time.Time
	// Shipped is the log time (LogRecord.At) of the last record shipped;
	// the change log may be trimmed before it, never after. Zero when
	// nothing is shipped.
	Shipped time.Time
}

// PITRService is what point-in-time recovery needs of the backup jobs;
// the server installs it (SetPITR) when a store is configured and the
// backend has the change log and snapshot capabilities.
type PITRService interface {
	// Window answers the table incarnation's restorable window for a
	// recovery period of days.
	Window(ctx context.Context, ref backend.TableRef, days int64) (PITRWindow, error)
	// RestoreToPointInTime starts a restore job of the source's history
	// to the instant at into the table account/name, as
	// BackupService.RestoreTable does for a backup: it records the job,
	// then calls create with the job's key (which the target's
	// description keeps, so the job recognizes its target) to create the
	// target in CREATING. create's error is returned unchanged.
	RestoreToPointInTime(ctx context.Context, src PITRHistory, at time.Time, account, name string,
		create func(ctx context.Context, job string) (*backend.Table, error)) error
	// StoredHistory finds in the store the newest history of the table
	// account/name whose ARN is arn, for a restore whose source is not in
	// the catalog (deleted, or known only from an adopted store); nil
	// when the store has none.
	StoredHistory(ctx context.Context, account, name, arn string) (*StoredPITRHistory, error)
}

// StoredPITRHistory is a history found in the store alone.
type StoredPITRHistory struct {
	// Prefix names the history in the store (PITRHistory.Prefix).
	Prefix string
	// Description is the source's DynamoDB TableDescription as the
	// history's head keeps it.
	Description []byte
	Window      PITRWindow
}

// PITRHistory names a table incarnation's history in the store.
type PITRHistory struct {
	Ref     backend.TableRef
	TableID string
	// Since is when point-in-time recovery was turned on.
	Since time.Time
	// Prefix, when set, names the history in the store (a history found
	// by StoredHistory); otherwise it follows from the fields above.
	Prefix string
}

// SetPITR installs the point-in-time recovery service; without it,
// enabling point-in-time recovery answers
// ContinuousBackupsUnavailableException. Call it before serving.
func (e *Engine) SetPITR(s PITRService) { e.pitrSvc = s }

// pitrAvailable tells whether point-in-time recovery can be turned on.
func (e *Engine) pitrAvailable() error {
	if e.pitrSvc != nil {
		return nil
	}
	why := "no backup store is configured ([backup.store])"
	if e.backupsOff != "" {
		why = e.backupsOff
	} else if _, ok := e.changeLog(); !ok {
		why = "the " + e.backend.Name() + " storage backend has no change log"
	}
	return newErr(CodeContinuousBackupsUnavailable, "Point-in-time recovery is unavailable on this server: %s", why)
}

// continuousBackups describes a table's continuous backups: on-demand
// backups are always ENABLED; point-in-time recovery with its period and
// window while it is on.
func (e *Engine) continuousBackups(ctx context.Context, t *table) (*ContinuousBackupsOutput, error) {
	d := &PointInTimeRecoveryDescription{PointInTimeRecoveryStatus: "DISABLED"}
	if p := t.stored.PITR; p != nil {
		days := p.Days
		d.PointInTimeRecoveryStatus = "ENABLED"
		d.RecoveryPeriodInDays = &days
		if e.pitrSvc != nil {
			w, err := e.pitrSvc.Window(ctx, t.ref, days)
			if err != nil {
				return nil, err
			}
			if !w.Latest.IsZero() {
				ea, la := epochSeconds(w.Earliest), epochSeconds(w.Latest)
				d.EarliestRestorableDateTime, d.LatestRestorableDateTime = &ea, &la
			}
		}
	}
	return &ContinuousBackupsOutput{ContinuousBackupsDescription: &ContinuousBackupsDescription{
		ContinuousBackupsStatus: "ENABLED", PointInTimeRecoveryDescription: d}}, nil
}

// trimBound is the time before which a table's change log may be
// trimmed: the stream retention's cut, bounded while point-in-time
// recovery is on by the last shipped record (nothing unshipped is ever
// trimmed). ok is false when nothing may be trimmed.
func (e *Engine) trimBound(ctx context.Context, t *table, retentionCut time.Time, streams bool) (time.Time, bool, error) {
	if !t.pitr {
		return retentionCut, streams, nil
	}
	if e.pitrSvc == nil {
		return time.Time{}, false, nil
	}
	w, err := e.pitrSvc.Window(ctx, t.ref, t.stored.PITR.Days)
	if err != nil || w.Shipped.IsZero() {
		return time.Time{}, false, err
	}
	if streams && retentionCut.Before(w.Shipped) {
		return retentionCut, true, nil
	}
	return w.Shipped, true, nil
}

// PITRTableInfo is a table with point-in-time recovery on, as shipping
// needs it.
type PITRTableInfo struct {
	Ref      backend.TableRef
	TableID  string // the DynamoDB TableId
	TableArn string
	Days     int64
	Since    time.Time
	// Description is the DynamoDB TableDescription (JSON).
	Description []byte
}

// PITRTables lists the tables with point-in-time recovery on, in every
// account the server serves.
func (e *Engine) PITRTables(ctx context.Context) ([]PITRTableInfo, error) {
	var out []PITRTableInfo
	var ferr error
	e.forEachTable(ctx, func(t *table) {
		p := t.stored.PITR
		if p == nil || ferr != nil {
			return
		}
		desc, err := json.Marshal(t.describe())
		if err != nil {
			ferr = err
			return
		}
		out = append(out, PITRTableInfo{Ref: t.ref, TableID: t.stored.Desc.TableId, TableArn: t.stored.Desc.TableArn,
			Days: p.Days, Since: time.UnixMilli(p.Since), Description: desc})
	})
	if ferr == nil {
		ferr = ctx.Err()
	}
	return out, ferr
}

// PITRRecordFields is a change record as a point-in-time recovery
// segment line holds it.
type PITRRecordFields struct {
	Event                    string // INSERT, MODIFY, REMOVE
	Keys, NewImage, OldImage []byte // canonical DynamoDB-JSON; nil when absent
	Txn                      []byte // the transaction id, nil outside a transaction
	TxnCount                 int
	// Time is when the write was decided (the engine's clock).
	Time            time.Time
	Hidden, Service bool
}

// PITRRecord decodes a change record written while point-in-time
// recovery was on. A record without full images (written before PITR was
// turned on) is refused: it cannot be replayed.
func (e *Engine) PITRRecord(data []byte) (PITRRecordFields, error) {
	r, err := decodeRecord(data)
	if err != nil {
		return PITRRecordFields{}, err
	}
	if r.flags&flagFull == 0 {
		return PITRRecordFields{}, errors.New("engine: a change record without full images (written while point-in-time recovery was off)")
	}
	f := PITRRecordFields{Keys: r.keys, Txn: r.txn, TxnCount: r.txnCount, Time: time.UnixMilli(r.ms),
		Hidden: r.flags&flagHidden != 0, Service: r.service}
	switch r.event {
	case eventInsert:
		f.Event = "INSERT"
	case eventModify:
		f.Event = "MODIFY"
	default:
		f.Event = "REMOVE"
	}
	if len(r.newRaw) > 0 {
		f.NewImage = r.newRaw
	}
	if len(r.oldRaw) > 0 {
		f.OldImage = r.oldRaw
	}
	return f, nil
}

// systemBackupWait bounds how long DeleteTable waits for the SYSTEM
// backup of a table with point-in-time recovery to be complete.
const systemBackupWait = 10 * time.Minute
