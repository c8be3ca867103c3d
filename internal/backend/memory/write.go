package memory

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/tidwall/btree"

	"github.com/extenddb/extenddb/internal/backend"
)

// nStripes is the number of key stripes. Two keys that share a stripe
// only wait for each other.
const nStripes = 1024

type stripe struct {
	mu sync.Mutex
	_  [56]byte // one cache line each: stripes of different keys do not share one
}

// stripeOf chooses the stripe of a key: FNV-1a continued from the
// partition key's KeyHash over the sort key, mixed with the table ID.
func stripeOf(id int64, h uint32, sk []byte) uint32 {
	x := h ^ uint32(id)*0x9E3779B1 ^ uint32(id>>32)
	for _, c := range sk {
		x ^= uint32(c)
		x *= 16777619
	}
	x ^= x >> 15
	return x % nStripes
}

// opState is the backend's state of one write operation.
type opState struct {
	t      *table
	h      uint32
	stripe uint32
	// old is the item the function saw; cur the item after the
	// operation (old when it failed or kept).
	old, cur []byte
	ch       backend.Change
}

// WriteItem implements backend.Backend.
func (b *Backend) WriteItem(ctx context.Context, p backend.WriteItemParams) (*backend.WriteItemResult, error) {
	ops := [1]backend.WriteItemParams{p}
	var st [1]opState
	if err := b.write(ctx, ops[:], st[:], false); err != nil {
		return nil, err
	}
	return &backend.WriteItemResult{Old: st[0].old, Change: st[0].ch}, nil
}

// TransactWrite implements backend.Backend.
func (b *Backend) TransactWrite(ctx context.Context, p backend.TransactWriteParams) (*backend.TransactWriteResult, error) {
	st := make([]opState, len(p.Ops))
	if err := b.write(ctx, p.Ops, st, true); err != nil {
		return nil, err
	}
	res := &backend.TransactWriteResult{Results: make([]backend.WriteItemResult, len(p.Ops))}
	for i := range st {
		res.Results[i] = backend.WriteItemResult{Old: st[i].old, Change: st[i].ch}
	}
	return res, nil
}

// write is the backend's one write path (WriteItem is a write of one
// operation, not a transaction): it locks the operations' key stripes,
// fences every operation on its table's description version (before any
// function runs, and again when applying), reads each current item and
// runs its function in order (a later operation on the same key sees the
// earlier one's result), and applies every change under the write locks
// of the tables, or nothing when a function failed or a fence refused. For a transaction the failures are collected into a
// KindTransactionCanceled error with one reason per operation; a single
// write returns its function's error unchanged.
func (b *Backend) write(ctx context.Context, ops []backend.WriteItemParams, st []opState, tx bool) error {
	if b.closed.Load() {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return backend.Wrap(backend.KindUnavailable, err, "memory: write canceled")
	}
	if len(ops) == 0 {
		return nil
	}
	for i := range ops {
		op, s := &ops[i], &st[i]
		if op.Fn == nil {
			return backend.Errorf(backend.KindInternal, "memory: write operation %d without Fn", i)
		}
		if s.t = b.lookup(op.Table.ID); s.t == nil {
			return tableNotFound(op.Table)
		}
		s.h = backend.KeyHash(op.PK)
		s.stripe = stripeOf(op.Table.ID, s.h, op.SK)
	}
	if len(ops) == 1 {
		mu := &b.stripes[st[0].stripe].mu
		mu.Lock()
		defer mu.Unlock()
	} else {
		defer b.lockStripes(st)()
	}

	// Fence every operation on its table's description version before
	// running any write function (a single write does it with its read).
	if len(ops) > 1 {
		for i := range ops {
			st[i].t.mu.RLock()
			err := st[i].t.fence(ops[i].Table)
			st[i].t.mu.RUnlock()
			if err != nil {
				return err
			}
		}
	}
	if err := decide(ops, st, tx); err != nil {
		return err
	}

	// Apply under the tables' write locks: all of them, or nothing when
	// one was deleted meanwhile.
	if len(ops) == 1 {
		t := st[0].t
		t.mu.Lock()
		defer t.mu.Unlock()
		if err := t.fence(ops[0].Table); err != nil {
			return err
		}
		t.apply(&ops[0], &st[0])
		return nil
	}
	defer lockTables(len(st), func(i int) *table { return st[i].t }, true)()
	for i := range st {
		if err := st[i].t.fence(ops[i].Table); err != nil {
			return err
		}
	}
	for i := range ops {
		st[i].t.apply(&ops[i], &st[i])
	}
	return nil
}

// decide runs each operation's write function on the item it reads
// (for an item an earlier operation of the batch wrote, that operation's
// result) and keeps its change in st; the caller holds the stripe locks.
// In a transaction every function runs, and any that fail cancel it with
// their reasons; otherwise the first failure is returned.
func decide(ops []backend.WriteItemParams, st []opState, tx bool) error {
	var reasons []error
	for i := range ops {
		op, s := &ops[i], &st[i]
		known := false
		for j := i - 1; j >= 0; j-- {
			if st[j].t == s.t && bytes.Equal(ops[j].PK, op.PK) && bytes.Equal(ops[j].SK, op.SK) {
				s.old, known = st[j].cur, true
				break
			}
		}
		if len(ops) == 1 || (!known && !op.Blind) {
			s.t.mu.RLock()
			if err := s.t.fence(op.Table); err != nil {
				s.t.mu.RUnlock()
				return err
			}
			if !known && !op.Blind {
				if e, ok := s.t.items.Get(ent{h: s.h, pk: op.PK, sk: op.SK}); ok {
					s.old = e.item
				}
			}
			s.t.mu.RUnlock()
		}
		s.cur = s.old
		ch, err := op.Fn(s.old)
		if err != nil {
			if !tx {
				return err
			}
			if reasons == nil {
				reasons = make([]error, len(ops))
			}
			reasons[i] = err
			continue
		}
		s.ch = ch
		switch ch.Op {
		case backend.Put:
			s.cur = ch.Item
		case backend.Delete:
			s.cur = nil
		}
	}
	if reasons != nil {
		n := 0
		for _, r := range reasons {
			if r != nil {
				n++
			}
		}
		for i := range st {
			st[i].old, st[i].ch = nil, backend.Change{}
		}
		return &backend.Error{Kind: backend.KindTransactionCanceled,
			Message: fmt.Sprintf("%d of %d operations failed", n, len(ops)), Reasons: reasons}
	}
	return nil
}

// fence answers KindTableNotFound when the table was deleted and
// KindTableVersion when its description version is not the one the write
// was computed from (caller holds t.mu). Checked again under the write
// lock when the change is applied, it is atomic with the write: an
// UpdateTable (which replaces meta under the same lock) is ordered
// entirely before or after it.
func (t *table) fence(ref backend.TableRef) error {
	if t.dropped {
		return tableNotFound(ref)
	}
	if v := t.meta.Version; v != ref.Version {
		return backend.VersionChanged(ref, v)
	}
	return nil
}

// lockStripes locks the distinct stripes of the operations in ascending
// order (so that two transactions never wait for each other in a cycle)
// and returns the unlock.
func (b *Backend) lockStripes(st []opState) func() {
	idx := make([]uint32, len(st))
	for i := range st {
		idx[i] = st[i].stripe
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		b.stripes[i].mu.Lock()
	}
	return func() {
		for _, i := range idx {
			b.stripes[i].mu.Unlock()
		}
	}
}

// apply applies one operation's change to the trees (caller holds t.mu
// for writing). Every stored buffer is new: keys and items are copied,
// so nothing the caller owns is kept, and what readers were handed is
// never written again.
func (t *table) apply(op *backend.WriteItemParams, s *opState) {
	ch := &s.ch
	switch ch.Op {
	case backend.Keep:
		return
	}
	if ch.Log != nil {
		t.appendLog(ch.Log)
	}
	switch ch.Op {
	case backend.Put:
		pl, sl := len(op.PK), len(op.SK)
		buf := make([]byte, pl+sl+len(ch.Item))
		copy(buf, op.PK)
		copy(buf[pl:], op.SK)
		copy(buf[pl+sl:], ch.Item)
		size := t.size.SizeOf(ch.Item)
		e := ent{h: s.h, size: uint32(size), pk: buf[:pl:pl], sk: buf[pl : pl+sl : pl+sl], item: buf[pl+sl:]}
		if prev, ok := t.items.Set(e); ok {
			t.itemBytes -= int64(prev.size)
		} else {
			t.itemCount++
		}
		t.itemBytes += size
	case backend.Delete:
		if prev, ok := t.items.Delete(ent{h: s.h, pk: op.PK, sk: op.SK}); ok {
			t.itemCount--
			t.itemBytes -= int64(prev.size)
		}
	}
	for _, k := range ch.DeleteIndex {
		if ix := t.indexes[k.Index]; ix != nil {
			if prev, ok := ix.tr.Delete(ixEnt{h: backend.KeyHash(k.PK), pk: k.PK, sk: k.SK, bpk: op.PK, bsk: op.SK}); ok {
				ix.count--
				ix.bytes -= int64(prev.size)
			}
		}
	}
	for i := range ch.PutIndex {
		x := &ch.PutIndex[i]
		ix := t.indexes[x.Index]
		if ix == nil {
			ix = &index{tr: btree.NewBTreeGOptions(ixLess, btree.Options{Degree: degree, NoLocks: true})}
			t.indexes[x.Index] = ix
		}
		a := len(x.PK)
		bb := a + len(x.SK)
		c := bb + len(op.PK)
		d := c + len(op.SK)
		buf := make([]byte, d+len(x.Item))
		copy(buf, x.PK)
		copy(buf[a:], x.SK)
		copy(buf[bb:], op.PK)
		copy(buf[c:], op.SK)
		copy(buf[d:], x.Item)
		size := t.size.SizeOf(x.Item)
		if prev, ok := ix.tr.Set(ixEnt{h: backend.KeyHash(x.PK), size: uint32(size), pk: buf[:a:a], sk: buf[a:bb:bb], bpk: buf[bb:c:c], bsk: buf[c:d:d], item: buf[d:]}); ok {
			ix.bytes -= int64(prev.size)
		} else {
			ix.count++
		}
		ix.bytes += size
	}
}
