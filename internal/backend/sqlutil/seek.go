package sqlutil

import (
	"bytes"

	"github.com/extenddb/extenddb/internal/backend"
)

// Paging from a cursor must seek to it: a page's cost must not grow with
// its position. An SQL range read has one start key, and a statement that
// carries both a bound on the leading column (a segment's lowest hash, an
// index sort key bound) and the row-value cursor gives the planner two
// candidate starts; SQLite takes one of them (the first written) and
// filters with the other, so a page could walk from the start of the range
// to the cursor. One of the two always implies the other, so SQL
// backends drop the implied one and the statement holds a single start.

// CursorSeeksScan reports whether a Scan of the hash range starting at
// segLo must start from the cursor (its partition hash is in or after the
// range: every row after the cursor has a hash >= segLo, so the range's
// lower end is implied). When false the cursor lies before the range and
// every row of the range is after it: drop the cursor, start at segLo.
func CursorSeeksScan(after *backend.Cursor, segLo uint32) bool {
	return after != nil && backend.KeyHash(after.PK) >= segLo
}

// CursorSeeksQuery reports, for an index Query resuming after a cursor
// whose index sort key is csk, whether the cursor is the start of the
// read. bd is the bound on the start side (Lower when forward, Upper when
// backward). When true the bound is implied by the cursor (drop the
// bound); when false the bound implies the cursor (drop the cursor).
func CursorSeeksQuery(csk []byte, bd *backend.Bound, forward bool) bool {
	if bd == nil {
		return true
	}
	c := bytes.Compare(csk, bd.Key)
	if !forward {
		c = -c
	}
	return c > 0 || (c == 0 && bd.Inclusive)
}
