package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/extenddb/extenddb/internal/backend"
)

// Read lanes: GetItems of concurrent requests pipelined on one connection
// (ADR 0033).
//
// A GetItem is one statement and one round trip; what it costs the
// extenddb process is mostly the round trip itself (a pool acquire, a
// socket write, a park on the socket and a wake-up, a read). A lane is a
// goroutine that takes every GetItem queued when it is free (up to
// laneBatch), acquires one pooled connection and sends them in one
// pipeline — a Bind and Execute of the prepared GetItem statement each,
// then one Sync — in one write, then reads the results in order. Each
// statement takes its own snapshot (READ COMMITTED, as when it runs
// alone); the one Sync lets the server send all results in one flush. A
// GetItem takes no lock, so a pipeline holds none, and the connection is
// released after each pipeline.
//
// A statement that fails makes the server skip the rest up to the Sync,
// and a lost connection leaves them unanswered: every GetItem without its
// answer then runs again on the ordinary path (b.read, with its retries),
// which gives each its own outcome — reads are idempotent. A request
// whose context ends while queued or in flight returns at once; the lane
// drops its answer.
type lanes struct {
	b     *Backend
	queue chan *laneGet
	stop  chan struct{}
	wg    sync.WaitGroup

	// pipelines and gets count the pipelines sent and the GetItems
	// answered in them (LaneStats).
	pipelines, gets atomic.Int64
}

// LaneStats reports the read lanes' pipelines and the GetItems they
// answered (gets/pipelines is the mean batch).
func (b *Backend) LaneStats() (pipelines, gets int64) {
	if b.lanes == nil {
		return 0, 0
	}
	return b.lanes.pipelines.Load(), b.lanes.gets.Load()
}

// laneBatch bounds the GetItems of one pipeline.
const laneBatch = 64

// laneGet is one queued GetItem.
type laneGet struct {
	ctx    context.Context
	params [4][]byte // t, h (int8, binary), pk, sk (bytea)
	done   chan laneAnswer
}

// laneAnswer is the outcome of one GetItem in a pipeline. retry: the
// pipeline failed before this GetItem's answer arrived (a statement, the
// connection, the acquire); the request runs on the ordinary path.
type laneAnswer struct {
	item  []byte
	found bool // the table row exists
	err   error
	retry bool
}

var laneGetPool = sync.Pool{New: func() any { return &laneGet{done: make(chan laneAnswer, 1)} }}

func newLanes(b *Backend, n int) *lanes {
	l := &lanes{b: b, queue: make(chan *laneGet, 1024), stop: make(chan struct{})}
	for range n {
		l.wg.Add(1)
		go l.run()
	}
	return l
}

// close stops the lanes; queued requests are answered retry (the ordinary
// path then answers the closed backend).
func (l *lanes) close() {
	close(l.stop)
	l.wg.Wait()
	for {
		select {
		case g := <-l.queue:
			g.done <- laneAnswer{retry: true}
		default:
			return
		}
	}
}

// get runs one GetItem through a lane. ok=false: not answered, run the
// ordinary path.
func (l *lanes) get(ctx context.Context, table int64, pk, sk []byte) (item []byte, found bool, err error, ok bool) {
	g := laneGetPool.Get().(*laneGet)
	g.ctx = ctx
	g.params[0] = binary.BigEndian.AppendUint64(g.params[0][:0], uint64(table))
	g.params[1] = binary.BigEndian.AppendUint64(g.params[1][:0], uint64(hashOf(pk)))
	g.params[2], g.params[3] = pk, sk
	select {
	case l.queue <- g:
	default:
		laneGetPool.Put(g)
		return nil, false, nil, false // queue full: the ordinary path
	}
	select {
	case a := <-g.done:
		g.ctx, g.params[2], g.params[3] = nil, nil, nil
		laneGetPool.Put(g)
		if a.retry {
			return nil, false, nil, false
		}
		return a.item, a.found, a.err, true
	case <-ctx.Done():
		// The lane still answers into g.done (buffered); g is not reused.
		return nil, false, ctx.Err(), true
	case <-l.stop:
		// The backend is closing (a request queued after the lanes
		// drained would wait for nobody): the ordinary path answers.
		return nil, false, nil, false
	}
}

func (l *lanes) run() {
	defer l.wg.Done()
	batch := make([]*laneGet, 0, laneBatch)
	for {
		select {
		case <-l.stop:
			return
		case g := <-l.queue:
			batch = append(batch[:0], g)
		}
	drain:
		for len(batch) < laneBatch {
			select {
			case g := <-l.queue:
				batch = append(batch, g)
			default:
				break drain
			}
		}
		l.pipeline(batch)
		clear(batch)
	}
}

var (
	laneParamFormats  = []int16{1, 1, 1, 1}
	laneResultFormats = []int16{1}
)

// pipeline sends batch on one pooled connection and answers each request.
func (l *lanes) pipeline(batch []*laneGet) {
	b := l.b
	// Requests whose context already ended are answered (and skipped).
	live := batch[:0]
	for _, g := range batch {
		if err := g.ctx.Err(); err != nil {
			g.done <- laneAnswer{err: err}
			continue
		}
		live = append(live, g)
	}
	if len(live) == 0 {
		return
	}
	// The lane's own context: a pipeline serves several requests, so none
	// of their contexts may end it; it is bounded like an acquire plus a
	// statement.
	ctx, cancel := context.WithTimeout(context.Background(), b.opts.AcquireTimeout+30*time.Second)
	defer cancel()
	failAll := func(from int) {
		for _, g := range live[from:] {
			g.done <- laneAnswer{retry: true}
		}
	}
	c, err := b.acquire(ctx)
	if err != nil {
		failAll(0)
		return
	}
	sd, err := c.Conn().Prepare(ctx, sqlGetItem, sqlGetItem)
	if err != nil {
		closeBroken(c, err)
		failAll(0)
		return
	}
	pc := c.Conn().PgConn()
	p := pc.StartPipeline(ctx)
	for _, g := range live {
		p.SendQueryStatement(sd, g.params[:], laneParamFormats, laneResultFormats)
	}
	p.SendPipelineSync()
	if err := p.Flush(); err != nil {
		p.Close()
		closeBroken(c, err)
		failAll(0)
		return
	}
	for i, g := range live {
		a, err := readLaneAnswer(p)
		if err != nil {
			// A statement failed (the server skips the rest up to the
			// Sync) or the connection did: this and the following
			// requests have no answer; reads are idempotent, they run
			// again on the ordinary path, which answers each its own.
			p.Close()
			closeBroken(c, err)
			failAll(i)
			return
		}
		// Counted before the answer: a caller that saw its answer sees
		// it counted (LaneStats).
		if i == 0 {
			l.pipelines.Add(1)
		}
		l.gets.Add(1)
		g.done <- a
	}
	res, err := p.GetResults()
	if err == nil {
		if _, ok := res.(*pgconn.PipelineSync); !ok {
			err = errors.New("postgres: read lane: expected the pipeline's Sync")
		}
	}
	if err == nil {
		err = p.Close()
	} else {
		p.Close()
	}
	if err != nil {
		closeBroken(c, err)
		return
	}
	c.Release()
}

// readLaneAnswer reads one GetItem's result. err: this GetItem has no
// answer (its statement or the connection failed).
func readLaneAnswer(p *pgconn.Pipeline) (laneAnswer, error) {
	var a laneAnswer
	res, err := p.GetResults()
	if err != nil {
		return a, err
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return a, errors.New("postgres: read lane: unexpected pipeline result")
	}
	for rr.NextRow() {
		a.found = true
		if v := rr.Values()[0]; v != nil {
			a.item = append(make([]byte, 0, len(v)), v...)
		}
	}
	if _, err := rr.Close(); err != nil {
		return laneAnswer{}, err
	}
	return a, nil
}

// closeBroken closes and releases the connection of a failed pipeline
// (the pool discards it): after a failed statement the server skips the
// pipeline's rest, and a connection in an unknown state is not reused.
func closeBroken(c *pgxpool.Conn, _ error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	c.Conn().Close(ctx)
	cancel()
	c.Release()
}

// getViaLane answers GetItem through the read lanes; ok=false: run the
// ordinary path.
func (b *Backend) getViaLane(ctx context.Context, p backend.GetItemParams) (*backend.GetItemResult, bool, error) {
	pk := nz(p.PK)
	item, found, err, ok := b.lanes.get(ctx, p.Table.ID, pk, nz(p.SK))
	if !ok {
		return nil, false, nil
	}
	if err != nil {
		if retryableBeforeCommit(err) {
			return nil, false, nil // a conflict or a connection error of this statement: the ordinary path retries
		}
		return nil, true, mapErr(err, "postgres: get item")
	}
	if !found {
		return nil, true, tableNotFound(p.Table)
	}
	return &backend.GetItemResult{Item: item}, true, nil
}
