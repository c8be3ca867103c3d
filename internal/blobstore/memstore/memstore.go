// Package memstore is an in-memory blobstore.Store for tests of the backup and
// restore jobs. It follows the full contract (it passes storetest) and keeps
// everything in one map under a mutex.
package memstore

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/blobstore"
)

type object struct {
	data    []byte
	modTime time.Time
	etag    string
}

// Store is an in-memory store. The zero value is not usable; call New.
type Store struct {
	mu      sync.Mutex
	objects map[string]object
	now     func() time.Time
}

var _ blobstore.Store = (*Store)(nil)

// New answers an empty store.
func New() *Store {
	return &Store{objects: map[string]object{}, now: time.Now}
}

func (s *Store) String() string { return "mem:" }

// Len answers the number of objects (a test helper).
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects)
}

func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, key, r, false)
}

func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, key, r, true)
}

func (s *Store) put(ctx context.Context, key string, r io.Reader, exclusive bool) error {
	if err := blobstore.ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := io.ReadAll(blobstore.CtxReader(ctx, r))
	if err != nil {
		return fmt.Errorf("memstore: put %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sum := md5.Sum(data)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[key]; ok && exclusive {
		return fmt.Errorf("%w: %q", blobstore.ErrExists, key)
	}
	s.objects[key] = object{data: data, modTime: s.now().UTC(), etag: hex.EncodeToString(sum[:])}
	return nil
}

func (s *Store) lookup(key string) (object, error) {
	if err := blobstore.ValidateKey(key); err != nil {
		return object{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if !ok {
		return object{}, fmt.Errorf("%w: %q", blobstore.ErrNotFound, key)
	}
	return o, nil
}

func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := s.lookup(key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(blobstore.CtxReader(ctx, bytes.NewReader(o.data))), nil
}

func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o, err := s.lookup(key)
	if err != nil {
		return nil, err
	}
	size := int64(len(o.data))
	if off < 0 || off > size {
		return nil, fmt.Errorf("%w: offset %d of %q (%d bytes)", blobstore.ErrInvalidRange, off, key, size)
	}
	end := size
	if n >= 0 && off+n < size {
		end = off + n
	}
	return io.NopCloser(blobstore.CtxReader(ctx, bytes.NewReader(o.data[off:end]))), nil
}

func (s *Store) Head(ctx context.Context, key string) (blobstore.ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return blobstore.ObjectInfo{}, err
	}
	o, err := s.lookup(key)
	if err != nil {
		return blobstore.ObjectInfo{}, err
	}
	return blobstore.ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime, ETag: o.etag}, nil
}

func (s *Store) List(ctx context.Context, prefix string) ([]blobstore.ObjectInfo, error) {
	if err := blobstore.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []blobstore.ObjectInfo
	for k, o := range s.objects {
		if blobstore.UnderPrefix(k, prefix) {
			out = append(out, blobstore.ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime, ETag: o.etag})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b blobstore.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Walk visits a snapshot of List(prefix), calling fn outside the lock (fn
// may use the store).
func (s *Store) Walk(ctx context.Context, prefix string, fn func(blobstore.ObjectInfo) error) error {
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	if err := blobstore.ValidatePrefix(prefix); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.objects {
		if blobstore.UnderPrefix(k, prefix) {
			delete(s.objects, k)
		}
	}
	return nil
}

func (s *Store) Validate(ctx context.Context) error { return ctx.Err() }
