package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/backend"
)

const (
	sqlGetTable   = `SELECT id, descr, version, created_at FROM tables WHERE account = $1 AND name = $2`
	sqlListTables = `SELECT name FROM tables WHERE account = $1 AND name > $2 ORDER BY name LIMIT $3`
	// A new table starts with known (zero) statistics (counts.go).
	sqlInsTable = `WITH n AS (INSERT INTO tables(account, name, descr, version) VALUES ($1, $2, $3, 1)
			ON CONFLICT (account, name) DO NOTHING RETURNING id, created_at),
		s AS (INSERT INTO table_stats_state(t, counted) SELECT id, true FROM n)
		SELECT id, created_at FROM n`
	sqlLockTable = `SELECT id, descr, version, created_at FROM tables WHERE account = $1 AND name = $2 FOR NO KEY UPDATE`
	sqlUpdTable  = `UPDATE tables SET descr = $1, version = version + 1 WHERE id = $2`
	sqlDelTable  = `DELETE FROM tables WHERE account = $1 AND name = $2 RETURNING id, descr, version, created_at`
)

func scanTable(row pgx.Row, account, name string) (*backend.Table, error) {
	t := &backend.Table{Account: account, Name: name}
	if err := row.Scan(&t.ID, &t.Desc, &t.Version, &t.CreatedAt); err != nil {
		return nil, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	if t.Desc == nil {
		t.Desc = []byte{}
	}
	return t, nil
}

func notFoundByName(account, name string) error {
	return backend.Errorf(backend.KindTableNotFound, "table %q of account %q not found", name, account)
}

// CreateTable implements backend.Backend.
func (b *Backend) CreateTable(ctx context.Context, p backend.CreateTableParams) (*backend.CreateTableResult, error) {
	var res *backend.Table
	err := b.run(ctx, "postgres: create table", func() *attemptErr {
		c, err := b.acquire(ctx)
		if err != nil {
			return &attemptErr{err: err, retry: retryableBeforeCommit(err)}
		}
		defer c.Release()
		t := &backend.Table{Account: p.Account, Name: p.Name, Desc: append([]byte{}, p.Desc...), Version: 1}
		err = c.QueryRow(ctx, sqlInsTable, p.Account, p.Name, t.Desc).Scan(&t.ID, &t.CreatedAt)
		switch {
		case errors.Is(err, pgx.ErrNoRows) || pgCode(err) == "23505":
			return &attemptErr{err: backend.Errorf(backend.KindTableExists, "table %q of account %q already exists", p.Name, p.Account)}
		case err != nil:
			// An autocommit INSERT lost with its connection may have
			// committed: retry only when nothing reached the server.
			return &attemptErr{err: err, retry: isConflict(err) || pgconn.SafeToRetry(err)}
		}
		t.CreatedAt = t.CreatedAt.UTC()
		res = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &backend.CreateTableResult{Table: res}, nil
}

// GetTable implements backend.Backend.
func (b *Backend) GetTable(ctx context.Context, p backend.GetTableParams) (*backend.GetTableResult, error) {
	var res *backend.Table
	err := b.read(ctx, "postgres: get table", func(c *pgxpool.Conn) error {
		t, err := scanTable(c.QueryRow(ctx, sqlGetTable, p.Account, p.Name), p.Account, p.Name)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFoundByName(p.Account, p.Name)
		}
		res = t
		return err
	})
	if err != nil {
		return nil, err
	}
	return &backend.GetTableResult{Table: res}, nil
}

// ListTables implements backend.Backend.
func (b *Backend) ListTables(ctx context.Context, p backend.ListTablesParams) (*backend.ListTablesResult, error) {
	var limit any // NULL: LIMIT ALL
	if p.Limit > 0 {
		limit = int64(p.Limit)
	}
	res := &backend.ListTablesResult{}
	err := b.read(ctx, "postgres: list tables", func(c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, sqlListTables, p.Account, p.StartAfter, limit)
		if err != nil {
			return err
		}
		res.Names, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// UpdateTable implements backend.Backend.
func (b *Backend) UpdateTable(ctx context.Context, p backend.UpdateTableParams) (*backend.UpdateTableResult, error) {
	if p.Fn == nil {
		return nil, backend.Errorf(backend.KindInternal, "postgres: UpdateTable without Fn")
	}
	var res *backend.Table
	var fnErr error
	err := b.write(ctx, "postgres: update table", func(x *txn) error {
		fnErr = nil
		var old *backend.Table
		bt := &pgx.Batch{}
		bt.Queue("BEGIN")
		bt.Queue(sqlLockTable, p.Account, p.Name).QueryRow(func(row pgx.Row) error {
			t, err := scanTable(row, p.Account, p.Name)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			old = t
			return err
		})
		if err := x.send(bt); err != nil {
			return err
		}
		if old == nil {
			return notFoundByName(p.Account, p.Name)
		}
		cur := *old
		desc, err := p.Fn(&cur) // backend.Checked recovers a panic of the function
		if err != nil {
			fnErr = err
			x.rollback()
			return nil
		}
		desc = nz(desc)
		bt = &pgx.Batch{}
		bt.Queue(sqlUpdTable, desc, old.ID)
		bt.Queue("COMMIT")
		x.commitSent = true
		if err := x.send(bt); err != nil {
			return err
		}
		nt := *old
		nt.Desc = append([]byte{}, desc...)
		nt.Version++
		res = &nt
		b.noteVersion(nt.ID, nt.Version)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if fnErr != nil {
		return nil, fnErr
	}
	return &backend.UpdateTableResult{Table: res}, nil
}

// DeleteTable implements backend.Backend. Deleting the catalog row waits
// for the writers that hold it (FOR KEY SHARE); the items and index
// entries are deleted by later statements of the transaction, whose
// snapshots include those writers' commits, and writers that come later
// find the table gone.
func (b *Backend) DeleteTable(ctx context.Context, p backend.DeleteTableParams) (*backend.DeleteTableResult, error) {
	if b.rcache != nil {
		defer b.rcache.Clear() // the table's items, whatever the outcome (ADR 0037)
	}
	var res *backend.Table
	err := b.write(ctx, "postgres: delete table", func(x *txn) error {
		res = nil
		bt := &pgx.Batch{}
		bt.Queue("BEGIN")
		bt.Queue(sqlDelTable, p.Account, p.Name).QueryRow(func(row pgx.Row) error {
			t, err := scanTable(row, p.Account, p.Name)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			res = t
			return err
		})
		if err := x.send(bt); err != nil {
			return err
		}
		if res == nil {
			return notFoundByName(p.Account, p.Name)
		}
		bt = &pgx.Batch{}
		// The items, index entries and change records are the purger's
		// (purge.go, ADR 0057).
		bt.Queue(sqlPurgeAdd, res.ID)
		bt.Queue(sqlDelLogLast, res.ID)
		// Deltas before the folded rows: a fold running now commits
		// before the second delete looks (counts.go).
		bt.Queue(sqlStatDelDeltas, res.ID)
		bt.Queue(sqlStatDel, res.ID)
		bt.Queue(sqlStatDelState, res.ID)
		bt.Queue("COMMIT")
		x.commitSent = true
		return x.send(bt)
	})
	if err != nil {
		return nil, err
	}
	b.tabVersions.Delete(res.ID)
	b.wakePurge()
	return &backend.DeleteTableResult{Table: res}, nil
}

// DropIndex implements backend.Backend.
func (b *Backend) DropIndex(ctx context.Context, p backend.DropIndexParams) (*backend.DropIndexResult, error) {
	err := b.write(ctx, "postgres: drop index", func(x *txn) error {
		found := false
		var version int64
		bt := &pgx.Batch{}
		bt.Queue("BEGIN")
		bt.Queue(sqlFenceTabs, []int64{p.Table.ID}).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				if err := rows.Scan(new(int64), &version); err != nil {
					return err
				}
				found = true
			}
			return rows.Err()
		})
		if err := x.send(bt); err != nil {
			return err
		}
		if !found {
			return tableNotFound(p.Table)
		}
		if version != p.Table.Version {
			return backend.VersionChanged(p.Table, version)
		}
		bt = &pgx.Batch{}
		bt.Queue(sqlDropIdx, p.Table.ID, p.Index)
		bt.Queue(sqlStatDropDeltas, p.Table.ID, p.Index)
		bt.Queue(sqlStatDropIx, p.Table.ID, p.Index)
		bt.Queue("COMMIT")
		x.commitSent = true
		return x.send(bt)
	})
	if err != nil {
		return nil, err
	}
	return &backend.DropIndexResult{}, nil
}
