package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/extenddb/extenddb/internal/backend"
)

// presence learns whether this server is alone on its database: whether
// any client session other than its own is open there (ADR 0037). Nothing
// writes the database but through a session, and every session is listed
// in pg_stat_activity, so while this server's sessions are the only ones,
// no other server can be changing its items.
//
// Every connection of the backend carries application_name
// "extenddb <id>" (appName). On a connection of its own, presence LISTENs
// on presenceChannel, NOTIFYs it once when it starts (so a server that
// joins is known to the others within a round trip, before its Open
// returns), and about once a second counts the other client sessions of
// the database. alone() holds only until shortly after the last count that
// found none, and ends at once on a notification of another server or a
// failure of the connection (notifications may then be lost). A session of
// a client that does not notify (an older extenddb, psql) is seen by the
// next count, within presenceInterval.
type presence struct {
	id       string
	cfg      *pgconn.Config
	base     time.Time
	onReset  func() // clears the read cache; called on the loop goroutine
	interval time.Duration

	aloneUntil atomic.Int64 // time since base (ns) until which alone() holds
	others     atomic.Int64 // other sessions seen by the last count

	// Loop state (loop goroutine only).
	conn     *pgconn.PgConn
	epoch    uint64 // notifications of other servers seen
	dirty    bool   // the cache may hold values from a time this server was not alone
	notified bool   // this server's arrival was announced
	stop     chan struct{}
	done     chan struct{}
	closed   atomic.Bool
}

const (
	presenceChannel  = "extenddb_servers"
	presenceInterval = time.Second
	// presenceAloneFor: how long a count that found no other session lets
	// the cache answer.
	presenceAloneFor = 2 * presenceInterval
)

func newPresenceID() string {
	var raw [12]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(raw[:])
}

// appName is the application_name of every connection of the server id.
func appName(id string) string { return "extenddb " + id }

func newPresence(id string, cfg *pgconn.Config, onReset func()) *presence {
	p := &presence{id: id, base: time.Now(), onReset: onReset,
		interval: presenceInterval, stop: make(chan struct{}), done: make(chan struct{})}
	c := cfg.Copy()
	c.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
		if n.Channel == presenceChannel && n.Payload != p.id {
			p.epoch++
			p.notAlone()
		}
	}
	p.cfg = c
	return p
}

func (p *presence) now() int64 { return int64(time.Since(p.base)) }

// alone reports whether no other client session was open on the database
// at a count less than presenceAloneFor ago, and none announced itself
// since.
func (p *presence) alone() bool { return p.now() < p.aloneUntil.Load() }

// notAlone ends alone() at once (loop goroutine).
func (p *presence) notAlone() {
	p.aloneUntil.Store(0)
	p.dirty = true
}

// start announces the server and makes the first count before Open
// returns, then starts the loop.
func (p *presence) start(ctx context.Context) error {
	if err := p.connect(ctx); err != nil {
		return err
	}
	if err := p.count(ctx); err != nil {
		p.drop()
		return err
	}
	go p.loop()
	return nil
}

func (p *presence) connect(ctx context.Context) error {
	c, err := pgconn.ConnectConfig(ctx, p.cfg)
	if err != nil {
		return mapErr(err, "postgres: presence connection")
	}
	if _, err := c.Exec(ctx, "LISTEN "+presenceChannel).ReadAll(); err != nil {
		c.Close(context.WithoutCancel(ctx))
		return mapErr(err, "postgres: presence listen")
	}
	p.conn = c
	return nil
}

// count counts the other client sessions of the database (announcing this
// server first, once) and sets alone() from the answer. Sessions of
// background processes (autovacuum, parallel workers) are not clients;
// pg_stat_activity shows their backend_type only to a role that may read
// all statistics (pg_read_all_stats, or the same role), so for any other
// role they count as clients: the cache is then off while they run.
func (p *presence) count(ctx context.Context) error {
	e0 := p.epoch
	began := p.now()
	sql := fmt.Sprintf(`SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
AND application_name IS DISTINCT FROM '%s'
AND (backend_type IS NULL OR backend_type = 'client backend')`, appName(p.id))
	if !p.notified {
		sql = fmt.Sprintf(`SELECT pg_notify('%s', '%s'); `, presenceChannel, p.id) + sql
	}
	cctx, cancel := context.WithTimeout(ctx, 10*p.interval)
	defer cancel()
	res, err := p.conn.Exec(cctx, sql).ReadAll()
	if err != nil {
		p.notAlone()
		return mapErr(err, "postgres: presence count")
	}
	last := res[len(res)-1]
	if len(last.Rows) != 1 || len(last.Rows[0]) != 1 {
		p.notAlone()
		return backend.Errorf(backend.KindInternal, "postgres: presence count: unexpected answer")
	}
	n, err := strconv.ParseInt(string(last.Rows[0][0]), 10, 64)
	if err != nil {
		p.notAlone()
		return backend.Wrap(backend.KindInternal, err, "postgres: presence count")
	}
	p.notified = true
	p.others.Store(n)
	if n > 0 || p.epoch != e0 {
		p.notAlone()
		return nil
	}
	if p.dirty {
		// Values cached before another session was seen may be stale.
		p.onReset()
		p.dirty = false
	}
	p.aloneUntil.Store(began + int64(presenceAloneFor))
	return nil
}

func (p *presence) loop() {
	defer close(p.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	next := time.Now().Add(p.interval)
	for ctx.Err() == nil {
		if p.conn == nil {
			if err := p.connect(ctx); err != nil {
				p.notAlone()
				sleepCtx(ctx, p.interval/4)
				continue
			}
			next = time.Now()
		}
		if !time.Now().Before(next) {
			next = time.Now().Add(p.interval)
			if err := p.count(ctx); err != nil {
				p.drop()
				continue
			}
		}
		wctx, wcancel := context.WithDeadline(ctx, next)
		err := p.conn.WaitForNotification(wctx)
		wcancel()
		if err != nil && wctx.Err() == nil {
			p.notAlone()
			p.drop() // the connection failed: notifications may be lost
		}
	}
	p.drop()
}

func (p *presence) drop() {
	if p.conn != nil {
		p.conn.Close(context.Background())
		p.conn = nil
	}
}

// close stops the loop and closes its connection.
func (p *presence) close() {
	if p.closed.Swap(true) {
		return
	}
	close(p.stop)
	<-p.done
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
