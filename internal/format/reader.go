package format

import (
	"bufio"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"

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
	src FileSource
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

// readBufSize is the line reader's window; longer lines are scanned in
// pieces.
const readBufSize = 256 << 10

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
	sidecar, err := readSmall(ctx, src, sk, int64(SidecarLen))
	if err != nil {
		return nil, err
	}
	if _, err := ParseSidecar(sidecar); err != nil {
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
	return &Backup{Prefix: prefix, ManifestBytes: mb, Parsed: p, src: src}, nil
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
	fr := newFileReader(b)
	for i := range b.DataFiles {
		if err := fr.read(ctx, i, nil); err != nil {
			return err
		}
	}
	return nil
}

// VerifyFile reads and checks data file i alone.
func (b *Backup) VerifyFile(ctx context.Context, i int) error {
	return newFileReader(b).read(ctx, i, nil)
}

// Items streams every item in file order to fn, checking each file as it
// goes. A file's hashes are known only at its end, so items of a corrupt
// file may reach fn before its error: call Verify first when nothing may be
// written from a bad backup. An error from fn stops the stream and is
// returned as it is.
func (b *Backup) Items(ctx context.Context, fn func(*Record) error) error {
	fr := newFileReader(b)
	for i := range b.DataFiles {
		if err := fr.read(ctx, i, fn); err != nil {
			return err
		}
	}
	return nil
}

// FileItems is Items for data file i alone.
func (b *Backup) FileItems(ctx context.Context, i int, fn func(*Record) error) error {
	return newFileReader(b).read(ctx, i, fn)
}

type fileReader struct {
	b       *Backup
	lr      *limitHashReader
	dec     *zstd.Decoder
	br      *bufio.Reader
	sc      lineScanner
	lineBuf []byte
	prev    encKey
	cur     encKey
	rec     Record
}

func newFileReader(b *Backup) *fileReader {
	fr := &fileReader{b: b, lr: newLimitHashReader(), br: bufio.NewReaderSize(nil, readBufSize)}
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
	if fr.dec == nil {
		if fr.dec, err = NewDecoder(fr.lr); err != nil {
			return fileErrCause(f.Key, ErrCompression, err, "")
		}
	} else if err := fr.dec.Reset(fr.lr); err != nil {
		return fr.finish(f, fileErrCause(f.Key, ErrCompression, err, ""))
	}
	defer fr.dec.Reset(nil)
	fr.br.Reset(fr.dec)
	items, ubytes, cerr := fr.lines(ctx, i, f, fn)
	if ce, ok := cerr.(*callbackErr); ok {
		return ce.err
	}
	if cerr == nil {
		switch {
		case ubytes != f.UncompressedBytes:
			cerr = fileErr(f.Key, ErrUncompressedSize, "%d bytes decompressed, manifest records %d", ubytes, f.UncompressedBytes)
		case items != f.ItemCount:
			cerr = fileErr(f.Key, ErrItemCount, "%d items, manifest records %d", items, f.ItemCount)
		}
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
	want, _ := hex.DecodeString(f.SHA256)
	if got := fr.lr.sha.Sum(nil); subtle.ConstantTimeCompare(got, want) != 1 {
		return fileErrCause(f.Key, ErrSHA256, contentErr, "sha256 is %x, manifest records %s", got, f.SHA256)
	}
	wantMD5, _ := base64.StdEncoding.DecodeString(f.MD5)
	if got := fr.lr.md5.Sum(nil); subtle.ConstantTimeCompare(got, wantMD5) != 1 {
		return fileErrCause(f.Key, ErrMD5, contentErr, "md5 is %s, manifest records %s", base64.StdEncoding.EncodeToString(got), f.MD5)
	}
	return contentErr
}

// lines reads every line of the current file.
func (fr *fileReader) lines(ctx context.Context, fi int, f *DataFile, fn func(*Record) error) (items, ubytes int64, err error) {
	sc := &fr.sc
	er := fr.b.ranges[fi]
	ordered := fr.b.ItemOrder == OrderKey
	for {
		if items&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return items, ubytes, &callbackErr{err}
			}
		}
		sc.reset()
		retained := fr.lineBuf[:0]
		var whole []byte // the line when it fits the read buffer
		long := false
		var n int64
		for {
			chunk, rerr := fr.br.ReadSlice('\n')
			if rerr == nil || rerr == io.EOF && len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
				body := chunk[:len(chunk)-1]
				if n+int64(len(body)) > MaxLineBytes {
					return items, ubytes, fileErr(f.Key, ErrLineTooLong, "line %d is longer than %d bytes", items+1, MaxLineBytes)
				}
				n += int64(len(body)) + 1
				if err := sc.feed(body); err != nil {
					return items, ubytes, fileErr(f.Key, ErrLine, "line %d: %v", items+1, err)
				}
				if long {
					if fn != nil {
						retained = append(retained, body...)
					}
				} else {
					whole = body
				}
				break
			}
			if rerr == bufio.ErrBufferFull {
				if n+int64(len(chunk)) > MaxLineBytes {
					return items, ubytes, fileErr(f.Key, ErrLineTooLong, "line %d is longer than %d bytes", items+1, MaxLineBytes)
				}
				n += int64(len(chunk))
				if ubytes+n > f.UncompressedBytes {
					return items, ubytes + n, fileErr(f.Key, ErrUncompressedSize, "more than the recorded %d bytes", f.UncompressedBytes)
				}
				if err := sc.feed(chunk); err != nil {
					return items, ubytes, fileErr(f.Key, ErrLine, "line %d: %v", items+1, err)
				}
				long = true
				if fn != nil {
					retained = append(retained, chunk...)
				}
				continue
			}
			if rerr == io.EOF {
				if n == 0 && len(chunk) == 0 {
					return items, ubytes, nil
				}
				return items, ubytes, fileErr(f.Key, ErrLine, "line %d: the file ends inside a line", items+1)
			}
			if fr.lr.tooLong != nil {
				return items, ubytes, fr.lr.tooLong
			}
			return items, ubytes, fileErrCause(f.Key, ErrCompression, rerr, "")
		}
		ubytes += n
		if ubytes > f.UncompressedBytes {
			return items, ubytes, fileErr(f.Key, ErrUncompressedSize, "more than the recorded %d bytes", f.UncompressedBytes)
		}
		items++
		if items > f.ItemCount {
			return items, ubytes, fileErr(f.Key, ErrItemCount, "more than the recorded %d items", f.ItemCount)
		}
		k, err := sc.finish()
		if err != nil {
			return items, ubytes, fileErr(f.Key, ErrLine, "line %d: %v", items, err)
		}
		if ordered {
			if err := fr.cur.set(k, fr.b.Schema.HasRange()); err != nil {
				return items, ubytes, fileErr(f.Key, ErrLine, "line %d: %v", items, err)
			}
			if items == 1 {
				if er == nil || er.first.compare(&fr.cur) != 0 {
					return items, ubytes, fileErr(f.Key, ErrKeyRange, "first key is not key_range.first")
				}
			} else if fr.prev.compare(&fr.cur) >= 0 {
				return items, ubytes, fileErr(f.Key, ErrKeyOrder, "line %d is not after line %d", items, items-1)
			}
			if items == f.ItemCount && er.last.compare(&fr.cur) != 0 {
				return items, ubytes, fileErr(f.Key, ErrKeyRange, "last key is not key_range.last")
			}
			if er.last.compare(&fr.cur) < 0 {
				return items, ubytes, fileErr(f.Key, ErrKeyRange, "line %d is after key_range.last", items)
			}
			fr.prev, fr.cur = fr.cur, fr.prev
		}
		if fn != nil {
			line := whole
			if long {
				line = retained
				fr.lineBuf = retained[:0]
			}
			fr.rec = Record{Item: line[len(LinePrefix) : len(line)-1], Key: k, File: fi, Index: items - 1}
			if err := fn(&fr.rec); err != nil {
				return items, ubytes, &callbackErr{err}
			}
		}
	}
}
