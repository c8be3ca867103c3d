package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
)

func tableNotFound(ref storage.TableRef) error {
	return storage.Errorf(storage.KindTableNotFound, "table %q (id %d) of account %q not found", ref.Name, ref.ID, ref.Account)
}

func scanTable(row *sql.Row, account, name string) (*storage.Table, error) {
	t := &storage.Table{Account: account, Name: name}
	var created int64
	if err := row.Scan(&t.ID, &t.Desc, &t.Version, &created); err != nil {
		return nil, err
	}
	t.CreatedAt = time.Unix(0, created).UTC()
	return t, nil
}

// CreateTable implements storage.Backend.
func (b *Backend) CreateTable(ctx context.Context, p storage.CreateTableParams) (*storage.CreateTableResult, error) {
	var res *storage.Table
	err := b.submit(ctx, func(w *writer) error {
		t, err := w.createTable(p)
		res = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return &storage.CreateTableResult{Table: res}, nil
}

// GetTable implements storage.Backend.
func (b *Backend) GetTable(ctx context.Context, p storage.GetTableParams) (*storage.GetTableResult, error) {
	t, err := scanTable(b.getTable.QueryRowContext(ctx, p.Account, p.Name), p.Account, p.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storage.Errorf(storage.KindTableNotFound, "table %q of account %q not found", p.Name, p.Account)
	}
	if err != nil {
		return nil, mapErr(err, "sqlite: get table")
	}
	return &storage.GetTableResult{Table: t}, nil
}

// ListTables implements storage.Backend.
func (b *Backend) ListTables(ctx context.Context, p storage.ListTablesParams) (*storage.ListTablesResult, error) {
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1
	}
	rows, err := b.listTables.QueryContext(ctx, p.Account, p.StartAfter, limit)
	if err != nil {
		return nil, mapErr(err, "sqlite: list tables")
	}
	defer rows.Close()
	res := &storage.ListTablesResult{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, mapErr(err, "sqlite: list tables")
		}
		res.Names = append(res.Names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(err, "sqlite: list tables")
	}
	return res, nil
}

// UpdateTable implements storage.Backend.
func (b *Backend) UpdateTable(ctx context.Context, p storage.UpdateTableParams) (*storage.UpdateTableResult, error) {
	var res *storage.Table
	err := b.submit(ctx, func(w *writer) error {
		t, err := w.updateTable(p)
		res = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return &storage.UpdateTableResult{Table: res}, nil
}

// DeleteTable implements storage.Backend.
func (b *Backend) DeleteTable(ctx context.Context, p storage.DeleteTableParams) (*storage.DeleteTableResult, error) {
	var res *storage.Table
	err := b.submit(ctx, func(w *writer) error {
		t, err := w.deleteTable(p)
		res = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return &storage.DeleteTableResult{Table: res}, nil
}

// DropIndex implements storage.Backend. The entries go in one write
// operation (one transaction of the writer).
func (b *Backend) DropIndex(ctx context.Context, p storage.DropIndexParams) (*storage.DropIndexResult, error) {
	if err := b.submit(ctx, func(w *writer) error { return w.dropIndex(p) }); err != nil {
		return nil, err
	}
	return &storage.DropIndexResult{}, nil
}
