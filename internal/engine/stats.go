package engine

import (
	"context"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// Table statistics: DescribeTable's ItemCount and TableSizeBytes and each
// index's ItemCount and IndexSizeBytes. DynamoDB refreshes them about every
// six hours.
//
// A backend that keeps them with every write (backend.TableCounter, ADR
// 0053) answers them at each description, at a cost that does not depend
// on the table's size, as fresh as the last committed write. While its
// figures for a table are unknown (a database from before it counted, a
// table loaded in bulk), and on a backend without the capability, the
// engine computes them (Recount, or backend.Backend.TableStats: a read of
// the whole table off the request path) when a description asks for them
// and the last computation is older than the refresh interval, stretched
// to 20 times that computation's duration, so that a large table costs at
// most about 5% of one reader. The request that finds them stale answers
// the previous figures and starts the computation; the first request for
// a table waits up to statsFirstWait for it.

const (
	defaultStatsInterval = time.Second
	statsFirstWait       = 250 * time.Millisecond
	statsTimeout         = 10 * time.Minute
)

type statsCache struct {
	mu       sync.Mutex
	m        map[int64]*statsEntry
	interval time.Duration
}

type statsEntry struct {
	res     *backend.TableStatsResult
	at      time.Time     // start of the last computation
	cost    time.Duration // duration of the last computation
	running chan struct{} // closed when the running computation ends
}

// countsStats tells whether a table's statistics are computed: not while
// it is CREATING (a restore target being loaded answers ItemCount 0, as a
// new table does), where each recomputation would read a growing table
// beside the restore that fills it, for figures stale at once.
func countsStats(t *table) bool { return t.stored.Desc.TableStatus != "CREATING" }

// peekStats returns the last computed statistics of a table, or nil.
func (e *Engine) peekStats(id int64) *backend.TableStatsResult {
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	if s := e.stats.m[id]; s != nil {
		return s.res
	}
	return nil
}

func (e *Engine) forgetStats(id int64) {
	e.stats.mu.Lock()
	delete(e.stats.m, id)
	e.stats.mu.Unlock()
}

// tableStats returns a table's statistics: the maintained figures when
// the backend keeps them and knows them; else the last computed ones,
// starting a computation when they are stale; nil when none were computed
// yet (the first request for a table waits up to statsFirstWait).
func (e *Engine) tableStats(ctx context.Context, t *table) *backend.TableStatsResult {
	if res := e.countedStats(ctx, t.ref); res != nil {
		return res
	}
	s, res, running := e.refreshStats(t.ref)
	if res != nil || running == nil {
		return res
	}
	timer := time.NewTimer(statsFirstWait)
	defer timer.Stop()
	select {
	case <-running:
	case <-timer.C:
	case <-ctx.Done():
	}
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	return s.res
}

// countedStats reads the figures a backend keeps with its writes (nil
// when it does not, or does not know them now) and remembers them as the
// table's last figures (what DeleteTable reports).
func (e *Engine) countedStats(ctx context.Context, ref backend.TableRef) *backend.TableStatsResult {
	tc := e.backend.Capabilities().Counts
	if tc == nil {
		return nil
	}
	res, err := tc.Counts(ctx, backend.CountsParams{Table: ref})
	if err != nil {
		if !backend.IsKind(err, backend.KindTableNotFound) && ctx.Err() == nil {
			e.log.Warn("table statistics", "table", ref.Name, "err", err)
		}
		return nil
	}
	if !res.Counted {
		return nil
	}
	c := &e.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[int64]*statsEntry{}
	}
	s := c.m[ref.ID]
	if s == nil {
		s = &statsEntry{}
		c.m[ref.ID] = s
	}
	// Only the figures: at stays the last computation's start, so figures
	// that become unknown (a bulk load) are recounted at once.
	s.res = &res.Stats
	return s.res
}

// refreshStats returns a table's last statistics and starts their
// recomputation when they are stale (running is its end, nil when none
// runs). It never waits.
func (e *Engine) refreshStats(ref backend.TableRef) (s *statsEntry, res *backend.TableStatsResult, running chan struct{}) {
	c := &e.stats
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[int64]*statsEntry{}
	}
	s = c.m[ref.ID]
	if s == nil {
		s = &statsEntry{}
		c.m[ref.ID] = s
	}
	now := time.Now()
	if s.res != nil && now.Sub(s.at) < max(c.interval, 20*s.cost) {
		return s, s.res, nil
	}
	if s.running == nil {
		done := make(chan struct{})
		s.running = done
		s.at = now
		go e.computeStats(ref, s, done)
	}
	return s, s.res, s.running
}

// TableMetric is one table's statistics for /metrics.
type TableMetric struct {
	Account, Table string
	ItemCount      int64
	SizeBytes      int64
}

// TableMetrics lists the statistics of the tables of accounts (the figures
// DescribeTable reports, refreshed the same way: a scrape starts the
// recomputation of stale figures and reports the previous ones; a table
// not counted yet is left out until its first count ends). At most limit
// tables are listed; truncated tells that more exist.
func (e *Engine) TableMetrics(ctx context.Context, accounts []string, limit int) (out []TableMetric, truncated bool, err error) {
	for _, a := range accounts {
		res, err := e.backend.ListTables(ctx, backend.ListTablesParams{Account: a})
		if err != nil {
			return out, false, err
		}
		for _, name := range res.Names {
			if len(out) >= limit {
				return out, true, nil
			}
			t, err := e.loadTable(ctx, a, name)
			if err != nil || !countsStats(t) {
				continue // deleted meanwhile, or being restored
			}
			st := e.countedStats(ctx, t.ref)
			if st == nil {
				_, st, _ = e.refreshStats(t.ref)
			}
			if st != nil {
				out = append(out, TableMetric{Account: a, Table: name, ItemCount: st.ItemCount, SizeBytes: st.SizeBytes})
			}
		}
	}
	return out, false, nil
}

func (e *Engine) computeStats(ref backend.TableRef, s *statsEntry, done chan struct{}) {
	// Not the request's context (the request does not wait for the
	// result), but the background one when running, so Stop ends it.
	base := context.Background()
	e.bg.mu.Lock()
	if e.bg.ctx != nil {
		base = e.bg.ctx
	}
	e.bg.mu.Unlock()
	ctx, cancel := context.WithTimeout(base, statsTimeout)
	defer cancel()
	start := time.Now()
	var res *backend.TableStatsResult
	var err error
	if tc := e.backend.Capabilities().Counts; tc != nil {
		// The repair of unknown figures: counted with the backend's item
		// size function (the server's is ItemSize) and kept from now on.
		var rc *backend.CountsResult
		if rc, err = tc.Recount(ctx, backend.CountsParams{Table: ref}); err == nil && rc.Counted {
			res = &rc.Stats
		}
	} else {
		res, err = e.backend.TableStats(ctx, backend.TableStatsParams{Table: ref, Size: statsSize})
	}
	if err != nil && !backend.IsKind(err, backend.KindTableNotFound) {
		e.log.Warn("table statistics", "table", ref.Name, "err", err)
	}
	e.stats.mu.Lock()
	if res != nil {
		s.res = res
	}
	s.cost = time.Since(start)
	s.running = nil
	e.stats.mu.Unlock()
	close(done)
}

// withStats returns a copy of a description with the statistics filled in
// (the description's index slices are shared with the table cache).
func withStats(d *TableDescription, st *backend.TableStatsResult) *TableDescription {
	if st == nil {
		return d
	}
	out := *d
	out.ItemCount, out.TableSizeBytes = st.ItemCount, st.SizeBytes
	if len(d.GlobalSecondaryIndexes) > 0 {
		out.GlobalSecondaryIndexes = append([]GlobalSecondaryIndexDescription(nil), d.GlobalSecondaryIndexes...)
		for i := range out.GlobalSecondaryIndexes {
			g := &out.GlobalSecondaryIndexes[i]
			ix := st.Indexes[g.IndexName]
			g.ItemCount, g.IndexSizeBytes = ix.ItemCount, ix.SizeBytes
		}
	}
	if len(d.LocalSecondaryIndexes) > 0 {
		out.LocalSecondaryIndexes = append([]LocalSecondaryIndexDescription(nil), d.LocalSecondaryIndexes...)
		for i := range out.LocalSecondaryIndexes {
			l := &out.LocalSecondaryIndexes[i]
			ix := st.Indexes[l.IndexName]
			l.ItemCount, l.IndexSizeBytes = ix.ItemCount, ix.SizeBytes
		}
	}
	return &out
}
