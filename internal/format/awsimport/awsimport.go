// Package awsimport reads the source of an ImportTable call: every object
// under an S3 key prefix, decompressed (GZIP, ZSTD or NONE) and parsed as
// DynamoDB JSON, Amazon Ion or CSV, as DynamoDB's import from S3 reads them.
//
// Reading is streaming: one object is open at a time, one line (or Ion
// value, or CSV record) is held at a time. A line that cannot be parsed,
// an item without its key attributes or with a key of the wrong type, and
// an item over 400 KB are counted as errors and reported to the caller's
// OnError with the object and line they came from; reading goes on.
package awsimport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/store"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Input formats (ImportTable InputFormat).
const (
	FormatDynamoDBJSON = "DYNAMODB_JSON"
	FormatION          = "ION"
	FormatCSV          = "CSV"
)

// Compression types (ImportTable InputCompressionType).
const (
	CompressionGZIP = "GZIP"
	CompressionZSTD = "ZSTD"
	CompressionNone = "NONE"
)

// MaxLineBytes bounds one DynamoDB JSON line (or CSV record) as read; a
// longer line is an error and is skipped without being held whole. An
// item is at most 400 KB, but its JSON text may be several times larger
// (type wrappers, base64, escapes).
const MaxLineBytes = 4 << 20

// KeyAttr is a key attribute an item must carry (table keys) or, when
// Optional, may carry only with the given type (index keys).
type KeyAttr struct {
	Name     string
	Type     attr.Type // S, N or B
	Optional bool
}

// Options say how to read a source.
type Options struct {
	Format      string // FormatDynamoDBJSON, FormatION or FormatCSV
	Compression string // CompressionGZIP, CompressionZSTD or CompressionNone ("" is NONE)
	// CSVDelimiter separates CSV fields (',' when zero).
	CSVDelimiter rune
	// CSVHeader names the CSV columns; when empty the first record of
	// each object is its header.
	CSVHeader []string
	// Keys are the table's key attributes and the indexes' key attributes.
	Keys []KeyAttr
	// OnError is told of every item counted as an error (may be nil).
	OnError func(e ItemError)
}

// ItemError is one item that was not imported.
type ItemError struct {
	Object string // the object key
	Line   int64  // 1-based line (CSV: record's first line; Ion: value ordinal)
	Err    error
}

func (e ItemError) Error() string {
	return fmt.Sprintf("s3 object %s line %d: %v", e.Object, e.Line, e.Err)
}

// Stats are the counts of a read, as DescribeImport reports them.
type Stats struct {
	Objects        int64 // objects read
	ProcessedItems int64 // lines, values or records that held an item or were errors
	Errors         int64 // items counted as errors
	ProcessedBytes int64 // bytes of the objects read (as stored)
}

// Source is the part of a store the reader uses.
type Source interface {
	Walk(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
}

// skipNames are the files of an AWS export or an extenddb backup that
// hold no items, so that a prefix naming an export (or a backup) folder
// reads its data files only.
var skipNames = map[string]bool{
	"_started":               true,
	"manifest-summary.json":  true,
	"manifest-files.json":    true,
	"extenddb-manifest.json": true,
}

// Skipped reports whether key is an export or backup bookkeeping object
// (manifests, checksums, the _started marker) rather than data.
func Skipped(key string) bool {
	base := path.Base(key)
	if skipNames[base] || strings.HasSuffix(key, "/") {
		return true
	}
	for _, ext := range []string{".checksum", ".md5", ".sha256"} {
		if strings.HasSuffix(base, ext) {
			return true
		}
	}
	return false
}

// List returns the data objects whose key starts with prefix, byte for
// byte as S3 matches a key prefix ("data" also matches "data2/x" and
// "data.bak"), in key order, without the objects Skipped names.
func List(ctx context.Context, src Source, prefix string) ([]store.ObjectInfo, error) {
	walkFrom := ""
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		walkFrom = strings.TrimRight(prefix[:i], "/")
	}
	var out []store.ObjectInfo
	err := src.Walk(ctx, walkFrom, func(o store.ObjectInfo) error {
		if strings.HasPrefix(o.Key, prefix) && !Skipped(o.Key) {
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CheckOptions validates opts before any object is read.
func CheckOptions(opts Options) error {
	switch opts.Format {
	case FormatDynamoDBJSON, FormatION, FormatCSV:
	default:
		return fmt.Errorf("unknown input format %q", opts.Format)
	}
	switch opts.Compression {
	case "", CompressionNone, CompressionGZIP, CompressionZSTD:
	default:
		return fmt.Errorf("unknown compression type %q", opts.Compression)
	}
	if len(opts.Keys) == 0 || opts.Keys[0].Optional {
		return errors.New("no table key attribute")
	}
	return nil
}

// ReadObject reads one object and calls fn with every valid item. Errors
// returned are the source's (the object cannot be read or decompressed
// past some point) or fn's; item errors are counted in st and reported to
// opts.OnError.
func ReadObject(ctx context.Context, src Source, obj store.ObjectInfo, opts Options, st *Stats, fn func(attr.Item) error) error {
	if err := CheckOptions(opts); err != nil {
		return err
	}
	rc, err := src.Get(ctx, obj.Key)
	if err != nil {
		return fmt.Errorf("s3 object %s: %w", obj.Key, err)
	}
	defer rc.Close()
	st.Objects++
	st.ProcessedBytes += obj.Size
	r, closeDec, err := decompress(bufio.NewReaderSize(rc, 256<<10), opts.Compression)
	if err != nil {
		// An object that is not in the declared compression: AWS counts
		// it as an item that failed validation.
		itemErr(opts, st, obj.Key, 1, fmt.Errorf("not %s data: %v", opts.Compression, err))
		st.ProcessedItems++
		return nil
	}
	defer closeDec()
	p := &parser{ctx: ctx, key: obj.Key, opts: opts, st: st, fn: fn}
	switch opts.Format {
	case FormatDynamoDBJSON:
		return p.jsonLines(r)
	case FormatION:
		return p.ion(r)
	default:
		return p.csv(r)
	}
}

func decompress(r io.Reader, kind string) (io.Reader, func(), error) {
	switch kind {
	case CompressionGZIP:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, err
		}
		return zr, func() { zr.Close() }, nil
	case CompressionZSTD:
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return r, func() {}, nil
}

func itemErr(opts Options, st *Stats, key string, line int64, err error) {
	st.Errors++
	if opts.OnError != nil {
		opts.OnError(ItemError{Object: key, Line: line, Err: err})
	}
}

// dataErr marks an error of the data stream itself (a truncated or
// corrupt compressed object, a storage read failure).
type dataErr struct{ err error }

func (e *dataErr) Error() string { return e.err.Error() }
func (e *dataErr) Unwrap() error { return e.err }

type parser struct {
	ctx  context.Context
	key  string
	opts Options
	st   *Stats
	fn   func(attr.Item) error
}

// item checks a decoded item against the key attributes and the size
// limit and hands it on.
func (p *parser) item(line int64, it attr.Item) error {
	if err := CheckItem(it, p.opts.Keys); err != nil {
		itemErr(p.opts, p.st, p.key, line, err)
		return nil
	}
	return p.fn(it)
}

// CheckItem checks an item's key attributes and size.
func CheckItem(it attr.Item, keys []KeyAttr) error {
	for i, k := range keys {
		v, ok := it[k.Name]
		if !ok {
			if k.Optional {
				continue
			}
			return fmt.Errorf("missing key attribute %s", k.Name)
		}
		if v.Type != k.Type {
			return fmt.Errorf("key attribute %s is %s, the table defines it as %s", k.Name, v.Type, k.Type)
		}
		if (v.Type == attr.S && v.Str == "") || (v.Type == attr.B && len(v.Bin) == 0) {
			return fmt.Errorf("key attribute %s is empty", k.Name)
		}
		limit := 2048 // a partition key
		if i > 0 && !k.Optional {
			limit = 1024 // the table's sort key
		}
		if n := attr.KeySize(v); n > limit {
			return fmt.Errorf("key attribute %s is %d bytes, over the %d-byte limit", k.Name, n, limit)
		}
	}
	if n := attr.ItemSize(it); n > attr.MaxItemSize {
		return fmt.Errorf("item size %d bytes is over the 400 KB limit", n)
	}
	return nil
}

// readLine reads one line of at most MaxLineBytes; a longer line is
// consumed and reported with tooLong.
func readLine(br *bufio.Reader, buf []byte) (line []byte, tooLong bool, err error) {
	buf = buf[:0]
	for {
		frag, e := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(frag) > MaxLineBytes+1 {
				tooLong, buf = true, buf[:0]
			} else {
				buf = append(buf, frag...)
			}
		}
		if e == bufio.ErrBufferFull {
			continue
		}
		if e != nil && (len(buf) > 0 || tooLong) && e == io.EOF {
			return buf, tooLong, nil
		}
		return buf, tooLong, e
	}
}

func (p *parser) jsonLines(r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for n := int64(1); ; n++ {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		line, tooLong, err := readLine(br, buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &dataErr{fmt.Errorf("s3 object %s line %d: %w", p.key, n, err)}
		}
		buf = line
		if tooLong {
			p.st.ProcessedItems++
			itemErr(p.opts, p.st, p.key, n, fmt.Errorf("line longer than %d bytes", MaxLineBytes))
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		p.st.ProcessedItems++
		it, err := decodeJSONLine(line)
		if err != nil {
			itemErr(p.opts, p.st, p.key, n, err)
			continue
		}
		if err := p.item(n, it); err != nil {
			return err
		}
	}
}

// decodeJSONLine parses {"Item":{...}}, the only member a line may have.
func decodeJSONLine(line []byte) (attr.Item, error) {
	var frame map[string]json.RawMessage
	if err := json.Unmarshal(line, &frame); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	raw, ok := frame["Item"]
	if !ok || len(frame) != 1 {
		names := make([]string, 0, len(frame))
		for k := range frame {
			names = append(names, k)
		}
		sort.Strings(names)
		return nil, fmt.Errorf(`a line must be {"Item":{...}}, found members %v`, names)
	}
	it, err := attr.DecodeItem(raw)
	if err != nil {
		return nil, err
	}
	if it == nil {
		return nil, errors.New(`"Item" is null`)
	}
	return it, nil
}

// IsDataError reports whether err came from reading the object's bytes
// (storage or decompression) rather than from the caller's callback.
func IsDataError(err error) bool {
	var d *dataErr
	return errors.As(err, &d)
}
