package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

// Exports (ExportTableToPointInTime, DescribeExport, ListExports;
// docs/exports.md, ADR 0049). The engine checks the request and the
// table (point-in-time recovery on, the instant in its window), makes a
// ClientToken idempotent for 8 hours through the job catalog, and hands
// the export to the ExportService (internal/backup's Manager), which
// writes AWS's layout into the bucket. An export row's payload is the
// ExportDescription as the wire carries it.

// ExportService starts exports (internal/backup.Manager satisfies it
// through the server's adapter).
type ExportService interface {
	// StartExport pins the table's snapshot, records the export and
	// starts it; desc holds the request fields of the ExportDescription
	// (JSON); the answer is the description (JSON) with ExportArn,
	// ExportStatus, ExportTime and StartTime filled.
	StartExport(ctx context.Context, account, table string, desc []byte) ([]byte, error)
}

// SetExports installs the export jobs; without them the export
// operations answer a ValidationException naming [backup.store]. Call it
// before serving.
func (e *Engine) SetExports(s ExportService) { e.exports = s }

// Job catalog kinds of exports.
const (
	kindExport      = "export"
	kindExportToken = "export-token"
)

// exportTokenLife is how long a ClientToken names its export.
const exportTokenLife = 8 * time.Hour

// ExportDescription is DynamoDB's ExportDescription.
type ExportDescription struct {
	ExportArn       string   `json:"ExportArn"`
	ExportStatus    string   `json:"ExportStatus"`
	StartTime       *float64 `json:"StartTime,omitempty"`
	EndTime         *float64 `json:"EndTime,omitempty"`
	ExportManifest  string   `json:"ExportManifest,omitempty"`
	TableArn        string   `json:"TableArn"`
	TableId         string   `json:"TableId,omitempty"`
	ExportTime      *float64 `json:"ExportTime,omitempty"`
	ClientToken     string   `json:"ClientToken,omitempty"`
	S3Bucket        string   `json:"S3Bucket"`
	S3BucketOwner   string   `json:"S3BucketOwner,omitempty"`
	S3Prefix        string   `json:"S3Prefix,omitempty"`
	S3SseAlgorithm  string   `json:"S3SseAlgorithm,omitempty"`
	S3SseKmsKeyId   string   `json:"S3SseKmsKeyId,omitempty"`
	FailureCode     string   `json:"FailureCode,omitempty"`
	FailureMessage  string   `json:"FailureMessage,omitempty"`
	ExportFormat    string   `json:"ExportFormat"`
	ExportType      string   `json:"ExportType,omitempty"`
	BilledSizeBytes *int64   `json:"BilledSizeBytes,omitempty"`
	ItemCount       *int64   `json:"ItemCount,omitempty"`
}

type ExportTableToPointInTimeInput struct {
	TableArn                       *string         `json:"TableArn"`
	ExportTime                     *float64        `json:"ExportTime"`
	ClientToken                    *string         `json:"ClientToken"`
	S3Bucket                       *string         `json:"S3Bucket"`
	S3BucketOwner                  *string         `json:"S3BucketOwner"`
	S3Prefix                       *string         `json:"S3Prefix"`
	S3SseAlgorithm                 *string         `json:"S3SseAlgorithm"`
	S3SseKmsKeyId                  *string         `json:"S3SseKmsKeyId"`
	ExportFormat                   *string         `json:"ExportFormat"`
	ExportType                     *string         `json:"ExportType"`
	IncrementalExportSpecification json.RawMessage `json:"IncrementalExportSpecification"`
}

type ExportOutput struct {
	ExportDescription *ExportDescription `json:"ExportDescription"`
}

type DescribeExportInput struct {
	ExportArn *string `json:"ExportArn"`
}

type ListExportsInput struct {
	TableArn   *string `json:"TableArn"`
	MaxResults *int64  `json:"MaxResults"`
	NextToken  *string `json:"NextToken"`
}

type ExportSummary struct {
	ExportArn    string `json:"ExportArn"`
	ExportStatus string `json:"ExportStatus"`
	ExportType   string `json:"ExportType,omitempty"`
}

type ListExportsOutput struct {
	ExportSummaries []ExportSummary `json:"ExportSummaries"`
	NextToken       string          `json:"NextToken,omitempty"`
}

var (
	exportArnRE   = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:([a-z0-9-]+):([0-9]{12}):table/([a-zA-Z0-9_.-]{3,255})/export/([0-9]{14}-[0-9a-f]{8})$`)
	clientTokenRE = regexp.MustCompile(`^[^\s]+$`)
)

// ExportTableToPointInTime starts an export of a table with
// point-in-time recovery to S3 (or a bucket directory, [s3]
// filesystem_root) in AWS's layout. The table is read as of the request;
// an ExportTime earlier than it is refused (see docs/compatibility.md).
func (e *Engine) ExportTableToPointInTime(ctx context.Context, account string, in *ExportTableToPointInTimeInput) (*ExportOutput, error) {
	var c constraintErrors
	if in.TableArn == nil {
		c.add(nil, "tableArn", "Member must not be null")
	} else if n := len(*in.TableArn); n < 1 || n > 1024 {
		c.add(*in.TableArn, "tableArn", "Member must have length between 1 and 1024")
	}
	if in.S3Bucket == nil {
		c.add(nil, "s3Bucket", "Member must not be null")
	} else if n := len(*in.S3Bucket); n > 255 {
		c.add(*in.S3Bucket, "s3Bucket", "Member must have length less than or equal to 255")
	}
	if p := in.S3Prefix; p != nil && len(*p) > 1024 {
		c.add(*p, "s3Prefix", "Member must have length less than or equal to 1024")
	}
	if f := in.ExportFormat; f != nil && *f != "DYNAMODB_JSON" && *f != "ION" {
		c.add(*f, "exportFormat", "Member must satisfy enum value set: [ION, DYNAMODB_JSON]")
	}
	if t := in.ExportType; t != nil && *t != "FULL_EXPORT" && *t != "INCREMENTAL_EXPORT" {
		c.add(*t, "exportType", "Member must satisfy enum value set: [FULL_EXPORT, INCREMENTAL_EXPORT]")
	}
	if a := in.S3SseAlgorithm; a != nil && *a != "AES256" && *a != "KMS" {
		c.add(*a, "s3SseAlgorithm", "Member must satisfy enum value set: [AES256, KMS]")
	}
	if t := in.ClientToken; t != nil && (len(*t) < 1 || len(*t) > 100 || !clientTokenRE.MatchString(*t)) {
		c.add(*t, "clientToken", "Member must satisfy regular expression pattern: ^[^\\$]+$")
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	if in.ExportType != nil && *in.ExportType == "INCREMENTAL_EXPORT" {
		return nil, validationf("Invalid Request: INCREMENTAL_EXPORT is not supported by this server; use FULL_EXPORT")
	}
	if in.ExportType == nil && len(in.IncrementalExportSpecification) > 0 && string(in.IncrementalExportSpecification) != "null" {
		return nil, validationf("Invalid Request: IncrementalExportSpecification is only valid with ExportType INCREMENTAL_EXPORT")
	}
	if in.S3SseKmsKeyId != nil && (in.S3SseAlgorithm == nil || *in.S3SseAlgorithm != "KMS") {
		return nil, validationf("Invalid Request: KMS Key Id is not supported for this encryption type")
	}
	if e.exports == nil {
		if e.backupsOff != "" {
			return nil, validationf("Exports are unavailable on this server: %s", e.backupsOff)
		}
		return nil, validationf("Exports are not enabled on this server: configure a backup store in the [backup.store] section (kind = \"filesystem\" or \"s3\") and the buckets in [s3]")
	}
	jobs := e.backend.Capabilities().Jobs
	name := tableNameOrArn(*in.TableArn)
	if name == *in.TableArn {
		return nil, validationf("Invalid TableArn: Invalid ResourceArn provided as input %s", *in.TableArn)
	}
	if *in.TableArn != e.tableArn(account, name) {
		return nil, newErr(CodeTableNotFound, "Table not found: %s", *in.TableArn)
	}
	t, err := e.freshTable(ctx, account, &name)
	if err != nil {
		if isCode(err, CodeResourceNotFound) {
			return nil, newErr(CodeTableNotFound, "Table not found: %s", name)
		}
		return nil, err
	}
	if t.stored.PITR == nil {
		return nil, newErr(CodePITRUnavailable, "Point in time recovery is not enabled for table '%s'", name)
	}
	if in.ExportTime != nil {
		if math.IsNaN(*in.ExportTime) || math.IsInf(*in.ExportTime, 0) {
			return nil, invalidParam("ExportTime is not a valid timestamp")
		}
		at := time.UnixMilli(int64(math.Round(*in.ExportTime * 1000)))
		now := e.now()
		since := time.UnixMilli(t.stored.PITR.Since)
		switch {
		case at.After(now):
			return nil, newErr(CodeInvalidExportTime, "Export time cannot be in the future: %s", at.UTC().Format(time.RFC3339Nano))
		case at.Before(since):
			return nil, newErr(CodeInvalidExportTime, "Export time must be within the point-in-time recovery window of the table, which starts at %s",
				since.UTC().Format(time.RFC3339Nano))
		case now.Sub(at) > exportTimeSlack:
			return nil, validationf("Invalid Request: this server exports a table as of the request; ExportTime %s is earlier "+
				"(restore the table to that instant with RestoreTableToPointInTime, then export the restored table)", at.UTC().Format(time.RFC3339Nano))
		}
	}
	req := ExportDescription{TableArn: *in.TableArn, TableId: t.stored.Desc.TableId, S3Bucket: *in.S3Bucket,
		ExportFormat: "DYNAMODB_JSON", ExportType: "FULL_EXPORT", S3SseAlgorithm: "AES256"}
	for _, f := range []struct {
		dst *string
		src *string
	}{{&req.S3BucketOwner, in.S3BucketOwner}, {&req.S3Prefix, in.S3Prefix}, {&req.S3SseAlgorithm, in.S3SseAlgorithm},
		{&req.S3SseKmsKeyId, in.S3SseKmsKeyId}, {&req.ExportFormat, in.ExportFormat}, {&req.ClientToken, in.ClientToken}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	// A ClientToken names one export for 8 hours: the same request
	// answers it again, another request is ExportConflictException.
	var token *storage.JobRecord
	if req.ClientToken != "" {
		if jobs == nil {
			return nil, validationf("Exports are unavailable on this server: the %s backend has no job catalog", e.backend.Name())
		}
		sum := exportRequestHash(req, in.ExportTime)
		now := e.now()
		for attempt := 0; ; attempt++ {
			res, err := jobs.InsertJob(ctx, storage.JobRecord{Kind: kindExportToken, ID: account + "/" + req.ClientToken, Account: account,
				Status: "PENDING", CreatedAt: now, Payload: []byte(`{"hash":"` + sum + `"}`), Owner: "engine"})
			if err != nil {
				return nil, err
			}
			r := res.Record
			if !res.Matched && now.Sub(r.CreatedAt) > exportTokenLife && attempt == 0 {
				if _, err := jobs.RemoveJob(ctx, storage.RemoveJobParams{Kind: kindExportToken, ID: r.ID, Generation: r.Generation, Status: r.Status}); err != nil {
					return nil, err
				}
				continue // an expired token starts afresh
			}
			var tok struct{ Hash, Export string }
			_ = json.Unmarshal(r.Payload, &tok)
			if !res.Matched {
				if tok.Hash != sum {
					return nil, newErr(CodeExportConflict, "Export conflict: Duplicate request detected with conflicting parameters")
				}
				if tok.Export == "" {
					return nil, newErr(CodeLimitExceeded, "Export with ClientToken %s is being started; retry", req.ClientToken)
				}
				return e.describeExportID(ctx, account, tok.Export)
			}
			token = r
			break
		}
	}
	reqJSON, _ := json.Marshal(req)
	out, err := e.exports.StartExport(ctx, account, name, reqJSON)
	if err != nil {
		if token != nil {
			_, _ = jobs.RemoveJob(context.WithoutCancel(ctx), storage.RemoveJobParams{Kind: kindExportToken, ID: token.ID,
				Generation: token.Generation, Status: token.Status})
		}
		return nil, backupErr(err, name)
	}
	var d ExportDescription
	if err := json.Unmarshal(out, &d); err != nil {
		return nil, err
	}
	if token != nil {
		id := d.ExportArn[strings.LastIndexByte(d.ExportArn, '/')+1:]
		raw, _ := json.Marshal(map[string]string{"hash": exportRequestHash(req, in.ExportTime), "export": id})
		if _, err := jobs.UpdateJob(ctx, storage.UpdateJobParams{Kind: kindExportToken, ID: token.ID, Generation: token.Generation,
			Status: token.Status, NewStatus: "STARTED", Payload: raw}); err != nil {
			return nil, err
		}
	}
	return &ExportOutput{ExportDescription: &d}, nil
}

// exportTimeSlack is how far before the request an ExportTime may be and
// still be served by the snapshot the export opens (clocks of client and
// server, and the request's own time on the way).
const exportTimeSlack = 5 * time.Second

// exportRequestHash identifies a request's parameters for its ClientToken.
func exportRequestHash(d ExportDescription, at *float64) string {
	t := ""
	if at != nil {
		t = strconv.FormatFloat(*at, 'f', 3, 64)
	}
	h := sha256.Sum256([]byte(strings.Join([]string{d.TableArn, d.S3Bucket, d.S3BucketOwner, d.S3Prefix, d.S3SseAlgorithm,
		d.S3SseKmsKeyId, d.ExportFormat, d.ExportType, t}, "\x00")))
	return hex.EncodeToString(h[:])
}

// DescribeExport describes an export by its ARN.
func (e *Engine) DescribeExport(ctx context.Context, account string, in *DescribeExportInput) (*ExportOutput, error) {
	if in.ExportArn == nil {
		return nil, validationf("1 validation error detected: Value null at 'exportArn' failed to satisfy constraint: Member must not be null")
	}
	m := exportArnRE.FindStringSubmatch(*in.ExportArn)
	if m == nil {
		if len(*in.ExportArn) < 37 || len(*in.ExportArn) > 1024 {
			return nil, validationf("1 validation error detected: Value '%s' at 'exportArn' failed to satisfy constraint: Member must have length between 37 and 1024", *in.ExportArn)
		}
		return nil, validationf("Invalid Export ARN")
	}
	if m[1] != e.region || m[2] != account {
		return nil, newErr(CodeExportNotFound, "Export not found: %s", *in.ExportArn)
	}
	out, err := e.describeExportID(ctx, account, m[4])
	if err != nil || out.ExportDescription.ExportArn != *in.ExportArn {
		if err == nil || isCode(err, CodeExportNotFound) {
			return nil, newErr(CodeExportNotFound, "Export not found: %s", *in.ExportArn)
		}
		return nil, err
	}
	return out, nil
}

func (e *Engine) describeExportID(ctx context.Context, account, id string) (*ExportOutput, error) {
	jobs := e.backend.Capabilities().Jobs
	if jobs == nil {
		return nil, newErr(CodeExportNotFound, "Export not found: %s", id)
	}
	r, err := jobs.GetJob(ctx, kindExport, id)
	if err != nil {
		return nil, err
	}
	if r == nil || r.Account != account {
		return nil, newErr(CodeExportNotFound, "Export not found: %s", id)
	}
	var d ExportDescription
	if err := json.Unmarshal(r.Payload, &d); err != nil {
		return nil, err
	}
	return &ExportOutput{ExportDescription: &d}, nil
}

// ListExports lists the account's exports (of one table with TableArn),
// oldest first, MaxResults (1-25, default 25) at a time.
func (e *Engine) ListExports(ctx context.Context, account string, in *ListExportsInput) (*ListExportsOutput, error) {
	limit := 25
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 25 {
			return nil, validationf("1 validation error detected: Value '%d' at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 25", *in.MaxResults)
		}
		limit = int(*in.MaxResults)
	}
	start := ""
	if in.NextToken != nil {
		if !regexp.MustCompile(`^[0-9]{14}-[0-9a-f]{8}$`).MatchString(*in.NextToken) {
			return nil, validationf("Invalid Request: Provided nextToken is invalid: %s", *in.NextToken)
		}
		start = *in.NextToken
	}
	out := &ListExportsOutput{ExportSummaries: []ExportSummary{}}
	jobs := e.backend.Capabilities().Jobs
	if jobs == nil {
		return out, nil
	}
	for {
		rows, err := jobs.ListJobs(ctx, storage.ListJobsParams{Kind: kindExport, Account: account, StartAfter: start, Limit: 100})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			start = r.ID
			var d ExportDescription
			if err := json.Unmarshal(r.Payload, &d); err != nil {
				continue
			}
			if in.TableArn != nil && d.TableArn != *in.TableArn {
				continue
			}
			if len(out.ExportSummaries) == limit {
				out.NextToken = out.ExportSummaries[limit-1].ExportArn[strings.LastIndexByte(out.ExportSummaries[limit-1].ExportArn, '/')+1:]
				return out, nil
			}
			out.ExportSummaries = append(out.ExportSummaries, ExportSummary{ExportArn: d.ExportArn, ExportStatus: d.ExportStatus, ExportType: d.ExportType})
		}
		if len(rows) < 100 {
			return out, nil
		}
	}
}

func isCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}
