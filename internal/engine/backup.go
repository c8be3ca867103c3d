package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The on-demand backup operations (docs/adr/0015-backup-operations.md):
// the engine owns their wire shapes, validation, table rules and error
// wording; the jobs run in internal/backup, reached through BackupService,
// which the server fills (the engine never imports internal/backup, nor
// the reverse).

// BackupService is what the backup operations need of the backup jobs.
// internal/backup.Manager satisfies it. Errors are storage errors
// (KindTableNotFound, KindLimitExceeded, KindUnavailable for a store that
// cannot be used).
type BackupService interface {
	CreateBackup(ctx context.Context, account, table, name string) (*backend.BackupRecord, error)
	// CreateSystemBackup is CreateBackup for the SYSTEM backup that
	// DeleteTable keeps of a table with point-in-time recovery on,
	// expiring at expiresAt.
	CreateSystemBackup(ctx context.Context, account, table, name string, expiresAt time.Time) (*backend.BackupRecord, error)
	GetBackup(ctx context.Context, arn string) (*backend.BackupRecord, error)
	ListBackups(ctx context.Context, p backend.ListBackupsParams) ([]backend.BackupRecord, error)
	DeleteBackup(ctx context.Context, rec backend.BackupRecord) (*backend.BackupWriteResult, error)
	// RestoreTable records a restore job for the target table account/name,
	// then creates the target with create (in CREATING, with a
	// RestoreSummary) and starts loading the backup into it; the job flips
	// it ACTIVE through FinishRestore, or deletes it when the restore
	// fails. create's error is returned unchanged.
	RestoreTable(ctx context.Context, backup backend.BackupRecord, account, name string, create func(context.Context) (*backend.Table, error)) error
	// RestoringFrom tells whether a restore from the backup runs.
	RestoringFrom(arn string) bool
}

// SetBackups installs the backup jobs; without them every backup
// operation answers a ValidationException naming [backup.store]. Call it
// before serving.
func (e *Engine) SetBackups(s BackupService) { e.backups = s }

// SetBackupsUnavailable declares that this server cannot take backups
// although a store is configured, because its backend lacks a capability
// (reason names it, e.g. the snapshot capability); every backup operation
// then answers a ValidationException with the reason. Call it before
// serving.
func (e *Engine) SetBackupsUnavailable(reason string) { e.backupsOff = reason }

// TableDescriptionJSON is the DynamoDB TableDescription of a catalog row,
// as a backup manifest records it (backup.Describer).
func (e *Engine) TableDescriptionJSON(st *backend.Table) ([]byte, error) {
	t, err := parseTable(st)
	if err != nil {
		return nil, err
	}
	return json.Marshal(t.describe())
}

type CreateBackupInput struct {
	TableName  *string `json:"TableName"`
	BackupName *string `json:"BackupName"`
}

type BackupDetails struct {
	BackupArn              string  `json:"BackupArn"`
	BackupName             string  `json:"BackupName"`
	BackupSizeBytes        *int64  `json:"BackupSizeBytes,omitempty"`
	BackupStatus           string  `json:"BackupStatus"`
	BackupType             string  `json:"BackupType"`
	BackupCreationDateTime float64 `json:"BackupCreationDateTime"`
	BackupExpiryDateTime   float64 `json:"BackupExpiryDateTime,omitempty"`
}

type CreateBackupOutput struct {
	BackupDetails *BackupDetails `json:"BackupDetails"`
}

type BackupArnInput struct {
	BackupArn *string `json:"BackupArn"`
}

type SourceThroughput struct {
	ReadCapacityUnits  int64 `json:"ReadCapacityUnits"`
	WriteCapacityUnits int64 `json:"WriteCapacityUnits"`
}

type SourceTableDetails struct {
	TableName             string             `json:"TableName"`
	TableId               string             `json:"TableId"`
	TableArn              string             `json:"TableArn,omitempty"`
	TableSizeBytes        int64              `json:"TableSizeBytes"`
	KeySchema             []KeySchemaElement `json:"KeySchema"`
	TableCreationDateTime float64            `json:"TableCreationDateTime"`
	ProvisionedThroughput SourceThroughput   `json:"ProvisionedThroughput"`
	ItemCount             int64              `json:"ItemCount"`
	BillingMode           string             `json:"BillingMode"`
}

type IndexInfo struct {
	IndexName             string             `json:"IndexName"`
	KeySchema             []KeySchemaElement `json:"KeySchema"`
	Projection            *Projection        `json:"Projection"`
	ProvisionedThroughput *SourceThroughput  `json:"ProvisionedThroughput,omitempty"`
}

type SourceTableFeatureDetails struct {
	LocalSecondaryIndexes  []IndexInfo            `json:"LocalSecondaryIndexes,omitempty"`
	GlobalSecondaryIndexes []IndexInfo            `json:"GlobalSecondaryIndexes,omitempty"`
	StreamDescription      *StreamSpecification   `json:"StreamDescription,omitempty"`
	TimeToLiveDescription  *TimeToLiveDescription `json:"TimeToLiveDescription,omitempty"`
	SSEDescription         *SSEDescription        `json:"SSEDescription,omitempty"`
}

type BackupDescription struct {
	BackupDetails             *BackupDetails             `json:"BackupDetails"`
	SourceTableDetails        *SourceTableDetails        `json:"SourceTableDetails"`
	SourceTableFeatureDetails *SourceTableFeatureDetails `json:"SourceTableFeatureDetails"`
}

type BackupDescriptionOutput struct {
	BackupDescription *BackupDescription `json:"BackupDescription"`
}

type ListBackupsInput struct {
	TableName               *string  `json:"TableName"`
	Limit                   *int64   `json:"Limit"`
	TimeRangeLowerBound     *float64 `json:"TimeRangeLowerBound"`
	TimeRangeUpperBound     *float64 `json:"TimeRangeUpperBound"`
	ExclusiveStartBackupArn *string  `json:"ExclusiveStartBackupArn"`
	BackupType              *string  `json:"BackupType"`
}

type BackupSummary struct {
	TableName              string  `json:"TableName"`
	TableId                string  `json:"TableId,omitempty"`
	TableArn               string  `json:"TableArn"`
	BackupArn              string  `json:"BackupArn"`
	BackupName             string  `json:"BackupName"`
	BackupCreationDateTime float64 `json:"BackupCreationDateTime"`
	BackupStatus           string  `json:"BackupStatus"`
	BackupType             string  `json:"BackupType"`
	BackupSizeBytes        *int64  `json:"BackupSizeBytes,omitempty"`
	BackupExpiryDateTime   float64 `json:"BackupExpiryDateTime,omitempty"`
}

type ListBackupsOutput struct {
	BackupSummaries        []BackupSummary `json:"BackupSummaries"`
	LastEvaluatedBackupArn string          `json:"LastEvaluatedBackupArn,omitempty"`
}

// errBackupsDisabled answers every backup operation of a server without a
// store, or whose backend cannot take backups (SetBackupsUnavailable).
func (e *Engine) errBackupsDisabled() error {
	if e.backupsOff != "" {
		return validationf("Backups are not available on this server: %s", e.backupsOff)
	}
	return validationf("Backups are not enabled on this server: configure a backup store in the [backup.store] section (kind = \"filesystem\" or \"s3\")")
}

// isTableArn tells whether arn names a table (or one of its indexes or
// streams) rather than a backup: the service refuses it as a backup ARN
// instead of looking it up.
func isTableArn(arn string) bool {
	parts := strings.SplitN(arn, ":", 6)
	return len(parts) == 6 && parts[2] == "dynamodb" && strings.HasPrefix(parts[5], "table/") && !strings.Contains(parts[5], "/backup/")
}

func backupNotFound(arn string) error {
	return newErr(CodeBackupNotFound, "Backup not found: %s", arn)
}

var backupNameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]+$`)

// tableNameOrArn takes a TableName member that may be a table ARN.
func tableNameOrArn(s string) string {
	if strings.HasPrefix(s, "arn:") {
		if i := strings.Index(s, ":table/"); i >= 0 {
			return s[i+len(":table/"):]
		}
	}
	return s
}

func checkBackupArn(c *constraintErrors, member string, arn *string) {
	if arn == nil {
		c.add(nil, member, "Member must not be null")
		return
	}
	if len(*arn) < 37 {
		c.add(*arn, member, "Member must have length greater than or equal to 37")
	}
	if len(*arn) > 1024 {
		c.add(*arn, member, "Member must have length less than or equal to 1024")
	}
}

// CreateBackup starts an on-demand backup of a table.
func (e *Engine) CreateBackup(ctx context.Context, account string, in *CreateBackupInput) (*CreateBackupOutput, error) {
	var c constraintErrors
	if in.TableName == nil {
		c.add(nil, "tableName", "Member must not be null")
	} else if n := len(*in.TableName); n < 1 || n > 1024 {
		c.add(*in.TableName, "tableName", "Member must have length "+map[bool]string{true: "greater than or equal to 1", false: "less than or equal to 1024"}[n < 1])
	}
	if in.BackupName == nil {
		c.add(nil, "backupName", "Member must not be null")
	} else {
		n := *in.BackupName
		if len(n) < 3 {
			c.add(n, "backupName", "Member must have length greater than or equal to 3")
		}
		if len(n) > 255 {
			c.add(n, "backupName", "Member must have length less than or equal to 255")
		}
		if !backupNameRE.MatchString(n) {
			c.add(n, "backupName", "Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+")
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	if e.backups == nil {
		return nil, e.errBackupsDisabled()
	}
	name := tableNameOrArn(*in.TableName)
	e.tables.drop(account, name)
	t, err := e.loadTable(ctx, account, name)
	if err != nil {
		if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
			return nil, newErr(CodeTableNotFound, "Table not found: %s", name)
		}
		return nil, err
	}
	if beingRestored(&t.stored) {
		return nil, newErr(CodeTableNotFound, "Table not found: %s", name)
	}
	if s := t.stored.Desc.TableStatus; s == "CREATING" || s == "DELETING" {
		return nil, newErr(CodeTableInUse, "Table is being %s: %s", map[bool]string{true: "created", false: "deleted"}[s == "CREATING"], name)
	}
	rec, err := e.backups.CreateBackup(ctx, account, name, *in.BackupName)
	if err != nil {
		return nil, backupErr(err, name)
	}
	return &CreateBackupOutput{BackupDetails: backupDetails(rec)}, nil
}

func epochMillis(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func backupDetails(r *backend.BackupRecord) *BackupDetails {
	d := &BackupDetails{BackupArn: r.ARN, BackupName: r.Name, BackupStatus: wireBackupStatus(r.Status),
		BackupType: r.Type, BackupCreationDateTime: epochMillis(r.CreatedAt)}
	if !r.ExpiresAt.IsZero() {
		d.BackupExpiryDateTime = epochMillis(r.ExpiresAt)
	}
	if r.Status != backend.BackupCreating {
		n := r.SizeBytes
		d.BackupSizeBytes = &n
	}
	return d
}

// wireBackupStatus: the service knows CREATING, AVAILABLE and DELETED.
func wireBackupStatus(s string) string {
	switch s {
	case backend.BackupCreating, backend.BackupAvailable:
		return s
	}
	return "DELETED"
}

// describeBackup builds the BackupDescription of a row from the source
// table's description as it was at the backup's instant.
func (e *Engine) describeBackup(r *backend.BackupRecord) (*BackupDescription, error) {
	var st storedTable
	if err := json.Unmarshal(r.TableDesc, &st); err != nil {
		return nil, err
	}
	d := st.Desc
	billing := "PROVISIONED"
	if d.BillingModeSummary != nil && d.BillingModeSummary.BillingMode != "" {
		billing = d.BillingModeSummary.BillingMode
	}
	tp := func(pt *ProvisionedThroughputDescription) SourceThroughput {
		if pt == nil {
			return SourceThroughput{}
		}
		return SourceThroughput{ReadCapacityUnits: pt.ReadCapacityUnits, WriteCapacityUnits: pt.WriteCapacityUnits}
	}
	src := &SourceTableDetails{TableName: r.TableName, TableId: d.TableId, TableArn: d.TableArn,
		TableSizeBytes: r.SizeBytes, KeySchema: d.KeySchema, TableCreationDateTime: d.CreationDateTime,
		ProvisionedThroughput: tp(d.ProvisionedThroughput), ItemCount: r.ItemCount, BillingMode: billing}
	feat := &SourceTableFeatureDetails{SSEDescription: d.SSEDescription,
		TimeToLiveDescription: &TimeToLiveDescription{TimeToLiveStatus: "DISABLED"}}
	if st.TTL != nil {
		feat.TimeToLiveDescription = &TimeToLiveDescription{TimeToLiveStatus: "ENABLED", AttributeName: st.TTL.AttributeName}
	}
	if d.StreamSpecification != nil && d.StreamSpecification.StreamEnabled != nil && *d.StreamSpecification.StreamEnabled {
		feat.StreamDescription = d.StreamSpecification
	}
	for _, l := range d.LocalSecondaryIndexes {
		feat.LocalSecondaryIndexes = append(feat.LocalSecondaryIndexes, IndexInfo{IndexName: l.IndexName, KeySchema: l.KeySchema, Projection: l.Projection})
	}
	for _, g := range d.GlobalSecondaryIndexes {
		gi := IndexInfo{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection}
		if billing == "PROVISIONED" {
			t := tp(g.ProvisionedThroughput)
			gi.ProvisionedThroughput = &t
		}
		feat.GlobalSecondaryIndexes = append(feat.GlobalSecondaryIndexes, gi)
	}
	return &BackupDescription{BackupDetails: backupDetails(r), SourceTableDetails: src, SourceTableFeatureDetails: feat}, nil
}

// visibleBackup reads a backup of this account that the service would show:
// FAILED, DELETING and DELETED backups are not found.
func (e *Engine) visibleBackup(ctx context.Context, account string, arn *string) (*backend.BackupRecord, error) {
	var c constraintErrors
	checkBackupArn(&c, "backupArn", arn)
	if err := c.err(); err != nil {
		return nil, err
	}
	if isTableArn(*arn) {
		return nil, validationf("Invalid Backup ARN")
	}
	if e.backups == nil {
		return nil, e.errBackupsDisabled()
	}
	r, err := e.backups.GetBackup(ctx, *arn)
	if err != nil {
		return nil, backupErr(err, "")
	}
	if r == nil || r.Account != account || (r.Status != backend.BackupCreating && r.Status != backend.BackupAvailable) {
		return nil, backupNotFound(*arn)
	}
	return r, nil
}

// DescribeBackup describes a backup.
func (e *Engine) DescribeBackup(ctx context.Context, account string, in *BackupArnInput) (*BackupDescriptionOutput, error) {
	r, err := e.visibleBackup(ctx, account, in.BackupArn)
	if err != nil {
		return nil, err
	}
	d, err := e.describeBackup(r)
	if err != nil {
		return nil, err
	}
	return &BackupDescriptionOutput{BackupDescription: d}, nil
}

// DeleteBackup deletes an AVAILABLE backup.
func (e *Engine) DeleteBackup(ctx context.Context, account string, in *BackupArnInput) (*BackupDescriptionOutput, error) {
	for attempt := 0; ; attempt++ {
		r, err := e.visibleBackup(ctx, account, in.BackupArn)
		if err != nil {
			return nil, err
		}
		if r.Type == "SYSTEM" {
			return nil, validationf("Invalid Request: User is not allowed to delete the system backup with arn %s. It will automatically expire on %s",
				r.ARN, r.ExpiresAt.UTC().Format(time.RFC3339))
		}
		if r.Status == backend.BackupCreating {
			return nil, newErr(CodeBackupInUse, "Backup is being created: %s", r.ARN)
		}
		if e.backups.RestoringFrom(r.ARN) {
			return nil, newErr(CodeBackupInUse, "Backup is being restored: %s", r.ARN)
		}
		res, err := e.backups.DeleteBackup(ctx, *r)
		if err != nil {
			return nil, backupErr(err, "")
		}
		if !res.Matched {
			if attempt < 3 {
				continue // changed since read: answer from its new state
			}
			return nil, newErr(CodeBackupInUse, "Backup is in use by another operation: %s", r.ARN)
		}
		d, err := e.describeBackup(res.Record)
		if err != nil {
			return nil, err
		}
		d.BackupDetails.BackupStatus = "DELETED"
		return &BackupDescriptionOutput{BackupDescription: d}, nil
	}
}

// ListBackups lists the backups of the account (ascending ARN order, which
// within a table is the order of creation).
func (e *Engine) ListBackups(ctx context.Context, account string, in *ListBackupsInput) (*ListBackupsOutput, error) {
	var c constraintErrors
	limit := 100
	if in.Limit != nil {
		switch {
		case *in.Limit < 1:
			c.add(strconv.FormatInt(*in.Limit, 10), "limit", "Member must have value greater than or equal to 1")
		case *in.Limit > 100:
			c.add(strconv.FormatInt(*in.Limit, 10), "limit", "Member must have value less than or equal to 100")
		default:
			limit = int(*in.Limit)
		}
	}
	if in.TableName != nil {
		if n := len(*in.TableName); n < 1 || n > 1024 {
			c.add(*in.TableName, "tableName", "Member must have length "+map[bool]string{true: "greater than or equal to 1", false: "less than or equal to 1024"}[n < 1])
		}
	}
	if in.ExclusiveStartBackupArn != nil {
		checkBackupArn(&c, "exclusiveStartBackupArn", in.ExclusiveStartBackupArn)
	}
	typ := "USER"
	if in.BackupType != nil {
		switch *in.BackupType {
		case "USER", "SYSTEM", "AWS_BACKUP", "ALL":
			typ = *in.BackupType
		default:
			c.add(*in.BackupType, "backupType", "Member must satisfy enum value set: [USER, SYSTEM, AWS_BACKUP, ALL]")
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	if in.TimeRangeLowerBound != nil && in.TimeRangeUpperBound != nil && *in.TimeRangeLowerBound > *in.TimeRangeUpperBound {
		return nil, invalidParam("Time range lower bound must be less than or equal to upper bound")
	}
	if e.backups == nil {
		return nil, e.errBackupsDisabled()
	}
	out := &ListBackupsOutput{BackupSummaries: []BackupSummary{}}
	p := backend.ListBackupsParams{Account: account, Statuses: []string{backend.BackupCreating, backend.BackupAvailable}, Limit: limit + 1}
	if typ != "ALL" {
		p.Types = []string{typ}
	}
	if in.TableName != nil {
		p.TableName = tableNameOrArn(*in.TableName)
	}
	if in.ExclusiveStartBackupArn != nil {
		p.StartAfter = *in.ExclusiveStartBackupArn
	}
	if in.TimeRangeLowerBound != nil {
		p.CreatedFrom = ceilMillis(*in.TimeRangeLowerBound) // inclusive
	}
	if in.TimeRangeUpperBound != nil {
		p.CreatedTo = ceilMillis(*in.TimeRangeUpperBound).Add(-time.Millisecond) // exclusive
	}
	rows, err := e.backups.ListBackups(ctx, p)
	if err != nil {
		return nil, backupErr(err, "")
	}
	more := len(rows) > limit
	if more {
		rows = rows[:limit]
	}
	for i := range rows {
		r := &rows[i]
		var st storedTable
		_ = json.Unmarshal(r.TableDesc, &st)
		s := BackupSummary{TableName: r.TableName, TableId: st.Desc.TableId, TableArn: e.tableArn(account, r.TableName),
			BackupArn: r.ARN, BackupName: r.Name, BackupCreationDateTime: epochMillis(r.CreatedAt),
			BackupStatus: wireBackupStatus(r.Status), BackupType: r.Type}
		if !r.ExpiresAt.IsZero() {
			s.BackupExpiryDateTime = epochMillis(r.ExpiresAt)
		}
		if r.Status != backend.BackupCreating {
			n := r.SizeBytes
			s.BackupSizeBytes = &n
		}
		out.BackupSummaries = append(out.BackupSummaries, s)
	}
	if more {
		out.LastEvaluatedBackupArn = rows[len(rows)-1].ARN
	}
	return out, nil
}

// ceilMillis is the first whole millisecond at or after s epoch seconds.
func ceilMillis(s float64) time.Time {
	ms := math.Ceil(s*1000 - 1e-6)
	ms = math.Max(-1e15, math.Min(1e15, ms))
	return time.UnixMilli(int64(ms)).UTC()
}

type DescribeContinuousBackupsInput struct {
	TableName *string `json:"TableName"`
}

type PointInTimeRecoverySpecification struct {
	PointInTimeRecoveryEnabled *bool  `json:"PointInTimeRecoveryEnabled"`
	RecoveryPeriodInDays       *int64 `json:"RecoveryPeriodInDays"`
}

type UpdateContinuousBackupsInput struct {
	TableName                        *string                           `json:"TableName"`
	PointInTimeRecoverySpecification *PointInTimeRecoverySpecification `json:"PointInTimeRecoverySpecification"`
}

// continuousBackupsTable validates TableName (a name or ARN) and reads
// the table (TableNotFoundException "Table not found: <name>").
func (e *Engine) continuousBackupsTable(ctx context.Context, account string, c *constraintErrors, name *string) (*table, error) {
	if name == nil {
		c.add(nil, "tableName", "Member must not be null")
	} else if n := len(*name); n < 1 || n > 1024 {
		c.add(*name, "tableName", "Member must have length "+map[bool]string{true: "greater than or equal to 1", false: "less than or equal to 1024"}[n < 1])
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	n := tableNameOrArn(*name)
	e.tables.drop(account, n)
	t, err := e.loadTable(ctx, account, n)
	if err != nil {
		if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
			return nil, newErr(CodeTableNotFound, "Table not found: %s", n)
		}
		return nil, err
	}
	if beingRestored(&t.stored) {
		return nil, newErr(CodeTableNotFound, "Table not found: %s", n)
	}
	return t, nil
}

// DescribeContinuousBackups answers the table's point-in-time recovery
// setting and, while it is on, its restorable window as shipped to the
// store (docs/backup-design.md section 7).
func (e *Engine) DescribeContinuousBackups(ctx context.Context, account string, in *DescribeContinuousBackupsInput) (*ContinuousBackupsOutput, error) {
	var c constraintErrors
	t, err := e.continuousBackupsTable(ctx, account, &c, in.TableName)
	if err != nil {
		return nil, err
	}
	return e.continuousBackups(ctx, t)
}

// UpdateContinuousBackups turns point-in-time recovery on (with its
// recovery period, 1 to 35 days, 35 by default) or off. Turning it on
// needs the PITR service (a configured store and a backend with the
// change log and snapshot capabilities): without it the answer is
// ContinuousBackupsUnavailableException.
func (e *Engine) UpdateContinuousBackups(ctx context.Context, account string, in *UpdateContinuousBackupsInput) (*ContinuousBackupsOutput, error) {
	var c constraintErrors
	spec := in.PointInTimeRecoverySpecification
	if spec == nil {
		c.add(nil, "pointInTimeRecoverySpecification", "Member must not be null")
	} else {
		if spec.PointInTimeRecoveryEnabled == nil {
			c.add(nil, "pointInTimeRecoverySpecification.pointInTimeRecoveryEnabled", "Member must not be null")
		}
		if d := spec.RecoveryPeriodInDays; d != nil && *d < minRecoveryDays {
			c.add(*d, "pointInTimeRecoverySpecification.recoveryPeriodInDays", "Member must have value greater than or equal to 1")
		} else if d != nil && *d > maxRecoveryDays {
			c.add(*d, "pointInTimeRecoverySpecification.recoveryPeriodInDays", "Member must have value less than or equal to 35")
		}
	}
	t, err := e.continuousBackupsTable(ctx, account, &c, in.TableName)
	if err != nil {
		return nil, err
	}
	enable := *spec.PointInTimeRecoveryEnabled
	if !enable && spec.RecoveryPeriodInDays != nil {
		return nil, validationf("Invalid Request: Cannot specify RecoveryPeriodInDays when disabling point-in-time recovery.")
	}
	days := int64(maxRecoveryDays)
	if spec.RecoveryPeriodInDays != nil {
		days = *spec.RecoveryPeriodInDays
	}
	if enable {
		if err := e.pitrAvailable(); err != nil {
			return nil, err
		}
		if err := restoringTable(t); err != nil {
			return nil, err
		}
	} else if t.stored.PITR == nil {
		return e.continuousBackups(ctx, t)
	}
	now := e.now()
	res, err := e.backend.UpdateTable(ctx, backend.UpdateTableParams{Account: account, Name: t.name(), Fn: func(old *backend.Table) ([]byte, error) {
		if old.ID != t.ref.ID {
			return nil, backend.Errorf(backend.KindTableNotFound, "table %q was replaced", t.name())
		}
		var st storedTable
		if err := json.Unmarshal(old.Desc, &st); err != nil {
			return nil, err
		}
		switch {
		case !enable:
			st.PITR = nil
		case st.PITR == nil:
			st.PITR = &pitrSetting{Days: days, Since: now.UnixMilli()}
		default:
			p := *st.PITR
			p.Days = days
			st.PITR = &p
		}
		return json.Marshal(&st)
	}})
	e.tables.drop(account, t.name())
	if err != nil {
		if e.missing(err, account, t.name()) {
			return nil, newErr(CodeTableNotFound, "Table not found: %s", t.name())
		}
		return nil, err
	}
	nt, err := parseTable(res.Table)
	if err != nil {
		return nil, err
	}
	return e.continuousBackups(ctx, nt)
}

type RestoreTableFromBackupInput struct {
	TargetTableName               *string                `json:"TargetTableName"`
	BackupArn                     *string                `json:"BackupArn"`
	BillingModeOverride           *string                `json:"BillingModeOverride"`
	GlobalSecondaryIndexOverride  []GlobalSecondaryIndex `json:"GlobalSecondaryIndexOverride"`
	LocalSecondaryIndexOverride   []LocalSecondaryIndex  `json:"LocalSecondaryIndexOverride"`
	ProvisionedThroughputOverride *ProvisionedThroughput `json:"ProvisionedThroughputOverride"`
	OnDemandThroughputOverride    json.RawMessage        `json:"OnDemandThroughputOverride"`
	SSESpecificationOverride      *SSESpecification      `json:"SSESpecificationOverride"`
}

type RestoreTableFromBackupOutput struct {
	TableDescription *TableDescription `json:"TableDescription"`
}

// beingRestored reports whether a stored table is the CREATING target of
// a restore. The service answers the operations on such a table's
// settings (tags, TTL, UpdateTable, backups, point-in-time recovery) as
// if it did not exist yet, while DescribeTable shows it; so does extenddb.
func beingRestored(st *storedTable) bool {
	rs := st.Desc.RestoreSummary
	return rs != nil && rs.RestoreInProgress && st.Desc.TableStatus == "CREATING"
}

// refuseRestoreTarget answers ResourceNotFoundException for a table that
// is the CREATING target of a restore (see beingRestored).
func (e *Engine) refuseRestoreTarget(ctx context.Context, account, name string) error {
	t, err := e.loadTable(ctx, account, name)
	if err == nil && beingRestored(&t.stored) {
		// The cache may not have seen the restore finish: ask again.
		e.tables.drop(account, name)
		if t, err = e.loadTable(ctx, account, name); err == nil && beingRestored(&t.stored) {
			return tableNotFound(name)
		}
	}
	// Any other error is UpdateTable's own to answer.
	return nil
}

// restoringTable refuses to delete a table that a restore is loading.
func restoringTable(t *table) error {
	if rs := t.stored.Desc.RestoreSummary; rs != nil && rs.RestoreInProgress {
		return newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: Table is being restored: %s", t.name())
	}
	if t.stored.ImportJob != "" {
		return newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: Table is being imported: %s", t.name())
	}
	return nil
}

// RestoreTableFromBackup creates a table from a backup: the target is
// created in CREATING with a RestoreSummary and the restore job loads it
// and flips it ACTIVE. Tags, TTL, streams, point-in-time recovery,
// deletion protection and the table class are not restored, as on the
// service; the overrides replace the
// billing mode, throughput and SSE, and select the indexes to keep.
func (e *Engine) RestoreTableFromBackup(ctx context.Context, account string, in *RestoreTableFromBackupInput) (*RestoreTableFromBackupOutput, error) {
	var c constraintErrors
	checkTableName(&c, "targetTableName", in.TargetTableName)
	checkBackupArn(&c, "backupArn", in.BackupArn)
	checkRestoreOverrides(&c, in)
	if err := c.err(); err != nil {
		return nil, err
	}
	r, err := e.visibleBackup(ctx, account, in.BackupArn)
	if err != nil {
		return nil, err
	}
	if r.Status != backend.BackupAvailable {
		return nil, newErr(CodeBackupInUse, "Backup is being created: %s", r.ARN)
	}
	name := *in.TargetTableName
	if err := e.restoreTargetFree(ctx, account, name); err != nil {
		return nil, err
	}
	var src storedTable
	if err := json.Unmarshal(r.TableDesc, &src); err != nil {
		return nil, err
	}
	d, err := e.restoredDescription(account, name, r, &src.Desc, in)
	if err != nil {
		return nil, err
	}
	// A backup feeds one restore at a time, as on the service.
	if e.backups.RestoringFrom(r.ARN) {
		return nil, newErr(CodeBackupInUse, "Backup is being restored: %s", r.ARN)
	}
	raw, err := json.Marshal(&storedTable{Desc: *d})
	if err != nil {
		return nil, err
	}
	// The job row comes first, so that a crash between the two never
	// leaves a target without a job (the reconciler fails or resumes it).
	err = e.backups.RestoreTable(ctx, *r, account, name, func(ctx context.Context) (*backend.Table, error) {
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
	return &RestoreTableFromBackupOutput{TableDescription: d}, nil
}

// checkRestoreOverrides adds the constraint errors of a restore's
// billing mode and throughput overrides.
func checkRestoreOverrides(c *constraintErrors, in *RestoreTableFromBackupInput) {
	if in.BillingModeOverride != nil && *in.BillingModeOverride != "PROVISIONED" && *in.BillingModeOverride != "PAY_PER_REQUEST" {
		c.add(*in.BillingModeOverride, "billingModeOverride", "Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]")
	}
	if in.ProvisionedThroughputOverride != nil {
		checkThroughput(c, "provisionedThroughputOverride", in.ProvisionedThroughputOverride)
	}
}

// restoreTargetFree refuses a restore target name already taken.
func (e *Engine) restoreTargetFree(ctx context.Context, account, name string) error {
	if cur, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: account, Name: name}); err == nil {
		if t, perr := parseTable(cur.Table); perr == nil && t.stored.Desc.TableStatus == "CREATING" {
			return newErr(CodeTableInUse, "Table is being created: %s", name)
		}
		return newErr(CodeTableAlreadyExists, "Table already exists: %s", name)
	} else if !backend.IsKind(err, backend.KindTableNotFound) {
		return err
	}
	return nil
}

// restoredDescription is the target table's description: the source's at
// the backup instant, renamed, with the overrides applied.
func (e *Engine) restoredDescription(account, name string, r *backend.BackupRecord, s *TableDescription, in *RestoreTableFromBackupInput) (*TableDescription, error) {
	now := e.now()
	arn := e.tableArn(account, name)
	d := &TableDescription{
		TableName: name, TableId: newUUID(), TableArn: arn, TableStatus: "CREATING",
		CreationDateTime: epochSeconds(now), KeySchema: s.KeySchema, AttributeDefinitions: s.AttributeDefinitions,
		ProvisionedThroughput: s.ProvisionedThroughput, BillingModeSummary: s.BillingModeSummary,
		SSEDescription: s.SSEDescription,
		RestoreSummary: &RestoreSummary{SourceBackupArn: r.ARN, SourceTableArn: e.tableArn(account, r.TableName),
			RestoreDateTime: epochSeconds(now), RestoreInProgress: true},
	}
	billing := "PROVISIONED"
	if s.BillingModeSummary != nil && s.BillingModeSummary.BillingMode != "" {
		billing = s.BillingModeSummary.BillingMode
	}
	if in.BillingModeOverride != nil {
		billing = *in.BillingModeOverride
	}
	switch {
	case in.ProvisionedThroughputOverride != nil && in.BillingModeOverride != nil && billing == "PAY_PER_REQUEST":
		return nil, validationf("Invalid Request: Cannot override ProvisionedThroughput if BillingMode is overridden to PAY_PER_REQUEST")
	case in.ProvisionedThroughputOverride != nil && billing != "PROVISIONED":
		return nil, validationf("Invalid Request: Cannot override ProvisionedThroughput unless BillingMode is PROVISIONED")
	case in.ProvisionedThroughputOverride == nil && in.BillingModeOverride != nil && billing == "PROVISIONED":
		return nil, validationf("Invalid Request: Must override ProvisionedThroughput if BillingMode is overridden to PROVISIONED")
	}
	pt := in.ProvisionedThroughputOverride
	if pt == nil && billing == "PROVISIONED" && s.ProvisionedThroughput != nil && s.ProvisionedThroughput.ReadCapacityUnits > 0 {
		rc, wc := s.ProvisionedThroughput.ReadCapacityUnits, s.ProvisionedThroughput.WriteCapacityUnits
		pt = &ProvisionedThroughput{ReadCapacityUnits: &rc, WriteCapacityUnits: &wc}
	}
	tp, err := billingThroughput(billing, pt, "")
	if err != nil {
		return nil, err
	}
	d.ProvisionedThroughput = tp
	d.BillingModeSummary = &BillingModeSummary{BillingMode: billing}
	if billing == "PROVISIONED" && (s.BillingModeSummary == nil || s.BillingModeSummary.BillingMode == "") {
		d.BillingModeSummary = s.BillingModeSummary
	}
	// Index selection: an override keeps the named indexes of the backup.
	gsis := s.GlobalSecondaryIndexes
	if in.GlobalSecondaryIndexOverride != nil {
		gsis = nil
		for _, o := range in.GlobalSecondaryIndexOverride {
			var found *GlobalSecondaryIndexDescription
			for i := range s.GlobalSecondaryIndexes {
				if sameIndex(o.IndexName, o.KeySchema, o.Projection, s.GlobalSecondaryIndexes[i].IndexName, s.GlobalSecondaryIndexes[i].KeySchema, s.GlobalSecondaryIndexes[i].Projection) {
					found = &s.GlobalSecondaryIndexes[i]
				}
			}
			if found == nil {
				return nil, errIndexNotInSource(o.IndexName)
			}
			g := *found
			g.IndexName = o.IndexName
			if o.ProvisionedThroughput != nil {
				rc, wc := *o.ProvisionedThroughput.ReadCapacityUnits, *o.ProvisionedThroughput.WriteCapacityUnits
				g.ProvisionedThroughput = &ProvisionedThroughputDescription{ReadCapacityUnits: rc, WriteCapacityUnits: wc}
			}
			gsis = append(gsis, g)
		}
	}
	for _, g := range gsis {
		g.IndexArn = arn + "/index/" + g.IndexName
		g.IndexStatus = "ACTIVE"
		g.ItemCount, g.IndexSizeBytes = 0, 0
		if billing == "PAY_PER_REQUEST" {
			g.ProvisionedThroughput = &ProvisionedThroughputDescription{}
		} else if g.ProvisionedThroughput == nil || g.ProvisionedThroughput.ReadCapacityUnits == 0 {
			g.ProvisionedThroughput = &ProvisionedThroughputDescription{ReadCapacityUnits: tp.ReadCapacityUnits, WriteCapacityUnits: tp.WriteCapacityUnits}
		}
		d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, g)
	}
	lsis := s.LocalSecondaryIndexes
	if in.LocalSecondaryIndexOverride != nil {
		lsis = nil
		for _, o := range in.LocalSecondaryIndexOverride {
			ok := false
			for _, l := range s.LocalSecondaryIndexes {
				if !ok && sameIndex(o.IndexName, o.KeySchema, o.Projection, l.IndexName, l.KeySchema, l.Projection) {
					l.IndexName = o.IndexName
					lsis, ok = append(lsis, l), true
				}
			}
			if !ok {
				return nil, errIndexNotInSource(o.IndexName)
			}
		}
	}
	for _, l := range lsis {
		l.IndexArn = arn + "/index/" + l.IndexName
		l.ItemCount, l.IndexSizeBytes = 0, 0
		d.LocalSecondaryIndexes = append(d.LocalSecondaryIndexes, l)
	}
	if o := in.SSESpecificationOverride; o != nil {
		d.SSEDescription = nil
		if o.Enabled != nil && *o.Enabled {
			t := o.SSEType
			if t == "" {
				t = "KMS"
			}
			d.SSEDescription = &SSEDescription{Status: "ENABLED", SSEType: t,
				KMSMasterKeyArn: "arn:aws:kms:" + e.region + ":" + account + ":key/extenddb-managed"}
		}
	}
	return d, nil
}

// IsRestoreTarget tells whether a table is being restored from the
// backup (backup.Restorer; the reconciler resumes only such a target).
func (e *Engine) IsRestoreTarget(st *backend.Table, backupARN string) bool {
	var s storedTable
	if err := json.Unmarshal(st.Desc, &s); err != nil {
		return false
	}
	rs := s.Desc.RestoreSummary
	return rs != nil && rs.RestoreInProgress && s.Desc.TableStatus == "CREATING" &&
		(rs.SourceBackupArn == backupARN || s.RestoreJob != "" && s.RestoreJob == backupARN)
}

// FinishRestore is the description of a restored table once loaded
// (ACTIVE, without RestoreSummary); the restore job writes it with a
// conditional UpdateTable (backup.Restorer).
func (e *Engine) FinishRestore(st *backend.Table) ([]byte, error) {
	var s storedTable
	if err := json.Unmarshal(st.Desc, &s); err != nil {
		return nil, err
	}
	rs := s.Desc.RestoreSummary
	if rs == nil || !rs.RestoreInProgress || s.Desc.TableStatus != "CREATING" {
		return nil, fmt.Errorf("table %s is not a restore in progress", st.Name)
	}
	// The service's RestoreSummary lives only while the table is
	// CREATING: an ACTIVE restored table does not show where it came from.
	s.Desc.RestoreSummary = nil
	s.Desc.TableStatus = "ACTIVE"
	s.RestoreJob = ""
	return json.Marshal(&s)
}

// StoredDescription turns a backup manifest's source_table (a DynamoDB
// TableDescription) into the description the catalog keeps for a backup
// row (backup.Describer), for backups adopted from a store by sync.
func (e *Engine) StoredDescription(sourceTable []byte) ([]byte, error) {
	var d TableDescription
	if err := json.Unmarshal(sourceTable, &d); err != nil {
		return nil, fmt.Errorf("source_table: %w", err)
	}
	return json.Marshal(&storedTable{Desc: d})
}

// sameIndex tells whether an index override names a source index: by its
// name, or (a renamed index) by the same key schema and projection type.
func sameIndex(name string, ks []KeySchemaElement, p *Projection, srcName string, srcKS []KeySchemaElement, srcP *Projection) bool {
	if name == srcName {
		return true
	}
	if len(ks) == 0 || !slices.Equal(ks, srcKS) || p == nil || srcP == nil {
		return false
	}
	return p.ProjectionType == srcP.ProjectionType && slices.Equal(p.NonKeyAttributes, srcP.NonKeyAttributes)
}

func errIndexNotInSource(name string) error {
	return validationf("Invalid Request: Index %s does not match a secondary index that existed in the source table and cannot be created during the restore operation", name)
}
