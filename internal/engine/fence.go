package engine

import (
	"context"

	"github.com/extenddb/extenddb/internal/storage"
)

// Item writes are fenced on the table description version they were
// computed from (storage.TableRef.Version): the backend refuses, with
// KindTableVersion and without writing, a write computed from a
// description that another server (or this one) has changed since. The
// engine then reads the description again and recomputes the whole
// operation from the request, so a write never lands with the index set,
// key schemas or TTL attribute of an older description. See ADR 0005.

// maxVersionAttempts bounds how often one request is computed: a request
// refused that many times in a row (each time another UpdateTable
// committed between reading the description and writing) answers the
// refusal, which the api maps to a retryable error.
const maxVersionAttempts = 8

// reloadTables marks the context of a recomputed write: loadTable reads
// the description from the backend instead of the cache.
type reloadTables struct{}

// fenced runs op, recomputing it with fresh table descriptions while the
// backend refuses it as computed from a stale one.
func fenced[T any](ctx context.Context, op func(ctx context.Context) (T, error)) (T, error) {
	out, err := op(ctx)
	for attempt := 1; attempt < maxVersionAttempts && storage.IsKind(err, storage.KindTableVersion); attempt++ {
		if attempt == 1 {
			ctx = context.WithValue(ctx, reloadTables{}, true)
		}
		out, err = op(ctx)
	}
	return out, err
}

// PutItem writes an item.
func (e *Engine) PutItem(ctx context.Context, account string, in *PutItemInput) (*ItemOutput, error) {
	return fenced(ctx, func(ctx context.Context) (*ItemOutput, error) { return e.putItem(ctx, account, in) })
}

// DeleteItem deletes an item.
func (e *Engine) DeleteItem(ctx context.Context, account string, in *DeleteItemInput) (*ItemOutput, error) {
	return fenced(ctx, func(ctx context.Context) (*ItemOutput, error) { return e.deleteItem(ctx, account, in) })
}

// UpdateItem updates (or creates) an item.
func (e *Engine) UpdateItem(ctx context.Context, account string, in *UpdateItemInput) (*ItemOutput, error) {
	return fenced(ctx, func(ctx context.Context) (*ItemOutput, error) { return e.updateItem(ctx, account, in) })
}

// BatchWriteItem puts and deletes up to 25 items across tables (see
// batchWriteItem).
func (e *Engine) BatchWriteItem(ctx context.Context, account string, in *BatchWriteItemInput) (*BatchWriteItemOutput, error) {
	return fenced(ctx, func(ctx context.Context) (*BatchWriteItemOutput, error) { return e.batchWriteItem(ctx, account, in) })
}
