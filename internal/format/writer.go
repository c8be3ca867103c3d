package format

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/klauspost/compress/zstd"
)

// DefaultTargetFileBytes is the uncompressed size at which a data file is
// closed (on an item boundary).
const DefaultTargetFileBytes = 64 << 20

// FileSink receives the objects of a backup. Create is called once per
// object, in order: data files as they fill, then manifest-files.json,
// manifest-summary.json, extenddb-manifest.json and the sidecar. Closing
// the returned writer publishes the object; the Writer closes each one
// before it creates the next.
//
// If the returned writer has a method ETag() string, it is called after a
// successful Close of a data file and its answer is recorded as the file's
// etag (null otherwise). If it has a method CloseWithError(error) error
// (as *io.PipeWriter does), Writer.Abort calls it instead of Close so that
// a partial object is not published.
type FileSink interface {
	Create(ctx context.Context, key string) (io.WriteCloser, error)
}

// FileSinkFunc adapts a function to FileSink.
type FileSinkFunc func(ctx context.Context, key string) (io.WriteCloser, error)

// Create calls f.
func (f FileSinkFunc) Create(ctx context.Context, key string) (io.WriteCloser, error) {
	return f(ctx, key)
}

// WriterConfig describes the backup being written.
type WriterConfig struct {
	// ARN is the backup's ARN; it decides the key prefix, and its backup id
	// encodes the snapshot instant (backup_creation_date_time).
	ARN        ARN
	BackupName string
	Source     Source
	Snapshot   Snapshot
	// SourceTable is the full DynamoDB TableDescription as a JSON object. It
	// must hold TableName (the ARN's table), KeySchema and
	// AttributeDefinitions for the key attributes.
	SourceTable json.RawMessage
	// ItemOrder is OrderKey when items arrive in ascending key order (the
	// writer checks it), else OrderUnordered.
	ItemOrder ItemOrder
	// TargetFileBytes is the uncompressed size at which a data file closes
	// (DefaultTargetFileBytes when 0). A file holds at least one item, so
	// one item larger than the target makes a larger file.
	TargetFileBytes int64
	// VerifyItems makes Append decode every item, check that its bytes are
	// canonical and that its key is the given one (slow; for tests and
	// paranoid callers).
	VerifyItems bool
	// AWS configures the AWS export manifests.
	AWS AWSExport
	// Now is the clock for the AWS summary's startTime and endTime
	// (time.Now when nil).
	Now func() time.Time
}

// AWSExport holds what manifest-summary.json needs that the format cannot
// know: where the store puts the objects.
type AWSExport struct {
	S3Bucket       string // "" is written as null
	S3Prefix       string // "" is written as null
	S3SSEAlgorithm string // "" is written as null
	S3SSEKMSKeyID  string // "" is written as null
	// KeyPrefix is prepended to object keys in dataFileS3Key and
	// manifestFilesS3Key, so they are full bucket keys (the store's own
	// prefix, with its trailing '/').
	KeyPrefix string
}

// Result is what Finish wrote.
type Result struct {
	Prefix        string
	Manifest      *Manifest
	ManifestBytes []byte
	Sidecar       []byte
}

// Writer streams items into a backup. It is not safe for concurrent use.
// After any error the backup is unusable: call Abort.
type Writer struct {
	ctx      context.Context
	sink     FileSink
	cfg      WriterConfig
	prefix   string
	schema   KeySchema
	table    *TableDescription
	ordered  bool
	target   int64
	start    time.Time
	enc      *zstd.Encoder
	hw       *hashWriter
	wc       io.WriteCloser // open data file, or nil
	fileKey  string
	items    int64
	ubytes   int64
	first    Key
	last     Key
	lastBins [2][]byte
	lastItem []byte // the last item's bytes when its key came as bytes
	cur      encKey
	prev     encKey
	havePrev bool
	files    []DataFile
	scratch  []byte
	err      error
	done     bool
}

// NewWriter checks cfg and returns a Writer. Nothing is created in the
// sink until the first item (or Finish).
func NewWriter(ctx context.Context, sink FileSink, cfg WriterConfig) (*Writer, error) {
	if err := cfg.ARN.Validate(); err != nil {
		return nil, err
	}
	td, err := ParseTableDescription(cfg.SourceTable)
	if err != nil {
		return nil, err
	}
	if td.TableName != cfg.ARN.Table {
		return nil, fmt.Errorf("%w: source_table is %q, ARN names %q", ErrARNMismatch, td.TableName, cfg.ARN.Table)
	}
	if td.TableArn != "" && td.TableArn != cfg.ARN.TableARN() {
		return nil, fmt.Errorf("%w: source_table.TableArn %q is not %q", ErrARNMismatch, td.TableArn, cfg.ARN.TableARN())
	}
	if cfg.ItemOrder != OrderKey && cfg.ItemOrder != OrderUnordered {
		return nil, fmt.Errorf("format: item order %q", cfg.ItemOrder)
	}
	if cfg.Source.Backend == "" || cfg.Snapshot.Kind == "" {
		return nil, errors.New("format: source backend and snapshot kind are required")
	}
	if cfg.TargetFileBytes < 0 {
		return nil, errors.New("format: negative target file size")
	}
	if cfg.TargetFileBytes == 0 {
		cfg.TargetFileBytes = DefaultTargetFileBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	schema, _ := td.Schema()
	w := &Writer{
		ctx: ctx, sink: sink, cfg: cfg, prefix: PrefixOf(cfg.ARN), schema: schema, table: td,
		ordered: cfg.ItemOrder == OrderKey, target: cfg.TargetFileBytes, start: cfg.Now(),
		hw: newHashWriter(),
	}
	w.enc, err = NewEncoder(nil)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Prefix returns the backup's key prefix.
func (w *Writer) Prefix() string { return w.prefix }

// Schema returns the key schema taken from the source table.
func (w *Writer) Schema() KeySchema { return w.schema }

// Append writes one item given as its canonical attribute-map bytes
// ({"a":{"S":"x"},...}, as attr.AppendItem writes them) and its key. This
// is the fast path: the bytes go to the data file as they are. The key
// must be the item's key, of the schema's types, numbers normalized; with
// item order key, keys must be strictly ascending.
func (w *Writer) Append(item []byte, k Key) error {
	if err := w.checkItem(item); err != nil {
		return err
	}
	if err := w.schema.Check(k); err != nil {
		return w.fail(fmt.Errorf("%w: %v", ErrLine, err))
	}
	if w.cfg.VerifyItems {
		if err := w.verifyItem(item, k); err != nil {
			return w.fail(err)
		}
	}
	if err := w.cur.set(k, w.schema.HasRange()); err != nil {
		return w.fail(fmt.Errorf("%w: %v", ErrLine, err))
	}
	if err := w.emit(item); err != nil {
		return err
	}
	if w.items == 1 {
		w.first = copyKey(k)
	}
	w.last = w.keepLast(k)
	w.lastItem = w.lastItem[:0]
	return nil
}

// AppendKeyBytes writes one item given as its canonical attribute-map
// bytes and its key as the order-preserving key bytes storage keeps
// (attr.KeyBytes of the partition and sort key values; sk empty when the
// table has no sort key). It is the fastest path, for callers that read
// rows from storage: the item is not decoded, the caller vouches that the
// bytes are its key (with WriterConfig.VerifyItems they are checked). A
// reader checks every line's key again on restore. With item order key
// the bytes must be strictly ascending.
func (w *Writer) AppendKeyBytes(item, pk, sk []byte) error {
	if err := w.checkItem(item); err != nil {
		return err
	}
	if len(pk) == 0 || w.schema.HasRange() != (len(sk) > 0) {
		return w.fail(fmt.Errorf("%w: key bytes of %d and %d bytes do not fit the key schema", ErrLine, len(pk), len(sk)))
	}
	if w.cfg.VerifyItems {
		k, err := w.itemKey(item)
		if err != nil {
			return w.fail(err)
		}
		if err := w.verifyItem(item, k); err != nil {
			return w.fail(err)
		}
		if err := w.cur.set(k, w.schema.HasRange()); err != nil {
			return w.fail(fmt.Errorf("%w: %v", ErrLine, err))
		}
		if !bytes.Equal(w.cur.h, pk) || !bytes.Equal(w.cur.r, sk) {
			return w.fail(fmt.Errorf("%w: the given key bytes are not the item's key", ErrLine))
		}
	}
	w.cur.h = append(w.cur.h[:0], pk...)
	w.cur.r = append(w.cur.r[:0], sk...)
	if err := w.emit(item); err != nil {
		return err
	}
	if w.ordered {
		// The key values of a file's first and last items go into its key
		// range: decode the first now, keep the last item's bytes and
		// decode them when the file closes.
		if w.items == 1 {
			k, err := w.itemKey(item)
			if err != nil {
				return w.fail(err)
			}
			w.first = copyKey(k)
		}
		w.lastItem = append(w.lastItem[:0], item...)
	}
	return nil
}

// itemKey decodes an item's key values from its bytes.
func (w *Writer) itemKey(item []byte) (Key, error) {
	it, err := attr.DecodeItem(item)
	if err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrLine, err)
	}
	k, err := w.schema.KeyOf(it)
	if err != nil {
		return Key{}, fmt.Errorf("%w: %v", ErrLine, err)
	}
	return k, nil
}

// checkItem checks the writer's state and an item's shape and size.
func (w *Writer) checkItem(item []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return errors.New("format: Append after Finish")
	}
	if len(item) < 2 || item[0] != '{' || item[len(item)-1] != '}' || bytes.IndexByte(item, '\n') >= 0 {
		return w.fail(fmt.Errorf("%w: item bytes are not one JSON object on one line", ErrLine))
	}
	if int64(len(LinePrefix)+len(item)+len(LineSuffix)) > MaxLineBytes+1 {
		return w.fail(fmt.Errorf("%w: item of %d bytes", ErrLineTooLong, len(item)))
	}
	return nil
}

// emit writes one line whose key is in w.cur: it checks the order,
// closes the data file at its target size and opens the next.
func (w *Writer) emit(item []byte) error {
	lineLen := int64(len(LinePrefix) + len(item) + len(LineSuffix))
	if w.ordered && w.havePrev && w.prev.compare(&w.cur) >= 0 {
		return w.fail(fmt.Errorf("%w: item %d is not after the previous item", ErrKeyOrder, w.totalItems()))
	}
	if w.wc != nil && w.items > 0 && w.ubytes+lineLen > w.target {
		if err := w.closeFile(); err != nil {
			return err
		}
	}
	if w.wc == nil {
		if err := w.openFile(); err != nil {
			return err
		}
	}
	if _, err := w.enc.Write([]byte(LinePrefix)); err != nil {
		return w.fail(w.sinkErr(err))
	}
	if _, err := w.enc.Write(item); err != nil {
		return w.fail(w.sinkErr(err))
	}
	if _, err := w.enc.Write([]byte(LineSuffix)); err != nil {
		return w.fail(w.sinkErr(err))
	}
	w.items++
	w.ubytes += lineLen
	w.prev, w.cur = w.cur, w.prev
	w.havePrev = true
	return nil
}

// AppendItem writes an attr.Item (encoded canonically first).
func (w *Writer) AppendItem(it attr.Item) error {
	if w.err != nil {
		return w.err
	}
	k, err := w.schema.KeyOf(it)
	if err != nil {
		return w.fail(fmt.Errorf("%w: %v", ErrLine, err))
	}
	w.scratch = attr.AppendItem(w.scratch[:0], it)
	return w.Append(w.scratch, k)
}

func (w *Writer) verifyItem(item []byte, k Key) error {
	it, err := attr.DecodeItem(item)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLine, err)
	}
	if !bytes.Equal(attr.AppendItem(nil, it), item) {
		return fmt.Errorf("%w: item bytes are not canonical", ErrLine)
	}
	ik, err := w.schema.KeyOf(it)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLine, err)
	}
	if !attr.Equal(ik.Hash, k.Hash) || w.schema.HasRange() && !attr.Equal(ik.Range, k.Range) {
		return fmt.Errorf("%w: the given key is not the item's key", ErrLine)
	}
	return nil
}

func (w *Writer) totalItems() int64 {
	n := w.items
	for _, f := range w.files {
		n += f.ItemCount
	}
	return n
}

func copyValue(v attr.Value) attr.Value {
	if v.Type == attr.B {
		v.Bin = append([]byte(nil), v.Bin...)
	}
	return v
}

func copyKey(k Key) Key { return Key{Hash: copyValue(k.Hash), Range: copyValue(k.Range)} }

// keepLast copies k, reusing buffers for binary values.
func (w *Writer) keepLast(k Key) Key {
	if k.Hash.Type == attr.B {
		w.lastBins[0] = append(w.lastBins[0][:0], k.Hash.Bin...)
		k.Hash.Bin = w.lastBins[0]
	}
	if k.Range.Type == attr.B {
		w.lastBins[1] = append(w.lastBins[1][:0], k.Range.Bin...)
		k.Range.Bin = w.lastBins[1]
	}
	return k
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}

func (w *Writer) sinkErr(err error) error {
	return fileErrCause(w.fileKey, ErrSource, err, "writing")
}

func (w *Writer) openFile() error {
	if err := w.ctx.Err(); err != nil {
		return w.fail(err)
	}
	w.fileKey = DataFileKey(w.prefix, len(w.files)+1)
	wc, err := w.sink.Create(w.ctx, w.fileKey)
	if err != nil {
		return w.fail(fileErrCause(w.fileKey, ErrSource, err, "creating"))
	}
	w.wc = wc
	w.hw.reset(wc)
	w.enc.Reset(w.hw)
	w.items, w.ubytes = 0, 0
	return nil
}

func (w *Writer) closeFile() error {
	if err := w.enc.Close(); err != nil {
		return w.fail(w.sinkErr(err))
	}
	wc := w.wc
	w.wc = nil
	if err := wc.Close(); err != nil {
		return w.fail(fileErrCause(w.fileKey, ErrSource, err, "closing"))
	}
	f := DataFile{
		Key:               w.fileKey,
		ItemCount:         w.items,
		UncompressedBytes: w.ubytes,
		CompressedBytes:   w.hw.n,
		SHA256:            hex.EncodeToString(w.hw.sha.Sum(nil)),
		MD5:               base64.StdEncoding.EncodeToString(w.hw.md5.Sum(nil)),
	}
	if et, ok := wc.(interface{ ETag() string }); ok {
		s := et.ETag()
		f.ETag = &s
	}
	if w.ordered && w.items > 0 {
		last := w.last
		if len(w.lastItem) > 0 {
			k, err := w.itemKey(w.lastItem)
			if err != nil {
				return w.fail(err)
			}
			last = k
		}
		f.KeyRange = &KeyRange{First: w.schema.Item(w.first), Last: w.schema.Item(copyKey(last))}
	}
	w.files = append(w.files, f)
	return nil
}

// Abort abandons the backup: the open data file, if any, is closed with
// err (CloseWithError when the sink's writer has it). Objects already
// published stay; without a sidecar the backup is visibly incomplete.
func (w *Writer) Abort(err error) {
	if err == nil {
		err = errors.New("format: backup aborted")
	}
	w.fail(err)
	if w.wc != nil {
		if c, ok := w.wc.(interface{ CloseWithError(error) error }); ok {
			c.CloseWithError(err)
		} else {
			w.wc.Close()
		}
		w.wc = nil
	}
}

// Finish closes the last data file (an empty backup gets one empty data
// file, so that data/ is never empty), then writes manifest-files.json,
// manifest-summary.json, the manifest and, last, the sidecar.
func (w *Writer) Finish() (*Result, error) {
	if w.err != nil {
		return nil, w.err
	}
	if w.done {
		return nil, errors.New("format: Finish called twice")
	}
	if w.wc == nil && len(w.files) == 0 {
		if err := w.openFile(); err != nil {
			return nil, err
		}
	}
	if w.wc != nil {
		if err := w.closeFile(); err != nil {
			return nil, err
		}
	}
	w.done = true
	created, _, _ := ParseBackupID(w.cfg.ARN.BackupID)
	m := &Manifest{
		FormatVersion:          FormatVersion,
		BackupARN:              w.cfg.ARN.String(),
		BackupName:             w.cfg.BackupName,
		BackupCreationDateTime: created,
		Source:                 w.cfg.Source,
		Snapshot:               w.cfg.Snapshot,
		SourceTable:            w.cfg.SourceTable,
		ItemOrder:              w.cfg.ItemOrder,
		DataFiles:              w.files,
	}
	for _, f := range w.files {
		m.ItemCount += f.ItemCount
		m.UncompressedBytes += f.UncompressedBytes
		m.CompressedBytes += f.CompressedBytes
	}
	mb, err := m.Marshal()
	if err != nil {
		return nil, w.fail(err)
	}
	files := ManifestFiles(m, w.cfg.AWS.KeyPrefix)
	summary, err := ManifestSummary(m, w.table, w.cfg.AWS, w.start, w.cfg.Now())
	if err != nil {
		return nil, w.fail(err)
	}
	sidecar := SidecarOf(sidecarLines(m, files, summary, mb))
	for _, o := range []struct {
		key  string
		data []byte
	}{
		{ManifestFilesKey(w.prefix), files},
		{ManifestSummaryKey(w.prefix), summary},
		{ManifestKey(w.prefix), mb},
		{SidecarKey(w.prefix), sidecar},
	} {
		if err := w.put(o.key, o.data); err != nil {
			return nil, w.fail(err)
		}
	}
	return &Result{Prefix: w.prefix, Manifest: m, ManifestBytes: mb, Sidecar: sidecar}, nil
}

func (w *Writer) put(key string, data []byte) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	wc, err := w.sink.Create(w.ctx, key)
	if err != nil {
		return fileErrCause(key, ErrSource, err, "creating")
	}
	if _, err := wc.Write(data); err != nil {
		if c, ok := wc.(interface{ CloseWithError(error) error }); ok {
			c.CloseWithError(err)
		} else {
			wc.Close()
		}
		return fileErrCause(key, ErrSource, err, "writing")
	}
	if err := wc.Close(); err != nil {
		return fileErrCause(key, ErrSource, err, "closing")
	}
	return nil
}
