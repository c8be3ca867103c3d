package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// StoreSource reads a backup's objects from a store for the format reader.
type StoreSource struct{ Store blobstore.Store }

func notExist(key string, err error) error {
	if errors.Is(err, blobstore.ErrNotFound) {
		return fmt.Errorf("%s: %w (%w)", key, fs.ErrNotExist, err)
	}
	return err
}

// Open implements format.FileSource.
func (s StoreSource) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := s.Store.Get(ctx, key)
	if err != nil {
		return nil, notExist(key, err)
	}
	return rc, nil
}

// Size implements format.FileSource.
func (s StoreSource) Size(ctx context.Context, key string) (int64, error) {
	info, err := s.Store.Head(ctx, key)
	if err != nil {
		return 0, notExist(key, err)
	}
	return info.Size, nil
}

// Verify checks a backup in a store completely (sidecar, manifest, every
// data file's size, hashes, item count and key rules) and answers the
// first failure, which names the bad object.
func Verify(ctx context.Context, st blobstore.Store, arn string) (*format.Backup, error) {
	a, err := format.ParseARN(arn)
	if err != nil {
		return nil, err
	}
	b, err := format.OpenARN(ctx, StoreSource{st}, a)
	if err != nil {
		return nil, err
	}
	if err := b.Verify(ctx); err != nil {
		return nil, err
	}
	return b, nil
}
