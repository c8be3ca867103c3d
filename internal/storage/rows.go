package storage

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
	ncol, n int
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

// Recycle makes a new, empty buffer (of a Scan: no fixed partition) write
// its columns into buf's memory, when it is the larger. A snapshot hands
// each page the previous page's buffer: its rows are dead by then (a
// SnapshotStream row is valid until the next call), and a fresh page of
// a megabyte costs its allocation, page faults and a collection.
func (rb *RowBuffer) Recycle(buf []byte) {
	if len(rb.buf) == 0 && cap(buf) > cap(rb.buf) {
		rb.buf = buf[:0]
	}
}

// Buffer is the memory the columns were written to (for Recycle).
func (rb *RowBuffer) Buffer() []byte { return rb.buf }

// Size is the number of bytes of columns added so far.
func (rb *RowBuffer) Size() int { return len(rb.buf) }

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
func (rb *RowBuffer) Rows() []Row {
	out := make([]Row, rb.Len())
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
