package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// Exports to S3 in AWS's format (docs/adr/0049-aws-format-exports.md).
// The engine owns the wire shapes, the validation, the table and window
// rules and the job rows (backend.JobCatalog, kind "export"); the job
// that writes the objects runs in internal/backup, reached through
// ExportService.

// Job kinds of the export rows.
const (
	// JobKindExport rows are exports, keyed by ExportArn; the payload is
	// an exportPayload.
	JobKindExport = "export"
	// JobKindExportToken rows map an account's ClientToken to its export
	// for ClientTokenTTL.
	JobKindExportToken = "export-token"
)

// Export statuses (ExportStatus, and the job row's status).
const (
	ExportInProgress = "IN_PROGRESS"
	ExportCompleted  = "COMPLETED"
	ExportFailed     = "FAILED"
)

// ExportService runs export jobs; internal/backup provides it through the
// server (SetExports).
type ExportService interface {
	// HistoryPrefix names a table incarnation's point-in-time history
	// in the backup store: the job reads the table image from it.
	HistoryPrefix(h PITRHistory) string
	// Owner names this server in job claims; the engine inserts rows
	// claimed by it.
	Owner() string
	// RunExport runs the job of a row just inserted (claimed by Owner)
	// in the background: it writes the objects and moves the row to
	// COMPLETED or FAILED.
	RunExport(rec backend.JobRecord)
}

// SetExports installs the export jobs. Without them (or without a job
// catalog) ExportTableToPointInTime answers a ValidationException that
// says why. Call it before serving.
func (e *Engine) SetExports(s ExportService) { e.exports = s }

// IncrementalExportSpecification is the request and description member
// of an incremental export.
type IncrementalExportSpecification struct {
	ExportFromTime *float64 `json:"ExportFromTime,omitempty"`
	ExportToTime   *float64 `json:"ExportToTime,omitempty"`
	ExportViewType *string  `json:"ExportViewType,omitempty"`
}

type ExportTableToPointInTimeInput struct {
	TableArn                       *string                         `json:"TableArn"`
	ExportTime                     *float64                        `json:"ExportTime"`
	ClientToken                    *string                         `json:"ClientToken"`
	S3Bucket                       *string                         `json:"S3Bucket"`
	S3BucketOwner                  *string                         `json:"S3BucketOwner"`
	S3Prefix                       *string                         `json:"S3Prefix"`
	S3SseAlgorithm                 *string                         `json:"S3SseAlgorithm"`
	S3SseKmsKeyId                  *string                         `json:"S3SseKmsKeyId"`
	ExportFormat                   *string                         `json:"ExportFormat"`
	ExportType                     *string                         `json:"ExportType"`
	IncrementalExportSpecification *IncrementalExportSpecification `json:"IncrementalExportSpecification"`
}

// ExportDescription is DescribeExport's description of an export.
type ExportDescription struct {
	ExportArn                      string                          `json:"ExportArn"`
	ExportStatus                   string                          `json:"ExportStatus"`
	StartTime                      float64                         `json:"StartTime"`
	EndTime                        *float64                        `json:"EndTime,omitempty"`
	ExportManifest                 *string                         `json:"ExportManifest,omitempty"`
	TableArn                       string                          `json:"TableArn"`
	TableId                        string                          `json:"TableId"`
	ExportTime                     *float64                        `json:"ExportTime,omitempty"`
	ClientToken                    string                          `json:"ClientToken,omitempty"`
	S3Bucket                       string                          `json:"S3Bucket"`
	S3BucketOwner                  *string                         `json:"S3BucketOwner,omitempty"`
	S3Prefix                       *string                         `json:"S3Prefix,omitempty"`
	S3SseAlgorithm                 string                          `json:"S3SseAlgorithm"`
	S3SseKmsKeyId                  *string                         `json:"S3SseKmsKeyId,omitempty"`
	FailureCode                    *string                         `json:"FailureCode,omitempty"`
	FailureMessage                 *string                         `json:"FailureMessage,omitempty"`
	ExportFormat                   string                          `json:"ExportFormat"`
	BilledSizeBytes                *int64                          `json:"BilledSizeBytes,omitempty"`
	ItemCount                      *int64                          `json:"ItemCount,omitempty"`
	ExportType                     string                          `json:"ExportType,omitempty"`
	IncrementalExportSpecification *IncrementalExportSpecification `json:"IncrementalExportSpecification,omitempty"`
}

// exportPayload is an export row's payload: its description as the
// wire shows it, and what the job needs besides. The job
// (internal/backup) reads and updates the same members by name.
type exportPayload struct {
	ExportDescription
	// ExportID is the last component of ExportArn.
	ExportID string `json:"ExportId"`
	// HistoryPrefix names the table's point-in-time history in the
	// backup store (ExportService.HistoryPrefix).
	HistoryPrefix string `json:"HistoryPrefix"`
	// ExportTimeMs is the instant of the image, Unix milliseconds.
	ExportTimeMs int64 `json:"ExportTimeMs"`
	// ExportTypeAsked is the export type, whether or not the request
	// named it (DescribeExport echoes only what was asked).
	ExportTypeAsked string `json:"ExportTypeAsked"`
	// An incremental export's period [from, to), Unix milliseconds, and
	// view.
	ExportFromTimeMs    int64  `json:"ExportFromTimeMs,omitempty"`
	ExportToTimeMs      int64  `json:"ExportToTimeMs,omitempty"`
	ExportViewTypeAsked string `json:"ExportViewTypeAsked,omitempty"`
	// SourceRef and RecoveryDays name the source's shipped history, so
	// that the job can wait until it covers the instant (an export
	// without ExportTime is of the request's instant).
	SourceRef    backend.TableRef `json:"SourceRef"`
	RecoveryDays int64            `json:"RecoveryDays"`
	// ExportTimeDefault: the request named no ExportTime (the job may
	// move the instant to the history's first base, see internal/backup).
	ExportTimeDefault bool `json:"ExportTimeDefault,omitempty"`
}

// Bounds of an incremental export's period.
const (
	minIncrementalPeriod = 15 * time.Minute
	maxIncrementalPeriod = 24 * time.Hour
)

type ExportTableToPointInTimeOutput struct {
	ExportDescription *ExportDescription `json:"ExportDescription"`
}

type DescribeExportInput struct {
	ExportArn *string `json:"ExportArn"`
}

type DescribeExportOutput struct {
	ExportDescription *ExportDescription `json:"ExportDescription"`
}

type ListExportsInput struct {
	TableArn   *string `json:"TableArn"`
	MaxResults *int64  `json:"MaxResults"`
	NextToken  *string `json:"NextToken"`
}

type ExportSummary struct {
	ExportArn    string `json:"ExportArn"`
	ExportStatus string `json:"ExportStatus"`
	ExportType   string `json:"ExportType"`
}

type ListExportsOutput struct {
	ExportSummaries []ExportSummary `json:"ExportSummaries"`
	NextToken       *string         `json:"NextToken,omitempty"`
}

var (
	s3BucketRE      = regexp.MustCompile(`^[a-z0-9A-Z]+[\.\-\w]*[a-z0-9A-Z]+$`)
	s3BucketOwnerRE = regexp.MustCompile(`^[0-9]{12}$`)
	clientTokenRE   = regexp.MustCompile(`^[^$]+$`)
	exportArnRE     = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:[0-9]{12}:table/[a-zA-Z0-9_.-]{3,255}/export/[0-9]{14}-[0-9a-f]{8}$`)
)

func checkEnum(c *constraintErrors, member string, v *string, values ...string) {
	if v != nil && !slices.Contains(values, *v) {
		c.add(*v, member, "Member must satisfy enum value set: ["+strings.Join(values, ", ")+"]")
	}
}

func checkLen(c *constraintErrors, member string, v *string, lo, hi int) {
	if v == nil {
		return
	}
	switch {
	case len(*v) < lo:
		c.add(*v, member, fmt.Sprintf("Member must have length greater than or equal to %d", lo))
	case len(*v) > hi:
		c.add(*v, member, fmt.Sprintf("Member must have length less than or equal to %d", hi))
	}
}

func checkPattern(c *constraintErrors, member string, v *string, re *regexp.Regexp, shown string) {
	if v != nil && !re.MatchString(*v) {
		c.add(*v, member, "Member must satisfy regular expression pattern: "+shown)
	}
}

func validTime(f *float64) bool {
	return f == nil || !(math.IsNaN(*f) || math.IsInf(*f, 0) || *f < 0 || *f > 1e11)
}

// checkExportInput applies the members' constraints and couplings.
func checkExportInput(in *ExportTableToPointInTimeInput) error {
	var c constraintErrors
	if in.TableArn == nil {
		c.add(nil, "tableArn", "Member must not be null")
	}
	checkLen(&c, "tableArn", in.TableArn, 1, 1024)
	if in.S3Bucket == nil {
		c.add(nil, "s3Bucket", "Member must not be null")
	}
	checkLen(&c, "s3Bucket", in.S3Bucket, 0, 255)
	checkPattern(&c, "s3Bucket", in.S3Bucket, s3BucketRE, `^[a-z0-9A-Z]+[\.\-\w]*[a-z0-9A-Z]+$`)
	checkPattern(&c, "s3BucketOwner", in.S3BucketOwner, s3BucketOwnerRE, "[0-9]{12}")
	checkLen(&c, "s3Prefix", in.S3Prefix, 0, 1024)
	checkEnum(&c, "s3SseAlgorithm", in.S3SseAlgorithm, "AES256", "KMS")
	checkLen(&c, "s3SseKmsKeyId", in.S3SseKmsKeyId, 1, 2048)
	checkPattern(&c, "clientToken", in.ClientToken, clientTokenRE, `^[^\$]+$`)
	checkEnum(&c, "exportFormat", in.ExportFormat, "DYNAMODB_JSON", "ION")
	checkEnum(&c, "exportType", in.ExportType, "FULL_EXPORT", "INCREMENTAL_EXPORT")
	if s := in.IncrementalExportSpecification; s != nil {
		checkEnum(&c, "incrementalExportSpecification.exportViewType", s.ExportViewType, "NEW_IMAGE", "NEW_AND_OLD_IMAGES")
	}
	if err := c.err(); err != nil {
		return err
	}
	if !validTime(in.ExportTime) {
		return validationf("Invalid Request: ExportTime is not a valid timestamp")
	}
	if in.S3SseKmsKeyId != nil && (in.S3SseAlgorithm == nil || *in.S3SseAlgorithm != "KMS") {
		return validationf("Invalid Request: KMS Key Id is not supported for this encryption type")
	}
	incremental := in.ExportType != nil && *in.ExportType == "INCREMENTAL_EXPORT"
	switch spec := in.IncrementalExportSpecification; {
	case spec != nil && in.ExportType == nil:
		return validationf("Invalid Request: Export Type expected to be Incremental Export when incremental export specification is provided")
	case spec != nil && !incremental:
		return validationf("Invalid Request: When Export Type is Full Export , Incremental Export Specification should not be provided")
	case incremental && spec == nil:
		return validationf("Invalid Request: Incremental Export Specification expected when export type is set as Incremental Export")
	case incremental && spec.ExportFromTime == nil:
		return validationf("Invalid Request: ExportFromTime must be provided in IncrementalExportSpecification")
	case incremental && (!validTime(spec.ExportFromTime) || !validTime(spec.ExportToTime)):
		return validationf("Invalid Request: ExportFromTime and ExportToTime must be valid timestamps")
	}
	return nil
}

// exportSourceName checks TableArn as the service does and answers the
// table name it names in this account and region.
func (e *Engine) exportSourceName(account, arn string) (string, error) {
	if !strings.HasPrefix(arn, "arn:") {
		return "", invalidParam("tableArn is not a valid ARN")
	}
	i := strings.Index(arn, ":table/")
	if i < 0 {
		return "", invalidParam("tableArn is not a valid ARN")
	}
	name := arn[i+len(":table/"):]
	if strings.Contains(name, "/") {
		return "", validationf("Invalid Request: Table ARN is invalid.")
	}
	if arn != e.tableArn(account, name) {
		return "", newErr(CodeTableNotFound, "Table not found: %s", arn)
	}
	return name, nil
}

// exportsReady tells whether this server can run exports.
func (e *Engine) exportsReady() (backend.JobCatalog, error) {
	jobs := e.backend.Capabilities().Jobs
	switch {
	case e.exports == nil:
		return nil, validationf("Exports are unavailable on this server: no backup store is configured ([backup.store]), " +
			"and exports read the table's point-in-time history from it")
	case jobs == nil:
		return nil, validationf("Exports are unavailable on this server: the %s storage backend keeps no job catalog", e.backend.Name())
	}
	return jobs, nil
}

// mintExportID returns an ExportId for an export started at t.
func mintExportID(t time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%014d-%s", t.UnixMilli(), hex.EncodeToString(b[:]))
}

// exportParamsHash identifies a request's parameters, so that a
// replayed ClientToken is told apart from a conflicting one.
func exportParamsHash(in *ExportTableToPointInTimeInput) string {
	c := *in
	c.ClientToken = nil
	b, _ := json.Marshal(&c)
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ExportTableToPointInTime starts an export of the table's image at
// ExportTime (default: the newest restorable instant) to the bucket, in
// the background; DescribeExport follows it.
func (e *Engine) ExportTableToPointInTime(ctx context.Context, account string, in *ExportTableToPointInTimeInput) (*ExportTableToPointInTimeOutput, error) {
	if err := checkExportInput(in); err != nil {
		return nil, err
	}
	name, err := e.exportSourceName(account, *in.TableArn)
	if err != nil {
		return nil, err
	}
	e.tables.drop(account, name)
	t, err := e.loadTable(ctx, account, name)
	if err != nil {
		if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
			return nil, newErr(CodeTableNotFound, "Table not found: %s", *in.TableArn)
		}
		return nil, err
	}
	p := t.stored.PITR
	incremental := in.ExportType != nil && *in.ExportType == "INCREMENTAL_EXPORT"
	if p == nil {
		if incremental {
			return nil, newErr(CodeInvalidExportTime, "Incremental export period from time cannot be less than the table creation time : %s",
				time.UnixMilli(int64(t.stored.Desc.CreationDateTime*1000)).UTC().Format("2006-01-02T15:04:05Z"))
		}
		return nil, newErr(CodePITRUnavailable, "Point in time recovery is not enabled for table '%s'", name)
	}
	jobs, err := e.exportsReady()
	if err != nil {
		return nil, err
	}
	if err := e.pitrAvailable(); err != nil {
		return nil, err
	}
	w, err := e.pitrSvc.Window(ctx, t.ref, p.Days)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	span, err := exportSpan(in, p, w, now)
	if err != nil {
		return nil, err
	}
	at, from, to, view := span.at, span.from, span.to, span.view
	id := mintExportID(now)
	arn := e.tableArn(account, name) + "/export/" + id
	exportTime := epochSeconds(at)
	d := ExportDescription{
		ExportArn: arn, ExportStatus: ExportInProgress, StartTime: epochSeconds(now),
		TableArn: e.tableArn(account, name), TableId: t.stored.Desc.TableId,
		S3Bucket: *in.S3Bucket, S3BucketOwner: in.S3BucketOwner, S3Prefix: in.S3Prefix,
		S3SseAlgorithm: "AES256", S3SseKmsKeyId: in.S3SseKmsKeyId, ExportFormat: "DYNAMODB_JSON",
	}
	if incremental {
		f, t := epochSeconds(from), epochSeconds(to)
		d.ExportType = "INCREMENTAL_EXPORT"
		d.IncrementalExportSpecification = &IncrementalExportSpecification{ExportFromTime: &f, ExportToTime: &t, ExportViewType: &view}
	} else {
		d.ExportTime = &exportTime
	}
	if in.ClientToken != nil {
		d.ClientToken = *in.ClientToken
	}
	if in.S3SseAlgorithm != nil {
		d.S3SseAlgorithm = *in.S3SseAlgorithm
	}
	if in.ExportFormat != nil {
		d.ExportFormat = *in.ExportFormat
	}
	if in.ClientToken != nil {
		prev, err := e.claimExportToken(ctx, jobs, account, *in.ClientToken, exportParamsHash(in), &d, now)
		if err != nil || prev != nil {
			if prev != nil {
				return &ExportTableToPointInTimeOutput{ExportDescription: prev}, nil
			}
			return nil, err
		}
	}
	pay := exportPayload{ExportDescription: d, ExportID: id, HistoryPrefix: e.exports.HistoryPrefix(PITRHistory{
		Ref: t.ref, TableID: t.stored.Desc.TableId, Since: time.UnixMilli(p.Since)}),
		ExportTimeMs: at.UnixMilli(), ExportTypeAsked: "FULL_EXPORT", SourceRef: t.ref, RecoveryDays: p.Days,
		ExportTimeDefault: in.ExportTime == nil}
	if incremental {
		pay.ExportTypeAsked, pay.ExportTimeMs = "INCREMENTAL_EXPORT", 0
		pay.ExportFromTimeMs, pay.ExportToTimeMs, pay.ExportViewTypeAsked = from.UnixMilli(), to.UnixMilli(), view
	}
	raw, err := json.Marshal(&pay)
	if err != nil {
		return nil, err
	}
	res, err := jobs.InsertJob(ctx, backend.JobRecord{Kind: JobKindExport, ID: arn, Account: account, Status: ExportInProgress,
		CreatedAt: now, Payload: raw, Owner: e.exports.Owner()})
	if err != nil {
		return nil, err
	}
	if !res.Matched {
		return nil, newErr(CodeInternal, "export %s exists already", arn)
	}
	e.exports.RunExport(*res.Record)
	return &ExportTableToPointInTimeOutput{ExportDescription: &d}, nil
}

// exportTimes is what an export reads: the instant of a full export, or
// the period [from, to) and view of an incremental one.
type exportTimes struct {
	at, from, to time.Time
	view         string
}

// exportSpan checks the request's instant or period against the table's
// recovery window w (PITR on since p.Since) and the clock, with
// DynamoDB's messages.
func exportSpan(in *ExportTableToPointInTimeInput, p *pitrSetting, w PITRWindow, now time.Time) (exportTimes, error) {
	incremental := in.ExportType != nil && *in.ExportType == "INCREMENTAL_EXPORT"
	at := w.Latest
	var from, to time.Time
	view := "NEW_AND_OLD_IMAGES"
	if incremental {
		spec := in.IncrementalExportSpecification
		if in.ExportTime != nil {
			return exportTimes{}, validationf("Invalid Request: ExportTime cannot be specified for an incremental export")
		}
		from = time.UnixMilli(int64(math.Round(*spec.ExportFromTime * 1000)))
		to = w.Latest
		if spec.ExportToTime != nil {
			to = time.UnixMilli(int64(math.Round(*spec.ExportToTime * 1000)))
		}
		if spec.ExportViewType != nil {
			view = *spec.ExportViewType
		}
		earliest := time.UnixMilli(p.Since)
		if w.Earliest.After(earliest) {
			earliest = w.Earliest
		}
		switch {
		case from.Before(earliest) || (spec.ExportToTime != nil && !from.Before(to)):
			return exportTimes{}, newErr(CodeInvalidExportTime, "Incremental export period from time cannot be less than the table creation time : %s",
				earliest.UTC().Format("2006-01-02T15:04:05Z"))
		case to.After(now):
			return exportTimes{}, newErr(CodeInvalidExportTime, "Incremental export period to time cannot be greater than the current time : %s",
				now.UTC().Format("2006-01-02T15:04:05Z"))
		case to.Sub(from) < minIncrementalPeriod:
			return exportTimes{}, newErr(CodeInvalidExportTime, "Difference between export period from time and export period to time is less than 15 minutes")
		case to.Sub(from) > maxIncrementalPeriod:
			return exportTimes{}, newErr(CodeInvalidExportTime, "Difference between export period from time and export period to time is greater than 24 hours")
		case w.Latest.IsZero() || to.After(w.Latest):
			return exportTimes{}, newErr(CodeInvalidExportTime, "Point in Time Recovery is not available for specified export time "+
				"(the table's history is shipped up to %s)", w.Latest.UTC().Format(time.RFC3339Nano))
		}
	} else if in.ExportTime != nil {
		at = time.UnixMilli(int64(math.Round(*in.ExportTime * 1000)))
		switch {
		case at.After(now), at.Before(time.UnixMilli(p.Since)), !w.Earliest.IsZero() && at.Before(w.Earliest):
			return exportTimes{}, newErr(CodeInvalidExportTime, "Export Time is invalid")
		case w.Latest.IsZero() || at.After(w.Latest):
			return exportTimes{}, newErr(CodeInvalidExportTime, "Point in Time Recovery is not available for specified export time")
		}
	} else {
		// The request's instant: the job waits until the history is
		// shipped up to it (within a ship interval).
		at = now
	}
	return exportTimes{at: at, from: from, to: to, view: view}, nil
}

// claimExportToken records a ClientToken for the new export d (its ARN
// minted). When the token already names an export (within
// ClientTokenTTL), it answers that export's description if the
// parameters are the same, and ExportConflictException if not.
func (e *Engine) claimExportToken(ctx context.Context, jobs backend.JobCatalog, account, token, hash string, d *ExportDescription, now time.Time) (*ExportDescription, error) {
	initial, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	_, prev, err := claimClientToken(ctx, jobs, JobKindExportToken, e.exports.Owner(), account, token,
		tokenRow{ParamsHash: hash, Target: d.ExportArn, Initial: initial}, now, func() error {
			return newErr(CodeExportConflict, "Export conflict: Duplicate request detected with conflicting parameters")
		})
	if err != nil || prev == nil {
		return nil, err
	}
	rec, err := jobs.GetJob(ctx, JobKindExport, prev.Target)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		// The request that took the token has not written its export
		// yet.
		var d ExportDescription
		if err := json.Unmarshal(prev.Initial, &d); err != nil {
			return nil, fmt.Errorf("export token %s/%s: %w", account, token, err)
		}
		return &d, nil
	}
	return exportDescriptionOf(rec)
}

// exportDescriptionOf reads an export row as DescribeExport shows it.
func exportDescriptionOf(rec *backend.JobRecord) (*ExportDescription, error) {
	var p exportPayload
	if err := json.Unmarshal(rec.Payload, &p); err != nil {
		return nil, fmt.Errorf("export %s: %w", rec.ID, err)
	}
	d := p.ExportDescription
	d.ExportStatus = rec.Status
	return &d, nil
}

// DescribeExport describes an export of this account.
func (e *Engine) DescribeExport(ctx context.Context, account string, in *DescribeExportInput) (*DescribeExportOutput, error) {
	var c constraintErrors
	if in.ExportArn == nil {
		c.add(nil, "exportArn", "Member must not be null")
	}
	checkLen(&c, "exportArn", in.ExportArn, 37, 1024)
	if err := c.err(); err != nil {
		return nil, err
	}
	arn := *in.ExportArn
	if !exportArnRE.MatchString(arn) {
		return nil, validationf("Invalid Export ARN")
	}
	jobs := e.backend.Capabilities().Jobs
	if jobs == nil || !strings.HasPrefix(arn, "arn:aws:dynamodb:"+e.region+":"+account+":") {
		return nil, newErr(CodeExportNotFound, "Export not found: Export not found: %s", arn)
	}
	rec, err := jobs.GetJob(ctx, JobKindExport, arn)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Account != account {
		return nil, newErr(CodeExportNotFound, "Export not found: Export not found: %s", arn)
	}
	d, err := exportDescriptionOf(rec)
	if err != nil {
		return nil, err
	}
	return &DescribeExportOutput{ExportDescription: d}, nil
}

// ListExports lists the account's exports, newest first; with TableArn,
// those of the table as it exists now (an export of a deleted table, or
// of an earlier table of the same name, is left out, as on the service).
func (e *Engine) ListExports(ctx context.Context, account string, in *ListExportsInput) (*ListExportsOutput, error) {
	var c constraintErrors
	checkLen(&c, "tableArn", in.TableArn, 1, 1024)
	limit := 25
	if in.MaxResults != nil {
		switch {
		case *in.MaxResults < 1:
			c.add(strconv.FormatInt(*in.MaxResults, 10), "maxResults", "Member must have value greater than or equal to 1")
		case *in.MaxResults > 25:
			c.add(strconv.FormatInt(*in.MaxResults, 10), "maxResults", "Member must have value less than or equal to 25")
		default:
			limit = int(*in.MaxResults)
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	after := ""
	if in.NextToken != nil {
		b, err := hex.DecodeString(*in.NextToken)
		if err != nil || !exportArnRE.Match(b) {
			return nil, validationf("Invalid Request: Provided nextToken is invalid: %s", *in.NextToken)
		}
		after = string(b)
	}
	out := &ListExportsOutput{ExportSummaries: []ExportSummary{}}
	jobs := e.backend.Capabilities().Jobs
	if jobs == nil {
		return out, nil
	}
	tableID := ""
	if in.TableArn != nil {
		name, err := e.exportSourceName(account, *in.TableArn)
		if err != nil {
			if ee, ok := err.(*Error); ok && ee.Code == CodeTableNotFound {
				return out, nil
			}
			return nil, err
		}
		t, err := e.loadTable(ctx, account, name)
		if err != nil {
			if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
				return out, nil
			}
			return nil, err
		}
		tableID = t.stored.Desc.TableId
	}
	rows, err := jobs.ListJobs(ctx, backend.ListJobsParams{Kind: JobKindExport, Account: account})
	if err != nil {
		return nil, err
	}
	// Newest first: by ExportId (its start instant), then ARN.
	type row struct {
		rec backend.JobRecord
		id  string
	}
	var list []row
	for _, r := range rows {
		var p exportPayload
		if json.Unmarshal(r.Payload, &p) != nil {
			continue
		}
		if tableID != "" && (p.TableId != tableID || p.TableArn != *in.TableArn) {
			continue
		}
		list = append(list, row{r, p.ExportID})
	}
	slices.SortFunc(list, func(a, b row) int {
		if c := strings.Compare(b.id, a.id); c != 0 {
			return c
		}
		return strings.Compare(b.rec.ID, a.rec.ID)
	})
	start := 0
	if after != "" {
		start = len(list)
		for i, r := range list {
			if r.rec.ID == after {
				start = i + 1
				break
			}
		}
	}
	for i := start; i < len(list); i++ {
		if len(out.ExportSummaries) == limit {
			tok := hex.EncodeToString([]byte(list[i-1].rec.ID))
			out.NextToken = &tok
			break
		}
		r := list[i]
		var p exportPayload
		_ = json.Unmarshal(r.rec.Payload, &p)
		typ := p.ExportTypeAsked
		if typ == "" {
			typ = "FULL_EXPORT"
		}
		out.ExportSummaries = append(out.ExportSummaries, ExportSummary{ExportArn: r.rec.ID, ExportStatus: r.rec.Status, ExportType: typ})
	}
	return out, nil
}

// isCode tells whether err is an engine error of code c.
func isCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}
