package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/backend"
)

// TestPagesSeekFromCursor: Query and Scan pages are ordered range reads
// of the primary key (no Sort step) that start at the cursor — the row
// value is an Index Cond, not a filter — for table and index Scans with
// and without segments and index Queries with a bound on the start side,
// here on statistics taken before a bulk load (ANALYZE with 10 items,
// then 50,000 more written).
func TestPagesSeekFromCursor(t *testing.T) {
	need(t)
	b := openT(t, Options{DSN: ownDatabase(t)})
	ctx := context.Background()
	big := createTable(t, b, "big")
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := b.pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// The statistics see a few items, then a bulk load lands.
	const rows = `SELECT $1::bigint, hashtext(g::text)::bigint & 4294967295, ($3 || g)::bytea, '\x'::bytea, '\x7b7d'::bytea FROM generate_series(1, $2::int) g`
	exec(`INSERT INTO items(t, h, pk, sk, item) `+rows, big.ID, 10, "p")
	exec(`INSERT INTO idx(t, ix, h, ipk, isk, pk, sk, item) SELECT t, 'g', h, pk, sk, pk, sk, item FROM items WHERE t = $1`, big.ID)
	exec(`ANALYZE items`)
	exec(`ANALYZE idx`)
	exec(`INSERT INTO items(t, h, pk, sk, item) `+rows, big.ID, 50000, "q")
	exec(`INSERT INTO idx(t, ix, h, ipk, isk, pk, sk, item) SELECT t, 'g', h, pk, sk, pk, sk, item FROM items WHERE t = $1 AND pk >= 'q'`, big.ID)

	k := []byte("p5")
	at := &backend.Cursor{PK: k, SK: []byte{}, BasePK: k, BaseSK: []byte{}}
	type stmt struct {
		what, sql string
		args      []any
		cursor    string // the cursor's row value in the Index Cond; "" for none
	}
	var stmts []stmt
	// A cursor inside segment 0 of 2.
	seg0 := []byte("p1")
	for i := 0; backend.KeyHash(seg0) >= 1<<31; i++ {
		seg0 = fmt.Appendf(nil, "p%d", i)
	}
	at0 := &backend.Cursor{PK: seg0, SK: []byte{}, BasePK: seg0, BaseSK: []byte{}}
	for _, c := range []struct {
		p      backend.ScanParams
		cursor string
	}{
		{backend.ScanParams{Table: big, Limit: 100}, ""},
		{backend.ScanParams{Table: big, Limit: 100, After: at}, "ROW(h, pk, sk) >"},
		{backend.ScanParams{Table: big, Limit: 100, After: at0, Segment: 0, TotalSegments: 2}, "ROW(h, pk, sk) >"},
		{backend.ScanParams{Table: big, Index: "g", Limit: 100, After: at}, "ROW(h, ipk, isk, pk, sk) >"},
		{backend.ScanParams{Table: big, Index: "g", Limit: 100, After: at0, Segment: 0, TotalSegments: 2}, "ROW(h, ipk, isk, pk, sk) >"},
	} {
		sql, args, _ := scanStmt(c.p)
		stmts = append(stmts, stmt{fmt.Sprintf("scan %+v", c.p), sql, args, c.cursor})
	}
	for _, c := range []struct {
		p      backend.QueryParams
		cursor string
	}{
		{backend.QueryParams{Table: big, Index: "g", PK: k, Forward: true, Limit: 100, After: at, Lower: &backend.Bound{Key: []byte{}, Inclusive: true}}, "ROW(isk, pk, sk) >"},
		{backend.QueryParams{Table: big, Index: "g", PK: k, Forward: false, Limit: 100, After: at, Upper: &backend.Bound{Key: []byte("z"), Inclusive: true}}, "ROW(isk, pk, sk) <"},
	} {
		sql, args, _ := queryStmt(c.p)
		stmts = append(stmts, stmt{fmt.Sprintf("query %+v", c.p), sql, args, c.cursor})
	}
	for _, s := range stmts {
		var plan []string
		err := b.read(ctx, "explain", func(c *pgxpool.Conn) error {
			rs, err := c.Query(ctx, "EXPLAIN "+s.sql, append(s.args, int64(101))...)
			if err != nil {
				return err
			}
			defer rs.Close()
			for rs.Next() {
				var line string
				if err := rs.Scan(&line); err != nil {
					return err
				}
				plan = append(plan, strings.TrimSpace(line))
			}
			return rs.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		p := strings.Join(plan, "\n")
		if strings.Contains(p, "Sort") || !strings.Contains(p, "Index Scan") {
			t.Errorf("%s: not an ordered index range read:\n%s\n%s", s.what, s.sql, p)
		}
		if s.cursor != "" && !slices.ContainsFunc(plan, func(l string) bool {
			return strings.HasPrefix(l, "Index Cond:") && strings.Contains(l, s.cursor)
		}) {
			t.Errorf("%s: the cursor (%s) is not where the index read starts:\n%s\n%s", s.what, s.cursor, s.sql, p)
		}
	}
}
