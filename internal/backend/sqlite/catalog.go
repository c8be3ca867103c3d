package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

func tableNotFound(ref backend.TableRef) error {
	return backend.Errorf(backend.KindTableNotFound, "table %q (id %d) of account %q not found", ref.Name, ref.ID, ref.Account)
}

func scanTable(row *sql.Row, account, name string) (*backend.Table, error) {
	t := &backend.Table{Account: account, Name: name}
	var created int64
	if err := row.Scan(&t.ID, &t.Desc, &t.Version, &created); err != nil {
		return nil, err
	}
	t.CreatedAt = time.Unix(0, created).UTC()
	return t, nil
}

// CreateTable implements backend.Backend.
func (b *Backend) CreateTable(ctx context.Context, p backend.CreateTableParams) (*backend.CreateTableResult, error) {
	var res *backend.Table
	err := b.submit(ctx, func(w *writer) error {
		t, err := w.createTable(p)
		res = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return &backend.CreateTableResult{Table: res}, nil
}

// GetTable implements backend.Backend.
func (b *Backend) GetTable(ctx context.Context, p backend.GetTableParams) (*backend.GetTableResult, error) {
	t, err := scanTable(b.getTable.QueryRowContext(ctx, p.Account, p.Name), p.Account, p.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, backend.Errorf(backend.KindTableNotFound, "table %q of account %q not found", p.Name, p.Account)
	}
	if err != nil {
		return nil, mapErr(err, "sqlite: get table")
	}
	return &backend.GetTableResult{Table: t}, nil
}

// ListTables implements backend.Backend.
func (b *Backend) ListTables(ctx context.Context, p backend.ListTablesParams) (*backend.ListTablesResult, error) {
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1
	}
	rows, err := b.listTables.QueryContext(ctx, p.Account, p.StartAfter, limit)
	if err != nil {
		return nil, mapErr(err, "sqlite: list tables")
	}
	defer rows.Close()
	res := &backend.ListTablesResult{}
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

// UpdateTable implements backend.Backend.
func (b *Backend) UpdateTable(ctx context.Context, p backend.UpdateTableParams) (*backend.UpdateTableResult, error) {
	var res *backend.Table
	err := b.submit(ctx, func(w *writer) error {
		t, err := w.updateTable(p)
		res = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return &backend.UpdateTableResult{Table: res}, nil
}

// DeleteTable implements backend.Backend.
func (b *Backend) DeleteTable(ctx context.Context, p backend.DeleteTableParams) (*backend.DeleteTableResult, error) {
	var res *backend.Table
	err := b.submit(ctx, func(w *writer) error {
		t, err := w.deleteTable(p)
		res = t
		return err
	})
	if err != nil {
		return nil, err
	}
	b.wakePurge()
	return &backend.DeleteTableResult{Table: res}, nil
}

// DropIndex implements backend.Backend. The entries go in one write
// operation (one transaction of the writer).
func (b *Backend) DropIndex(ctx context.Context, p backend.DropIndexParams) (*backend.DropIndexResult, error) {
	if err := b.submit(ctx, func(w *writer) error { return w.dropIndex(p) }); err != nil {
		return nil, err
	}
	return &backend.DropIndexResult{}, nil
}
