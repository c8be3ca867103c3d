package postgres

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/sqlutil"
)

// Statements of Query and Scan pages come from the shared SQL planning
// (sqlutil.PlanQuery, sqlutil.PlanScan), built once per shape; pgx
// prepares each on first use per connection (statement cache).

var variants sync.Map // int -> string

// variant wraps the planned page in a LATERAL subquery joined to the
// table's catalog row, so one statement (one snapshot) answers both "does
// the table exist" (no row at all) and the page: a live table yields at
// least one row, whose `ok` is NULL when the page is empty.
func variant(sh sqlutil.SQLShape) string {
	key := sh.Key()
	if s, ok := variants.Load(key); ok {
		return s.(string)
	}
	n := 1
	ph := func() string {
		n++
		return "$" + strconv.Itoa(n)
	}
	cols := sh.Columns()
	for i, c := range cols {
		cols[i] = "x." + c
	}
	s := "SELECT x.ok, " + strings.Join(cols, ", ") + " FROM tables tb LEFT JOIN LATERAL (" +
		sh.Select("true AS ok, ", "tb.id", ph) + ") x ON true WHERE tb.id = $1"
	variants.Store(key, s)
	return s
}

// queryStmt returns the statement of a Query page, its arguments but the
// LIMIT, and whether it reads an index.
func queryStmt(p backend.QueryParams) (string, []any, bool) {
	plan := sqlutil.PlanQuery(p)
	return variant(plan.Shape), append([]any{p.Table.ID}, plan.Args...), plan.Shape.Index()
}

// scanStmt returns the statement of a Scan page, its arguments but the
// LIMIT, and whether it reads an index.
func scanStmt(p backend.ScanParams) (string, []any, bool) {
	plan := sqlutil.PlanScan(p)
	return variant(plan.Shape), append([]any{p.Table.ID}, plan.Args...), plan.Shape.Index()
}

// Query implements backend.Backend.
func (b *Backend) Query(ctx context.Context, p backend.QueryParams) (*backend.QueryResult, error) {
	sql, args, index := queryStmt(p)
	rows, more, err := b.collect(ctx, p.Table, sql, args, index, nz(p.PK), p.Limit)
	if err != nil {
		return nil, err
	}
	return &backend.QueryResult{Rows: rows, More: more}, nil
}

// Scan implements backend.Backend.
func (b *Backend) Scan(ctx context.Context, p backend.ScanParams) (*backend.ScanResult, error) {
	if !sqlutil.ValidSegment(p) {
		return nil, backend.Errorf(backend.KindInternal, "postgres: segment %d out of range [0, %d)", p.Segment, p.TotalSegments)
	}
	sql, args, index := scanStmt(p)
	rows, more, err := b.collect(ctx, p.Table, sql, args, index, nil, p.Limit)
	if err != nil {
		return nil, err
	}
	return &backend.ScanResult{Rows: rows, More: more}, nil
}

// collect runs a Query/Scan statement for limit+1 rows and returns at most
// limit of them (More when there was one more). The key and item bytes of
// all rows are copied into one buffer.
func (b *Backend) collect(ctx context.Context, ref backend.TableRef, sql string, args []any, index bool, pk []byte, limit int) ([]backend.Row, bool, error) {
	var lim any // NULL: LIMIT ALL
	if limit > 0 {
		lim = int64(limit) + 1
	}
	args = append(args, lim)
	var out []backend.Row
	more := false
	err := b.read(ctx, "postgres: query", func(c *pgxpool.Conn) error {
		rs, err := c.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		rb := sqlutil.NewRowBuffer(pk, index, limit)
		seen := false
		more = false
		for rs.Next() {
			seen = true
			raw := rs.RawValues()
			if raw[0] == nil {
				break // the table exists and the page is empty
			}
			if limit > 0 && rb.Len() == limit {
				more = true
				break
			}
			rb.Add(raw[1 : rb.Columns()+1]...)
		}
		rs.Close()
		if err := rs.Err(); err != nil {
			return err
		}
		if !seen {
			return tableNotFound(ref)
		}
		out = rb.Rows()
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return out, more, nil
}
