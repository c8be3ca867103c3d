package format

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every verification failure is a *FileError that wraps
// exactly one of these and names the object; test with errors.Is.
var (
	// ErrSidecarForm: the sidecar is not in its sha256sum form (lines
	// "<64 lowercase hex>  <name>\n", the last naming
	// extenddb-manifest.json), or does not list the files its format
	// version requires.
	ErrSidecarForm = errors.New("sidecar is not in sha256sum form")
	// ErrSidecarMismatch: a hash in the sidecar differs from the bytes of
	// the file it names (the manifest, a data file, an AWS manifest).
	ErrSidecarMismatch = errors.New("sidecar hash does not match the manifest")
	// ErrVersionTooNew: the manifest's format_version is newer than this reader.
	ErrVersionTooNew = errors.New("backup format version is newer than this reader")
	// ErrManifest: the manifest is malformed (syntax, a missing or unknown
	// member, a bad value, totals that do not add up).
	ErrManifest = errors.New("malformed manifest")
	// ErrARNMismatch: backup_arn disagrees with source_table, the creation
	// time or the expected ARN.
	ErrARNMismatch = errors.New("backup ARN is inconsistent")
	// ErrPrefixMismatch: the manifest or a data file key does not lie where
	// the backup's prefix says it must.
	ErrPrefixMismatch = errors.New("object key does not match the backup prefix")
	// ErrFileMissing: a data file (or the manifest or sidecar) is absent.
	ErrFileMissing = errors.New("object is missing")
	// ErrSource: the file source failed for another reason than absence.
	ErrSource = errors.New("cannot read object")
	// ErrCompressedSize: a data file's stored size differs from the manifest
	// (found by Size, or while reading: a longer stream is refused at the
	// first byte past the recorded size).
	ErrCompressedSize = errors.New("compressed size differs from the manifest")
	// ErrUncompressedSize: the decompressed size differs from the manifest.
	ErrUncompressedSize = errors.New("uncompressed size differs from the manifest")
	// ErrSHA256: the data file's sha256 differs from the manifest.
	ErrSHA256 = errors.New("sha256 differs from the manifest")
	// ErrMD5: the data file's md5 differs from the manifest.
	ErrMD5 = errors.New("md5 differs from the manifest")
	// ErrItemCount: the number of lines differs from the manifest.
	ErrItemCount = errors.New("item count differs from the manifest")
	// ErrCompression: the data file is not a valid zstd stream.
	ErrCompression = errors.New("invalid zstd stream")
	// ErrLineTooLong: a decompressed line is longer than MaxLineBytes.
	ErrLineTooLong = errors.New("line longer than the line cap")
	// ErrLine: a line is not {"Item":{...}} with valid canonical keys.
	ErrLine = errors.New("malformed line")
	// ErrKeyOrder: keys are not strictly ascending within a file.
	ErrKeyOrder = errors.New("keys are not in strictly ascending order")
	// ErrKeyRange: a file's keys do not lie in its key_range, or the ranges
	// are not ascending and disjoint.
	ErrKeyRange = errors.New("key outside the recorded key range")
)

// FileError is a failure concerning one object of a backup.
type FileError struct {
	Key    string // the full object key
	Err    error  // one of the Err* sentinels
	Detail string // what exactly differed, for people
	Cause  error  // an underlying error (I/O, zstd), if any
}

func (e *FileError) Error() string {
	s := e.Key + ": " + e.Err.Error()
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Cause != nil {
		s += ": " + e.Cause.Error()
	}
	return s
}

// Unwrap returns the sentinel and the cause.
func (e *FileError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

func fileErr(key string, sentinel error, format string, args ...any) *FileError {
	return &FileError{Key: key, Err: sentinel, Detail: fmt.Sprintf(format, args...)}
}

func fileErrCause(key string, sentinel, cause error, format string, args ...any) *FileError {
	return &FileError{Key: key, Err: sentinel, Detail: fmt.Sprintf(format, args...), Cause: cause}
}
