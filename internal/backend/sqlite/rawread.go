package sqlite

import (
	"fmt"
	"time"
	"unsafe"

	"modernc.org/libc"
	"modernc.org/libc/sys/types"
	sqlite3 "modernc.org/sqlite/lib"
)

// A raw read connection: SQLite's C API as modernc.org/sqlite/lib exports
// it, without database/sql and the driver above it (ADR 0036). Table
// snapshots read every item of a table through it: the driver hands each
// BLOB column to database/sql as a freshly allocated copy, so a snapshot
// of 1M items of 1 KiB allocated and copied a gigabyte that the caller then
// copied once more into its page; here a column is a view of SQLite's own
// memory, copied once, into the page.
//
// A rawConn is not safe for concurrent use (nor is its libc.TLS); it is
// opened without SQLite's per-connection mutex for that reason.
type rawConn struct {
	tls *libc.TLS
	db  uintptr
}

// rawError is a failed call of the C API: its result code and SQLite's
// message. mapErr classifies it like the driver's *sqlite.Error.
type rawError struct {
	code int
	msg  string
}

func (e *rawError) Error() string { return e.msg }

// Code is the SQLite (extended) result code.
func (e *rawError) Code() int { return e.code }

// openRaw opens path read-only for queries (query_only; the WAL and its
// shared memory are the writer's, and a read transaction needs to write
// its read mark there, so the file is opened read-write).
func openRaw(path string, busy time.Duration) (*rawConn, error) {
	c := &rawConn{tls: libc.NewTLS()}
	name, err := libc.CString(path)
	if err != nil {
		c.tls.Close()
		return nil, err
	}
	defer libc.Xfree(c.tls, name)
	pdb := libc.Xmalloc(c.tls, types.Size_t(unsafe.Sizeof(uintptr(0))))
	if pdb == 0 {
		c.tls.Close()
		return nil, &rawError{code: sqlite3.SQLITE_NOMEM, msg: "sqlite: out of memory"}
	}
	defer libc.Xfree(c.tls, pdb)
	*(*uintptr)(cmem(pdb)) = 0
	rc := sqlite3.Xsqlite3_open_v2(c.tls, name, pdb, sqlite3.SQLITE_OPEN_READWRITE|sqlite3.SQLITE_OPEN_NOMUTEX, 0)
	c.db = *(*uintptr)(cmem(pdb))
	if rc != sqlite3.SQLITE_OK {
		err := c.err(rc, "open")
		c.close()
		return nil, err
	}
	sqlite3.Xsqlite3_extended_result_codes(c.tls, c.db, 1)
	sqlite3.Xsqlite3_busy_timeout(c.tls, c.db, int32(busy.Milliseconds()))
	if err := c.exec("PRAGMA query_only=1"); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// cmem is the address p of memory that SQLite's C heap (modernc's libc
// allocator, outside the Go heap) owns, as a pointer. The C API speaks
// addresses as uintptr; this reads the bits as a pointer instead of
// converting, which go vet's unsafeptr check would flag although the
// memory never moves and the garbage collector does not manage it.
func cmem(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

// openRaw opens a raw read connection on the backend's database file;
// errClosed once the backend is closed (as every other operation).
func (b *Backend) openRaw() (*rawConn, error) {
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return nil, errClosed
	}
	return openRaw(b.path, b.opts.BusyTimeout)
}

// err builds the error of result code rc of op.
func (c *rawConn) err(rc int32, op string) error {
	msg := libc.GoString(sqlite3.Xsqlite3_errstr(c.tls, rc))
	if c.db != 0 {
		if m := libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db)); m != "" && m != msg {
			msg += ": " + m
		}
	}
	return &rawError{code: int(rc), msg: fmt.Sprintf("sqlite: %s: %s (%d)", op, msg, rc)}
}

// exec runs one statement that returns no rows.
func (c *rawConn) exec(sql string) error {
	s, err := c.prepare(sql)
	if err != nil {
		return err
	}
	defer s.finalize()
	for {
		row, err := s.step()
		if err != nil || !row {
			return err
		}
	}
}

// close closes the connection (after every statement is finalized).
func (c *rawConn) close() {
	if c.db != 0 {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
		c.db = 0
	}
	if c.tls != nil {
		c.tls.Close()
		c.tls = nil
	}
}

// rawStmt is one prepared statement of a rawConn.
type rawStmt struct {
	c     *rawConn
	p     uintptr
	texts []uintptr // C strings bound to it, freed by finalize
}

func (c *rawConn) prepare(sql string) (*rawStmt, error) {
	z, err := libc.CString(sql)
	if err != nil {
		return nil, err
	}
	defer libc.Xfree(c.tls, z)
	pp := libc.Xmalloc(c.tls, types.Size_t(unsafe.Sizeof(uintptr(0))))
	if pp == 0 {
		return nil, &rawError{code: sqlite3.SQLITE_NOMEM, msg: "sqlite: out of memory"}
	}
	defer libc.Xfree(c.tls, pp)
	*(*uintptr)(cmem(pp)) = 0
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, z, -1, pp, 0); rc != sqlite3.SQLITE_OK {
		return nil, c.err(rc, "prepare")
	}
	return &rawStmt{c: c, p: *(*uintptr)(cmem(pp))}, nil
}

// bindInt64 binds parameter i (1-based).
func (s *rawStmt) bindInt64(i int, v int64) error {
	if rc := sqlite3.Xsqlite3_bind_int64(s.c.tls, s.p, int32(i), v); rc != sqlite3.SQLITE_OK {
		return s.c.err(rc, "bind")
	}
	return nil
}

// bindText binds parameter i (1-based) to a copy of v that lives until
// finalize.
func (s *rawStmt) bindText(i int, v string) error {
	z, err := libc.CString(v)
	if err != nil {
		return err
	}
	s.texts = append(s.texts, z)
	if rc := sqlite3.Xsqlite3_bind_text(s.c.tls, s.p, int32(i), z, int32(len(v)), 0); rc != sqlite3.SQLITE_OK {
		return s.c.err(rc, "bind")
	}
	return nil
}

// step advances to the next row: true while there is one.
func (s *rawStmt) step() (bool, error) {
	switch rc := sqlite3.Xsqlite3_step(s.c.tls, s.p); rc {
	case sqlite3.SQLITE_ROW:
		return true, nil
	case sqlite3.SQLITE_DONE:
		return false, nil
	default:
		return false, s.c.err(rc, "step")
	}
}

// blob is column i (0-based) of the current row as a view of SQLite's
// memory, valid until the next step, reset or finalize; nil when empty
// or NULL.
func (s *rawStmt) blob(i int) []byte {
	p := sqlite3.Xsqlite3_column_blob(s.c.tls, s.p, int32(i))
	n := sqlite3.Xsqlite3_column_bytes(s.c.tls, s.p, int32(i))
	if p == 0 || n <= 0 {
		return nil
	}
	return unsafe.Slice((*byte)(cmem(p)), int(n))
}

// int64 is column i (0-based) of the current row.
func (s *rawStmt) int64(i int) int64 {
	return sqlite3.Xsqlite3_column_int64(s.c.tls, s.p, int32(i))
}

// finalize releases the statement and its bound strings.
func (s *rawStmt) finalize() {
	if s.p != 0 {
		sqlite3.Xsqlite3_finalize(s.c.tls, s.p)
		s.p = 0
	}
	for _, z := range s.texts {
		libc.Xfree(s.c.tls, z)
	}
	s.texts = nil
}
