package engine

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// Imports (ImportTable, DescribeImport, ListImports; docs/exports.md,
// ADR 0050). The engine checks the request (the table to create by
// CreateTable's rules, the format and its options), refuses a name that
// exists, makes a ClientToken idempotent, and hands the import to the
// ImportService (internal/backup's Manager), which creates the table in
// CREATING through the function it is given, loads it and flips it ACTIVE
// (FinishImport). An import row's payload is the ImportTableDescription
// as the wire carries it.

// ImportService starts imports (internal/backup.Manager through the
// server's adapter).
type ImportService interface {
	// StartImport records the import, creates the target with create
	// (given the import's id) and starts loading it; desc is the
	// ImportTableDescription's request fields (JSON), keyTypes the types
	// of the key attributes; the answer is the description (JSON) with
	// ImportArn, ImportStatus and StartTime filled.
	StartImport(ctx context.Context, account, table string, desc []byte, keyTypes map[string]string,
		create func(ctx context.Context, importID string) (*backend.Table, error)) ([]byte, error)
}

// SetImports installs the import jobs. Call it before serving.
func (e *Engine) SetImports(s ImportService) { e.imports = s }

const (
	kindImport      = "import"
	kindImportToken = "import-token"
)

type S3BucketSource struct {
	S3Bucket      *string `json:"S3Bucket"`
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

type ImportTableInput struct {
	ClientToken             *string                  `json:"ClientToken"`
	S3BucketSource          *S3BucketSource          `json:"S3BucketSource"`
	InputFormat             *string                  `json:"InputFormat"`
	InputFormatOptions      *InputFormatOptions      `json:"InputFormatOptions"`
	InputCompressionType    *string                  `json:"InputCompressionType"`
	TableCreationParameters *TableCreationParameters `json:"TableCreationParameters"`
}

// ImportTableDescription is DynamoDB's ImportTableDescription.
type ImportTableDescription struct {
	ImportArn               string                   `json:"ImportArn"`
	ImportStatus            string                   `json:"ImportStatus"`
	TableArn                string                   `json:"TableArn"`
	TableId                 string                   `json:"TableId,omitempty"`
	ClientToken             string                   `json:"ClientToken,omitempty"`
	S3BucketSource          *S3BucketSource          `json:"S3BucketSource"`
	InputFormat             string                   `json:"InputFormat"`
	InputFormatOptions      *InputFormatOptions      `json:"InputFormatOptions,omitempty"`
	InputCompressionType    string                   `json:"InputCompressionType"`
	TableCreationParameters *TableCreationParameters `json:"TableCreationParameters,omitempty"`
	StartTime               *float64                 `json:"StartTime,omitempty"`
	EndTime                 *float64                 `json:"EndTime,omitempty"`
	ProcessedSizeBytes      *int64                   `json:"ProcessedSizeBytes,omitempty"`
	ProcessedItemCount      int64                    `json:"ProcessedItemCount"`
	ImportedItemCount       int64                    `json:"ImportedItemCount"`
	ErrorCount              int64                    `json:"ErrorCount"`
	FailureCode             string                   `json:"FailureCode,omitempty"`
	FailureMessage          string                   `json:"FailureMessage,omitempty"`
}

type ImportTableOutput struct {
	ImportTableDescription *ImportTableDescription `json:"ImportTableDescription"`
}

type DescribeImportInput struct {
	ImportArn *string `json:"ImportArn"`
}

type ListImportsInput struct {
	TableArn  *string `json:"TableArn"`
	PageSize  *int64  `json:"PageSize"`
	NextToken *string `json:"NextToken"`
}

type ImportSummary struct {
	ImportArn      string          `json:"ImportArn"`
	ImportStatus   string          `json:"ImportStatus"`
	TableArn       string          `json:"TableArn"`
	S3BucketSource *S3BucketSource `json:"S3BucketSource"`
	InputFormat    string          `json:"InputFormat"`
	StartTime      *float64        `json:"StartTime,omitempty"`
	EndTime        *float64        `json:"EndTime,omitempty"`
}

type ListImportsOutput struct {
	ImportSummaryList []ImportSummary `json:"ImportSummaryList"`
	NextToken         string          `json:"NextToken,omitempty"`
}

var importArnRE = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:([a-z0-9-]+):([0-9]{12}):table/([a-zA-Z0-9_.-]{3,255})/import/([0-9]{14}-[0-9a-f]{8})$`)

// checkImportInput checks an ImportTable request's members as the
// service does: constraint messages first, then the CSV options.
func checkImportInput(in *ImportTableInput) error {
	var c constraintErrors
	if in.S3BucketSource == nil {
		c.add(nil, "s3BucketSource", "Member must not be null")
	} else if b := in.S3BucketSource.S3Bucket; b == nil {
		c.add(nil, "s3BucketSource.s3Bucket", "Member must not be null")
	} else if len(*b) > 255 {
		c.add(*b, "s3BucketSource.s3Bucket", "Member must have length less than or equal to 255")
	} else if !bucketNameRE.MatchString(*b) {
		c.add(*b, "s3BucketSource.s3Bucket", "Member must satisfy regular expression pattern: ^[a-z0-9A-Z]+[\\.\\-\\w]*[a-z0-9A-Z]+$")
	}
	if in.InputFormat == nil {
		c.add(nil, "inputFormat", "Member must not be null")
	} else if f := *in.InputFormat; f != "DYNAMODB_JSON" && f != "ION" && f != "CSV" {
		c.add(f, "inputFormat", "Member must satisfy enum value set: [ION, CSV, DYNAMODB_JSON]")
	}
	if t := in.InputCompressionType; t != nil && *t != "GZIP" && *t != "ZSTD" && *t != "NONE" {
		c.add(*t, "inputCompressionType", "Member must satisfy enum value set: [ZSTD, NONE, GZIP]")
	}
	if in.TableCreationParameters == nil {
		c.add(nil, "tableCreationParameters", "Member must not be null")
	} else {
		checkTableName(&c, "tableCreationParameters.tableName", in.TableCreationParameters.TableName)
	}
	if t := in.ClientToken; t != nil && (len(*t) < 1 || len(*t) > 100 || !clientTokenRE.MatchString(*t)) {
		c.add(*t, "clientToken", "Member must satisfy regular expression pattern: ^[^\\$]+$")
	}
	if err := c.err(); err != nil {
		return err
	}
	if o := in.InputFormatOptions; o != nil && o.Csv != nil {
		if *in.InputFormat != "CSV" {
			return validationf("Invalid Request: Unsupported InputFormatOptions for the given input format: %s.", *in.InputFormat)
		}
		if d := o.Csv.Delimiter; d != nil && !csvDelimiterRE.MatchString(*d) {
			// The service's constraint: one of , ; : | tab or space.
			var c constraintErrors
			if len(*d) != 1 {
				c.add(*d, "inputFormatOptions.csv.delimiter", "Member must have length less than or equal to 1")
			}
			c.add(*d, "inputFormatOptions.csv.delimiter", "Member must satisfy regular expression pattern: [,;:|\t ]")
			return c.err()
		}
	}
	return nil
}

// ImportTable creates a table from objects of a bucket ([s3]) in
// DynamoDB JSON, Ion or CSV, optionally GZIP or ZSTD compressed.
func (e *Engine) ImportTable(ctx context.Context, account string, in *ImportTableInput) (*ImportTableOutput, error) {
	if err := checkImportInput(in); err != nil {
		return nil, err
	}
	if e.imports == nil {
		if e.backupsOff != "" {
			return nil, validationf("Imports are unavailable on this server: %s", e.backupsOff)
		}
		return nil, validationf("Imports are not enabled on this server: configure a backup store in the [backup.store] section (kind = \"filesystem\" or \"s3\") and the buckets in [s3]")
	}
	p := in.TableCreationParameters
	name := *p.TableName
	// The table to create follows CreateTable's rules.
	st, err := e.newTable(account, &CreateTableInput{TableName: p.TableName, AttributeDefinitions: p.AttributeDefinitions,
		KeySchema: p.KeySchema, BillingMode: p.BillingMode, ProvisionedThroughput: p.ProvisionedThroughput,
		SSESpecification: p.SSESpecification, GlobalSecondaryIndexes: p.GlobalSecondaryIndexes}, e.now())
	if err != nil {
		return nil, err
	}
	req := ImportTableDescription{TableArn: st.Desc.TableArn, TableId: st.Desc.TableId, S3BucketSource: in.S3BucketSource,
		InputFormat: *in.InputFormat, InputFormatOptions: in.InputFormatOptions, InputCompressionType: "NONE",
		TableCreationParameters: p}
	if in.InputCompressionType != nil {
		req.InputCompressionType = *in.InputCompressionType
	}
	if in.ClientToken != nil {
		req.ClientToken = *in.ClientToken
	}
	if src := *in.S3BucketSource; src.S3BucketOwner == nil {
		// DescribeImport names the bucket's owner: the caller's account
		// unless the request said otherwise, as on the service.
		owner := account
		src.S3BucketOwner = &owner
		req.S3BucketSource = &src
	}
	jobs := e.backend.Capabilities().Jobs
	var token *clientToken
	if req.ClientToken != "" {
		raw, _ := json.Marshal(in)
		h := sha256.Sum256(raw)
		tok, prev, err := claimClientToken(ctx, jobs, kindImportToken, "engine", account, req.ClientToken,
			tokenRow{ParamsHash: hex.EncodeToString(h[:])}, e.now(), func() error {
				return newErr(CodeImportConflict, "Import conflict: Duplicate request detected with conflicting parameters")
			})
		if err != nil {
			return nil, err
		}
		if prev != nil {
			if prev.Target == "" {
				return nil, newErr(CodeLimitExceeded, "Import with ClientToken %s is being started; retry", req.ClientToken)
			}
			return e.describeImportID(ctx, account, prev.Target)
		}
		token = tok
	}
	if _, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: account, Name: name}); err == nil || !backend.IsKind(err, backend.KindTableNotFound) {
		if token != nil {
			token.release(ctx)
		}
		if err != nil {
			return nil, err
		}
		return nil, newErr(CodeResourceInUse, "Table already exists: %s", name)
	}
	keyTypes := map[string]string{}
	for _, ad := range p.AttributeDefinitions {
		keyTypes[ad.AttributeName] = ad.AttributeType
	}
	d := st.Desc
	d.TableStatus = "CREATING"
	reqJSON, _ := json.Marshal(req)
	out, err := e.imports.StartImport(ctx, account, name, reqJSON, keyTypes, func(ctx context.Context, id string) (*backend.Table, error) {
		raw, err := json.Marshal(&storedTable{Desc: d, ImportJob: id, Tags: st.Tags})
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
		if token != nil {
			token.release(ctx)
		}
		if backend.IsKind(err, backend.KindTableExists) {
			return nil, newErr(CodeResourceInUse, "Table already exists: %s", name)
		}
		return nil, backupErr(err, name)
	}
	var desc ImportTableDescription
	if err := json.Unmarshal(out, &desc); err != nil {
		return nil, err
	}
	if token != nil {
		if err := token.bind(ctx, desc.ImportArn[strings.LastIndexByte(desc.ImportArn, '/')+1:]); err != nil {
			return nil, err
		}
	}
	return &ImportTableOutput{ImportTableDescription: &desc}, nil
}

// DescribeImport describes an import by its ARN.
func (e *Engine) DescribeImport(ctx context.Context, account string, in *DescribeImportInput) (*ImportTableOutput, error) {
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
	if m[1] != e.region || m[2] != account {
		return nil, newErr(CodeImportNotFound, "Import not found: %s", *in.ImportArn)
	}
	out, err := e.describeImportID(ctx, account, m[4])
	if err == nil && out.ImportTableDescription.ImportArn != *in.ImportArn {
		err = newErr(CodeImportNotFound, "Import not found: %s", *in.ImportArn)
	}
	if isCode(err, CodeImportNotFound) {
		return nil, newErr(CodeImportNotFound, "Import not found: %s", *in.ImportArn)
	}
	return out, err
}

func (e *Engine) describeImportID(ctx context.Context, account, id string) (*ImportTableOutput, error) {
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
	var d ImportTableDescription
	if err := json.Unmarshal(r.Payload, &d); err != nil {
		return nil, err
	}
	return &ImportTableOutput{ImportTableDescription: &d}, nil
}

// importListWindow is how far back ListImports lists, as on the service.
const importListWindow = 90 * 24 * time.Hour

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
	since := e.now().Add(-importListWindow)
	for {
		rows, err := jobs.ListJobs(ctx, backend.ListJobsParams{Kind: kindImport, Account: account, StartAfter: start, Limit: 100})
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			start = r.ID
			var d ImportTableDescription
			if json.Unmarshal(r.Payload, &d) != nil || r.CreatedAt.Before(since) {
				continue
			}
			if in.TableArn != nil && d.TableArn != *in.TableArn {
				continue
			}
			if len(out.ImportSummaryList) == limit {
				last := out.ImportSummaryList[limit-1].ImportArn
				out.NextToken = importToken(account, last[strings.LastIndexByte(last, '/')+1:])
				return out, nil
			}
			out.ImportSummaryList = append(out.ImportSummaryList, ImportSummary{ImportArn: d.ImportArn, ImportStatus: d.ImportStatus,
				TableArn: d.TableArn, S3BucketSource: d.S3BucketSource, InputFormat: d.InputFormat, StartTime: d.StartTime, EndTime: d.EndTime})
		}
		if len(rows) < 100 {
			return out, nil
		}
	}
}

// FinishImport is the description of an imported table once loaded
// (ACTIVE); the import job writes it with a conditional UpdateTable
// (backup.Importer).
func (e *Engine) FinishImport(st *backend.Table) ([]byte, error) {
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

// IsImportTarget tells whether t is being loaded by the import id.
func (e *Engine) IsImportTarget(st *backend.Table, id string) bool {
	var s storedTable
	return json.Unmarshal(st.Desc, &s) == nil && s.ImportJob == id && s.Desc.TableStatus == "CREATING"
}

// bucketNameRE is the service's constraint on an S3Bucket.
var bucketNameRE = regexp.MustCompile(`^[a-z0-9A-Z]+[\.\-\w]*[a-z0-9A-Z]+$`)

// csvDelimiterRE is the service's constraint on a CSV Delimiter.
var csvDelimiterRE = regexp.MustCompile(`^[,;:|\t ]$`)

// importToken is ListImports' NextToken after import id: the id and a
// digest binding it to the account, base64 (the SDKs refuse a NextToken
// under 112 characters).
func importToken(account, id string) string {
	h := sha256.Sum256([]byte(account + "/" + id))
	return base64.RawURLEncoding.EncodeToString([]byte(id + "|" + hex.EncodeToString(h[:])))
}

// parseImportToken answers the import id a NextToken of importToken
// resumes after.
func parseImportToken(account, tok string) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", false
	}
	id, _, ok := strings.Cut(string(raw), "|")
	if !ok || importToken(account, id) != tok {
		return "", false
	}
	return id, true
}
