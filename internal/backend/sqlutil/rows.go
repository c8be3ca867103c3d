package sqlutil

import "github.com/extenddb/extenddb/internal/backend"

// RowBuffer assembles Query and Scan results for SQL backends: the key and
// item columns of every row are copied into one buffer (one allocation
// per page instead of one per column) and sliced into Rows at the end.
//
// Column order per row: for a Query (fixed partition, pk given to
// NewRowBuffer) the sort key first, else the partition key then the sort
// key; for an index the table's pk and sk follow; the item comes last.
type RowBuffer struct {
	buf     []byte
	ends    []int // end offset of every column of every row
	pkEnd   int
	fixedPK bool
	index   bool
	ncol    int
}

// NewRowBuffer prepares a buffer. pk is the partition of a Query (nil for
// a Scan); index tells whether rows carry the table keys too; hint is the
// expected number of rows.
func NewRowBuffer(pk []byte, index bool, hint int) *RowBuffer {
	rb := &RowBuffer{fixedPK: pk != nil, index: index, ncol: 2}
	if !rb.fixedPK {
		rb.ncol++
	}
	if index {
		rb.ncol += 2
	}
	if hint <= 0 || hint > 256 {
		hint = 256
	}
	rb.ends = make([]int, 0, hint*rb.ncol)
	rb.buf = append(rb.buf, pk...)
	rb.pkEnd = len(rb.buf)
	return rb
}

// SnapshotPages builds the pages of a snapshot stream (Scan rows: pk, sk,
// item), each in the memory of the page before it: its columns, their
// offsets and its []backend.Row. A stream's row is valid only until the next
// call, so the previous page is dead when the next is read, and a
// snapshot read page after page allocates nothing per page. The zero
// value is ready; not safe for concurrent use.
type SnapshotPages struct {
	buf  []byte
	ends []int
	rows []backend.Row
	last int // bytes of columns of the previous page
}

// Next returns the buffer of the next page, with room for about as many
// bytes as the previous page held (ReserveLike).
func (p *SnapshotPages) Next() *RowBuffer {
	rb := &RowBuffer{ncol: 3, buf: p.buf[:0], ends: p.ends[:0]}
	rb.ReserveLike(p.last)
	return rb
}

// Rows ends the page rb (from Next) and returns its rows, which stay valid
// until the following Next.
func (p *SnapshotPages) Rows(rb *RowBuffer) []backend.Row {
	p.last, p.buf, p.ends = len(rb.buf), rb.buf, rb.ends
	p.rows = rb.RowsInto(p.rows)
	return p.rows
}

// Reserve makes room for n more bytes of columns in one allocation (a
// caller that knows a page's size, such as a snapshot reading pages of
// like size, avoids growing the buffer by doubling).
func (rb *RowBuffer) Reserve(n int) {
	if n > cap(rb.buf)-len(rb.buf) {
		nb := make([]byte, len(rb.buf), len(rb.buf)+n)
		copy(nb, rb.buf)
		rb.buf = nb
	}
}

// ReserveLike prepares a page expected to be about as large as the last
// one (last bytes of columns): when the buffer has less room than last
// plus a sixteenth, it makes room for last plus a quarter in one
// allocation. A page built in its predecessor's memory (SnapshotPages)
// thus reallocates only when pages grow by more than that, not whenever
// one page is a few bytes larger than the one before.
func (rb *RowBuffer) ReserveLike(last int) {
	if cap(rb.buf)-len(rb.buf) < last+last/16 {
		rb.Reserve(last + last/4)
	}
}

// Columns is the number of columns each row must add.
func (rb *RowBuffer) Columns() int { return rb.ncol }

// Add copies columns (Columns() of them make a row, in the order above).
func (rb *RowBuffer) Add(cols ...[]byte) {
	for _, c := range cols {
		rb.buf = append(rb.buf, c...)
		rb.ends = append(rb.ends, len(rb.buf))
	}
}

// Len is the number of complete rows added.
func (rb *RowBuffer) Len() int { return len(rb.ends) / rb.ncol }

// Rows slices the buffer into rows. The rows share the buffer; callers
// must not append to them.
func (rb *RowBuffer) Rows() []backend.Row { return rb.RowsInto(nil) }

// RowsInto is Rows written into dst's memory when it has room (the rows of
// an earlier, dead page), else into a new slice.
func (rb *RowBuffer) RowsInto(dst []backend.Row) []backend.Row {
	var out []backend.Row
	if n := rb.Len(); cap(dst) >= n {
		out = dst[:n]
	} else {
		out = make([]backend.Row, n)
	}
	off := rb.pkEnd
	next := func(j int) []byte {
		e := rb.ends[j]
		s := rb.buf[off:e:e]
		off = e
		return s
	}
	fixed := rb.buf[:rb.pkEnd:rb.pkEnd]
	for i := range out {
		r := &out[i]
		j := i * rb.ncol
		if rb.fixedPK {
			r.PK = fixed
		} else {
			r.PK = next(j)
			j++
		}
		r.SK = next(j)
		j++
		if rb.index {
			r.BasePK, r.BaseSK = next(j), next(j+1)
			j += 2
		} else {
			r.BasePK, r.BaseSK = r.PK, r.SK
		}
		r.Item = next(j)
	}
	return out
}
