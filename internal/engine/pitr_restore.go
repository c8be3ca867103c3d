package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// RestoreTableToPointInTimeInput is the request of
// RestoreTableToPointInTime; the overrides are RestoreTableFromBackup's.
type RestoreTableToPointInTimeInput struct {
	SourceTableArn                *string                `json:"SourceTableArn"`
	SourceTableName               *string                `json:"SourceTableName"`
	TargetTableName               *string                `json:"TargetTableName"`
	RestoreDateTime               *float64               `json:"RestoreDateTime"`
	UseLatestRestorableTime       *bool                  `json:"UseLatestRestorableTime"`
	BillingModeOverride           *string                `json:"BillingModeOverride"`
	GlobalSecondaryIndexOverride  []GlobalSecondaryIndex `json:"GlobalSecondaryIndexOverride"`
	LocalSecondaryIndexOverride   []LocalSecondaryIndex  `json:"LocalSecondaryIndexOverride"`
	ProvisionedThroughputOverride *ProvisionedThroughput `json:"ProvisionedThroughputOverride"`
	OnDemandThroughputOverride    json.RawMessage        `json:"OnDemandThroughputOverride"`
	SSESpecificationOverride      *SSESpecification      `json:"SSESpecificationOverride"`
}

type RestoreTableToPointInTimeOutput struct {
	TableDescription *TableDescription `json:"TableDescription"`
}

// RestoreTableToPointInTime creates a table holding the source table's
// items as they were at an instant of its restorable window
// (docs/backup-design.md section 7): the target is created in CREATING
// with a RestoreSummary (SourceTableArn, RestoreDateTime the instant) and
// a restore job loads the newest base at or before the instant, replays
// the shipped change log up to it and flips the table ACTIVE. As on the
// service, the key schema, indexes and capacity settings are restored
// (the source's as they are now, with RestoreTableFromBackup's
// overrides); tags, TTL, streams and the point-in-time recovery setting
// are not.
func (e *Engine) RestoreTableToPointInTime(ctx context.Context, account string, in *RestoreTableToPointInTimeInput) (*RestoreTableToPointInTimeOutput, error) {
	over := &RestoreTableFromBackupInput{TargetTableName: in.TargetTableName, BillingModeOverride: in.BillingModeOverride,
		GlobalSecondaryIndexOverride: in.GlobalSecondaryIndexOverride, LocalSecondaryIndexOverride: in.LocalSecondaryIndexOverride,
		ProvisionedThroughputOverride: in.ProvisionedThroughputOverride, OnDemandThroughputOverride: in.OnDemandThroughputOverride,
		SSESpecificationOverride: in.SSESpecificationOverride}
	var c constraintErrors
	checkTableName(&c, "targetTableName", in.TargetTableName)
	if in.SourceTableName != nil {
		checkTableName(&c, "sourceTableName", in.SourceTableName)
	}
	if a := in.SourceTableArn; a != nil && (len(*a) < 1 || len(*a) > 1024) {
		c.add(*a, "sourceTableArn", "Member must have length "+map[bool]string{true: "greater than or equal to 1", false: "less than or equal to 1024"}[len(*a) < 1])
	}
	checkRestoreOverrides(&c, over)
	if err := c.err(); err != nil {
		return nil, err
	}
	switch {
	case in.SourceTableArn != nil && in.SourceTableName != nil:
		return nil, validationf("Must provide exactly one of: sourceTableArn, sourceTableName")
	case in.SourceTableArn == nil && in.SourceTableName == nil:
		return nil, validationf("Must provide exactly one of: sourceTableArn, sourceTableName")
	}
	latest := in.UseLatestRestorableTime != nil && *in.UseLatestRestorableTime
	switch {
	case latest && in.RestoreDateTime != nil:
		return nil, validationf("Invalid Request: Either one of RestoreDateTime or UseLatestRestorableTime must be specified, but not both")
	case !latest && in.RestoreDateTime == nil:
		return nil, validationf("Invalid Request: Either one of RestoreDateTime or UseLatestRestorableTime must be specified, but not both")
	}
	if in.RestoreDateTime != nil && (math.IsNaN(*in.RestoreDateTime) || math.IsInf(*in.RestoreDateTime, 0)) {
		return nil, invalidParam("RestoreDateTime is not a valid timestamp")
	}
	srcName := ""
	if in.SourceTableName != nil {
		srcName = *in.SourceTableName
	} else {
		srcName = tableNameOrArn(*in.SourceTableArn)
		if srcName == *in.SourceTableArn || *in.SourceTableArn != e.tableArn(account, srcName) {
			// Not a table ARN of this account and region: no such table.
			return nil, newErr(CodeTableNotFound, "Table not found: %s", *in.SourceTableArn)
		}
	}
	src, err := e.pitrSource(ctx, account, srcName, in.SourceTableArn)
	if err != nil {
		return nil, err
	}
	w := src.window
	if w.Latest.IsZero() {
		return nil, newErr(CodePITRUnavailable, "Point in time recovery is not yet available for this source table: %s "+
			"(its history has no base in the backup store yet)", srcName)
	}
	at := w.Latest
	if !latest {
		at = time.UnixMilli(int64(math.Round(*in.RestoreDateTime * 1000)))
		if at.Before(w.Earliest) || at.After(w.Latest) {
			return nil, newErr(CodeInvalidRestoreTime, "An invalid restore time was specified. RestoreDateTime must be between "+
				"EarliestRestorableDateTime and LatestRestorableDateTime (%s and %s)",
				w.Earliest.UTC().Format(time.RFC3339Nano), w.Latest.UTC().Format(time.RFC3339Nano))
		}
	}
	name := *in.TargetTableName
	if err := e.restoreTargetFree(ctx, account, name); err != nil {
		return nil, err
	}
	d, err := e.restoredDescription(account, name, &backend.BackupRecord{TableName: srcName}, src.desc, over)
	if err != nil {
		return nil, err
	}
	d.RestoreSummary = &RestoreSummary{SourceTableArn: src.desc.TableArn, RestoreDateTime: epochSeconds(at), RestoreInProgress: true}
	err = e.pitrSvc.RestoreToPointInTime(ctx, src.hist, at, account, name, func(ctx context.Context, job string) (*backend.Table, error) {
		raw, err := json.Marshal(&storedTable{Desc: *d, RestoreJob: job})
		if err != nil {
			return nil, err
		}
		res, err := e.backend.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: name, Desc: raw})
		if err != nil {
			return nil, err
		}
		return res.Table, nil
	})
	e.tables.drop(account, name)
	if err != nil {
		if backend.IsKind(err, backend.KindTableExists) {
			return nil, newErr(CodeTableAlreadyExists, "Table already exists: %s", name)
		}
		return nil, backupErr(err, name)
	}
	return &RestoreTableToPointInTimeOutput{TableDescription: d}, nil
}

// pitrRestoreSource is the source of a point-in-time restore: its
// description, its history and the history's window.
type pitrRestoreSource struct {
	desc   *TableDescription
	hist   PITRHistory
	window PITRWindow
}

// pitrSource finds a restore's source: the table of the catalog with
// point-in-time recovery on, or, when the catalog has no such table and
// the source is named by its ARN, the newest history of that ARN in the
// store (a table deleted, or known only from a store this server
// adopted).
func (e *Engine) pitrSource(ctx context.Context, account, name string, arn *string) (*pitrRestoreSource, error) {
	e.tables.drop(account, name)
	t, err := e.loadTable(ctx, account, name)
	if err == nil {
		p := t.stored.PITR
		if p == nil {
			return nil, newErr(CodePITRUnavailable, "Point in time recovery has not yet been enabled for this source table: %s", name)
		}
		if err := e.pitrAvailable(); err != nil {
			return nil, err
		}
		w, err := e.pitrSvc.Window(ctx, t.ref, p.Days)
		if err != nil {
			return nil, err
		}
		return &pitrRestoreSource{desc: &t.stored.Desc, window: w,
			hist: PITRHistory{Ref: t.ref, TableID: t.stored.Desc.TableId, Since: time.UnixMilli(p.Since)}}, nil
	}
	if ee, ok := err.(*Error); !ok || ee.Code != CodeResourceNotFound {
		return nil, err
	}
	if arn == nil || e.pitrSvc == nil {
		return nil, newErr(CodeTableNotFound, "Table not found: %s", name)
	}
	// Named by its ARN and not in the catalog: its newest history in the
	// store, if any.
	h, err := e.pitrSvc.StoredHistory(ctx, account, name, *arn)
	if err != nil {
		return nil, err
	}
	if h == nil {
		return nil, newErr(CodeTableNotFound, "Table not found: %s", name)
	}
	var d TableDescription
	if err := json.Unmarshal(h.Description, &d); err != nil {
		return nil, fmt.Errorf("the history's source table description: %w", err)
	}
	d.TableArn = *arn
	return &pitrRestoreSource{desc: &d, window: h.Window, hist: PITRHistory{Prefix: h.Prefix}}, nil
}
