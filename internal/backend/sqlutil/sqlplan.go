package sqlutil

import (
	"bytes"
	"strings"

	"github.com/extenddb/extenddb/internal/backend"
)

// The planning of a Query or Scan page for the SQL backends, written once:
// which statement shape (table or index, query or scan, which bounds on
// the sort key column, whether a row-value cursor starts the read, which
// direction), its arguments in statement order, and its text up to each
// dialect's placeholders. Both SQL backends keep items in
// items(t, h, pk, sk, item) and index entries in
// idx(t, ix, h, ipk, isk, pk, sk, item), keyed in that column order, so a
// page is one ordered range read of the primary key.

// SQLKind is what a page reads.
type SQLKind uint8

const (
	SQLTableQuery SQLKind = iota
	SQLIndexQuery
	SQLTableScan
	SQLIndexScan
)

// SQLBound is a bound operator on the sort key column.
type SQLBound uint8

const (
	SQLNoBound SQLBound = iota
	SQLInclusive
	SQLExclusive
)

// SQLShape identifies one statement variant; backends cache prepared
// statements by Key.
type SQLShape struct {
	Kind         SQLKind
	Lower, Upper SQLBound
	// Cursor: the read starts strictly after a row-value cursor.
	Cursor bool
	// Desc: descending order (a backward Query).
	Desc bool
}

// Key is a small integer unique to the shape.
func (s SQLShape) Key() int {
	k := int(s.Kind) | int(s.Lower)<<2 | int(s.Upper)<<4
	if s.Cursor {
		k |= 1 << 6
	}
	if s.Desc {
		k |= 1 << 7
	}
	return k
}

// Index reports whether rows carry the table keys beside the index keys.
func (s SQLShape) Index() bool { return s.Kind == SQLIndexQuery || s.Kind == SQLIndexScan }

// Columns are the selected columns, in the order RowBuffer takes
// them (a Query's partition key is known and not selected).
func (s SQLShape) Columns() []string {
	switch s.Kind {
	case SQLTableQuery:
		return []string{"sk", "item"}
	case SQLIndexQuery:
		return []string{"isk", "pk", "sk", "item"}
	case SQLTableScan:
		return []string{"pk", "sk", "item"}
	default:
		return []string{"ipk", "isk", "pk", "sk", "item"}
	}
}

// order is the primary key order of the read, which the cursor compares.
func (s SQLShape) order() []string {
	switch s.Kind {
	case SQLTableQuery:
		return []string{"sk"}
	case SQLIndexQuery:
		return []string{"isk", "pk", "sk"}
	case SQLTableScan:
		return []string{"h", "pk", "sk"}
	default:
		return []string{"h", "ipk", "isk", "pk", "sk"}
	}
}

// Select renders the page statement: SELECT [prefix]columns FROM ... WHERE
// t = tableID AND ... ORDER BY ... LIMIT <placeholder>. ph returns the
// next placeholder of the dialect ("?" or "$n"); the placeholders appear
// in the order of SQLPlan.Args, then the LIMIT's.
func (s SQLShape) Select(prefix, tableID string, ph func() string) string {
	var sb strings.Builder
	sb.WriteString("SELECT " + prefix + strings.Join(s.Columns(), ", "))
	col := "sk"
	switch s.Kind {
	case SQLTableQuery:
		sb.WriteString(" FROM items WHERE t = " + tableID + " AND h = " + ph() + " AND pk = " + ph())
	case SQLIndexQuery:
		col = "isk"
		sb.WriteString(" FROM idx WHERE t = " + tableID + " AND ix = " + ph() + " AND h = " + ph() + " AND ipk = " + ph())
	case SQLTableScan:
		sb.WriteString(" FROM items WHERE t = " + tableID)
	case SQLIndexScan:
		sb.WriteString(" FROM idx WHERE t = " + tableID + " AND ix = " + ph())
	}
	if s.Kind == SQLTableScan || s.Kind == SQLIndexScan {
		// A segment's hash range; with a cursor the cursor is the start
		// (CursorSeeksScan).
		if !s.Cursor {
			sb.WriteString(" AND h >= " + ph())
		}
		sb.WriteString(" AND h <= " + ph())
	}
	switch s.Lower {
	case SQLInclusive:
		sb.WriteString(" AND " + col + " >= " + ph())
	case SQLExclusive:
		sb.WriteString(" AND " + col + " > " + ph())
	}
	switch s.Upper {
	case SQLInclusive:
		sb.WriteString(" AND " + col + " <= " + ph())
	case SQLExclusive:
		sb.WriteString(" AND " + col + " < " + ph())
	}
	order := s.order()
	if s.Cursor {
		op := " > "
		if s.Desc {
			op = " < "
		}
		ps := make([]string, len(order))
		for i := range ps {
			ps[i] = ph()
		}
		sb.WriteString(" AND (" + strings.Join(order, ", ") + ")" + op + "(" + strings.Join(ps, ", ") + ")")
	}
	sb.WriteString(" ORDER BY ")
	for i, c := range order {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(c)
		if s.Desc {
			sb.WriteString(" DESC")
		}
	}
	sb.WriteString(" LIMIT " + ph())
	return sb.String()
}

// SQLShapes lists every shape a plan can take (for backends' plan tests).
func SQLShapes() []SQLShape {
	var out []SQLShape
	for kind := SQLTableQuery; kind <= SQLIndexScan; kind++ {
		for lo := SQLNoBound; lo <= SQLExclusive; lo++ {
			for hi := SQLNoBound; hi <= SQLExclusive; hi++ {
				for _, cursor := range []bool{false, true} {
					for _, desc := range []bool{false, true} {
						if kind >= SQLTableScan && (lo != SQLNoBound || hi != SQLNoBound || desc) {
							continue // scans have no sort key bounds and one direction
						}
						out = append(out, SQLShape{Kind: kind, Lower: lo, Upper: hi, Cursor: cursor, Desc: desc})
					}
				}
			}
		}
	}
	return out
}

// SQLPlan is a page's shape and its arguments in statement order, after
// the table id and before the LIMIT.
type SQLPlan struct {
	Shape SQLShape
	Args  []any
}

// sqlKey is a key column argument: never nil, since drivers bind a nil
// []byte as NULL.
func sqlKey(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func sqlBound(bd *backend.Bound) SQLBound {
	switch {
	case bd == nil:
		return SQLNoBound
	case bd.Inclusive:
		return SQLInclusive
	default:
		return SQLExclusive
	}
}

// PlanQuery plans a Query page. On the table the cursor is one more bound
// on the sort key (the tighter one wins); on an index the read starts at
// the cursor or at the bound on that side, never both (CursorSeeksQuery).
func PlanQuery(p backend.QueryParams) SQLPlan {
	pk := sqlKey(p.PK)
	lower, upper := p.Lower, p.Upper
	s := SQLShape{Kind: SQLTableQuery, Desc: !p.Forward}
	args := make([]any, 0, 9)
	if p.Index != "" {
		s.Kind = SQLIndexQuery
		args = append(args, p.Index)
		if p.After != nil {
			csk := sqlKey(p.After.SK)
			if p.Forward {
				if s.Cursor = CursorSeeksQuery(csk, lower, true); s.Cursor {
					lower = nil
				}
			} else if s.Cursor = CursorSeeksQuery(csk, upper, false); s.Cursor {
				upper = nil
			}
		}
	} else if p.After != nil {
		c := &backend.Bound{Key: sqlKey(p.After.SK)}
		if p.Forward {
			if lower == nil || bytes.Compare(c.Key, lower.Key) >= 0 {
				lower = c
			}
		} else if upper == nil || bytes.Compare(c.Key, upper.Key) <= 0 {
			upper = c
		}
	}
	args = append(args, int64(backend.KeyHash(pk)), pk)
	s.Lower, s.Upper = sqlBound(lower), sqlBound(upper)
	if lower != nil {
		args = append(args, sqlKey(lower.Key))
	}
	if upper != nil {
		args = append(args, sqlKey(upper.Key))
	}
	if s.Cursor {
		args = append(args, sqlKey(p.After.SK), sqlKey(p.After.BasePK), sqlKey(p.After.BaseSK))
	}
	return SQLPlan{Shape: s, Args: args}
}

// PlanScan plans a Scan page: a segment's hash range, started at the
// cursor or at the segment's lowest hash, never both (CursorSeeksScan).
func PlanScan(p backend.ScanParams) SQLPlan {
	segLo, segHi := backend.SegmentRange(p.Segment, p.TotalSegments)
	s := SQLShape{Kind: SQLTableScan}
	args := make([]any, 0, 8)
	if p.Index != "" {
		s.Kind = SQLIndexScan
		args = append(args, p.Index)
	}
	s.Cursor = CursorSeeksScan(p.After, segLo)
	if !s.Cursor {
		args = append(args, int64(segLo))
	}
	args = append(args, int64(segHi))
	if s.Cursor {
		cpk := sqlKey(p.After.PK)
		args = append(args, int64(backend.KeyHash(cpk)), cpk, sqlKey(p.After.SK))
		if s.Kind == SQLIndexScan {
			args = append(args, sqlKey(p.After.BasePK), sqlKey(p.After.BaseSK))
		}
	}
	return SQLPlan{Shape: s, Args: args}
}

// ValidSegment reports whether a Scan's segment is in range.
func ValidSegment(p backend.ScanParams) bool {
	return p.TotalSegments <= 1 || (p.Segment >= 0 && p.Segment < p.TotalSegments)
}
