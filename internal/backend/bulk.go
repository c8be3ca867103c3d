package backend

import (
	"context"
	"errors"
	"fmt"
)

// BulkItem is one item of a BulkLoad: its key and the Put the engine's
// item loader computed for it (Op Put, Item, PutIndex; no DeleteIndex, no
// Log).
type BulkItem struct {
	PK, SK []byte
	Change Change
}

type BulkLoadParams struct {
	Table TableRef
	Items []BulkItem
}

// BulkLoader is an optional capability (ADR 0032): loading items into a
// table that is being restored (not yet ACTIVE, so no client writes it),
// cheaper than a TransactWrite of blind puts.
//
// BulkLoad writes every item with its index entries, all or nothing. It
// is fenced on Table.Version exactly like TransactWrite: KindTableVersion
// when the table's version moved, KindTableNotFound when it is gone,
// writing nothing; the check is atomic with the write. Each item is an
// upsert: an item already stored under its key is replaced, and an index
// entry already stored under its index key and table key is replaced, so
// loading the same items again (a resumed restore, or a stale owner racing
// its successor on the same keys, ADR 0024) ends with one row per key and
// per index entry. Several BulkLoad calls run at once on one table with
// distinct keys, and the same keys may be loaded concurrently by two
// calls: the backend keeps that safe (no duplicate or lost row), not
// ordered. BulkLoad appends no change-log record (a restore target has no
// stream) and reads nothing; a backend that caches items never leaves a
// stale cached value of a loaded key (it drops the key or caches the
// loaded item). Items must hold distinct keys.
type BulkLoader interface {
	BulkLoad(ctx context.Context, p BulkLoadParams) error
}

var kindsBulk = []Kind{KindTableNotFound, KindTableVersion}

type checkedBulk struct {
	c  *checked
	bl BulkLoader
}

// ValidateBulkItem checks one item of a BulkLoad.
func ValidateBulkItem(it BulkItem) error {
	ch := it.Change
	if ch.Op != Put {
		return fmt.Errorf("op %d is not a Put", ch.Op)
	}
	if len(ch.DeleteIndex) > 0 {
		return errors.New("a bulk item deletes index entries")
	}
	if ch.Log != nil {
		return errors.New("a bulk item carries a change-log record")
	}
	if len(it.PK) == 0 {
		return errors.New("a bulk item without a partition key")
	}
	return ValidateChange(ch)
}

func (cb checkedBulk) BulkLoad(ctx context.Context, p BulkLoadParams) error {
	keys := make(map[string]struct{}, len(p.Items))
	for i := range p.Items {
		it := &p.Items[i]
		if err := ValidateBulkItem(*it); err != nil {
			return cb.c.violation("BulkLoad", "item %d: %v", i, err)
		}
		k := fmt.Sprintf("%d:%x%x", len(it.PK), it.PK, it.SK)
		if _, dup := keys[k]; dup {
			return cb.c.violation("BulkLoad", "item %d: key %x/%x loaded twice in one call", i, it.PK, it.SK)
		}
		keys[k] = struct{}{}
	}
	return cb.c.checkErr("BulkLoad", cb.bl.BulkLoad(ctx, p), kindsBulk, nil)
}
