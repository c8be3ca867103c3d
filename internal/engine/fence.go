package engine

import (
	"context"
	"errors"

	"github.com/extenddb/extenddb/internal/backend"
)

// Item writes are fenced on the table description version they were
// computed from (backend.TableRef.Version): the backend refuses, with
// KindTableVersion and without writing, a write computed from a
// description that another server (or this one) has changed since. The
// engine then reads the description again and recomputes the whole
// operation from the request, so a write never lands with the index set,
// key schemas or TTL attribute of an older description. See ADR 0010.

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
	for attempt := 1; attempt < maxVersionAttempts && backend.IsKind(err, backend.KindTableVersion); attempt++ {
		if attempt == 1 {
			ctx = context.WithValue(ctx, reloadTables{}, true)
		}
		out, err = op(ctx)
	}
	return out, err
}

// errDescriptionMoved aborts an UpdateTable that creates an index when
// the description is no longer the one the index name was cleared at.
var errDescriptionMoved = errors.New("engine: table description changed while an index name was being cleared")

// clearIndex prepares the creation of an index: it removes any entries
// still stored under the name (an earlier index of that name whose
// entries a crash or a concurrent change kept DropIndex from removing),
// fenced on the current description version, and returns that version.
// The UpdateTable that creates the index must apply on exactly that
// version: no description between the two has the index, so no write
// (stale ones are refused) can have added an entry, and the new index
// starts empty. present tells whether the description has the index
// already (then nothing is cleared; the UpdateTable refuses). 0 means the
// table is gone (the UpdateTable answers that).
func (e *Engine) clearIndex(ctx context.Context, account, name, index string, present func(*table) bool) (int64, error) {
	for attempt := 1; ; attempt++ {
		gt, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: account, Name: name})
		if backend.IsKind(err, backend.KindTableNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		t, err := parseTable(gt.Table)
		if err != nil {
			return 0, err
		}
		if present(t) {
			return t.version, nil
		}
		_, err = e.backend.DropIndex(ctx, backend.DropIndexParams{Table: t.ref, Index: index})
		switch {
		case err == nil:
			return t.version, nil
		case backend.IsKind(err, backend.KindTableNotFound):
			return 0, nil
		case !backend.IsKind(err, backend.KindTableVersion) || attempt >= maxVersionAttempts:
			return 0, err
		}
	}
}

// dropIndexEntries removes the entries of an index that the description
// at ref no longer has. When the description moved on meanwhile (the
// fenced DropIndex is refused) it retries on the new one, unless the
// index exists again: its creator cleared the old entries first.
func (e *Engine) dropIndexEntries(ctx context.Context, ref backend.TableRef, index string) error {
	for attempt := 1; ; attempt++ {
		_, err := e.backend.DropIndex(ctx, backend.DropIndexParams{Table: ref, Index: index})
		if backend.IsKind(err, backend.KindTableNotFound) {
			return nil
		}
		if !backend.IsKind(err, backend.KindTableVersion) || attempt >= maxVersionAttempts {
			return err
		}
		t, err := e.currentTable(ctx, ref)
		if err != nil {
			return err
		}
		if t == nil || t.anyIndex(index) != nil {
			return nil
		}
		ref = t.ref
	}
}
