package sqlite

import (
	"context"
	"database/sql"
	"errors"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/itemcache"
)

// WriteItem implements backend.Backend.
func (b *Backend) WriteItem(ctx context.Context, p backend.WriteItemParams) (*backend.WriteItemResult, error) {
	if p.Fn == nil {
		return nil, backend.Errorf(backend.KindInternal, "sqlite: WriteItem without Fn")
	}
	res := &backend.WriteItemResult{}
	err := b.submit(ctx, func(w *writer) error {
		*res = backend.WriteItemResult{}
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

// TransactWrite implements backend.Backend.
func (b *Backend) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	for i := range p.Ops {
		if p.Ops[i].Fn == nil {
			return nil, backend.Errorf(backend.KindInternal, "sqlite: TransactWrite operation %d without Fn", i)
		}
	}
	res := &backend.TransactWriteResult{}
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

func (b *Backend) checkTable(ctx context.Context, ref backend.TableRef) error {
	ok, err := b.hasTable(ctx, b.tableByID, ref.ID)
	if err != nil {
		return err
	}
	if !ok {
		return tableNotFound(ref)
	}
	return nil
}

// GetItem implements backend.Backend.
func (b *Backend) GetItem(ctx context.Context, p backend.GetItemParams) (*backend.GetItemResult, error) {
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
			return &backend.GetItemResult{Item: item}, nil
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
	item, err := r.item(p.Table.ID, int64(backend.KeyHash(p.PK)), p.PK, p.SK)
	b.points.put(r, err != nil)
	if err != nil {
		return nil, mapErr(err, "sqlite: get item")
	}
	if item == nil {
		return &backend.GetItemResult{}, nil
	}
	if b.cache != nil {
		b.cache.Fill(string(key), item, gen)
	}
	return &backend.GetItemResult{Item: item}, nil
}

// TransactGet implements backend.Backend: every key is read in one read
// transaction, hence from one WAL snapshot.
func (b *Backend) TransactGet(ctx context.Context, p backend.TransactGetParams) (*backend.TransactGetResult, error) {
	tx, err := b.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapErr(err, "sqlite: begin read")
	}
	defer tx.Rollback()
	get := tx.StmtContext(ctx, b.getItem)
	byID := tx.StmtContext(ctx, b.tableByID)
	res := &backend.TransactGetResult{Items: make([][]byte, len(p.Keys))}
	for i, k := range p.Keys {
		ok, err := b.hasTable(ctx, byID, k.Table.ID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, tableNotFound(k.Table)
		}
		var item []byte
		err = get.QueryRowContext(ctx, k.Table.ID, int64(backend.KeyHash(k.PK)), nz(k.PK), nz(k.SK)).Scan(&item)
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
