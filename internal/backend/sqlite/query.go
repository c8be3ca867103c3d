package sqlite

import (
	"context"
	"database/sql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlutil"
)

// Statements of Query and Scan pages come from the shared SQL planning
// (sqlutil.PlanQuery, sqlutil.PlanScan); each shape is prepared on first
// use on the reader pool and cached by its key.

func (b *Backend) variant(ctx context.Context, sh sqlutil.SQLShape) (*sql.Stmt, error) {
	key := sh.Key()
	if s, ok := b.variants.Load(key); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := b.rdb.PrepareContext(ctx, sh.Select("", "?", func() string { return "?" }))
	if err != nil {
		return nil, mapErr(err, "sqlite: prepare")
	}
	if prev, loaded := b.variants.LoadOrStore(key, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

// page runs one planned Query/Scan page.
func (b *Backend) page(ctx context.Context, ref backend.TableRef, plan sqlutil.SQLPlan, pk []byte, limit int) ([]backend.Row, bool, error) {
	if err := b.checkTable(ctx, ref); err != nil {
		return nil, false, err
	}
	stmt, err := b.variant(ctx, plan.Shape)
	if err != nil {
		return nil, false, err
	}
	args := append([]any{ref.ID}, plan.Args...)
	return b.collect(ctx, stmt, args, plan.Shape.Index(), pk, limit)
}

// Query implements backend.Backend.
func (b *Backend) Query(ctx context.Context, p backend.QueryParams) (*backend.QueryResult, error) {
	rows, more, err := b.page(ctx, p.Table, sqlutil.PlanQuery(p), nz(p.PK), p.Limit)
	if err != nil {
		return nil, err
	}
	return &backend.QueryResult{Rows: rows, More: more}, nil
}

// Scan implements backend.Backend.
func (b *Backend) Scan(ctx context.Context, p backend.ScanParams) (*backend.ScanResult, error) {
	if !sqlutil.ValidSegment(p) {
		return nil, backend.Errorf(backend.KindInternal, "sqlite: segment %d out of range [0, %d)", p.Segment, p.TotalSegments)
	}
	rows, more, err := b.page(ctx, p.Table, sqlutil.PlanScan(p), nil, p.Limit)
	if err != nil {
		return nil, err
	}
	return &backend.ScanResult{Rows: rows, More: more}, nil
}

// collect runs a Query/Scan statement for limit+1 rows and returns at most
// limit of them (More when there was one more). The blobs of all rows are
// copied into one buffer, so a page costs a few allocations rather than
// several per row.
func (b *Backend) collect(ctx context.Context, stmt *sql.Stmt, args []any, index bool, pk []byte, limit int) ([]backend.Row, bool, error) {
	lim := int64(limit) + 1
	if limit <= 0 {
		lim = -1
	}
	args = append(args, lim)
	rs, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, false, mapErr(err, "sqlite: query")
	}
	defer rs.Close()
	rb := sqlutil.NewRowBuffer(pk, index, limit)
	ncol := rb.Columns()
	var raw [5]sql.RawBytes
	var dest [5]any
	for i := range ncol {
		dest[i] = &raw[i]
	}
	more := false
	for rs.Next() {
		if limit > 0 && rb.Len() == limit {
			more = true
			break
		}
		if err := rs.Scan(dest[:ncol]...); err != nil {
			return nil, false, mapErr(err, "sqlite: query")
		}
		for _, c := range raw[:ncol] {
			rb.Add(c)
		}
	}
	if err := rs.Err(); err != nil {
		return nil, false, mapErr(err, "sqlite: query")
	}
	return rb.Rows(), more, nil
}
