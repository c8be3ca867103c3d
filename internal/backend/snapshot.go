package backend

import (
	"context"
	"io"
	"sync"
	"time"
)

// Snapshotter is the optional capability of reading one table as of
// one instant, which backups are built on (docs/backup-design.md section
// 3). A backend that cannot give a consistent instant does not have it
// (Capabilities.Snapshots is nil); callers answer a clear error.
type Snapshotter interface {
	// OpenTableSnapshot pins one instant of a table: the description and
	// every item the stream yields are as of that instant, whatever is
	// written after it. KindTableNotFound when the table does not exist;
	// KindLimitExceeded at once when the server's bound on open
	// snapshots is reached. The caller must Close the stream. The
	// snapshot outlives ctx (which bounds only the open); each Next call
	// takes its own context.
	OpenTableSnapshot(ctx context.Context, p OpenSnapshotParams) (*TableSnapshot, error)
}

// OpenSnapshotParams names the table to snapshot.
type OpenSnapshotParams struct {
	Account string
	Name    string
	// PageSize is the number of rows fetched from the backend at a time
	// (0: DefaultSnapshotPageSize). Memory is bounded by one page.
	PageSize int
	// AfterPin, when set (tests only), runs after the instant is pinned
	// and the description read, before any item is read; a test commits
	// writes there to prove description and items share one instant.
	AfterPin func()
}

// DefaultSnapshotPageSize is the page size of a snapshot stream.
const DefaultSnapshotPageSize = 1000

// SnapshotDescriptor says which mechanism pinned the instant and where:
// Kind names it (e.g. "sqlite_wal_read_txn", "postgres_repeatable_read"),
// Marker is the backend's position (e.g. an exported snapshot id), "" when
// the backend has none to report.
type SnapshotDescriptor struct {
	Kind   string
	Marker string
}

// TableSnapshot is an open snapshot of one table.
type TableSnapshot struct {
	// Table is the catalog row (description, version) at the instant.
	Table *Table
	// At is the instant, on the backend's clock.
	At         time.Time
	Descriptor SnapshotDescriptor
	// KeyOrder tells whether Items come in ascending (PK, SK) byte order;
	// otherwise they come in the backend's own stable order.
	KeyOrder bool
	// Items streams the table's items (PK, SK, Item; BasePK/BaseSK equal
	// PK/SK). It owns the backend transaction; Close releases it.
	Items *SnapshotStream
}

// SnapshotStream is a lazy stream of a snapshot's rows, fetched a page at a
// time through a backend's fetch function inside its snapshot transaction.
// It is not safe for concurrent use.
type SnapshotStream struct {
	fetch    func(ctx context.Context, after *Cursor, limit int) ([]Row, bool, error)
	release  func() error
	pageSize int

	page    []Row
	pos     int
	more    bool
	after   *Cursor
	err     error
	fetches int
	once    sync.Once
	closeEr error
}

// NewSnapshotStream builds a stream over fetch (rows strictly after a
// cursor, at most limit, and whether more may follow). release runs once,
// on Close, and must end the backend transaction.
func NewSnapshotStream(fetch func(ctx context.Context, after *Cursor, limit int) ([]Row, bool, error), pageSize int, release func() error) *SnapshotStream {
	if pageSize <= 0 {
		pageSize = DefaultSnapshotPageSize
	}
	return &SnapshotStream{fetch: fetch, release: release, pageSize: pageSize, more: true}
}

// Next returns the next row, io.EOF after the last one. The row's slices
// stay valid until the next call. The first error ends the stream.
func (s *SnapshotStream) Next(ctx context.Context) (Row, error) {
	if s.err != nil {
		return Row{}, s.err
	}
	for s.pos >= len(s.page) {
		if !s.more {
			s.err = io.EOF
			return Row{}, io.EOF
		}
		if err := ctx.Err(); err != nil {
			s.err = err
			return Row{}, err
		}
		rows, more, err := s.fetch(ctx, s.after, s.pageSize)
		s.fetches++
		if err != nil {
			s.err = err
			return Row{}, err
		}
		if len(rows) == 0 && more {
			s.err = Errorf(KindInternal, "snapshot: a fetch returned no rows but more")
			return Row{}, s.err
		}
		s.page, s.pos, s.more = rows, 0, more
		if len(rows) > 0 {
			last := rows[len(rows)-1]
			s.after = &Cursor{PK: last.PK, SK: last.SK, BasePK: last.BasePK, BaseSK: last.BaseSK}
		}
	}
	r := s.page[s.pos]
	s.pos++
	return r, nil
}

// Fetches is the number of pages fetched from the backend so far (tests
// use it to prove the stream reads lazily).
func (s *SnapshotStream) Fetches() int { return s.fetches }

var errStreamClosed = Errorf(KindSnapshotExpired, "snapshot: the stream is closed")

// Close releases the snapshot; it is safe to call more than once.
func (s *SnapshotStream) Close() error {
	s.once.Do(func() {
		s.err = errStreamClosed
		s.page = nil
		if s.release != nil {
			s.closeEr = s.release()
		}
	})
	return s.closeEr
}

// SnapshotLimiter bounds the snapshots open at once on a server, so that
// snapshots can never take every pooled connection.
type SnapshotLimiter struct{ slots chan struct{} }

// DefaultMaxSnapshots is the default bound on open snapshots per server.
const DefaultMaxSnapshots = 2

// NewSnapshotLimiter allows n open snapshots (n <= 0: DefaultMaxSnapshots).
func NewSnapshotLimiter(n int) *SnapshotLimiter {
	if n <= 0 {
		n = DefaultMaxSnapshots
	}
	return &SnapshotLimiter{slots: make(chan struct{}, n)}
}

// Acquire takes a slot without waiting, or answers KindLimitExceeded. The
// returned release frees the slot once, however often it is called.
func (l *SnapshotLimiter) Acquire() (release func(), err error) {
	select {
	case l.slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-l.slots }) }, nil
	default:
		return nil, Errorf(KindLimitExceeded, "too many open snapshots (at most %d at once)", cap(l.slots))
	}
}
