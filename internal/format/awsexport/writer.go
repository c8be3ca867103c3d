// Package awsexport writes a table image in the layout of DynamoDB's
// ExportTableToPointInTime, so that any consumer of AWS exports reads it:
//
//	<prefix>/AWSDynamoDB/<ExportId>/_started                    (empty, first)
//	<prefix>/AWSDynamoDB/<ExportId>/data/<name>.json.gz         (or .ion.gz)
//	<prefix>/AWSDynamoDB/<ExportId>/manifest-files.json         (+ .checksum)
//	<prefix>/AWSDynamoDB/<ExportId>/manifest-summary.json       (+ .checksum, last)
//
// Data files are gzip streams of one item per line: {"Item":{...}} in
// DynamoDB JSON, or Ion text ($ion_1_0, then {Item:{...}} per line) with
// the service's type mapping (N as decimal, B as blob, sets as lists
// annotated $dynamodb_SS, $dynamodb_NS, $dynamodb_BS). A data file is
// closed once it holds MaxFileBytes of uncompressed lines, and each file
// streams to the store as it is written: memory stays bounded whatever
// the table's size. manifest-summary.json is written last, so its
// presence means the export is whole.
package awsexport

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/amazon-ion/ion-go/ion"
	"github.com/klauspost/compress/gzip"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// Output formats (ExportFormat).
const (
	FormatJSON = "DYNAMODB_JSON"
	FormatION  = "ION"
)

// Manifest versions and export types.
const (
	VersionFull        = "2020-06-30"
	VersionIncremental = "2023-08-01"
	TypeFull           = "FULL_EXPORT"
	TypeIncremental    = "INCREMENTAL_EXPORT"
	// Views of an incremental export (ExportViewType).
	ViewNewImage        = "NEW_IMAGE"
	ViewNewAndOldImages = "NEW_AND_OLD_IMAGES"
)

// Object names inside an export's directory.
const (
	StartedName         = "_started"
	ManifestFilesName   = "manifest-files.json"
	ManifestSummaryName = "manifest-summary.json"
	FilesChecksumName   = "manifest-files.checksum"
	SummaryChecksumName = "manifest-summary.checksum"
	DataDir             = "data"
)

// DefaultMaxFileBytes bounds a data file's uncompressed lines.
const DefaultMaxFileBytes = 256 << 20

// MintExportID returns a new ExportId for an export started at t: 14
// digits of Unix milliseconds, '-', 8 random hex digits.
func MintExportID(t time.Time) (string, error) { return format.MintBackupID(t, nil) }

// Dir is the key of an export's directory: "<prefix>/AWSDynamoDB/<id>"
// (no prefix: "AWSDynamoDB/<id>"). Slashes around prefix are dropped.
func Dir(prefix, id string) string {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return "AWSDynamoDB/" + id
	}
	return prefix + "/AWSDynamoDB/" + id
}

// Params describe an export; they go into manifest-summary.json.
type Params struct {
	ExportArn  string
	ExportID   string
	TableArn   string
	TableID    string
	ExportTime time.Time
	StartTime  time.Time
	S3Bucket   string
	// S3Prefix as the request gave it ("" for none).
	S3Prefix       string
	S3SseAlgorithm string
	S3SseKmsKeyID  string
	Format         string // FormatJSON or FormatION
	// MaxFileBytes bounds a data file's uncompressed bytes; 0 means
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// Incremental, when set, makes this an incremental export: its
	// lines are changes (AddChange) and its summary has version
	// 2023-08-01 with the period and view instead of exportTime.
	Incremental *Incremental
}

// Incremental describes an incremental export: the changes of
// [From, To) seen through View.
type Incremental struct {
	From, To time.Time
	View     string // ViewNewImage or ViewNewAndOldImages
}

// FileEntry is one line of manifest-files.json.
type FileEntry struct {
	ItemCount     int64  `json:"itemCount"`
	MD5Checksum   string `json:"md5Checksum"`
	ETag          string `json:"etag"`
	DataFileS3Key string `json:"dataFileS3Key"`
}

// Summary is manifest-summary.json of a full export.
type Summary struct {
	Version            string  `json:"version"`
	ExportArn          string  `json:"exportArn"`
	StartTime          string  `json:"startTime"`
	EndTime            string  `json:"endTime"`
	TableArn           string  `json:"tableArn"`
	TableID            string  `json:"tableId"`
	ExportTime         string  `json:"exportTime"`
	S3Bucket           string  `json:"s3Bucket"`
	S3Prefix           *string `json:"s3Prefix"`
	S3SseAlgorithm     string  `json:"s3SseAlgorithm"`
	S3SseKmsKeyID      *string `json:"s3SseKmsKeyId"`
	ManifestFilesS3Key string  `json:"manifestFilesS3Key"`
	BilledSizeBytes    int64   `json:"billedSizeBytes"`
	ItemCount          int64   `json:"itemCount"`
	OutputFormat       string  `json:"outputFormat"`
	ExportType         string  `json:"exportType"`
}

// IncrementalSummary is manifest-summary.json of an incremental export.
type IncrementalSummary struct {
	Version            string  `json:"version"`
	ExportArn          string  `json:"exportArn"`
	StartTime          string  `json:"startTime"`
	EndTime            string  `json:"endTime"`
	TableArn           string  `json:"tableArn"`
	TableID            string  `json:"tableId"`
	ExportFromTime     string  `json:"exportFromTime"`
	ExportToTime       string  `json:"exportToTime"`
	S3Bucket           string  `json:"s3Bucket"`
	S3Prefix           *string `json:"s3Prefix"`
	S3SseAlgorithm     string  `json:"s3SseAlgorithm"`
	S3SseKmsKeyID      *string `json:"s3SseKmsKeyId"`
	ManifestFilesS3Key string  `json:"manifestFilesS3Key"`
	BilledSizeBytes    int64   `json:"billedSizeBytes"`
	ItemCount          int64   `json:"itemCount"`
	OutputFormat       string  `json:"outputFormat"`
	OutputView         string  `json:"outputView"`
	ExportType         string  `json:"exportType"`
}

// Change is one line of an incremental export: an item's key, its image
// at the end of the period (nil: deleted) and, with NEW_AND_OLD_IMAGES,
// at its start (nil: absent then), and when it was last written.
type Change struct {
	Keys, NewImage, OldImage []byte // DynamoDB-JSON attribute maps
	WriteMicros              int64
}

// Result is what a finished export reports (DescribeExport).
type Result struct {
	ItemCount       int64
	BilledSizeBytes int64
	// ManifestSummaryKey is ExportManifest: the summary's key.
	ManifestSummaryKey string
	// ExportTime is the image's instant (zero for an incremental export).
	ExportTime time.Time
	Files      []FileEntry
}

// Writer writes one export. Add items, then Finish; on any error the
// export is incomplete (no manifest-summary.json) and Abort or
// Cleanup removes what was written.
type Writer struct {
	st     blobstore.Store
	p      Params
	dir    string
	max    int64
	cur    *dataFile
	files  []FileEntry
	items  int64
	billed int64
	line   []byte
	err    error
}

// dataFile is the data file being written: its lines go through gzip
// and an MD5 into an upload (blobstore.Upload: a buffered pipe that Put
// reads, so compression and the store's writes overlap).
type dataFile struct {
	key   string
	up    *blobstore.Upload
	gz    *gzip.Writer
	md5   hash.Hash
	raw   int64
	items int64
	ion   ion.Writer
	ionb  *bytes.Buffer
}

// Create starts an export in st (keys relative to the bucket's top):
// it writes the empty _started object, which also proves the bucket
// writable.
func Create(ctx context.Context, st blobstore.Store, p Params) (*Writer, error) {
	switch p.Format {
	case FormatJSON, FormatION:
	default:
		return nil, fmt.Errorf("awsexport: unknown format %q", p.Format)
	}
	w := &Writer{st: st, p: p, dir: Dir(p.S3Prefix, p.ExportID), max: p.MaxFileBytes}
	if w.max <= 0 {
		w.max = DefaultMaxFileBytes
	}
	if err := st.Put(ctx, w.dir+"/"+StartedName, bytes.NewReader(nil)); err != nil {
		return nil, err
	}
	return w, nil
}

// Dir is the export's directory key.
func (w *Writer) Dir() string { return w.dir }

func (w *Writer) ext() string {
	if w.p.Format == FormatION {
		return ".ion.gz"
	}
	return ".json.gz"
}

// dataName returns a random data file name: 26 base-32 characters, as
// the service names them.
func dataName() (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var b [26]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = alphabet[b[i]&31]
	}
	return string(b[:]), nil
}

func (w *Writer) open(ctx context.Context) error {
	name, err := dataName()
	if err != nil {
		return err
	}
	f := &dataFile{key: w.dir + "/" + DataDir + "/" + name + w.ext(), md5: md5.New()}
	f.up = blobstore.NewUpload(ctx, w.st, f.key)
	f.gz = gzip.NewWriter(io.MultiWriter(f.up, f.md5))
	if w.p.Format == FormatION {
		f.ionb = &bytes.Buffer{}
		f.ion = ion.NewTextWriter(f.ionb)
		if _, err := f.gz.Write([]byte("$ion_1_0\n")); err != nil {
			return w.abortFile(f, err)
		}
	}
	w.cur = f
	return nil
}

func (w *Writer) abortFile(f *dataFile, err error) error {
	f.up.CloseWithError(err)
	return err
}

// closeFile ends the current data file and records its manifest line.
func (w *Writer) closeFile() error {
	f := w.cur
	w.cur = nil
	if err := f.gz.Close(); err != nil {
		return w.abortFile(f, err)
	}
	if err := f.up.Close(); err != nil {
		return fmt.Errorf("data file %s: %w", f.key, err)
	}
	sum := f.md5.Sum(nil)
	w.files = append(w.files, FileEntry{ItemCount: f.items, MD5Checksum: base64.StdEncoding.EncodeToString(sum),
		ETag: hex.EncodeToString(sum), DataFileS3Key: f.key})
	return nil
}

// Add writes one item, given as its DynamoDB-JSON attribute map
// ({"a":{"S":"x"},...}).
func (w *Writer) Add(ctx context.Context, item []byte) error {
	if w.err != nil {
		return w.err
	}
	if err := w.add(ctx, item); err != nil {
		w.err = err
		if w.cur != nil {
			w.abortFile(w.cur, err)
			w.cur = nil
		}
		return err
	}
	return nil
}

func (w *Writer) add(ctx context.Context, item []byte) error {
	size, err := attr.RawItemSize(item)
	if err != nil {
		return fmt.Errorf("awsexport: item: %w", err)
	}
	if w.cur == nil {
		if err := w.open(ctx); err != nil {
			return err
		}
	}
	f := w.cur
	if w.p.Format == FormatION {
		it, err := attr.DecodeItem(item)
		if err != nil {
			return fmt.Errorf("awsexport: item: %w", err)
		}
		f.ionb.Reset()
		if err := writeIonLine(f.ion, it); err != nil {
			return err
		}
		w.line = append(w.line[:0], f.ionb.Bytes()...)
	} else {
		w.line = append(append(append(w.line[:0], `{"Item":`...), item...), "}\n"...)
	}
	return w.emit(int64(size))
}

// AddChange writes one line of an incremental export.
func (w *Writer) AddChange(ctx context.Context, c Change) error {
	if w.err != nil {
		return w.err
	}
	if err := w.addChange(ctx, c); err != nil {
		w.err = err
		if w.cur != nil {
			w.abortFile(w.cur, err)
			w.cur = nil
		}
		return err
	}
	return nil
}

func (w *Writer) addChange(ctx context.Context, c Change) error {
	if w.p.Incremental == nil {
		return errors.New("awsexport: a change in a full export")
	}
	if w.p.Incremental.View != ViewNewAndOldImages {
		c.OldImage = nil
	}
	var size int
	for _, img := range [][]byte{c.NewImage, c.Keys} {
		if img != nil {
			n, err := attr.RawItemSize(img)
			if err != nil {
				return fmt.Errorf("awsexport: change: %w", err)
			}
			size = n
			break
		}
	}
	if w.cur == nil {
		if err := w.open(ctx); err != nil {
			return err
		}
	}
	f := w.cur
	micros := strconv.FormatInt(c.WriteMicros, 10)
	if w.p.Format == FormatION {
		f.ionb.Reset()
		if err := writeIonChange(f.ion, c, micros); err != nil {
			return err
		}
		w.line = append(w.line[:0], f.ionb.Bytes()...)
	} else {
		w.line = append(w.line[:0], `{"Metadata":{"WriteTimestampMicros":{"N":"`...)
		w.line = append(append(w.line, micros...), `"}},"Keys":`...)
		w.line = append(w.line, c.Keys...)
		if c.NewImage != nil {
			w.line = append(append(w.line, `,"NewImage":`...), c.NewImage...)
		}
		if c.OldImage != nil {
			w.line = append(append(w.line, `,"OldImage":`...), c.OldImage...)
		}
		w.line = append(w.line, "}\n"...)
	}
	return w.emit(int64(size))
}

// writeIonChange writes an incremental line in Ion.
func writeIonChange(iw ion.Writer, c Change, micros string) error {
	if err := iw.BeginStruct(); err != nil {
		return err
	}
	d, err := ionDecimal(micros)
	if err != nil {
		return err
	}
	if err := iw.FieldName(ion.NewSymbolTokenFromString("Metadata")); err != nil {
		return err
	}
	if err := iw.BeginStruct(); err != nil {
		return err
	}
	if err := iw.FieldName(ion.NewSymbolTokenFromString("WriteTimestampMicros")); err != nil {
		return err
	}
	if err := iw.WriteDecimal(d); err != nil {
		return err
	}
	if err := iw.EndStruct(); err != nil {
		return err
	}
	for _, m := range []struct {
		name string
		img  []byte
	}{{"Keys", c.Keys}, {"NewImage", c.NewImage}, {"OldImage", c.OldImage}} {
		if m.img == nil {
			continue
		}
		it, err := attr.DecodeItem(m.img)
		if err != nil {
			return fmt.Errorf("awsexport: change: %w", err)
		}
		if err := iw.FieldName(ion.NewSymbolTokenFromString(m.name)); err != nil {
			return err
		}
		if err := writeIonMap(iw, it); err != nil {
			return err
		}
	}
	if err := iw.EndStruct(); err != nil {
		return err
	}
	return iw.Finish()
}

// emit writes the line built in w.line to the current data file.
func (w *Writer) emit(size int64) error {
	f := w.cur
	if _, err := f.gz.Write(w.line); err != nil {
		return err
	}
	f.raw += int64(len(w.line))
	f.items++
	w.items++
	w.billed += size
	if f.raw >= w.max {
		return w.closeFile()
	}
	return nil
}

// writeIonLine writes {Item:{...}} and ends the top-level value (a
// newline).
func writeIonLine(iw ion.Writer, it attr.Item) error {
	if err := iw.BeginStruct(); err != nil {
		return err
	}
	if err := iw.FieldName(ion.NewSymbolTokenFromString("Item")); err != nil {
		return err
	}
	if err := writeIonMap(iw, it); err != nil {
		return err
	}
	if err := iw.EndStruct(); err != nil {
		return err
	}
	return iw.Finish()
}

func writeIonMap(iw ion.Writer, m map[string]attr.Value) error {
	if err := iw.BeginStruct(); err != nil {
		return err
	}
	for _, k := range sortedKeys(m) {
		if err := iw.FieldName(ion.NewSymbolTokenFromString(k)); err != nil {
			return err
		}
		if err := writeIonValue(iw, m[k]); err != nil {
			return err
		}
	}
	return iw.EndStruct()
}

// ionDecimal converts a DynamoDB number to an Ion decimal.
func ionDecimal(n string) (*ion.Decimal, error) {
	d, err := ion.ParseDecimal(strings.NewReplacer("e", "d", "E", "d").Replace(n))
	if err != nil {
		return nil, fmt.Errorf("awsexport: number %q: %w", n, err)
	}
	return d, nil
}

func writeIonValue(iw ion.Writer, v attr.Value) error {
	switch v.Type {
	case attr.S:
		return iw.WriteString(v.Str)
	case attr.N:
		d, err := ionDecimal(v.Str)
		if err != nil {
			return err
		}
		return iw.WriteDecimal(d)
	case attr.B:
		return iw.WriteBlob(v.Bin)
	case attr.BOOL:
		return iw.WriteBool(v.Bool)
	case attr.NULL:
		return iw.WriteNull()
	case attr.M:
		return writeIonMap(iw, v.Map)
	case attr.L:
		if err := iw.BeginList(); err != nil {
			return err
		}
		for _, e := range v.List {
			if err := writeIonValue(iw, e); err != nil {
				return err
			}
		}
		return iw.EndList()
	case attr.SS, attr.NS, attr.BS:
		if err := iw.Annotation(ion.NewSymbolTokenFromString("$dynamodb_" + v.Type.String())); err != nil {
			return err
		}
		if err := iw.BeginList(); err != nil {
			return err
		}
		switch v.Type {
		case attr.SS:
			for _, s := range v.Strs {
				if err := iw.WriteString(s); err != nil {
					return err
				}
			}
		case attr.NS:
			for _, s := range v.Strs {
				d, err := ionDecimal(s)
				if err != nil {
					return err
				}
				if err := iw.WriteDecimal(d); err != nil {
					return err
				}
			}
		default:
			for _, b := range v.Bins {
				if err := iw.WriteBlob(b); err != nil {
					return err
				}
			}
		}
		return iw.EndList()
	}
	return fmt.Errorf("awsexport: value of type %v", v.Type)
}

// Finish closes the last data file and writes manifest-files.json, its
// checksum, then manifest-summary.json and its checksum, the summary
// naming end as the export's end time. An empty table exports one empty
// data file, as the service writes one per (empty) partition.
func (w *Writer) Finish(ctx context.Context, end time.Time) (*Result, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.cur == nil && len(w.files) == 0 {
		if err := w.open(ctx); err != nil {
			return nil, err
		}
	}
	if w.cur != nil {
		if err := w.closeFile(); err != nil {
			w.err = err
			return nil, err
		}
	}
	var files []byte
	for _, f := range w.files {
		files = append(files, compact(f)...)
	}
	filesKey := w.dir + "/" + ManifestFilesName
	if err := w.putWithChecksum(ctx, filesKey, w.dir+"/"+FilesChecksumName, files); err != nil {
		return nil, err
	}
	sum := Summary{
		Version: VersionFull, ExportArn: w.p.ExportArn,
		StartTime: format.FormatTime(w.p.StartTime), EndTime: format.FormatTime(end),
		TableArn: w.p.TableArn, TableID: w.p.TableID, ExportTime: format.FormatTime(w.p.ExportTime),
		S3Bucket: w.p.S3Bucket, S3Prefix: nullable(w.p.S3Prefix), S3SseAlgorithm: w.p.S3SseAlgorithm,
		S3SseKmsKeyID: nullable(w.p.S3SseKmsKeyID), ManifestFilesS3Key: filesKey,
		BilledSizeBytes: w.billed, ItemCount: w.items, OutputFormat: w.p.Format, ExportType: TypeFull,
	}
	if sum.S3SseAlgorithm == "" {
		sum.S3SseAlgorithm = "AES256"
	}
	var body []byte
	if inc := w.p.Incremental; inc != nil {
		body = compact(IncrementalSummary{
			Version: VersionIncremental, ExportArn: sum.ExportArn, StartTime: sum.StartTime, EndTime: sum.EndTime,
			TableArn: sum.TableArn, TableID: sum.TableID,
			ExportFromTime: format.FormatTime(inc.From), ExportToTime: format.FormatTime(inc.To),
			S3Bucket: sum.S3Bucket, S3Prefix: sum.S3Prefix, S3SseAlgorithm: sum.S3SseAlgorithm, S3SseKmsKeyID: sum.S3SseKmsKeyID,
			ManifestFilesS3Key: sum.ManifestFilesS3Key, BilledSizeBytes: sum.BilledSizeBytes, ItemCount: sum.ItemCount,
			OutputFormat: sum.OutputFormat, OutputView: inc.View, ExportType: TypeIncremental,
		})
	} else {
		body = compact(sum)
	}
	summaryKey := w.dir + "/" + ManifestSummaryName
	if err := w.putWithChecksum(ctx, summaryKey, w.dir+"/"+SummaryChecksumName, body); err != nil {
		return nil, err
	}
	res := &Result{ItemCount: w.items, BilledSizeBytes: w.billed, ManifestSummaryKey: summaryKey, Files: w.files}
	if w.p.Incremental == nil {
		res.ExportTime = w.p.ExportTime
	}
	return res, nil
}

// putWithChecksum writes a manifest, then its checksum object: the
// manifest's MD5 in lower-case hex.
func (w *Writer) putWithChecksum(ctx context.Context, key, sumKey string, body []byte) error {
	if err := w.st.Put(ctx, key, bytes.NewReader(body)); err != nil {
		return err
	}
	s := md5.Sum(body)
	return w.st.Put(ctx, sumKey, strings.NewReader(hex.EncodeToString(s[:])))
}

// Abort stops a failed or cancelled export: the open data file's upload
// ends with err. What was written stays; Cleanup removes it.
func (w *Writer) Abort(err error) {
	if err == nil {
		err = errors.New("awsexport: aborted")
	}
	if w.cur != nil {
		w.abortFile(w.cur, err)
		w.cur = nil
	}
	if w.err == nil {
		w.err = err
	}
}

// Cleanup removes everything an export wrote under its directory (a
// failed export's partial objects).
func Cleanup(ctx context.Context, st blobstore.Store, prefix, id string) error {
	return st.DeletePrefix(ctx, Dir(prefix, id))
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// compact marshals v as one JSON line, HTML characters unescaped.
func compact(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only fixed struct types are marshalled
	}
	return buf.Bytes()
}
