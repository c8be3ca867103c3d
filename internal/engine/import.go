package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

// Imports (ImportTable, DescribeImport, ListImports; docs/imports.md, ADR
// 0050). The engine checks the request, builds the new table's stored
// description (CREATING, marked with the import's id), makes a
// ClientToken idempotent through the job catalog and hands the import to
// the ImportService (internal/backup's Manager), which records the job,
// creates the table, loads it from the bucket and flips it ACTIVE. An
// import row's payload holds the ImportTableDescription as the wire
// carries it.

// ImportService starts imports (internal/backup.Manager through the
// server's adapter). req is an ImportRequest as JSON; the answer is the
// ImportTableDescription as JSON.
type ImportService interface {
	StartImport(ctx context.Context, account string, req []byte) ([]byte, error)
}

// SetImports installs the import jobs; without them ImportTable answers a
// ValidationException naming the configuration. Call it before serving.
func (e *Engine) SetImports(s ImportService) { e.imports = s }

// Job catalog kinds of imports.
const (
	kindImport      = "import"
	kindImportToken = "import-token"
)

// importListDays is how long ListImports lists an import.
const importListDays = 90

type S3BucketSource struct {
	S3Bucket      *string `json:"S3Bucket,omitempty"`
	S3BucketOwner *string `json:"S3BucketOwner,omitempty"`
	S3KeyPrefix   *string `json:"S3KeyPrefix,omitempty"`
}

type CsvOptions struct {
	Delimiter  *string  `json:"Delimiter,omitempty"`
	HeaderList []string `json:"HeaderList,omitempty"`
}

type InputFormatOptions struct {
	Csv *CsvOptions `json:"Csv,omitempty"`
}

type TableCreationParameters struct {
	TableName              *string                `json:"TableName"`
	AttributeDefinitions   []AttributeDefinition  `json:"AttributeDefinitions"`
	KeySchema              []KeySchemaElement     `json:"KeySchema"`
	BillingMode            string                 `json:"BillingMode,omitempty"`
	ProvisionedThroughput  *ProvisionedThroughput `json:"ProvisionedThroughput,omitempty"`
	OnDemandThroughput     json.RawMessage        `json:"OnDemandThroughput,omitempty"`
	SSESpecification       *SSESpecification      `json:"SSESpecification,omitempty"`
	GlobalSecondaryIndexes []GlobalSecondaryIndex `json:"GlobalSecondaryIndexes,omitempty"`
}

// ImportTableDescription is DynamoDB's ImportTableDescription.
type ImportTableDescription struct {
	ImportArn               string                   `json:"ImportArn"`
	ImportStatus            string                   `json:"ImportStatus"`
	TableArn                string                   `json:"TableArn,omitempty"`
	TableId                 string                   `json:"TableId,omitempty"`
	ClientToken             string                   `json:"ClientToken,omitempty"`
	S3BucketSource          *S3BucketSource          `json:"S3BucketSource,omitempty"`
	ErrorCount              int64                    `json:"ErrorCount"`
	CloudWatchLogGroupArn   string                   `json:"CloudWatchLogGroupArn,omitempty"`
	InputFormat             string                   `json:"InputFormat"`
	InputFormatOptions      *InputFormatOptions      `json:"InputFormatOptions,omitempty"`
	InputCompressionType    string                   `json:"InputCompressionType,omitempty"`
	TableCreationParameters *TableCreationParameters `json:"TableCreationParameters,omitempty"`
	StartTime               *float64                 `json:"StartTime,omitempty"`
	EndTime                 *float64                 `json:"EndTime,omitempty"`
	ProcessedSizeBytes      int64                    `json:"ProcessedSizeBytes"`
	ProcessedItemCount      int64                    `json:"ProcessedItemCount"`
	ImportedItemCount       int64                    `json:"ImportedItemCount"`
	FailureCode             string                   `json:"FailureCode,omitempty"`
	FailureMessage          string                   `json:"FailureMessage,omitempty"`
}

// ImportKey is a key attribute the items must carry (the table's) or may
// carry only with its type (the indexes', Optional).
type ImportKey struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Optional bool   `json:"optional,omitempty"`
}

// ImportRequest is what the ImportService gets: the description so far
// (ImportArn, ImportStatus IN_PROGRESS, the request's members), the
// new table's stored description, and the key attributes.
type ImportRequest struct {
	ID        string                 `json:"id"`
	TableName string                 `json:"tableName"`
	Desc      ImportTableDescription `json:"desc"`
	Table     json.RawMessage        `json:"table"`
	Keys      []ImportKey            `json:"keys"`
}

type ImportTableInput struct {
	ClientToken             *string                  `json:"ClientToken"`
	S3BucketSource          *S3BucketSource          `json:"S3BucketSource"`
	InputFormat             *string                  `json:"InputFormat"`
	InputFormatOptions      *InputFormatOptions      `json:"InputFormatOptions"`
	InputCompressionType    *string                  `json:"InputCompressionType"`
	TableCreationParameters *TableCreationParameters `json:"TableCreationParameters"`
}

type ImportTableOutput struct {
	ImportTableDescription *ImportTableDescription `json:"ImportTableDescription"`
}

type DescribeImportInput struct {
	ImportArn *string `json:"ImportArn"`
}

type DescribeImportOutput struct {
	ImportTableDescription *ImportTableDescription `json:"ImportTableDescription"`
}

type ListImportsInput struct {
	TableArn  *string `json:"TableArn"`
	PageSize  *int64  `json:"PageSize"`
	NextToken *string `json:"NextToken"`
}

type ImportSummary struct {
	ImportArn             string          `json:"ImportArn"`
	ImportStatus          string          `json:"ImportStatus"`
	TableArn              string          `json:"TableArn,omitempty"`
	S3BucketSource        *S3BucketSource `json:"S3BucketSource,omitempty"`
	CloudWatchLogGroupArn string          `json:"CloudWatchLogGroupArn,omitempty"`
	InputFormat           string          `json:"InputFormat"`
	StartTime             *float64        `json:"StartTime,omitempty"`
	EndTime               *float64        `json:"EndTime,omitempty"`
}

type ListImportsOutput struct {
	ImportSummaryList []ImportSummary `json:"ImportSummaryList"`
	NextToken         string          `json:"NextToken,omitempty"`
}

var (
	importArnRE   = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:([a-z0-9-]+):([0-9]{12}):table/([a-zA-Z0-9_.-]{3,255})/import/([0-9]{14}-[0-9a-f]{8})$`)
	importIDRE    = regexp.MustCompile(`^[0-9]{14}-[0-9a-f]{8}$`)
	bucketNameRE  = regexp.MustCompile(`^[a-z0-9A-Z]+[\.\-\w]*[a-z0-9A-Z]+$`)
	bucketOwnerRE = regexp.MustCompile(`^[0-9]{12}$`)
	delimiterRE   = regexp.MustCompile(`^[,;:|\t ]$`)
)

// newImportID mints an import id: the time in milliseconds (14 digits,
// so ids sort by time) and 8 random hex digits.
func newImportID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%014d-%s", now.UnixMilli(), hex.EncodeToString(b[:]))
}

// checkImportTable validates the request's members, with the service's
// "N validation errors detected" wording.
func checkImportTable(in *ImportTableInput) error {
	var c constraintErrors
	if in.S3BucketSource == nil {
		c.add(nil, "s3BucketSource", "Member must not be null")
	} else {
		s := in.S3BucketSource
		if s.S3Bucket == nil {
			c.add(nil, "s3BucketSource.s3Bucket", "Member must not be null")
		} else if len(*s.S3Bucket) > 255 {
			c.add(*s.S3Bucket, "s3BucketSource.s3Bucket", "Member must have length less than or equal to 255")
		} else if !bucketNameRE.MatchString(*s.S3Bucket) {
			c.add(*s.S3Bucket, "s3BucketSource.s3Bucket", "Member must satisfy regular expression pattern: ^[a-z0-9A-Z]+[\\.\\-\\w]*[a-z0-9A-Z]+$")
		}
		if o := s.S3BucketOwner; o != nil && !bucketOwnerRE.MatchString(*o) {
			c.add(*o, "s3BucketSource.s3BucketOwner", "Member must satisfy regular expression pattern: [0-9]{12}")
		}
		if p := s.S3KeyPrefix; p != nil && len(*p) > 1024 {
			c.add(*p, "s3BucketSource.s3KeyPrefix", "Member must have length less than or equal to 1024")
		}
	}
	if in.InputFormat == nil {
		c.add(nil, "inputFormat", "Member must not be null")
	} else if f := *in.InputFormat; f != "DYNAMODB_JSON" && f != "ION" && f != "CSV" {
		c.add(f, "inputFormat", "Member must satisfy enum value set: [ION, CSV, DYNAMODB_JSON]")
	}
	if t := in.InputCompressionType; t != nil && *t != "GZIP" && *t != "ZSTD" && *t != "NONE" {
		c.add(*t, "inputCompressionType", "Member must satisfy enum value set: [ZSTD, NONE, GZIP]")
	}
	if o := in.InputFormatOptions; o != nil && o.Csv != nil {
		if d := o.Csv.Delimiter; d != nil {
			if len(*d) != 1 {
				c.add(*d, "inputFormatOptions.csv.delimiter", "Member must have length less than or equal to 1")
			}
			if !delimiterRE.MatchString(*d) {
				c.add(*d, "inputFormatOptions.csv.delimiter", "Member must satisfy regular expression pattern: [,;:|\\t ]")
			}
		}
		if h := o.Csv.HeaderList; h != nil {
			if len(h) < 1 || len(h) > 255 {
				c.add(fmt.Sprint(h), "inputFormatOptions.csv.headerList", "Member must have length between 1 and 255")
			}
			for _, name := range h {
				if len(name) < 1 || len(name) > 65536 {
					c.add(name, "inputFormatOptions.csv.headerList.member", "Member must have length between 1 and 65536")
				}
			}
		}
	}
	if in.TableCreationParameters == nil {
		c.add(nil, "tableCreationParameters", "Member must not be null")
	}
	if t := in.ClientToken; t != nil && (len(*t) < 1 || len(*t) > 100 || !clientTokenRE.MatchString(*t)) {
		c.add(*t, "clientToken", "Member must satisfy regular expression pattern: ^[^\\$]+$")
	}
	return c.err()
}

// ImportTable creates a table from the objects under an S3 key prefix
// (or a bucket directory, [s3] filesystem_root). It answers IN_PROGRESS
// at once; the job loads the table in the background.
func (e *Engine) ImportTable(ctx context.Context, account string, in *ImportTableInput) (*ImportTableOutput, error) {
	if err := checkImportTable(in); err != nil {
		return nil, err
	}
	p := in.TableCreationParameters
	ct := &CreateTableInput{TableName: p.TableName, KeySchema: p.KeySchema, AttributeDefinitions: p.AttributeDefinitions,
		BillingMode: p.BillingMode, ProvisionedThroughput: p.ProvisionedThroughput, GlobalSecondaryIndexes: p.GlobalSecondaryIndexes,
		SSESpecification: p.SSESpecification}
	if err := checkCreateTable(ct); err != nil {
		return nil, err
	}
	format := *in.InputFormat
	if o := in.InputFormatOptions; o != nil && o.Csv != nil && format != "CSV" {
		return nil, validationf("Invalid Request: Unsupported InputFormatOptions for the given input format: %s.", format)
	}
	if len(p.OnDemandThroughput) > 0 && string(p.OnDemandThroughput) != "null" && p.BillingMode != "PAY_PER_REQUEST" {
		return nil, invalidParam("MaxWriteRequestUnits for OnDemandThroughput cannot be specified when table BillingMode is PROVISIONED.")
	}
	now := e.now()
	st, err := e.newTable(account, ct, now)
	if err != nil {
		return nil, err
	}
	if e.imports == nil {
		if e.backupsOff != "" {
			return nil, validationf("Imports are unavailable on this server: %s", e.backupsOff)
		}
		return nil, validationf("Imports are not enabled on this server: configure a backup store in the [backup.store] section (kind = \"filesystem\" or \"s3\") and the buckets in [s3]")
	}
	jobs := e.backend.Capabilities().Jobs
	if jobs == nil {
		return nil, validationf("Imports are unavailable on this server: the %s backend has no job catalog", e.backend.Name())
	}
	name := *p.TableName
	id := newImportID(now)
	st.Desc.TableStatus = "CREATING"
	for i := range st.Desc.GlobalSecondaryIndexes {
		st.Desc.GlobalSecondaryIndexes[i].IndexStatus = "ACTIVE"
	}
	st.ImportJob = id
	rawTable, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	src := *in.S3BucketSource
	if src.S3BucketOwner == nil {
		owner := account
		src.S3BucketOwner = &owner
	}
	compression := "NONE"
	if in.InputCompressionType != nil {
		compression = *in.InputCompressionType
	}
	start := epochSeconds(now)
	d := ImportTableDescription{
		ImportArn: st.Desc.TableArn + "/import/" + id, ImportStatus: "IN_PROGRESS",
		TableArn: st.Desc.TableArn, TableId: st.Desc.TableId, S3BucketSource: &src,
		InputFormat: format, InputFormatOptions: in.InputFormatOptions, InputCompressionType: compression,
		TableCreationParameters: p, StartTime: &start,
		CloudWatchLogGroupArn: "arn:aws:logs:" + e.region + ":" + account + ":log-group:/aws-dynamodb/imports:*",
	}
	// A ClientToken names one import: the same request answers it again,
	// another request with the token is ImportConflictException.
	var token *storage.JobRecord
	if in.ClientToken != nil {
		d.ClientToken = *in.ClientToken
		sum := importRequestHash(in)
		res, err := jobs.InsertJob(ctx, storage.JobRecord{Kind: kindImportToken, ID: account + "/" + d.ClientToken, Account: account,
			Status: "PENDING", CreatedAt: now, Payload: []byte(`{"hash":"` + sum + `"}`), Owner: "engine"})
		if err != nil {
			return nil, err
		}
		r := res.Record
		if !res.Matched {
			var tok struct{ Hash, Import string }
			_ = json.Unmarshal(r.Payload, &tok)
			if tok.Hash != sum {
				return nil, newErr(CodeImportConflict, "Import conflict: Duplicate request detected with conflicting parameters")
			}
			if tok.Import == "" {
				return nil, newErr(CodeLimitExceeded, "Import with ClientToken %s is being started; retry", d.ClientToken)
			}
			out, err := e.describeImportID(ctx, account, tok.Import)
			if err != nil {
				return nil, err
			}
			return &ImportTableOutput{ImportTableDescription: out}, nil
		}
		token = r
	}
	dropToken := func() {
		if token != nil {
			_, _ = jobs.RemoveJob(context.WithoutCancel(ctx), storage.RemoveJobParams{Kind: kindImportToken, ID: token.ID,
				Generation: token.Generation, Status: token.Status})
		}
	}
	if _, err := e.backend.GetTable(ctx, storage.GetTableParams{Account: account, Name: name}); err == nil {
		dropToken()
		return nil, newErr(CodeResourceInUse, "Table already exists: %s", name)
	} else if !storage.IsKind(err, storage.KindTableNotFound) {
		dropToken()
		return nil, err
	}
	var keys []ImportKey
	defs := map[string]string{}
	for _, a := range p.AttributeDefinitions {
		defs[a.AttributeName] = a.AttributeType
	}
	for _, k := range st.Desc.KeySchema {
		keys = append(keys, ImportKey{Name: k.AttributeName, Type: defs[k.AttributeName]})
	}
	for _, g := range st.Desc.GlobalSecondaryIndexes {
		for _, k := range g.KeySchema {
			keys = append(keys, ImportKey{Name: k.AttributeName, Type: defs[k.AttributeName], Optional: true})
		}
	}
	req, _ := json.Marshal(ImportRequest{ID: id, TableName: name, Desc: d, Table: rawTable, Keys: keys})
	out, err := e.imports.StartImport(ctx, account, req)
	e.tables.drop(account, name)
	if err != nil {
		dropToken()
		if storage.IsKind(err, storage.KindTableExists) {
			return nil, newErr(CodeResourceInUse, "Table already exists: %s", name)
		}
		return nil, backupErr(err, name)
	}
	var got ImportTableDescription
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, err
	}
	if token != nil {
		raw, _ := json.Marshal(map[string]string{"hash": importRequestHash(in), "import": id})
		if _, err := jobs.UpdateJob(ctx, storage.UpdateJobParams{Kind: kindImportToken, ID: token.ID, Generation: token.Generation,
			Status: token.Status, NewStatus: "STARTED", Payload: raw}); err != nil {
			return nil, err
		}
	}
	return &ImportTableOutput{ImportTableDescription: &got}, nil
}

// importRequestHash identifies a request's parameters for its ClientToken.
func importRequestHash(in *ImportTableInput) string {
	c := *in
	c.ClientToken = nil
	b, _ := json.Marshal(c)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// DescribeImport describes an import by its ARN.
func (e *Engine) DescribeImport(ctx context.Context, account string, in *DescribeImportInput) (*DescribeImportOutput, error) {
	if in.ImportArn == nil {
		return nil, validationf("1 validation error detected: Value null at 'importArn' failed to satisfy constraint: Member must not be null")
	}
	m := importArnRE.FindStringSubmatch(*in.ImportArn)
	if m == nil {
		if len(*in.ImportArn) < 37 || len(*in.ImportArn) > 1024 {
			return nil, validationf("1 validation error detected: Value '%s' at 'importArn' failed to satisfy constraint: Member must have length between 37 and 1024", *in.ImportArn)
		}
		return nil, validationf("Invalid Import ARN")
	}
	notFound := newErr(CodeImportNotFound, "Import not found: %s", *in.ImportArn)
	if m[1] != e.region || m[2] != account {
		return nil, notFound
	}
	d, err := e.describeImportID(ctx, account, m[4])
	if err != nil {
		return nil, err
	}
	if d.ImportArn != *in.ImportArn {
		return nil, notFound
	}
	return &DescribeImportOutput{ImportTableDescription: d}, nil
}

func (e *Engine) describeImportID(ctx context.Context, account, id string) (*ImportTableDescription, error) {
	jobs := e.backend.Capabilities().Jobs
	if jobs == nil {
		return nil, newErr(CodeImportNotFound, "Import not found: %s", id)
	}
	r, err := jobs.GetJob(ctx, kindImport, id)
	if err != nil {
		return nil, err
	}
	if r == nil || r.Account != account {
		return nil, newErr(CodeImportNotFound, "Import not found: %s", id)
	}
	var req ImportRequest
	if err := json.Unmarshal(r.Payload, &req); err != nil {
		return nil, err
	}
	return &req.Desc, nil
}

// ListImports lists the account's imports of the last 90 days (of one
// table with TableArn), oldest first, PageSize (1-25, default 25) at a
// time.
func (e *Engine) ListImports(ctx context.Context, account string, in *ListImportsInput) (*ListImportsOutput, error) {
	limit := 25
	if in.PageSize != nil {
		if *in.PageSize < 1 || *in.PageSize > 25 {
			return nil, validationf("1 validation error detected: Value '%d' at 'pageSize' failed to satisfy constraint: Member must have value between 1 and 25", *in.PageSize)
		}
		limit = int(*in.PageSize)
	}
	if in.TableArn != nil && (len(*in.TableArn) < 1 || len(*in.TableArn) > 1024) {
		return nil, validationf("1 validation error detected: Value '%s' at 'tableArn' failed to satisfy constraint: Member must have length between 1 and 1024", *in.TableArn)
	}
	start := ""
	if in.NextToken != nil {
		id, ok := parseImportToken(account, *in.NextToken)
		if !ok {
			return nil, validationf("Invalid Request: Provided nextToken is invalid: %s", *in.NextToken)
		}
		start = id
	}
	out := &ListImportsOutput{ImportSummaryList: []ImportSummary{}}
	jobs := e.backend.Capabilities().Jobs
	if jobs == nil {
		return out, nil
	}
	since := e.now().Add(-importListDays * 24 * time.Hour)
	last := ""
	for {
		rows, err := jobs.ListJobs(ctx, storage.ListJobsParams{Kind: kindImport, Account: account, StartAfter: start, Limit: 100})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			start = r.ID
			if r.CreatedAt.Before(since) {
				continue
			}
			var req ImportRequest
			if err := json.Unmarshal(r.Payload, &req); err != nil {
				continue
			}
			d := req.Desc
			if in.TableArn != nil && d.TableArn != *in.TableArn {
				continue
			}
			if len(out.ImportSummaryList) == limit {
				out.NextToken = importToken(account, last)
				return out, nil
			}
			last = r.ID
			out.ImportSummaryList = append(out.ImportSummaryList, ImportSummary{ImportArn: d.ImportArn, ImportStatus: d.ImportStatus,
				TableArn: d.TableArn, S3BucketSource: d.S3BucketSource, CloudWatchLogGroupArn: d.CloudWatchLogGroupArn,
				InputFormat: d.InputFormat, StartTime: d.StartTime, EndTime: d.EndTime})
		}
		if len(rows) < 100 {
			return out, nil
		}
	}
}

// IsImportTarget tells whether a stored table is the CREATING target of
// the import id (backup.Importer).
func (e *Engine) IsImportTarget(st *storage.Table, id string) bool {
	var s storedTable
	if err := json.Unmarshal(st.Desc, &s); err != nil {
		return false
	}
	return s.ImportJob == id && s.Desc.TableStatus == "CREATING"
}

// FinishImport is the description of an imported table once loaded
// (ACTIVE, no longer marked); the import job writes it with a
// conditional UpdateTable (backup.Importer).
func (e *Engine) FinishImport(st *storage.Table) ([]byte, error) {
	var s storedTable
	if err := json.Unmarshal(st.Desc, &s); err != nil {
		return nil, err
	}
	if s.ImportJob == "" || s.Desc.TableStatus != "CREATING" {
		return nil, fmt.Errorf("table %s is not an import in progress", st.Name)
	}
	s.Desc.TableStatus = "ACTIVE"
	s.ImportJob = ""
	return json.Marshal(&s)
}

// importingTable refuses to change a table that an import is loading.
func importingTable(t *table) error {
	if t.stored.ImportJob != "" {
		return newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: Table is being imported: %s", t.name())
	}
	return nil
}

// importToken is ListImports' NextToken after import id: the id and a
// digest binding it to the account, base64 (the SDKs require at least
// 112 characters).
func importToken(account, id string) string {
	h := sha256.Sum256([]byte(account + "/" + id))
	return base64.RawURLEncoding.EncodeToString([]byte(id + "|" + hex.EncodeToString(h[:])))
}

func parseImportToken(account, tok string) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", false
	}
	id, _, ok := strings.Cut(string(raw), "|")
	if !ok || !importIDRE.MatchString(id) || importToken(account, id) != tok {
		return "", false
	}
	return id, true
}
