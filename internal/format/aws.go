package format

import (
	"bytes"
	"encoding/json"
	"time"
)

// AWS export manifest constants (DynamoDB ExportTableToPointInTime output).
const (
	AWSManifestVersion = "2020-06-30"
	AWSOutputFormat    = "DYNAMODB_JSON"
	AWSExportType      = "FULL_EXPORT"
)

// AWSFileEntry is one line of manifest-files.json.
type AWSFileEntry struct {
	ItemCount     int64   `json:"itemCount"`
	MD5Checksum   string  `json:"md5Checksum"`
	ETag          *string `json:"etag"`
	DataFileS3Key string  `json:"dataFileS3Key"`
}

// AWSSummary is manifest-summary.json.
type AWSSummary struct {
	Version            string  `json:"version"`
	ExportArn          string  `json:"exportArn"`
	StartTime          string  `json:"startTime"`
	EndTime            string  `json:"endTime"`
	TableArn           string  `json:"tableArn"`
	TableID            *string `json:"tableId"`
	ExportTime         string  `json:"exportTime"`
	S3Bucket           *string `json:"s3Bucket"`
	S3Prefix           *string `json:"s3Prefix"`
	S3SseAlgorithm     *string `json:"s3SseAlgorithm"`
	S3SseKmsKeyID      *string `json:"s3SseKmsKeyId"`
	ManifestFilesS3Key string  `json:"manifestFilesS3Key"`
	BilledSizeBytes    int64   `json:"billedSizeBytes"`
	ItemCount          int64   `json:"itemCount"`
	OutputFormat       string  `json:"outputFormat"`
	ExportType         string  `json:"exportType"`
}

func marshalCompact(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only fixed struct types are marshalled
	}
	return buf.Bytes() // ends in '\n'
}

// ManifestFiles returns manifest-files.json for a manifest: one JSON object
// per data file and line, as the AWS export writes it. keyPrefix is
// prepended to each key (the store's bucket prefix).
func ManifestFiles(m *Manifest, keyPrefix string) []byte {
	var out []byte
	for _, f := range m.DataFiles {
		out = append(out, marshalCompact(AWSFileEntry{
			ItemCount: f.ItemCount, MD5Checksum: f.MD5, ETag: f.ETag, DataFileS3Key: keyPrefix + f.Key,
		})...)
	}
	return out
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ManifestSummary returns manifest-summary.json. exportArn is the backup
// ARN; exportTime is the snapshot instant; billedSizeBytes is the
// uncompressed item bytes.
func ManifestSummary(m *Manifest, table *TableDescription, aws AWSExport, start, end time.Time) ([]byte, error) {
	a, err := ParseARN(m.BackupARN)
	if err != nil {
		return nil, err
	}
	var tableID *string
	if table != nil {
		tableID = nullable(table.TableId)
	}
	return marshalCompact(AWSSummary{
		Version:            AWSManifestVersion,
		ExportArn:          m.BackupARN,
		StartTime:          FormatTime(start),
		EndTime:            FormatTime(end),
		TableArn:           a.TableARN(),
		TableID:            tableID,
		ExportTime:         FormatTime(m.BackupCreationDateTime),
		S3Bucket:           nullable(aws.S3Bucket),
		S3Prefix:           nullable(aws.S3Prefix),
		S3SseAlgorithm:     nullable(aws.S3SSEAlgorithm),
		S3SseKmsKeyID:      nullable(aws.S3SSEKMSKeyID),
		ManifestFilesS3Key: aws.KeyPrefix + ManifestFilesKey(PrefixOf(a)),
		BilledSizeBytes:    m.UncompressedBytes,
		ItemCount:          m.ItemCount,
		OutputFormat:       AWSOutputFormat,
		ExportType:         AWSExportType,
	}), nil
}
