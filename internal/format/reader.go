package format

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/klauspost/compress/zstd"
)

// FileSource gives read access to a backup's objects. Both methods return
// an error for which errors.Is(err, fs.ErrNotExist) holds when the object
// does not exist (adapters wrap their store's not-found error so).
type FileSource interface {
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	Size(ctx context.Context, key string) (int64, error)
}

// Backup is an opened backup whose sidecar and manifest have been checked.
type Backup struct {
	Prefix        string
	ManifestBytes []byte
	*Parsed
	src     FileSource
	awsSums []SidecarLine // the AWS manifests' sidecar lines (version 2)
}

// Record is one item read from a data file. Item and the key's binary
// values are valid only until the callback returns.
type Record struct {
	Item  []byte // canonical attribute-map bytes ({"a":{"S":"x"},...})
	Key   Key
	File  int   // index in DataFiles
	Index int64 // item index within the file
}

// Decode fully decodes and validates the item.
func (r *Record) Decode() (attr.Item, error) { return attr.DecodeItem(r.Item) }

func sourceErr(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fileErrCause(key, ErrFileMissing, err, "")
	}
	return fileErrCause(key, ErrSource, err, "")
}

func readSmall(ctx context.Context, src FileSource, key string, max int64) ([]byte, error) {
	rc, err := src.Open(ctx, key)
	if err != nil {
		return nil, sourceErr(key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, sourceErr(key, err)
	}
	return data, nil
}

// Open reads the backup under prefix ("<account>/<table>/<backup_id>/")
// and checks the sidecar's form and hash, the manifest (see ParseManifest)
// and that the manifest's ARN is the one the prefix names. Data files are
// not read: call Verify.
func Open(ctx context.Context, src FileSource, prefix string) (*Backup, error) {
	account, table, id, err := ParsePrefix(prefix)
	if err != nil {
		return nil, &FileError{Key: prefix, Err: ErrPrefixMismatch, Cause: err}
	}
	prefix = Prefix(account, table, id)
	sk, mk := SidecarKey(prefix), ManifestKey(prefix)
	sidecar, err := readSmall(ctx, src, sk, MaxSidecarBytes)
	if err != nil {
		return nil, err
	}
	if len(sidecar) > MaxSidecarBytes {
		return nil, fileErr(sk, ErrSidecarForm, "larger than %d bytes", MaxSidecarBytes)
	}
	lines, err := ParseSidecarLines(sidecar)
	if err != nil {
		fe := err.(*FileError)
		fe.Key = sk
		return nil, fe
	}
	mb, err := readSmall(ctx, src, mk, MaxManifestBytes)
	if err != nil {
		return nil, err
	}
	if len(mb) > MaxManifestBytes {
		return nil, fileErr(mk, ErrManifest, "larger than %d bytes", MaxManifestBytes)
	}
	if err := CheckSidecar(sk, sidecar, mb); err != nil {
		return nil, err
	}
	p, err := ParseManifest(mb)
	if err != nil {
		var fe *FileError
		if errors.As(err, &fe) {
			fe.Key = mk
		}
		return nil, err
	}
	if p.ARN.Account != account || p.ARN.Table != table || p.ARN.BackupID != id {
		return nil, fileErr(mk, ErrPrefixMismatch, "backup_arn %s does not belong under %s", p.ManifestARN(), prefix)
	}
	b := &Backup{Prefix: prefix, ManifestBytes: mb, Parsed: p, src: src}
	if err := b.checkSidecarLines(sk, lines); err != nil {
		return nil, err
	}
	return b, nil
}

// checkSidecarLines checks which files the sidecar lists. Version 1: the
// manifest alone. Version 2: every data file (with the manifest's hash of
// it), manifest-files.json, manifest-summary.json and the manifest, in
// that order; the AWS manifests' hashes are kept for Verify.
func (b *Backup) checkSidecarLines(sk string, lines []SidecarLine) error {
	if b.FormatVersion < 2 {
		if len(lines) != 1 {
			return fileErr(sk, ErrSidecarForm, "a format version 1 sidecar has one line, this one has %d", len(lines))
		}
		return nil
	}
	want := len(b.DataFiles) + 3
	if len(lines) != want {
		return fileErr(sk, ErrSidecarForm, "%d lines, a sidecar of a backup of %d data files has %d", len(lines), len(b.DataFiles), want)
	}
	for i, f := range b.DataFiles {
		l := lines[i]
		if name := strings.TrimPrefix(f.Key, b.Prefix); l.Name != name {
			return fileErr(sk, ErrSidecarForm, "line %d names %s, expected %s", i+1, l.Name, name)
		}
		if hex.EncodeToString(l.Sum[:]) != f.SHA256 {
			return fileErr(sk, ErrSidecarMismatch, "sidecar hash of %s differs from the manifest's", f.Key)
		}
	}
	for j, name := range []string{ManifestFilesName, ManifestSummaryName} {
		l := lines[len(b.DataFiles)+j]
		if l.Name != name {
			return fileErr(sk, ErrSidecarForm, "line %d names %s, expected %s", len(b.DataFiles)+j+1, l.Name, name)
		}
		b.awsSums = append(b.awsSums, l)
	}
	return nil
}

// verifyAWSManifests checks the AWS export manifests against the
// sidecar's hashes (format version 2; version 1 does not cover them).
func (b *Backup) verifyAWSManifests(ctx context.Context) error {
	for _, l := range b.awsSums {
		key := b.Prefix + l.Name
		data, err := readSmall(ctx, b.src, key, MaxManifestBytes)
		if err != nil {
			return err
		}
		if sha256.Sum256(data) != l.Sum {
			return fileErr(key, ErrSidecarMismatch, "the sidecar's hash of %s differs from its bytes", l.Name)
		}
	}
	return nil
}

// ManifestARN returns the manifest's backup ARN text.
func (p *Parsed) ManifestARN() string { return p.BackupARN }

// OpenARN is Open for the backup an ARN names; the manifest's ARN must be
// exactly a (partition and region included).
func OpenARN(ctx context.Context, src FileSource, a ARN) (*Backup, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	b, err := Open(ctx, src, PrefixOf(a))
	if err != nil {
		return nil, err
	}
	if b.ARN != a {
		return nil, fileErr(ManifestKey(b.Prefix), ErrARNMismatch, "manifest names %s, expected %s", b.BackupARN, a)
	}
	return b, nil
}

// CheckSizes checks that every data file exists at its recorded
// compressed size (Size only; nothing is read).
func (b *Backup) CheckSizes(ctx context.Context) error {
	for _, f := range b.DataFiles {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := b.src.Size(ctx, f.Key)
		if err != nil {
			return sourceErr(f.Key, err)
		}
		if n != f.CompressedBytes {
			return fileErr(f.Key, ErrCompressedSize, "stored size is %d bytes, manifest records %d", n, f.CompressedBytes)
		}
	}
	return nil
}

// Verify checks the whole backup before anything is written anywhere:
// every data file present at its recorded size, then each file read in
// full (sha256, md5, item count, uncompressed size, line cap, line shape,
// and, for item order key, strictly ascending keys matching the key
// ranges). Memory stays bounded whatever the line lengths.
func (b *Backup) Verify(ctx context.Context) error {
	if err := b.CheckSizes(ctx); err != nil {
		return err
	}
	if err := b.verifyAWSManifests(ctx); err != nil {
		return err
	}
	fr := newFileReader(b)
	defer fr.release()
	for i := range b.DataFiles {
		if err := fr.read(ctx, i, nil); err != nil {
			return err
		}
	}
	return nil
}

// VerifyFile reads and checks data file i alone.
func (b *Backup) VerifyFile(ctx context.Context, i int) error {
	fr := newFileReader(b)
	defer fr.release()
	return fr.read(ctx, i, nil)
}

// Items streams every item in file order to fn, checking each file as it
// goes. A file's hashes are known only at its end, so items of a corrupt
// file may reach fn before its error: call Verify first when nothing may be
// written from a bad backup. An error from fn stops the stream and is
// returned as it is.
func (b *Backup) Items(ctx context.Context, fn func(*Record) error) error {
	fr := newFileReader(b)
	defer fr.release()
	for i := range b.DataFiles {
		if err := fr.read(ctx, i, fn); err != nil {
			return err
		}
	}
	return nil
}

// FileItems is Items for data file i alone.
func (b *Backup) FileItems(ctx context.Context, i int, fn func(*Record) error) error {
	fr := newFileReader(b)
	defer fr.release()
	return fr.read(ctx, i, fn)
}

type fileReader struct {
	b   *Backup
	lr  *limitHashReader
	dec *zstd.Decoder
	sc  lineScanner

	// State of the file being read; the decoder writes its blocks
	// straight to fr (Write), which scans them in place.
	ctx     context.Context
	fi      int
	f       *DataFile
	fn      func(*Record) error
	er      *encRange
	ordered bool
	items   int64 // complete lines seen
	ubytes  int64 // bytes of the complete lines seen
	n       int64 // bytes of the current partial line (0: at a line start)
	lineBuf []byte
	err     error // first content error, stops the decoder
	prev    encKey
	cur     encKey
	rec     Record
}

// decoderPool keeps idle decoders (synchronous, so they hold no
// goroutines) with their buffers for the next file reader.
var decoderPool sync.Pool

// release hands the decoder back to decoderPool.
func (fr *fileReader) release() {
	if fr.dec != nil {
		decoderPool.Put(fr.dec)
		fr.dec = nil
	}
}

func newFileReader(b *Backup) *fileReader {
	fr := &fileReader{b: b, lr: newLimitHashReader()}
	fr.sc.schema = b.Schema
	return fr
}

type callbackErr struct{ err error }

func (e *callbackErr) Error() string { return e.err.Error() }

// read streams data file i. fn may be nil (verification only).
func (fr *fileReader) read(ctx context.Context, i int, fn func(*Record) error) (err error) {
	f := &fr.b.DataFiles[i]
	rc, err := fr.b.src.Open(ctx, f.Key)
	if err != nil {
		return sourceErr(f.Key, err)
	}
	defer rc.Close()
	fr.lr.reset(rc, f.Key, f.CompressedBytes)
	defer fr.lr.join()
	if fr.dec == nil {
		if d, ok := decoderPool.Get().(*zstd.Decoder); ok {
			fr.dec = d
		} else if fr.dec, err = NewDecoder(nil); err != nil {
			return fileErrCause(f.Key, ErrCompression, err, "")
		}
	}
	if err := fr.dec.Reset(fr.lr); err != nil {
		return fr.finish(f, fileErrCause(f.Key, ErrCompression, err, ""))
	}
	defer fr.dec.Reset(nil)
	fr.ctx, fr.fi, fr.f, fr.fn = ctx, i, f, fn
	fr.er, fr.ordered = fr.b.ranges[i], fr.b.ItemOrder == OrderKey
	fr.items, fr.ubytes, fr.n, fr.err = 0, 0, 0, nil
	fr.lineBuf = fr.lineBuf[:0]
	defer func() { fr.ctx, fr.fn, fr.f = nil, nil, nil }()
	if err := fr.ctx.Err(); err != nil {
		return err
	}
	// Decompression and scanning overlap: the decoder hands its blocks to
	// a pipe whose goroutine scans them (fr.Write) while the next block is
	// decompressed.
	pipe := newScanPipe(fr)
	_, derr := fr.dec.WriteTo(pipe)
	pipe.close()
	cerr := fr.err
	switch {
	case cerr != nil:
	case derr != nil && fr.lr.tooLong != nil:
		cerr = fr.lr.tooLong
	case derr != nil:
		cerr = fileErrCause(f.Key, ErrCompression, derr, "")
	case fr.n > 0:
		cerr = fileErr(f.Key, ErrLine, "line %d: the file ends inside a line", fr.items+1)
	case fr.ubytes != f.UncompressedBytes:
		cerr = fileErr(f.Key, ErrUncompressedSize, "%d bytes decompressed, manifest records %d", fr.ubytes, f.UncompressedBytes)
	case fr.items != f.ItemCount:
		cerr = fileErr(f.Key, ErrItemCount, "%d items, manifest records %d", fr.items, f.ItemCount)
	}
	if ce, ok := cerr.(*callbackErr); ok {
		return ce.err
	}
	return fr.finish(f, cerr)
}

// finish drains the stream and applies the checks in precedence order:
// compressed size, sha256, md5, then the content error found earlier.
func (fr *fileReader) finish(f *DataFile, contentErr error) error {
	if err := fr.lr.drain(); err != nil {
		var fe *FileError
		if errors.As(err, &fe) {
			return err
		}
		return sourceErr(f.Key, err)
	}
	if fr.lr.n != f.CompressedBytes {
		return fileErr(f.Key, ErrCompressedSize, "stream ended after %d bytes, manifest records %d", fr.lr.n, f.CompressedBytes)
	}
	gotSHA, gotMD5 := fr.lr.sums()
	want, _ := hex.DecodeString(f.SHA256)
	if got := gotSHA; subtle.ConstantTimeCompare(got, want) != 1 {
		return fileErrCause(f.Key, ErrSHA256, contentErr, "sha256 is %x, manifest records %s", got, f.SHA256)
	}
	wantMD5, _ := base64.StdEncoding.DecodeString(f.MD5)
	if got := gotMD5; subtle.ConstantTimeCompare(got, wantMD5) != 1 {
		return fileErrCause(f.Key, ErrMD5, contentErr, "md5 is %s, manifest records %s", base64.StdEncoding.EncodeToString(got), f.MD5)
	}
	return contentErr
}

// errStop is what Write answers after a content error (kept in fr.err);
// it only stops the decoder.
var errStop = errors.New("format: stop")

// Write scans a block of decompressed bytes as the decoder hands it over:
// complete lines are checked in place, and the start of a line that
// continues in the next block is fed to the scanner (and, when there is a
// callback, kept in lineBuf). The decoder's block is never copied
// otherwise, and a long line is never buffered unless a callback needs it.
func (fr *fileReader) Write(p []byte) (int, error) {
	if fr.err != nil {
		return 0, errStop
	}
	total := len(p)
	for len(p) > 0 {
		j := bytes.IndexByte(p, '\n')
		if j < 0 {
			if err := fr.partial(p); err != nil {
				fr.err = err
				return 0, errStop
			}
			break
		}
		if err := fr.line(p[:j]); err != nil {
			fr.err = err
			return 0, errStop
		}
		p = p[j+1:]
	}
	return total, nil
}

// partial takes the start (or a middle piece) of a line that continues
// past the current block.
func (fr *fileReader) partial(chunk []byte) error {
	f := fr.f
	if fr.n == 0 {
		fr.sc.reset()
		fr.lineBuf = fr.lineBuf[:0]
	}
	if fr.n+int64(len(chunk)) > MaxLineBytes {
		return fileErr(f.Key, ErrLineTooLong, "line %d is longer than %d bytes", fr.items+1, MaxLineBytes)
	}
	fr.n += int64(len(chunk))
	if fr.ubytes+fr.n > f.UncompressedBytes {
		return fileErr(f.Key, ErrUncompressedSize, "more than the recorded %d bytes", f.UncompressedBytes)
	}
	if err := fr.sc.feed(chunk); err != nil {
		return fileErr(f.Key, ErrLine, "line %d: %v", fr.items+1, err)
	}
	if fr.fn != nil {
		fr.lineBuf = append(fr.lineBuf, chunk...)
	}
	return nil
}

// line takes the end of a line (body, without its newline): the whole line
// when no partial piece came before it.
func (fr *fileReader) line(body []byte) error {
	f := fr.f
	sc := &fr.sc
	if fr.items&1023 == 0 {
		if err := fr.ctx.Err(); err != nil {
			return &callbackErr{err}
		}
	}
	whole := fr.n == 0
	if fr.n+int64(len(body)) > MaxLineBytes {
		return fileErr(f.Key, ErrLineTooLong, "line %d is longer than %d bytes", fr.items+1, MaxLineBytes)
	}
	n := fr.n + int64(len(body)) + 1
	fr.n = 0
	// A whole line goes to the fast path first; whatever it does not
	// recognise, the general scanner decides (see fastline.go).
	var k Key
	fast := false
	if whole {
		if hv, rv, ok := sc.fastLine(body); ok {
			var err error
			k, err = sc.keyFrom(hv, rv)
			fast = err == nil
		}
		if !fast {
			sc.reset()
		}
	}
	if !fast {
		if err := sc.feed(body); err != nil {
			return fileErr(f.Key, ErrLine, "line %d: %v", fr.items+1, err)
		}
	}
	line := body
	if !whole && fr.fn != nil {
		fr.lineBuf = append(fr.lineBuf, body...)
		line = fr.lineBuf
	}
	fr.ubytes += n
	if fr.ubytes > f.UncompressedBytes {
		return fileErr(f.Key, ErrUncompressedSize, "more than the recorded %d bytes", f.UncompressedBytes)
	}
	fr.items++
	items := fr.items
	if items > f.ItemCount {
		return fileErr(f.Key, ErrItemCount, "more than the recorded %d items", f.ItemCount)
	}
	if !fast {
		var err error
		if k, err = sc.finish(); err != nil {
			return fileErr(f.Key, ErrLine, "line %d: %v", items, err)
		}
	}
	if fr.ordered {
		if err := fr.cur.set(k, fr.b.Schema.HasRange()); err != nil {
			return fileErr(f.Key, ErrLine, "line %d: %v", items, err)
		}
		er := fr.er
		if items == 1 {
			if er == nil || er.first.compare(&fr.cur) != 0 {
				return fileErr(f.Key, ErrKeyRange, "first key is not key_range.first")
			}
		} else if fr.prev.compare(&fr.cur) >= 0 {
			return fileErr(f.Key, ErrKeyOrder, "line %d is not after line %d", items, items-1)
		}
		if items == f.ItemCount && er.last.compare(&fr.cur) != 0 {
			return fileErr(f.Key, ErrKeyRange, "last key is not key_range.last")
		}
		if er.last.compare(&fr.cur) < 0 {
			return fileErr(f.Key, ErrKeyRange, "line %d is after key_range.last", items)
		}
		fr.prev, fr.cur = fr.cur, fr.prev
	}
	if fr.fn != nil {
		fr.rec = Record{Item: line[len(LinePrefix) : len(line)-1], Key: k, File: fr.fi, Index: items - 1}
		if err := fr.fn(&fr.rec); err != nil {
			return &callbackErr{err}
		}
	}
	return nil
}

// scanPipe feeds decompressed blocks to fr.Write on a second goroutine.
// Blocks are copied (the decoder reuses its buffer); at most scanPipeDepth
// blocks wait, so memory stays bounded. The callback of Items runs on
// that goroutine, one record after the other.
type scanPipe struct {
	fr     *fileReader
	ch     chan []byte
	done   chan struct{}
	failed atomic.Bool
}

const scanPipeDepth = 4

func newScanPipe(fr *fileReader) *scanPipe {
	p := &scanPipe{fr: fr, ch: make(chan []byte, scanPipeDepth), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer func() {
			// A callback that ends its goroutine (a test's FailNow) or
			// panics must not leave the decoder waiting.
			if r := recover(); r != nil && fr.err == nil {
				fr.err = &callbackErr{fmt.Errorf("format: item callback panicked: %v", r)}
			}
			p.failed.Store(true)
			for b := range p.ch {
				putHashBuf(b)
			}
		}()
		for b := range p.ch {
			if fr.err == nil {
				if _, err := fr.Write(b); err != nil {
					p.failed.Store(true)
				}
			}
			putHashBuf(b)
		}
	}()
	return p
}

// Write queues a copy of a block for scanning.
func (p *scanPipe) Write(b []byte) (int, error) {
	if p.failed.Load() {
		return 0, errStop
	}
	c := getHashBuf(len(b))
	copy(c, b)
	select {
	case p.ch <- c:
		return len(b), nil
	case <-p.done:
		putHashBuf(c)
		return 0, errStop
	}
}

// close waits until every queued block is scanned.
func (p *scanPipe) close() {
	close(p.ch)
	<-p.done
}
