package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Limits bound what a connection, and all connections together, may hold:
// the request and response bodies in memory at once (a server-wide
// budget) and how long a client may take to send a body or to take a
// response. Zero fields take the defaults below.
type Limits struct {
	// MaxInflightBodyBytes bounds the request bodies being read and the
	// responses being built or written, server-wide. A request reserves
	// its Content-Length plus the largest response its operation can
	// produce before its body is read.
	MaxInflightBodyBytes int64
	// InflightWait is how long a request waits for room in that budget
	// before it is answered ThrottlingException.
	InflightWait time.Duration
	// BodyReadTimeout is how long a client has to send a request's whole
	// body once its headers are read.
	BodyReadTimeout time.Duration
	// WriteTimeout is how long a client has to take a response.
	WriteTimeout time.Duration
}

// Defaults of Limits (the configuration documents the same values).
const (
	DefaultMaxInflightBodyBytes = 128 << 20
	DefaultInflightWait         = time.Second
	DefaultBodyReadTimeout      = 30 * time.Second
	DefaultWriteTimeout         = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxInflightBodyBytes <= 0 {
		l.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	if l.InflightWait <= 0 {
		l.InflightWait = DefaultInflightWait
	}
	if l.BodyReadTimeout <= 0 {
		l.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	return l
}

// Protocol errors of the connection budget and deadlines. Both are
// retried by the AWS SDKs (standard retry mode lists them as throttling
// and transient errors).
const (
	codeThrottling     = "ThrottlingException"
	prefixAvailability = "com.amazon.coral.availability#"
	codeRequestTimeout = "RequestTimeoutException"
	msgThrottled       = "Rate of requests exceeds the allowed throughput."
	msgBodyTimeout     = "Your socket connection to the server was not read from or written to within the timeout period."
)

// Sizes that decide how a request is held.
const (
	// poolableBytes: buffers up to this capacity go back to the pools;
	// larger ones are left to the garbage collector so that one large
	// request does not pin its buffer for the life of the process.
	poolableBytes = 256 << 10
	// smallReservation: a request reserving at most this much may use
	// the whole budget; larger ones leave a quarter of it free, so that a
	// flood of large bodies cannot starve ordinary requests.
	smallReservation = 4 << 20
	// releaseAfter: after the last large reservation ends, memory is
	// returned to the OS once the server has been quiet for this long
	// (at most once per releaseEvery).
	releaseAfter = time.Second
	releaseEvery = 5 * time.Second
	// largeReservation: reservations from this size on count as large
	// for the memory release.
	largeReservation = 4 << 20
)

// replyReserve is the response memory reserved per operation before it
// runs: the items it reads plus their encoded copy, for the largest reply
// the operation produces (a Query or Scan page 1 MB, an item 400 KB).
// BatchGetItem and TransactGetItems reserve once decoded, by the number
// of items asked for (replies.go). The reservation is set to the real
// size once the response is encoded.
var replyReserve = map[string]int64{
	"Query":      2 * (1<<20 + 64<<10),
	"Scan":       2 * (1<<20 + 64<<10),
	"GetItem":    2 * maxItemReserve,
	"PutItem":    2 * maxItemReserve,
	"UpdateItem": 2 * maxItemReserve,
	"DeleteItem": 2 * maxItemReserve,
	"GetRecords": 2 * (1<<20 + 64<<10),
	// A PartiQL SELECT answers a Query or Scan page.
	"ExecuteStatement": 2 * (1<<20 + 64<<10),
}

const defaultReplyReserve = 32 << 10

// budget is a weighted semaphore over bytes held by requests. Waiters
// are woken one by one as room frees up, in arrival order (never all at
// once: hundreds of throttled clients must not cost every release a
// herd of wake-ups).
type budget struct {
	mu      sync.Mutex
	max     int64
	large   int64 // what large reservations may use together
	used    int64
	nLarge  int // large reservations held
	waiters []*waiter

	lastRelease time.Time
	timer       *time.Timer
}

type waiter struct {
	n, own  int64
	ready   chan struct{}
	granted bool
}

func newBudget(max int64) *budget {
	return &budget{max: max, large: max - max/4}
}

// fitsLocked reports whether n more bytes may be reserved now by a
// request that holds own already. A reservation larger than the whole
// budget is admitted when nothing else is held.
func (b *budget) fitsLocked(n, own int64) bool {
	limit := b.max
	if n+own > smallReservation {
		limit = b.large
	}
	return b.used+n <= limit || b.used == own
}

func (b *budget) takeLocked(n, own int64) {
	b.used += n
	if own < largeReservation && own+n >= largeReservation {
		b.nLarge++
	}
}

// acquire reserves n more bytes for a request holding own, waiting up to
// wait for room.
func (b *budget) acquire(ctx context.Context, n, own int64, wait time.Duration) bool {
	b.mu.Lock()
	if b.fitsLocked(n, own) {
		b.takeLocked(n, own)
		b.mu.Unlock()
		return true
	}
	w := &waiter{n: n, own: own, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-w.ready:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		return true
	}
	for i, x := range b.waiters {
		if x == w {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			break
		}
	}
	return false
}

// resize changes a held reservation from old to n bytes without waiting
// (the memory is already allocated; a larger size only makes later
// requests wait).
func (b *budget) resize(old, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used += n - old
	if old >= largeReservation && n < largeReservation {
		b.nLarge--
		b.scheduleReleaseLocked()
	} else if old < largeReservation && n >= largeReservation {
		b.nLarge++
	}
	if n < old && len(b.waiters) > 0 {
		kept := b.waiters[:0]
		for _, w := range b.waiters {
			if b.fitsLocked(w.n, w.own) {
				b.takeLocked(w.n, w.own)
				w.granted = true
				close(w.ready)
				continue
			}
			kept = append(kept, w)
		}
		clear(b.waiters[len(kept):])
		b.waiters = kept
	}
}

// inUse reports the bytes reserved.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// scheduleReleaseLocked returns freed memory to the OS once no large
// reservation has been held for releaseAfter. Go's runtime keeps freed
// heap for minutes when the process is idle (no GC runs, sync.Pools keep
// their buffers); after a burst of 16 MB bodies that is hundreds of MB.
func (b *budget) scheduleReleaseLocked() {
	if b.nLarge > 0 {
		return
	}
	d := releaseAfter
	if next := b.lastRelease.Add(releaseEvery); time.Until(next) > d {
		d = time.Until(next)
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(d, b.releaseMemory)
		return
	}
	b.timer.Reset(d)
}

func (b *budget) releaseMemory() {
	b.mu.Lock()
	if b.nLarge > 0 {
		b.mu.Unlock()
		return
	}
	b.lastRelease = time.Now()
	b.mu.Unlock()
	// Two collections empty the sync.Pools (their victim caches too),
	// then FreeOSMemory returns the freed spans.
	runtime.GC()
	debug.FreeOSMemory()
}

// reservation is what one request holds in the budget.
type reservation struct {
	b    *budget
	held int64
}

func (r *reservation) set(n int64) {
	if n != r.held {
		r.b.resize(r.held, n)
		r.held = n
	}
}

func (r *reservation) grow(ctx context.Context, by int64, wait time.Duration) bool {
	if !r.b.acquire(ctx, by, r.held, wait) {
		return false
	}
	r.held += by
	return true
}

func (r *reservation) done() { r.set(0) }

// errBodyTooLarge and errThrottled are the outcomes of readBody besides
// I/O errors.
var (
	errBodyTooLarge = errors.New("request body too large")
	errThrottled    = errors.New("request body budget exhausted")
)

// readBody reads a request body of at most MaxBodyBytes under the
// budget: a body of known length reserves its length (plus extra, the
// reply's reservation) before anything is read; a chunked one reserves
// extra first and then more as it grows. The returned release function
// gives a pooled buffer back (the body bytes must not be used after it).
func (s *Server) readBody(r *http.Request, res *reservation, extra int64) (body []byte, release func(), err error) {
	release = func() {}
	if r.ContentLength > MaxBodyBytes {
		return nil, release, errBodyTooLarge
	}
	if r.ContentLength >= 0 {
		n := r.ContentLength
		if !res.grow(r.Context(), n+extra, s.limits.InflightWait) {
			return nil, release, errThrottled
		}
		if n <= poolableBytes {
			buf := s.bufs.Get().(*bytes.Buffer)
			buf.Reset()
			release = func() { s.putBuf(buf) }
			_, err = buf.ReadFrom(r.Body)
			return buf.Bytes(), release, err
		}
		body = make([]byte, n)
		if _, err = io.ReadFull(r.Body, body); err != nil {
			return nil, release, err
		}
		// Reach EOF so that the server watches the connection again.
		var one [1]byte
		if _, err = r.Body.Read(one[:]); err != nil && err != io.EOF {
			return nil, release, err
		}
		return body, release, nil
	}
	// Chunked: reserve in steps as the body grows.
	if !res.grow(r.Context(), extra, s.limits.InflightWait) {
		return nil, release, errThrottled
	}
	buf := s.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	release = func() { s.putBuf(buf) }
	var reserved int64
	chunk := make([]byte, 32<<10)
	for {
		k, rerr := r.Body.Read(chunk)
		if k > 0 {
			if int64(buf.Len()+k) > MaxBodyBytes {
				return nil, release, errBodyTooLarge
			}
			if need := int64(buf.Len() + k); need > reserved {
				step := max(need-reserved, reserved, 64<<10)
				step = min(step, MaxBodyBytes+1-reserved)
				if !res.grow(r.Context(), step, s.limits.InflightWait) {
					return nil, release, errThrottled
				}
				reserved += step
			}
			buf.Write(chunk[:k])
		}
		if rerr == io.EOF {
			return buf.Bytes(), release, nil
		}
		if rerr != nil {
			return nil, release, rerr
		}
	}
}

// putBuf returns a buffer to the pool unless it grew large.
func (s *Server) putBuf(b *bytes.Buffer) {
	if b.Cap() <= poolableBytes {
		s.bufs.Put(b)
	}
}

// isTimeout reports a deadline that expired while reading or writing.
func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// bodyReadError answers a request whose body could not be read. The
// connection is closed after it: the rest of the body is never read.
func (s *Server) bodyReadError(w http.ResponseWriter, id, opName string, err error, start time.Time) {
	w.Header().Set("Connection", "close")
	var st int
	var body errorBody
	switch {
	case errors.Is(err, errBodyTooLarge):
		st, body = protocolError(codeTooLarge, "Request payload size exceeds the limit of 16 MB")
	case errors.Is(err, errThrottled):
		st, body = http.StatusBadRequest, errorBody{Type: prefixAvailability + codeThrottling, Message: msgThrottled}
	case isTimeout(err):
		st, body = http.StatusRequestTimeout, errorBody{Type: prefixService + codeRequestTimeout, Message: msgBodyTimeout}
	default:
		st, body = protocolError("SerializationException", "Unable to read request body")
	}
	s.metrics.observe(opName, lastSegment(body.Type), start)
	s.writeError(w, id, st, body)
}

func lastSegment(t string) string {
	for i := len(t) - 1; i >= 0; i-- {
		if t[i] == '#' {
			return t[i+1:]
		}
	}
	return t
}

// armBodyRead starts the body deadline. The returned function ends it:
// cleared when the body was read (the server then watches the idle
// connection), left expired otherwise so that nothing waits for the rest.
func (s *Server) armBodyRead(w http.ResponseWriter) func(read bool) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.limits.BodyReadTimeout)) != nil {
		return func(bool) {}
	}
	return func(read bool) {
		if read {
			_ = rc.SetReadDeadline(time.Time{})
		} else {
			_ = rc.SetReadDeadline(time.Now())
		}
	}
}

// abandonBody is called before answering a request whose body will not be
// read (in full): the connection closes after the answer, and the server
// does not wait for the rest of the body (net/http would otherwise try to
// drain up to 256 KB of it, with no deadline, before closing).
func (s *Server) abandonBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// armWrite starts the deadline of the response about to be written, so a
// client that stops reading is cut off and its response freed. net/http
// clears it once the response is finished (the final flush included), so
// it never outlives its response on a kept-alive connection.
func (s *Server) armWrite(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.limits.WriteTimeout))
}
