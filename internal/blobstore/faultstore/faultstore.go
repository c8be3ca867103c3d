// Package faultstore wraps a blobstore.Store and injects faults for tests of the
// backup and restore jobs: fail the Nth call of a kind (before or after the
// real call), cut a stream short (a Put's input or a Get's output), delay
// calls.
//
//	fs := faultstore.New(memstore.New())
//	fs.Inject(faultstore.Fault{Op: faultstore.OpPut, Nth: 3})          // 3rd Put fails, nothing written
//	fs.Inject(faultstore.Fault{Op: faultstore.OpGet, CutAfter: 100})   // every Get ends after 100 bytes
//	fs.Inject(faultstore.Fault{Op: faultstore.OpPut, KeyPrefix: "a/t", After: true}) // write lands, caller sees an error
//
// Faults are matched in the order injected; the first match applies. Calls
// are counted per Op whether or not a fault applies.
package faultstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/blobstore"
)

// Op names a kind of call.
type Op string

const (
	OpPut          Op = "Put"
	OpPutIfAbsent  Op = "PutIfAbsent"
	OpGet          Op = "Get"
	OpGetRange     Op = "GetRange"
	OpHead         Op = "Head"
	OpList         Op = "List"
	OpWalk         Op = "Walk"
	OpDeletePrefix Op = "DeletePrefix"
	OpValidate     Op = "Validate"
)

// ErrInjected is the default error of a fault.
var ErrInjected = errors.New("faultstore: injected fault")

// Fault describes one injected fault.
type Fault struct {
	Op Op
	// Nth selects the Nth call of Op (1-based, counted over the life of the
	// Store); 0 selects every call.
	Nth int
	// KeyPrefix, when set, limits the fault to keys under this
	// whole-component prefix. Nth still counts every call of Op, unless
	// NthUnderPrefix is set: then it counts only the calls of Op under
	// KeyPrefix made since the fault was injected (the calls a job makes
	// under its own prefix, whatever else writes to the store meanwhile).
	KeyPrefix      string
	NthUnderPrefix bool
	// Err is the error to answer (ErrInjected when nil).
	Err error
	// After: run the real call first, then answer Err (a write that
	// happened although the caller saw a failure). Ignored with CutAfter.
	After bool
	// CutAfter >= 0 with Cut set: for Put and PutIfAbsent the input stream
	// fails with Err after CutAfter bytes (the inner store sees a failing
	// reader); for Get and GetRange the returned stream fails with Err
	// after CutAfter bytes; for Walk the walk fails with Err after
	// CutAfter objects were visited (a listing that breaks mid-way).
	Cut      bool
	CutAfter int64
	// Delay before the call (respects the context). A fault with a Delay
	// and no Err, After or Cut only delays.
	Delay time.Duration

	delayOnly bool
	seen      int // calls counted for NthUnderPrefix
}

// Store is the fault-injecting decorator.
type Store struct {
	inner blobstore.Store

	mu     sync.Mutex
	faults []Fault
	calls  map[Op]int
}

var _ blobstore.Store = (*Store)(nil)

// New wraps inner.
func New(inner blobstore.Store) *Store {
	return &Store{inner: inner, calls: map[Op]int{}}
}

// Inner answers the wrapped store.
func (s *Store) Inner() blobstore.Store { return s.inner }

func (s *Store) String() string { return "fault:" + s.inner.String() }

// Inject adds a fault.
func (s *Store) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f)
}

// Reset removes every fault and zeroes the counters.
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.calls = map[Op]int{}
}

// Calls answers how many calls of op were made.
func (s *Store) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// begin counts the call and answers the fault that applies, if any, after
// its delay.
func (s *Store) begin(ctx context.Context, op Op, key string) (*Fault, error) {
	s.mu.Lock()
	s.calls[op]++
	n := s.calls[op]
	var hit *Fault
	for i := range s.faults {
		f := &s.faults[i]
		if f.Op != op || (f.KeyPrefix != "" && !blobstore.UnderPrefix(key, f.KeyPrefix)) {
			continue
		}
		nth := n
		if f.NthUnderPrefix {
			f.seen++
			nth = f.seen
		}
		if f.Nth != 0 && f.Nth != nth {
			continue
		}
		c := *f
		hit = &c
		break
	}
	s.mu.Unlock()
	if hit == nil {
		return nil, nil
	}
	hit.delayOnly = hit.Delay > 0 && hit.Err == nil && !hit.After && !hit.Cut
	if hit.Err == nil {
		hit.Err = fmt.Errorf("%w: %s call %d on %q", ErrInjected, op, n, key)
	}
	if hit.Delay > 0 {
		t := time.NewTimer(hit.Delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	return hit, nil
}

// fails: the fault answers its error before the real call.
func (f *Fault) fails() bool { return f != nil && !f.After && !f.Cut && !f.delayOnly }

// cutReader answers Err after n bytes.
type cutReader struct {
	r   io.Reader
	n   int64
	err error
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, c.err
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	k, err := c.r.Read(p)
	c.n -= int64(k)
	return k, err
}

func (s *Store) put(ctx context.Context, op Op, key string, r io.Reader, call func(context.Context, string, io.Reader) error) error {
	f, err := s.begin(ctx, op, key)
	if err != nil {
		return err
	}
	if f.fails() {
		return f.Err
	}
	if f != nil && f.Cut {
		r = &cutReader{r: r, n: f.CutAfter, err: f.Err}
	}
	err = call(ctx, key, r)
	if err == nil && f != nil && f.After && !f.Cut {
		return f.Err
	}
	return err
}

func (s *Store) Put(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, OpPut, key, r, s.inner.Put)
}

func (s *Store) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	return s.put(ctx, OpPutIfAbsent, key, r, s.inner.PutIfAbsent)
}

func (s *Store) read(ctx context.Context, op Op, key string, call func() (io.ReadCloser, error)) (io.ReadCloser, error) {
	f, err := s.begin(ctx, op, key)
	if err != nil {
		return nil, err
	}
	if f.fails() {
		return nil, f.Err
	}
	rc, err := call()
	if err != nil {
		return nil, err
	}
	if f != nil && f.After && !f.Cut {
		rc.Close()
		return nil, f.Err
	}
	if f != nil && f.Cut {
		return struct {
			io.Reader
			io.Closer
		}{&cutReader{r: rc, n: f.CutAfter, err: f.Err}, rc}, nil
	}
	return rc, nil
}

func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.read(ctx, OpGet, key, func() (io.ReadCloser, error) { return s.inner.Get(ctx, key) })
}

func (s *Store) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	return s.read(ctx, OpGetRange, key, func() (io.ReadCloser, error) { return s.inner.GetRange(ctx, key, off, n) })
}

// simple runs a call without streams.
func (s *Store) simple(ctx context.Context, op Op, key string, call func() error) error {
	f, err := s.begin(ctx, op, key)
	if err != nil {
		return err
	}
	if f.fails() {
		return f.Err
	}
	err = call()
	if err == nil && f != nil && f.After {
		return f.Err
	}
	return err
}

func (s *Store) Head(ctx context.Context, key string) (info blobstore.ObjectInfo, err error) {
	err = s.simple(ctx, OpHead, key, func() (e error) { info, e = s.inner.Head(ctx, key); return })
	if err != nil {
		return blobstore.ObjectInfo{}, err
	}
	return info, nil
}

func (s *Store) List(ctx context.Context, prefix string) (out []blobstore.ObjectInfo, err error) {
	err = s.simple(ctx, OpList, prefix, func() (e error) { out, e = s.inner.List(ctx, prefix); return })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Walk is OpWalk: a fault fails the walk before any object (or, with
// After, once the inner walk completed; with Cut, after CutAfter objects).
func (s *Store) Walk(ctx context.Context, prefix string, fn func(blobstore.ObjectInfo) error) error {
	f, err := s.begin(ctx, OpWalk, prefix)
	if err != nil {
		return err
	}
	if f != nil && f.Cut {
		n := int64(0)
		return s.inner.Walk(ctx, prefix, func(o blobstore.ObjectInfo) error {
			if n >= f.CutAfter {
				return f.Err
			}
			n++
			return fn(o)
		})
	}
	if f.fails() {
		return f.Err
	}
	err = s.inner.Walk(ctx, prefix, fn)
	if err == nil && f != nil && f.After {
		return f.Err
	}
	return err
}

func (s *Store) DeletePrefix(ctx context.Context, prefix string) error {
	return s.simple(ctx, OpDeletePrefix, prefix, func() error { return s.inner.DeletePrefix(ctx, prefix) })
}

func (s *Store) Validate(ctx context.Context) error {
	return s.simple(ctx, OpValidate, "", func() error { return s.inner.Validate(ctx) })
}
