package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"strings"

	"github.com/extenddb/extenddb/internal/storage"
)

// Statement variants of Query and Scan, prepared on first use on the
// reader pool and cached by their shape.
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

func (s shape) key() int {
	k := s.kind | s.lower<<2 | s.upper<<4
	if s.cursor {
		k |= 1 << 6
	}
	if s.desc {
		k |= 1 << 7
	}
	return k
}

func (s shape) sql() string {
	kind, lower, upper, cursor, desc := s.kind, s.lower, s.upper, s.cursor, s.desc
	var sb strings.Builder
	col := "sk"
	var order []string
	switch kind {
	case kTableQuery:
		sb.WriteString("SELECT sk, item FROM items WHERE t = ? AND h = ? AND pk = ?")
		order = []string{"sk"}
	case kIndexQuery:
		sb.WriteString("SELECT isk, pk, sk, item FROM idx WHERE t = ? AND ix = ? AND h = ? AND ipk = ?")
		col = "isk"
		order = []string{"isk", "pk", "sk"}
	case kTableScan:
		sb.WriteString("SELECT pk, sk, item FROM items WHERE t = ?")
		order = []string{"h", "pk", "sk"}
	case kIndexScan:
		sb.WriteString("SELECT ipk, isk, pk, sk, item FROM idx WHERE t = ? AND ix = ?")
		order = []string{"h", "ipk", "isk", "pk", "sk"}
	}
	if kind == kTableScan || kind == kIndexScan {
		// A segment's hash range; with a cursor, the cursor is the start
		// (see storage.CursorSeeksScan).
		if !cursor {
			sb.WriteString(" AND h >= ?")
		}
		sb.WriteString(" AND h <= ?")
	}
	switch lower {
	case bIncl:
		sb.WriteString(" AND " + col + " >= ?")
	case bExcl:
		sb.WriteString(" AND " + col + " > ?")
	}
	switch upper {
	case bIncl:
		sb.WriteString(" AND " + col + " <= ?")
	case bExcl:
		sb.WriteString(" AND " + col + " < ?")
	}
	if cursor {
		op := " > "
		if desc {
			op = " < "
		}
		qs := strings.TrimSuffix(strings.Repeat("?, ", len(order)), ", ")
		sb.WriteString(" AND (" + strings.Join(order, ", ") + ")" + op + "(" + qs + ")")
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
	sb.WriteString(" LIMIT ?")
	return sb.String()
}

func (b *Backend) variant(ctx context.Context, sh shape) (*sql.Stmt, error) {
	key := sh.key()
	if s, ok := b.variants.Load(key); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := b.rdb.PrepareContext(ctx, sh.sql())
	if err != nil {
		return nil, mapErr(err, "sqlite: prepare")
	}
	if prev, loaded := b.variants.LoadOrStore(key, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
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

// shape is one statement variant of Query/Scan.
type shape struct {
	kind, lower, upper int
	cursor, desc       bool
}

// queryStmt picks the statement variant and arguments of a Query (all but
// the LIMIT).
func queryStmt(p storage.QueryParams) (shape, []any) {
	pk := nz(p.PK)
	lower, upper := p.Lower, p.Upper
	s := shape{kind: kTableQuery, desc: !p.Forward}
	args := make([]any, 0, 10)
	args = append(args, p.Table.ID)
	if p.Index != "" {
		s.kind = kIndexQuery
		args = append(args, p.Index)
		if p.After != nil {
			// The read starts at the cursor or at the bound on that side,
			// never both (storage.CursorSeeksQuery).
			csk := nz(p.After.SK)
			if p.Forward {
				if s.cursor = storage.CursorSeeksQuery(csk, lower, true); s.cursor {
					lower = nil
				}
			} else if s.cursor = storage.CursorSeeksQuery(csk, upper, false); s.cursor {
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
	args = append(args, int64(storage.KeyHash(pk)), pk)
	s.lower, s.upper = boundOp(lower, bIncl, bExcl), boundOp(upper, bIncl, bExcl)
	if lower != nil {
		args = append(args, nz(lower.Key))
	}
	if upper != nil {
		args = append(args, nz(upper.Key))
	}
	if s.cursor {
		args = append(args, nz(p.After.SK), nz(p.After.BasePK), nz(p.After.BaseSK))
	}
	return s, args
}

// Query implements storage.Backend.
func (b *Backend) Query(ctx context.Context, p storage.QueryParams) (*storage.QueryResult, error) {
	if err := b.checkTable(ctx, p.Table); err != nil {
		return nil, err
	}
	s, args := queryStmt(p)
	stmt, err := b.variant(ctx, s)
	if err != nil {
		return nil, err
	}
	rows, more, err := b.collect(ctx, stmt, args, s.kind, nz(p.PK), p.Limit)
	if err != nil {
		return nil, err
	}
	return &storage.QueryResult{Rows: rows, More: more}, nil
}

// scanStmt picks the statement variant and arguments of a Scan (all but
// the LIMIT).
func scanStmt(p storage.ScanParams) (shape, []any) {
	segLo, segHi := storage.SegmentRange(p.Segment, p.TotalSegments)
	s := shape{kind: kTableScan}
	args := make([]any, 0, 11)
	args = append(args, p.Table.ID)
	if p.Index != "" {
		s.kind = kIndexScan
		args = append(args, p.Index)
	}
	// The read starts at the cursor or at the segment's lowest hash,
	// never both (storage.CursorSeeksScan).
	s.cursor = storage.CursorSeeksScan(p.After, segLo)
	if !s.cursor {
		args = append(args, int64(segLo))
	}
	args = append(args, int64(segHi))
	if s.cursor {
		cpk := nz(p.After.PK)
		args = append(args, int64(storage.KeyHash(cpk)), cpk, nz(p.After.SK))
		if s.kind == kIndexScan {
			args = append(args, nz(p.After.BasePK), nz(p.After.BaseSK))
		}
	}
	return s, args
}

// Scan implements storage.Backend.
func (b *Backend) Scan(ctx context.Context, p storage.ScanParams) (*storage.ScanResult, error) {
	if err := b.checkTable(ctx, p.Table); err != nil {
		return nil, err
	}
	if p.TotalSegments > 1 && (p.Segment < 0 || p.Segment >= p.TotalSegments) {
		return nil, storage.Errorf(storage.KindInternal, "sqlite: segment %d out of range [0, %d)", p.Segment, p.TotalSegments)
	}
	s, args := scanStmt(p)
	stmt, err := b.variant(ctx, s)
	if err != nil {
		return nil, err
	}
	rows, more, err := b.collect(ctx, stmt, args, s.kind, nil, p.Limit)
	if err != nil {
		return nil, err
	}
	return &storage.ScanResult{Rows: rows, More: more}, nil
}

// collect runs a Query/Scan statement for limit+1 rows and returns at most
// limit of them (More when there was one more). The blobs of all rows are
// copied into one buffer, so a page costs a few allocations rather than
// several per row.
func (b *Backend) collect(ctx context.Context, stmt *sql.Stmt, args []any, kind int, pk []byte, limit int) ([]storage.Row, bool, error) {
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
	rb := storage.NewRowBuffer(pk, kind == kIndexQuery || kind == kIndexScan, limit)
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
