package memory

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"slices"

	"github.com/tidwall/btree"

	"github.com/extenddb/extenddb/internal/backend"
)

// Reads hand out slices of the stored buffers: a stored buffer is never
// written again (a write stores a new one), so they stay valid and
// unchanged for as long as the caller keeps them.

// liveTable returns the table of a ref, not locked (it may be dropped
// before the caller locks it), or the error for a closed backend or an
// unknown table.
func (b *Backend) liveTable(ref backend.TableRef) (*table, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	t := b.lookup(ref.ID)
	if t == nil {
		return nil, tableNotFound(ref)
	}
	return t, nil
}

// readTable returns a live table read-locked; the caller must RUnlock.
func (b *Backend) readTable(ref backend.TableRef) (*table, error) {
	t, err := b.liveTable(ref)
	if err != nil {
		return nil, err
	}
	t.mu.RLock()
	if t.dropped {
		t.mu.RUnlock()
		return nil, tableNotFound(ref)
	}
	return t, nil
}

// GetItem implements backend.Backend.
func (b *Backend) GetItem(ctx context.Context, p backend.GetItemParams) (*backend.GetItemResult, error) {
	t, err := b.readTable(p.Table)
	if err != nil {
		return nil, err
	}
	e, ok := t.items.Get(ent{h: backend.KeyHash(p.PK), pk: p.PK, sk: p.SK})
	t.mu.RUnlock()
	if !ok {
		return &backend.GetItemResult{}, nil
	}
	return &backend.GetItemResult{Item: e.item}, nil
}

// TransactGet implements backend.Backend: the read locks of every table
// involved are held together (taken in ascending ID order, as writers
// take the write locks), so no write is applied between the reads.
func (b *Backend) TransactGet(ctx context.Context, p backend.TransactGetParams) (*backend.TransactGetResult, error) {
	if b.closed.Load() {
		return nil, errClosed
	}
	tabs := make([]*table, len(p.Keys))
	for i, k := range p.Keys {
		if tabs[i] = b.lookup(k.Table.ID); tabs[i] == nil {
			return nil, tableNotFound(k.Table)
		}
	}
	defer lockTables(len(tabs), func(i int) *table { return tabs[i] }, false)()
	res := &backend.TransactGetResult{Items: make([][]byte, len(p.Keys))}
	for i, k := range p.Keys {
		t := tabs[i]
		if t.dropped {
			return nil, tableNotFound(k.Table)
		}
		if e, ok := t.items.Get(ent{h: backend.KeyHash(k.PK), pk: k.PK, sk: k.SK}); ok {
			res.Items[i] = e.item
		}
	}
	return res, nil
}

// lockTables locks the distinct tables among at(0) .. at(n-1), for
// writing or for reading, in ascending ID order (the one order every
// multi-table lock takes, so two never deadlock), and returns the unlock.
func lockTables(n int, at func(int) *table, write bool) (unlock func()) {
	tables := make([]*table, 0, 4)
	for i := range n {
		if t := at(i); !slices.Contains(tables, t) {
			tables = append(tables, t)
		}
	}
	slices.SortFunc(tables, func(a, b *table) int { return cmp.Compare(a.id, b.id) })
	for _, t := range tables {
		if write {
			t.mu.Lock()
		} else {
			t.mu.RLock()
		}
	}
	return func() {
		for _, t := range tables {
			if write {
				t.mu.Unlock()
			} else {
				t.mu.RUnlock()
			}
		}
	}
}

// successor is the least byte string greater than k: k followed by 0x00.
func successor(k []byte) []byte {
	return append(append(make([]byte, 0, len(k)+1), k...), 0)
}

// rowCap is the initial capacity of a page of rows (limit may be
// math.MaxInt: no limit).
func rowCap(limit int) int {
	if limit >= 64 {
		return 64
	}
	return limit + 1
}

// Query implements backend.Backend.
func (b *Backend) Query(ctx context.Context, p backend.QueryParams) (*backend.QueryResult, error) {
	t, err := b.readTable(p.Table)
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	limit := p.Limit
	if limit <= 0 {
		limit = math.MaxInt
	}
	h := backend.KeyHash(p.PK)
	var rows []backend.Row
	var more bool
	if p.Index == "" {
		rows, more = queryItems(t.items, h, p, limit)
	} else if ix := t.indexes[p.Index]; ix != nil {
		rows, more = queryIndex(ix.tr, h, p, limit)
	}
	return &backend.QueryResult{Rows: rows, More: more}, nil
}

// belowLower and aboveUpper test a sort key against the query bounds.
func belowLower(sk []byte, lo *backend.Bound) bool {
	if lo == nil {
		return false
	}
	c := bytes.Compare(sk, lo.Key)
	return c < 0 || (c == 0 && !lo.Inclusive)
}

func aboveUpper(sk []byte, hi *backend.Bound) bool {
	if hi == nil {
		return false
	}
	c := bytes.Compare(sk, hi.Key)
	return c > 0 || (c == 0 && !hi.Inclusive)
}

// partition compares an entry's (hash, partition key) with the queried
// one: <0 before it, 0 in it, >0 after it.
func partition(eh uint32, epk []byte, h uint32, pk []byte) int {
	if eh != h {
		return cmp.Compare(eh, h)
	}
	return bytes.Compare(epk, pk)
}

// queryItems reads a partition of the table's tree. The walk starts at a
// pivot at or before the first candidate (in the walk's direction); the
// filters below decide, so the pivot only has to be near.
func queryItems(tr *btree.BTreeG[ent], h uint32, p backend.QueryParams, limit int) ([]backend.Row, bool) {
	rows := make([]backend.Row, 0, rowCap(limit))
	more := false
	visit := func(e ent) bool {
		switch partition(e.h, e.pk, h, p.PK) {
		case 0:
		case 1:
			return !p.Forward // after the partition: skip it walking backward
		default:
			return p.Forward
		}
		if p.Forward {
			if belowLower(e.sk, p.Lower) || (p.After != nil && bytes.Compare(e.sk, p.After.SK) <= 0) {
				return true
			}
			if aboveUpper(e.sk, p.Upper) {
				return false
			}
		} else {
			if aboveUpper(e.sk, p.Upper) || (p.After != nil && bytes.Compare(e.sk, p.After.SK) >= 0) {
				return true
			}
			if belowLower(e.sk, p.Lower) {
				return false
			}
		}
		if len(rows) == limit {
			more = true
			return false
		}
		rows = append(rows, backend.Row{PK: e.pk, SK: e.sk, BasePK: e.pk, BaseSK: e.sk, Item: e.item})
		return true
	}
	if p.Forward {
		var start []byte
		if p.Lower != nil {
			start = p.Lower.Key
			if !p.Lower.Inclusive {
				start = successor(start)
			}
		}
		if p.After != nil && bytes.Compare(p.After.SK, start) > 0 {
			start = p.After.SK
		}
		tr.Ascend(ent{h: h, pk: p.PK, sk: start}, visit)
		return rows, more
	}
	pivot := ent{h: h, pk: successor(p.PK)} // after every key of the partition
	if p.Upper != nil {
		pivot = ent{h: h, pk: p.PK, sk: p.Upper.Key}
	}
	if p.After != nil && (p.Upper == nil || bytes.Compare(p.After.SK, p.Upper.Key) < 0) {
		pivot = ent{h: h, pk: p.PK, sk: p.After.SK}
	}
	tr.Descend(pivot, visit)
	return rows, more
}

// ixPos compares an index entry's position within its partition with a
// cursor's.
func ixPos(e *ixEnt, c *backend.Cursor) int {
	if x := bytes.Compare(e.sk, c.SK); x != 0 {
		return x
	}
	if x := bytes.Compare(e.bpk, c.BasePK); x != 0 {
		return x
	}
	return bytes.Compare(e.bsk, c.BaseSK)
}

func ixRow(e ixEnt) backend.Row {
	return backend.Row{PK: e.pk, SK: e.sk, BasePK: e.bpk, BaseSK: e.bsk, Item: e.item}
}

// queryIndex reads a partition of an index in (isk, pk, sk) order.
func queryIndex(tr *btree.BTreeG[ixEnt], h uint32, p backend.QueryParams, limit int) ([]backend.Row, bool) {
	rows := make([]backend.Row, 0, rowCap(limit))
	more := false
	visit := func(e ixEnt) bool {
		switch partition(e.h, e.pk, h, p.PK) {
		case 0:
		case 1:
			return !p.Forward
		default:
			return p.Forward
		}
		if p.Forward {
			if belowLower(e.sk, p.Lower) || (p.After != nil && ixPos(&e, p.After) <= 0) {
				return true
			}
			if aboveUpper(e.sk, p.Upper) {
				return false
			}
		} else {
			if aboveUpper(e.sk, p.Upper) || (p.After != nil && ixPos(&e, p.After) >= 0) {
				return true
			}
			if belowLower(e.sk, p.Lower) {
				return false
			}
		}
		if len(rows) == limit {
			more = true
			return false
		}
		rows = append(rows, ixRow(e))
		return true
	}
	if p.Forward {
		pivot := ixEnt{h: h, pk: p.PK}
		if p.Lower != nil {
			pivot.sk = p.Lower.Key
			if !p.Lower.Inclusive {
				pivot.sk = successor(pivot.sk) // past every entry of that sort key
			}
		}
		if p.After != nil {
			if c := (ixEnt{h: h, pk: p.PK, sk: p.After.SK, bpk: p.After.BasePK, bsk: p.After.BaseSK}); ixLess(pivot, c) {
				pivot = c
			}
		}
		tr.Ascend(pivot, visit)
		return rows, more
	}
	pivot := ixEnt{h: h, pk: successor(p.PK)}
	if p.Upper != nil {
		pivot = ixEnt{h: h, pk: p.PK, sk: p.Upper.Key}
		if p.Upper.Inclusive {
			pivot.sk = successor(pivot.sk) // after every entry of that sort key
		}
	}
	if p.After != nil {
		if c := (ixEnt{h: h, pk: p.PK, sk: p.After.SK, bpk: p.After.BasePK, bsk: p.After.BaseSK}); ixLess(c, pivot) {
			pivot = c
		}
	}
	tr.Descend(pivot, visit)
	return rows, more
}

// Scan implements backend.Backend.
func (b *Backend) Scan(ctx context.Context, p backend.ScanParams) (*backend.ScanResult, error) {
	if p.TotalSegments > 1 && (p.Segment < 0 || p.Segment >= p.TotalSegments) {
		return nil, backend.Errorf(backend.KindInternal, "memory: segment %d out of range [0, %d)", p.Segment, p.TotalSegments)
	}
	t, err := b.readTable(p.Table)
	if err != nil {
		return nil, err
	}
	defer t.mu.RUnlock()
	limit := p.Limit
	if limit <= 0 {
		limit = math.MaxInt
	}
	lo, hi := backend.SegmentRange(p.Segment, p.TotalSegments)
	var rows []backend.Row
	var more bool
	if p.Index == "" {
		rows, more = scanItems(t.items, lo, hi, p.After, limit)
	} else if ix := t.indexes[p.Index]; ix != nil {
		rows, more = scanIndex(ix.tr, lo, hi, p.After, limit)
	}
	return &backend.ScanResult{Rows: rows, More: more}, nil
}

// scanItems reads a table's tree in (hash, pk, sk) order within the hash
// range [lo, hi], strictly after a cursor.
func scanItems(tr *btree.BTreeG[ent], lo, hi uint32, after *backend.Cursor, limit int) ([]backend.Row, bool) {
	pivot := ent{h: lo}
	var cur *ent
	if after != nil {
		cur = &ent{h: backend.KeyHash(after.PK), pk: after.PK, sk: after.SK}
	}
	return scanTree(tr, pivot, cur, entLess, func(e ent) uint32 { return e.h }, hi, func(e ent) backend.Row {
		return backend.Row{PK: e.pk, SK: e.sk, BasePK: e.pk, BaseSK: e.sk, Item: e.item}
	}, limit)
}

// scanIndex reads an index's tree in (hash, ipk, isk, pk, sk) order.
func scanIndex(tr *btree.BTreeG[ixEnt], lo, hi uint32, after *backend.Cursor, limit int) ([]backend.Row, bool) {
	pivot := ixEnt{h: lo}
	var cur *ixEnt
	if after != nil {
		cur = &ixEnt{h: backend.KeyHash(after.PK), pk: after.PK, sk: after.SK, bpk: after.BasePK, bsk: after.BaseSK}
	}
	return scanTree(tr, pivot, cur, ixLess, func(e ixEnt) uint32 { return e.h }, hi, ixRow, limit)
}

// scanTree is the Scan of either tree: ascending from the later of the
// segment's start (pivot) and the cursor, rows strictly after the cursor,
// up to the hash hi, at most limit rows (more tells that one followed).
func scanTree[T any](tr *btree.BTreeG[T], pivot T, cur *T, less func(a, b T) bool, hash func(T) uint32, hi uint32,
	row func(T) backend.Row, limit int) ([]backend.Row, bool) {
	rows := make([]backend.Row, 0, rowCap(limit))
	more := false
	if cur != nil && !less(*cur, pivot) {
		pivot = *cur
	}
	tr.Ascend(pivot, func(e T) bool {
		if hash(e) > hi {
			return false
		}
		if cur != nil && !less(*cur, e) {
			return true
		}
		if len(rows) == limit {
			more = true
			return false
		}
		rows = append(rows, row(e))
		return true
	})
	return rows, more
}
