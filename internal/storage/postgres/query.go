package postgres

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/storage"
)

// Statement variants of Query and Scan, built once per shape; pgx prepares
// each on first use per connection (statement cache).
const (
	kTableQuery = iota
	kIndexQuery
	kTableScan
	kIndexScan
)

const (
	bNone = iota
	bIncl
	bExcl
)

var variants sync.Map // int -> string

func variantKey(kind, lower, upper int, cursor, desc bool) int {
	k := kind | lower<<2 | upper<<4
	if cursor {
		k |= 1 << 6
	}
	if desc {
		k |= 1 << 7
	}
	return k
}

// variantSQL builds a Query/Scan statement. The rows come from a LATERAL
// subquery joined to the table's catalog row, so one statement (one
// snapshot) answers both "does the table exist" (no row at all) and the
// page: a live table yields at least one row, whose `ok` is NULL when the
// page is empty. The subquery is an ordered range scan of the primary key.
func variantSQL(kind, lower, upper int, cursor, desc bool) string {
	var sb strings.Builder
	n := 1
	arg := func() string {
		s := "$" + strconv.Itoa(n)
		n++
		return s
	}
	col := "sk"
	var cols string
	var order []string
	sb.WriteString("SELECT x.ok")
	switch kind {
	case kTableQuery:
		cols = "sk, item"
		order = []string{"sk"}
	case kIndexQuery:
		cols = "isk, pk, sk, item"
		col = "isk"
		order = []string{"isk", "pk", "sk"}
	case kTableScan:
		cols = "pk, sk, item"
		order = []string{"h", "pk", "sk"}
	case kIndexScan:
		cols = "ipk, isk, pk, sk, item"
		order = []string{"h", "ipk", "isk", "pk", "sk"}
	}
	for _, c := range strings.Split(cols, ", ") {
		sb.WriteString(", x." + c)
	}
	tid := arg()
	sb.WriteString(" FROM tables tb LEFT JOIN LATERAL (SELECT true AS ok, " + cols)
	switch kind {
	case kTableQuery:
		sb.WriteString(" FROM items WHERE t = tb.id AND h = " + arg() + " AND pk = " + arg())
	case kIndexQuery:
		sb.WriteString(" FROM idx WHERE t = tb.id AND ix = " + arg() + " AND h = " + arg() + " AND ipk = " + arg())
	case kTableScan:
		sb.WriteString(" FROM items WHERE t = tb.id")
	case kIndexScan:
		sb.WriteString(" FROM idx WHERE t = tb.id AND ix = " + arg())
	}
	if kind == kTableScan || kind == kIndexScan {
		// A segment's hash range; with a cursor, the cursor is the start
		// (see storage.CursorSeeksScan).
		if !cursor {
			sb.WriteString(" AND h >= " + arg())
		}
		sb.WriteString(" AND h <= " + arg())
	}
	switch lower {
	case bIncl:
		sb.WriteString(" AND " + col + " >= " + arg())
	case bExcl:
		sb.WriteString(" AND " + col + " > " + arg())
	}
	switch upper {
	case bIncl:
		sb.WriteString(" AND " + col + " <= " + arg())
	case bExcl:
		sb.WriteString(" AND " + col + " < " + arg())
	}
	if cursor {
		op := " > "
		if desc {
			op = " < "
		}
		ps := make([]string, len(order))
		for i := range ps {
			ps[i] = arg()
		}
		sb.WriteString(" AND (" + strings.Join(order, ", ") + ")" + op + "(" + strings.Join(ps, ", ") + ")")
	}
	sb.WriteString(" ORDER BY ")
	for i, c := range order {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(c)
		if desc {
			sb.WriteString(" DESC")
		}
	}
	sb.WriteString(" LIMIT " + arg() + ") x ON true WHERE tb.id = " + tid)
	return sb.String()
}

func variant(kind, lower, upper int, cursor, desc bool) string {
	key := variantKey(kind, lower, upper, cursor, desc)
	if s, ok := variants.Load(key); ok {
		return s.(string)
	}
	s := variantSQL(kind, lower, upper, cursor, desc)
	variants.Store(key, s)
	return s
}

func boundOp(bd *storage.Bound, incl, excl int) int {
	switch {
	case bd == nil:
		return bNone
	case bd.Inclusive:
		return incl
	default:
		return excl
	}
}

// queryStmt returns the statement of a Query page, its arguments but the
// LIMIT, and its kind.
func queryStmt(p storage.QueryParams) (string, []any, int) {
	pk := nz(p.PK)
	lower, upper := p.Lower, p.Upper
	kind := kTableQuery
	cursor := false
	args := make([]any, 0, 10)
	args = append(args, p.Table.ID)
	if p.Index != "" {
		kind = kIndexQuery
		args = append(args, p.Index)
		if p.After != nil {
			// The read starts at the cursor or at the bound on that side,
			// never both (storage.CursorSeeksQuery).
			csk := nz(p.After.SK)
			if p.Forward {
				if cursor = storage.CursorSeeksQuery(csk, lower, true); cursor {
					lower = nil
				}
			} else if cursor = storage.CursorSeeksQuery(csk, upper, false); cursor {
				upper = nil
			}
		}
	} else if p.After != nil {
		// On the table the cursor is one more bound on the sort key.
		c := &storage.Bound{Key: nz(p.After.SK)}
		if p.Forward {
			if lower == nil || bytes.Compare(c.Key, lower.Key) >= 0 {
				lower = c
			}
		} else if upper == nil || bytes.Compare(c.Key, upper.Key) <= 0 {
			upper = c
		}
	}
	args = append(args, hashOf(pk), pk)
	lo, hi := boundOp(lower, bIncl, bExcl), boundOp(upper, bIncl, bExcl)
	if lower != nil {
		args = append(args, nz(lower.Key))
	}
	if upper != nil {
		args = append(args, nz(upper.Key))
	}
	if cursor {
		args = append(args, nz(p.After.SK), nz(p.After.BasePK), nz(p.After.BaseSK))
	}
	return variant(kind, lo, hi, cursor, !p.Forward), args, kind
}

// Query implements storage.Backend.
func (b *Backend) Query(ctx context.Context, p storage.QueryParams) (*storage.QueryResult, error) {
	sql, args, kind := queryStmt(p)
	rows, more, err := b.collect(ctx, p.Table, sql, args, kind, nz(p.PK), p.Limit)
	if err != nil {
		return nil, err
	}
	return &storage.QueryResult{Rows: rows, More: more}, nil
}

// scanStmt returns the statement of a Scan page, its arguments but the
// LIMIT, and its kind.
func scanStmt(p storage.ScanParams) (string, []any, int) {
	segLo, segHi := storage.SegmentRange(p.Segment, p.TotalSegments)
	kind := kTableScan
	args := make([]any, 0, 11)
	args = append(args, p.Table.ID)
	if p.Index != "" {
		kind = kIndexScan
		args = append(args, p.Index)
	}
	// The read starts at the cursor or at the segment's lowest hash,
	// never both (storage.CursorSeeksScan).
	cursor := storage.CursorSeeksScan(p.After, segLo)
	if !cursor {
		args = append(args, int64(segLo))
	}
	args = append(args, int64(segHi))
	if cursor {
		cpk := nz(p.After.PK)
		args = append(args, hashOf(cpk), cpk, nz(p.After.SK))
		if kind == kIndexScan {
			args = append(args, nz(p.After.BasePK), nz(p.After.BaseSK))
		}
	}
	return variant(kind, bNone, bNone, cursor, false), args, kind
}

// Scan implements storage.Backend.
func (b *Backend) Scan(ctx context.Context, p storage.ScanParams) (*storage.ScanResult, error) {
	if p.TotalSegments > 1 && (p.Segment < 0 || p.Segment >= p.TotalSegments) {
		return nil, storage.Errorf(storage.KindInternal, "postgres: segment %d out of range [0, %d)", p.Segment, p.TotalSegments)
	}
	sql, args, kind := scanStmt(p)
	rows, more, err := b.collect(ctx, p.Table, sql, args, kind, nil, p.Limit)
	if err != nil {
		return nil, err
	}
	return &storage.ScanResult{Rows: rows, More: more}, nil
}

// collect runs a Query/Scan statement for limit+1 rows and returns at most
// limit of them (More when there was one more). The key and item bytes of
// all rows are copied into one buffer.
func (b *Backend) collect(ctx context.Context, ref storage.TableRef, sql string, args []any, kind int, pk []byte, limit int) ([]storage.Row, bool, error) {
	var lim any // NULL: LIMIT ALL
	if limit > 0 {
		lim = int64(limit) + 1
	}
	args = append(args, lim)
	var out []storage.Row
	more := false
	err := b.read(ctx, "postgres: query", func(c *pgxpool.Conn) error {
		rs, err := c.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rs.Close()
		rb := storage.NewRowBuffer(pk, kind == kIndexQuery || kind == kIndexScan, limit)
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
