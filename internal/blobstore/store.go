// Package store is where backups live: a small blob-store contract with a
// filesystem implementation (FS) and an S3 implementation (S3), the
// `[backup.store]` configuration, and the store identity file with the
// health rules of docs/backup-design.md section 2.
//
// A store moves bytes; it never decides key layout. Key names are chosen by
// internal/format alone; the store only enforces the key rule (see
// ValidateKey) so that every key means the same thing on every store.
//
// Sub-packages: storetest (the conformance suite every store passes),
// memstore (an in-memory store for job tests) and faultstore (a decorator
// that injects failures, short streams and delays).
//
// # Contract
//
// Every method takes a context first; cancelling it aborts the call (a
// cancelled Put publishes nothing). Keys and prefixes that break the key rule
// are refused with an error wrapping ErrInvalidKey before any I/O.
//
//   - Put(key, r) reads r to EOF and publishes its bytes under key, replacing
//     any previous object. Publication is atomic: readers see either the old
//     object (or none) or the complete new one. If r fails, ctx is
//     cancelled, or the store fails, Put returns an error and nothing new is
//     visible under key (a previous object stays as it was), and the store
//     leaves no partial object or open upload behind.
//   - PutIfAbsent(key, r) is Put, except that it fails with ErrExists and
//     changes nothing if an object already exists under key. Of concurrent
//     PutIfAbsent calls on one key at most one succeeds.
//   - Get(key) streams the object. ErrNotFound when there is no object. The
//     returned reader must be closed; reads after ctx is cancelled fail.
//   - GetRange(key, off, n) streams bytes [off, off+n) clipped to the
//     object's size; n < 0 means to the end. off greater than the size is
//     ErrInvalidRange; off equal to the size gives an empty stream.
//   - Head(key) answers size, modification time and an opaque ETag that
//     changes when the object is replaced by different bytes (on S3 the
//     service's ETag; on the filesystem an identity of the file, not a hash).
//   - List(prefix) answers the objects whose key equals prefix or lies under
//     prefix + "/" (a whole-component prefix: "a/b" matches "a/b" and
//     "a/b/c", never "a/bc"), in ascending byte order of key. The empty prefix
//     lists everything. Objects whose name breaks the key rule (temporary
//     files, foreign objects) are never listed.
//   - Walk(prefix, fn) visits the objects List(prefix) would answer, in the
//     same ascending byte order of key, calling fn once per object, without
//     holding the whole listing: S3 reads one ListObjectsV2 page at a time,
//     the filesystem one directory at a time. If fn returns an error the
//     walk stops at once and Walk returns that error unchanged. Objects
//     published or removed during a walk may or may not be visited; every
//     key is visited at most once and keys never go backwards. Use it
//     where a listing can be large (backup sync over a whole store).
//   - DeletePrefix(prefix) removes every object that List(prefix) would
//     answer (and any stray object under the prefix). Missing objects are not
//     an error, so concurrent deleters of one prefix all succeed.
//   - Validate() is the startup check: it proves the store is reachable and
//     usable and returns the underlying service's own error (for S3 the
//     smithy API error with its code, e.g. AccessDenied) wrapped, so the
//     operator sees what the service said.
//
// A key that names an object must not also be used as a directory of
// another key ("a/b" and "a/b/c"): the filesystem store cannot hold both and
// fails the second Put. The layout of internal/format never does this.
package blobstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors of the contract. Implementations wrap them; test with errors.Is.
var (
	// ErrNotFound: no object under the key.
	ErrNotFound = errors.New("store: object not found")
	// ErrExists: PutIfAbsent found an object under the key.
	ErrExists = errors.New("store: object already exists")
	// ErrInvalidKey: the key or prefix breaks the key rule.
	ErrInvalidKey = errors.New("store: invalid key")
	// ErrInvalidRange: GetRange with an offset past the end of the object.
	ErrInvalidRange = errors.New("store: invalid range")
	// ErrUnhealthy: the store's identity or health rules failed; see Health.
	ErrUnhealthy = errors.New("store: unhealthy")
)

// ObjectInfo describes one object.
type ObjectInfo struct {
	Key     string    // the key, as given to Put
	Size    int64     // bytes
	ModTime time.Time // last publication time as the store records it
	ETag    string    // opaque; changes when the object is replaced by other bytes
}

// Store is the blob-store contract; see the package documentation for the
// full semantics of each method. Implementations are safe for concurrent use.
type Store interface {
	Put(ctx context.Context, key string, r io.Reader) error
	PutIfAbsent(ctx context.Context, key string, r io.Reader) error
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error)
	Head(ctx context.Context, key string) (ObjectInfo, error)
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	Walk(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	DeletePrefix(ctx context.Context, prefix string) error
	Validate(ctx context.Context) error
	// String describes the store for logs ("fs:/var/lib/x", "s3://bucket/prefix").
	String() string
}

// listByWalk answers List(prefix) by collecting what walk visits (FS and
// S3 list by walking).
func listByWalk(ctx context.Context, prefix string, walk func(context.Context, string, func(ObjectInfo) error) error) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := walk(ctx, prefix, func(o ObjectInfo) error {
		out = append(out, o)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CtxReader wraps r so that every Read fails with ctx's error once ctx is
// done. Implementations use it to make long copies cancellable.
func CtxReader(ctx context.Context, r io.Reader) io.Reader {
	if ctx.Done() == nil {
		return r
	}
	return &ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// CtxReadCloser is CtxReader for a stream that must be closed.
func CtxReadCloser(ctx context.Context, rc io.ReadCloser) io.ReadCloser {
	if ctx.Done() == nil {
		return rc
	}
	return struct {
		io.Reader
		io.Closer
	}{&ctxReader{ctx: ctx, r: rc}, rc}
}
