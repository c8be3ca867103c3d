package sqlite

import (
	"context"
	"fmt"
	"sync"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// GetItem's reads of items the item cache does not hold go through raw
// connections of their own (ADR 0054), like snapshots (ADR 0036): one
// prepared statement per connection, the key bound from a buffer in C
// memory the connection keeps, the item copied once from SQLite's memory.
// Through database/sql and the driver the same read costs a goroutine
// and a progress handler for the context, a C copy of every bound key,
// the driver's Go copy of the item, and database/sql's locks and row
// bookkeeping; a point read is a few page reads, so that overhead was
// a large part of it.

// pointReader is one raw connection with the item statement prepared.
// It is used by one goroutine at a time (the pool hands it out).
type pointReader struct {
	c    *rawConn
	get  *rawStmt
	kbuf uintptr // C buffer for the bound key columns
	kcap int
}

// pointPool holds the idle point readers; at most max exist at once.
type pointPool struct {
	idle chan *pointReader
	mu   sync.Mutex
	n    int // open readers, idle or in use
	max  int
	done bool // the backend closed: readers given back are closed
	// closed is closed with done, waking the reads waiting for a reader.
	closed chan struct{}
	open   func() (*pointReader, error)
}

func newPointPool(limit int, open func() (*pointReader, error)) *pointPool {
	return &pointPool{idle: make(chan *pointReader, limit), max: limit, open: open, closed: make(chan struct{})}
}

// get returns an idle reader, opens one while fewer than max exist, or
// waits for one to be given back.
func (p *pointPool) get(ctx context.Context) (*pointReader, error) {
	select {
	case r := <-p.idle:
		return r, nil
	default:
	}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		return nil, errClosed
	}
	if p.n < p.max {
		p.n++
		p.mu.Unlock()
		r, err := p.open()
		if err != nil {
			p.mu.Lock()
			p.n--
			p.mu.Unlock()
			return nil, err
		}
		return r, nil
	}
	p.mu.Unlock()
	select {
	case r := <-p.idle:
		return r, nil
	case <-p.closed:
		return nil, errClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// put gives a reader back; broken (its statement failed) or after close
// the reader is closed instead.
func (p *pointPool) put(r *pointReader, broken bool) {
	p.mu.Lock()
	if broken || p.done {
		p.n--
		p.mu.Unlock()
		r.close()
		return
	}
	p.mu.Unlock()
	p.idle <- r
}

// close closes the idle readers; readers in use are closed when given back.
func (p *pointPool) close() {
	p.mu.Lock()
	if !p.done {
		p.done = true
		close(p.closed)
	}
	p.mu.Unlock()
	for {
		select {
		case r := <-p.idle:
			p.mu.Lock()
			p.n--
			p.mu.Unlock()
			r.close()
		default:
			return
		}
	}
}

// openPointReader opens a raw connection with the reader pool's page
// cache and memory-mapped window and prepares the item statement.
func (b *Backend) openPointReader() (*pointReader, error) {
	c, err := b.openRaw()
	if err != nil {
		return nil, mapErr(err, "sqlite: open point reader")
	}
	r := &pointReader{c: c}
	for _, q := range []string{
		fmt.Sprintf("PRAGMA cache_size=%d", b.readerCacheSize()),
		fmt.Sprintf("PRAGMA mmap_size=%d", b.opts.MmapBytes),
	} {
		if err := c.exec(q); err != nil {
			r.close()
			return nil, mapErr(err, "sqlite: open point reader")
		}
	}
	if r.get, err = c.prepare(`SELECT item FROM items WHERE t = ? AND h = ? AND pk = ? AND sk = ?`); err != nil {
		r.close()
		return nil, mapErr(err, "sqlite: open point reader")
	}
	return r, nil
}

func (r *pointReader) close() {
	if r.get != nil {
		r.get.finalize()
	}
	if r.kbuf != 0 {
		libc.Xfree(r.c.tls, r.kbuf)
		r.kbuf = 0
	}
	r.c.close()
}

// item reads the item of the key (t, h, pk, sk): a copy of it, nil when
// there is none. The statement is reset before it returns, which ends
// its read transaction.
func (r *pointReader) item(t, h int64, pk, sk []byte) ([]byte, error) {
	s := r.get
	defer sqlite3.Xsqlite3_reset(s.c.tls, s.p)
	if err := r.bindKey(pk, sk); err != nil {
		return nil, err
	}
	if err := s.bindInt64(1, t); err != nil {
		return nil, err
	}
	if err := s.bindInt64(2, h); err != nil {
		return nil, err
	}
	row, err := s.step()
	if err != nil || !row {
		return nil, err
	}
	v := s.blob(0)
	out := make([]byte, len(v))
	copy(out, v)
	return out, nil
}

// bindKey copies pk and sk into the connection's C buffer and binds them
// as parameters 3 and 4 (SQLITE_STATIC: the buffer outlives the step; an
// empty key is bound as a zero-length blob, never NULL).
func (r *pointReader) bindKey(pk, sk []byte) error {
	n := len(pk) + len(sk)
	if n > r.kcap || r.kbuf == 0 {
		if r.kbuf != 0 {
			libc.Xfree(r.c.tls, r.kbuf)
		}
		r.kcap = max(n, 256)
		r.kbuf = libc.Xmalloc(r.c.tls, types.Size_t(r.kcap))
		if r.kbuf == 0 {
			r.kcap = 0
			return &rawError{code: sqlite3.SQLITE_NOMEM, msg: "sqlite: out of memory"}
		}
	}
	buf := unsafe.Slice((*byte)(cmem(r.kbuf)), r.kcap)
	copy(buf, pk)
	copy(buf[len(pk):], sk)
	s := r.get
	if rc := sqlite3.Xsqlite3_bind_blob(s.c.tls, s.p, 3, r.kbuf, int32(len(pk)), 0); rc != sqlite3.SQLITE_OK {
		return s.c.err(rc, "bind")
	}
	if rc := sqlite3.Xsqlite3_bind_blob(s.c.tls, s.p, 4, r.kbuf+uintptr(len(pk)), int32(len(sk)), 0); rc != sqlite3.SQLITE_OK {
		return s.c.err(rc, "bind")
	}
	return nil
}
