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

func variantSQL(kind, lower, upper int, cursor, desc bool) string {
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
		sb.WriteString("SELECT pk, sk, item FROM items WHERE t = ? AND h >= ? AND h <= ?")
		order = []string{"h", "pk", "sk"}
	case kIndexScan:
		sb.WriteString("SELECT ipk, isk, pk, sk, item FROM idx WHERE t = ? AND ix = ? AND h >= ? AND h <= ?")
		order = []string{"h", "ipk", "isk", "pk", "sk"}
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

func (b *Backend) variant(ctx context.Context, kind, lower, upper int, cursor, desc bool) (*sql.Stmt, error) {
	key := variantKey(kind, lower, upper, cursor, desc)
	if s, ok := b.variants.Load(key); ok {
		return s.(*sql.Stmt), nil
	}
	s, err := b.rdb.PrepareContext(ctx, variantSQL(kind, lower, upper, cursor, desc))
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

// Query implements storage.Backend.
func (b *Backend) Query(ctx context.Context, p storage.QueryParams) (*storage.QueryResult, error) {
	if err := b.checkTable(ctx, p.Table); err != nil {
		return nil, err
	}
	pk := nz(p.PK)
	lower, upper := p.Lower, p.Upper
	kind := kTableQuery
	cursor := false
	args := make([]any, 0, 10)
	args = append(args, p.Table.ID)
	if p.Index != "" {
		kind = kIndexQuery
		args = append(args, p.Index)
		cursor = p.After != nil
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
	stmt, err := b.variant(ctx, kind, lo, hi, cursor, !p.Forward)
	if err != nil {
		return nil, err
	}
	rows, more, err := b.collect(ctx, stmt, args, kind, pk, p.Limit)
	if err != nil {
		return nil, err
	}
	return &storage.QueryResult{Rows: rows, More: more}, nil
}

// Scan implements storage.Backend.
func (b *Backend) Scan(ctx context.Context, p storage.ScanParams) (*storage.ScanResult, error) {
	if err := b.checkTable(ctx, p.Table); err != nil {
		return nil, err
	}
	if p.TotalSegments > 1 && (p.Segment < 0 || p.Segment >= p.TotalSegments) {
		return nil, storage.Errorf(storage.KindInternal, "sqlite: segment %d out of range [0, %d)", p.Segment, p.TotalSegments)
	}
	segLo, segHi := storage.SegmentRange(p.Segment, p.TotalSegments)
	kind := kTableScan
	args := make([]any, 0, 11)
	args = append(args, p.Table.ID)
	if p.Index != "" {
		kind = kIndexScan
		args = append(args, p.Index)
	}
	args = append(args, int64(segLo), int64(segHi))
	cursor := p.After != nil
	if cursor {
		cpk := nz(p.After.PK)
		args = append(args, int64(storage.KeyHash(cpk)), cpk, nz(p.After.SK))
		if kind == kIndexScan {
			args = append(args, nz(p.After.BasePK), nz(p.After.BaseSK))
		}
	}
	stmt, err := b.variant(ctx, kind, bNone, bNone, cursor, false)
	if err != nil {
		return nil, err
	}
	rows, more, err := b.collect(ctx, stmt, args, kind, nil, p.Limit)
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
