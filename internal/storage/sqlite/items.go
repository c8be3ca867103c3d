package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/storage/itemcache"
)

// WriteItem implements storage.Backend.
func (b *Backend) WriteItem(ctx context.Context, p storage.WriteItemParams) (*storage.WriteItemResult, error) {
	if p.Fn == nil {
		return nil, storage.Errorf(storage.KindInternal, "sqlite: WriteItem without Fn")
	}
	res := &storage.WriteItemResult{}
	err := b.submit(ctx, func(w *writer) error {
		*res = storage.WriteItemResult{}
		fnErr, err := w.writeItem(&p, res)
		if err != nil {
			return err
		}
		return fnErr
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// TransactWrite implements storage.Backend.
func (b *Backend) TransactWrite(ctx context.Context, p storage.TransactWriteParams) (*storage.TransactWriteResult, error) {
	for i := range p.Ops {
		if p.Ops[i].Fn == nil {
			return nil, storage.Errorf(storage.KindInternal, "sqlite: TransactWrite operation %d without Fn", i)
		}
	}
	res := &storage.TransactWriteResult{}
	err := b.submit(ctx, func(w *writer) error {
		results, err := w.transactWrite(p.Ops)
		res.Results = results
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// hasTable reports whether a table ID is live: from the published set, a
// miss confirmed by SQL (the set lags a commit of another process).
func (b *Backend) hasTable(ctx context.Context, q interface {
	QueryRowContext(context.Context, ...any) *sql.Row
}, id int64) (bool, error) {
	if _, ok := (*b.tables.Load())[id]; ok {
		return true, nil
	}
	var one int
	err := q.QueryRowContext(ctx, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, mapErr(err, "sqlite: read catalog")
	}
	return true, nil
}

func (b *Backend) checkTable(ctx context.Context, ref storage.TableRef) error {
	ok, err := b.hasTable(ctx, b.tableByID, ref.ID)
	if err != nil {
		return err
	}
	if !ok {
		return tableNotFound(ref)
	}
	return nil
}

// GetItem implements storage.Backend.
func (b *Backend) GetItem(ctx context.Context, p storage.GetItemParams) (*storage.GetItemResult, error) {
	if err := b.checkTable(ctx, p.Table); err != nil {
		return nil, err
	}
	var kbuf [96]byte
	var key []byte
	var gen itemcache.Gen
	if b.cache != nil {
		key = itemcache.AppendKey(kbuf[:0], p.Table.ID, p.PK, p.SK)
		item, ok, g := b.cache.GetBytes(key)
		if ok {
			return &storage.GetItemResult{Item: item}, nil
		}
		gen = g
	}
	if err := ctx.Err(); err != nil {
		return nil, mapErr(err, "sqlite: get item")
	}
	r, err := b.points.get(ctx)
	if err != nil {
		return nil, mapErr(err, "sqlite: get item")
	}
	item, err := r.item(p.Table.ID, int64(storage.KeyHash(p.PK)), p.PK, p.SK)
	b.points.put(r, err != nil)
	if err != nil {
		return nil, mapErr(err, "sqlite: get item")
	}
	if item == nil {
		return &storage.GetItemResult{}, nil
	}
	if b.cache != nil {
		b.cache.Fill(string(key), item, gen)
	}
	return &storage.GetItemResult{Item: item}, nil
}

// TransactGet implements storage.Backend: every key is read in one read
// transaction, hence from one WAL snapshot.
func (b *Backend) TransactGet(ctx context.Context, p storage.TransactGetParams) (*storage.TransactGetResult, error) {
	tx, err := b.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapErr(err, "sqlite: begin read")
	}
	defer tx.Rollback()
	get := tx.StmtContext(ctx, b.getItem)
	byID := tx.StmtContext(ctx, b.tableByID)
	res := &storage.TransactGetResult{Items: make([][]byte, len(p.Keys))}
	for i, k := range p.Keys {
		ok, err := b.hasTable(ctx, byID, k.Table.ID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, tableNotFound(k.Table)
		}
		var item []byte
		err = get.QueryRowContext(ctx, k.Table.ID, int64(storage.KeyHash(k.PK)), nz(k.PK), nz(k.SK)).Scan(&item)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, mapErr(err, "sqlite: transact get")
		}
		res.Items[i] = item
	}
	if err := tx.Commit(); err != nil {
		return nil, mapErr(err, "sqlite: end read")
	}
	return res, nil
}
