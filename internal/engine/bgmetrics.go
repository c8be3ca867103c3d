package engine

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
)

// Observability of background work (background.go): start, progress and
// end log lines and metrics for index backfills and TTL sweeps. Label
// cardinality is bounded: no table or index labels (the log lines carry
// them).

// backfillProgressEvery is how often a running backfill logs progress.
const backfillProgressEvery = 10 * time.Second

type bgMetrics struct {
	backfillsRunning  prometheus.Gauge
	backfillItems     prometheus.Counter
	backfillsFinished *prometheus.CounterVec
	backfillProgress  prometheus.Gauge
	ttlDeleted        prometheus.Counter
	ttlPasses         prometheus.Counter
	ttlBacklog        prometheus.Gauge
	ttlPassSeconds    prometheus.Histogram
	ttlErrors         prometheus.Counter
	deleted           atomic.Int64 // TTL deletions, for the pass summary
	running           atomic.Int64
}

func newBGMetrics(reg prometheus.Registerer) *bgMetrics {
	m := &bgMetrics{
		backfillsRunning: prometheus.NewGauge(prometheus.GaugeOpts{Name: "extenddb_index_backfills_running",
			Help: "Index backfills (GSI creation, TTL enabling) running in this process."}),
		backfillItems: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_index_backfill_items_total",
			Help: "Items read and indexed by index backfills."}),
		backfillsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "extenddb_index_backfills_finished_total",
			Help: "Index backfills that ended, by result: done, failed, interrupted (shutdown; resumed at the next start)."}, []string{"result"}),
		backfillProgress: prometheus.NewGauge(prometheus.GaugeOpts{Name: "extenddb_index_backfill_progress_ratio",
			Help: "Estimated fraction (0..1) of the key space covered by the most recently progressing backfill; 1 when none runs."}),
		ttlDeleted: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_ttl_deleted_items_total",
			Help: "Expired items deleted by the TTL sweeper."}),
		ttlPasses: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_ttl_sweeps_total",
			Help: "TTL sweeper passes over every TTL-enabled table."}),
		ttlBacklog: prometheus.NewGauge(prometheus.GaugeOpts{Name: "extenddb_ttl_backlog_items",
			Help: "Expired items still present at the end of the last TTL pass (a lower bound: at most one batch of 500 per table is seen); 0 when caught up."}),
		ttlPassSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "extenddb_ttl_sweep_duration_seconds",
			Help: "Duration of TTL sweeper passes.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		ttlErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_ttl_sweep_errors_total",
			Help: "Table sweeps that failed (logged as \"ttl sweep\")."}),
	}
	m.backfillProgress.Set(1)
	for _, r := range []string{"done", "failed", "interrupted"} {
		m.backfillsFinished.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.backfillsRunning, m.backfillItems, m.backfillsFinished, m.backfillProgress,
			m.ttlDeleted, m.ttlPasses, m.ttlBacklog, m.ttlPassSeconds, m.ttlErrors)
	}
	return m
}

// backfillProgress follows one index backfill.
type backfillProgress struct {
	e           *Engine
	ref         backend.TableRef
	index       string
	start, last time.Time
	items       int64
	frac        float64
}

type progressKey struct{}

// beginBackfill logs the start of a backfill and returns a context that
// carries its progress to backfill().
func (e *Engine) beginBackfill(ctx context.Context, ref backend.TableRef, index string) (context.Context, *backfillProgress) {
	p := &backfillProgress{e: e, ref: ref, index: index, start: time.Now()}
	p.last = p.start
	e.bgm.backfillsRunning.Inc()
	e.bgm.running.Add(1)
	e.log.Info("index backfill started", "account", ref.Account, "table", ref.Name, "index", displayIndex(index))
	return context.WithValue(ctx, progressKey{}, p), p
}

// backfillBatch records a batch written by backfill() (ctx from
// beginBackfill; other contexts are ignored). lastPK is the batch's last
// partition key: Scan runs in KeyHash order, so its hash estimates the
// fraction done.
func backfillBatch(ctx context.Context, rows int, lastPK []byte) {
	p, ok := ctx.Value(progressKey{}).(*backfillProgress)
	if !ok {
		return
	}
	p.items += int64(rows)
	p.e.bgm.backfillItems.Add(float64(rows))
	if rows > 0 {
		p.frac = (float64(backend.KeyHash(lastPK)) + 1) / (math.MaxUint32 + 1)
		p.e.bgm.backfillProgress.Set(p.frac)
	}
	if now := time.Now(); now.Sub(p.last) >= backfillProgressEvery {
		el := now.Sub(p.start)
		attrs := []any{"account", p.ref.Account, "table", p.ref.Name, "index", displayIndex(p.index), "items", p.items,
			"items_per_second", rate(p.items, el), "elapsed", el.Round(time.Second).String(), "progress", math.Round(p.frac*1000) / 1000}
		if p.frac > 0.01 {
			eta := time.Duration(float64(el) * (1 - p.frac) / p.frac)
			attrs = append(attrs, "eta", eta.Round(time.Second).String())
		}
		p.e.log.Info("index backfill progress", attrs...)
		p.last = now
	}
}

// end logs the end of a backfill: done, failed (err) or interrupted
// (shutdown).
func (p *backfillProgress) end(err error, interrupted bool) {
	e := p.e
	e.bgm.backfillsRunning.Dec()
	if e.bgm.running.Add(-1) == 0 {
		e.bgm.backfillProgress.Set(1)
	}
	el := time.Since(p.start)
	attrs := []any{"account", p.ref.Account, "table", p.ref.Name, "index", displayIndex(p.index), "items", p.items,
		"duration", el.Round(time.Millisecond).String(), "items_per_second", rate(p.items, el)}
	switch {
	case interrupted:
		e.bgm.backfillsFinished.WithLabelValues("interrupted").Inc()
		e.log.Info("index backfill interrupted; it resumes at the next start", attrs...)
	case err != nil:
		e.bgm.backfillsFinished.WithLabelValues("failed").Inc()
		// The error line itself is logged by startBackfill ("index backfill failed").
	default:
		e.bgm.backfillsFinished.WithLabelValues("done").Inc()
		e.log.Info("index backfill finished", attrs...)
	}
}

func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n)/d.Seconds()*10) / 10
}

// displayIndex names the internal TTL index for people.
func displayIndex(index string) string {
	if index == ttlIndexName {
		return "$ttl (TimeToLive enabling)"
	}
	return index
}

// ttlPass summarizes one sweeper pass.
type ttlPass struct {
	e       *Engine
	start   time.Time
	deleted int64
	tables  int
	backlog int64
}

func (e *Engine) beginTTLPass() *ttlPass {
	return &ttlPass{e: e, start: time.Now(), deleted: e.bgm.deleted.Load()}
}

// table records one table's sweep: n expired items in its last batch.
func (p *ttlPass) table(n int, err error) {
	p.tables++
	if err != nil {
		p.e.bgm.ttlErrors.Inc()
	}
	if n >= sweepBatch {
		p.backlog += int64(n)
	}
}

// end logs the pass when it deleted anything (info), otherwise at debug.
func (p *ttlPass) end() {
	e := p.e
	d := time.Since(p.start)
	deleted := e.bgm.deleted.Load() - p.deleted
	e.bgm.ttlPasses.Inc()
	e.bgm.ttlBacklog.Set(float64(p.backlog))
	e.bgm.ttlPassSeconds.Observe(d.Seconds())
	if p.tables == 0 {
		return // no TTL-enabled table: nothing worth a line
	}
	level := slog.LevelDebug
	if deleted > 0 || p.backlog > 0 {
		level = slog.LevelInfo
	}
	e.log.Log(context.Background(), level, "ttl sweep pass", "tables", p.tables, "deleted", deleted,
		"backlog", p.backlog, "duration", d.Round(time.Millisecond).String())
}

// ttlDeleted counts expired items deleted by one sweeper batch.
func (e *Engine) ttlDeleted(n int) {
	e.bgm.deleted.Add(int64(n))
	e.bgm.ttlDeleted.Add(float64(n))
}
