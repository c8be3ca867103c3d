package server

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backup/plan"
	"github.com/extenddb/extenddb/internal/buildinfo"
	"github.com/extenddb/extenddb/internal/engine"
)

// registerBuildInfo adds extenddb_build_info{version,commit,go} = 1.
func registerBuildInfo(reg prometheus.Registerer, b buildinfo.Info) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "extenddb_build_info",
		Help:        "The running build: always 1, labelled with version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "go": b.Go},
	})
	g.Set(1)
	reg.MustRegister(g)
}

// registerStorageMetrics exports a backend's Stats (pool, item cache,
// retries), read on every scrape. Backends without Stats export nothing.
func registerStorageMetrics(reg prometheus.Registerer, be backend.Backend) {
	sr := be.Capabilities().Stats
	if sr == nil {
		return
	}
	first := sr.Stats()
	labels := prometheus.Labels{"backend": be.Name()}
	gauge := func(name, help string, f func(backend.Stats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(sr.Stats()) })
	}
	counter := func(name, help string, f func(backend.Stats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return f(sr.Stats()) })
	}
	if first.HasPool {
		reg.MustRegister(
			gauge("extenddb_storage_pool_max_connections", "Bound of the storage connection pool (PostgreSQL pool; SQLite reader pool).",
				func(s backend.Stats) float64 { return float64(s.PoolMax) }),
			gauge("extenddb_storage_pool_in_use_connections", "Storage connections lent out now.",
				func(s backend.Stats) float64 { return float64(s.PoolInUse) }),
			gauge("extenddb_storage_pool_idle_connections", "Open idle storage connections.",
				func(s backend.Stats) float64 { return float64(s.PoolIdle) }),
			counter("extenddb_storage_pool_waits_total", "Acquisitions that waited for a storage connection (pool saturated).",
				func(s backend.Stats) float64 { return float64(s.PoolWaits) }),
			counter("extenddb_storage_pool_wait_seconds_total", "Total time spent waiting for a storage connection.",
				func(s backend.Stats) float64 { return s.PoolWaitTime.Seconds() }),
		)
	}
	if first.HasCache {
		reg.MustRegister(
			counter("extenddb_item_cache_hits_total", "Item reads answered by the in-memory item cache.",
				func(s backend.Stats) float64 { return float64(s.CacheHits) }),
			counter("extenddb_item_cache_misses_total", "Item reads the item cache could not answer.",
				func(s backend.Stats) float64 { return float64(s.CacheMisses) }),
			gauge("extenddb_item_cache_bytes", "Bytes held by the item cache.",
				func(s backend.Stats) float64 { return float64(s.CacheBytes) }),
			gauge("extenddb_item_cache_entries", "Items held by the item cache.",
				func(s backend.Stats) float64 { return float64(s.CacheEntries) }),
			gauge("extenddb_item_cache_max_bytes", "Bound of the item cache (storage.sqlite.item_cache_mb, storage.postgres.read_cache_mb).",
				func(s backend.Stats) float64 { return float64(s.CacheMaxBytes) }),
			gauge("extenddb_item_cache_in_use", "1 while the item cache answers reads (PostgreSQL: only while this server's sessions are the only client sessions on its database).",
				func(s backend.Stats) float64 {
					if s.CacheInUse {
						return 1
					}
					return 0
				}),
		)
	}
	if first.HasPipelining {
		spec := func(outcome string, f func(backend.Stats) int64) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "extenddb_storage_speculative_writes_total",
				Help:        "Writes sent on their guessed current items (PostgreSQL, ADR 0028): applied in one round trip, or refused (a wrong guess) and run again under the item lock.",
				ConstLabels: prometheus.Labels{"backend": be.Name(), "outcome": outcome}},
				func() float64 { return float64(f(sr.Stats())) })
		}
		reg.MustRegister(
			spec("applied", func(s backend.Stats) int64 { return s.SpeculativeApplied }),
			spec("refused", func(s backend.Stats) int64 { return s.SpeculativeRefused }),
			counter("extenddb_storage_write_batches_total", "Batches the write lanes sent, several concurrent writes committed together (PostgreSQL, ADR 0038).",
				func(s backend.Stats) float64 { return float64(s.WriteBatches) }),
			counter("extenddb_storage_write_batch_writes_total", "Writes carried by the write lanes' batches; divided by extenddb_storage_write_batches_total, the mean batch.",
				func(s backend.Stats) float64 { return float64(s.WriteBatchWrites) }),
			counter("extenddb_storage_read_pipelines_total", "Pipelines the read lanes sent, several concurrent GetItems in one round trip (PostgreSQL).",
				func(s backend.Stats) float64 { return float64(s.ReadPipelines) }),
			counter("extenddb_storage_read_pipeline_gets_total", "GetItems answered in the read lanes' pipelines.",
				func(s backend.Stats) float64 { return float64(s.ReadPipelineGets) }),
		)
	}
	if first.HasOutbox {
		reg.MustRegister(
			gauge("extenddb_gsi_outbox_pending", "Global secondary index changes committed with their item and not yet applied to the index, as this server knows them (Cassandra's index outbox).",
				func(s backend.Stats) float64 { return float64(s.OutboxPending) }),
			gauge("extenddb_gsi_outbox_oldest_seconds", "Age of the oldest of extenddb_gsi_outbox_pending (0 when none): the GSI lag.",
				func(s backend.Stats) float64 { return s.OutboxOldest.Seconds() }),
			counter("extenddb_gsi_outbox_recovered_total", "Index changes applied by the background outbox sweep (left by a writer that died or failed).",
				func(s backend.Stats) float64 { return float64(s.OutboxRecovered) }),
		)
	}
	if first.HasBackground {
		reg.MustRegister(counter("extenddb_storage_background_failures_total", "Failed passes of the storage backend's background work (the purge of deleted tables; PostgreSQL: also the statistics fold and its vacuum), each retried at the next pass: a count that keeps growing means work that never gets done.",
			func(s backend.Stats) float64 { return float64(s.BackgroundFailures) }))
	}
	if first.Retries >= 0 {
		reg.MustRegister(counter("extenddb_storage_retries_total", "Storage operations run again after a transient failure (nothing committed).",
			func(s backend.Stats) float64 { return float64(s.Retries) }))
	}
}

// tablesCollector exports extenddb_tables{account}: the number of tables
// of each configured account, listed on every scrape (one catalog read per
// account; accounts are bounded by the configuration).
type tablesCollector struct {
	backend  backend.Backend
	accounts []string
	desc     *prometheus.Desc
}

func newTablesCollector(b backend.Backend, accounts []string) *tablesCollector {
	seen := map[string]bool{}
	var uniq []string
	for _, a := range accounts {
		if !seen[a] {
			seen[a] = true
			uniq = append(uniq, a)
		}
	}
	return &tablesCollector{backend: b, accounts: uniq,
		desc: prometheus.NewDesc("extenddb_tables", "Tables per account (configured accounts only).", []string{"account"}, nil)}
}

func (c *tablesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *tablesCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, a := range c.accounts {
		res, err := c.backend.ListTables(ctx, backend.ListTablesParams{Account: a})
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.desc, err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(len(res.Names)), a)
	}
}

// maxTableSeries bounds the tables /metrics reports one by one, so a
// deployment with very many tables does not explode the series count.
const maxTableSeries = 500

// tableStatsCollector exports, per table of the configured accounts, the
// item count and size DescribeTable reports (engine.TableMetrics: a scrape
// refreshes stale figures in the background and reports the last ones).
type tableStatsCollector struct {
	eng                    *engine.Engine
	accounts               []string
	items, size, truncated *prometheus.Desc
}

func newTableStatsCollector(eng *engine.Engine, accounts []string) *tableStatsCollector {
	return &tableStatsCollector{eng: eng, accounts: uniqueStrings(accounts),
		items: prometheus.NewDesc("extenddb_table_items", "Items of a table (DescribeTable's ItemCount; refreshed in the background, at most every second and at most 5% of a reader for big tables).",
			[]string{"account", "table"}, nil),
		size: prometheus.NewDesc("extenddb_table_size_bytes", "Size of a table's items (DescribeTable's TableSizeBytes).",
			[]string{"account", "table"}, nil),
		truncated: prometheus.NewDesc("extenddb_table_metrics_truncated", "1 when more tables exist than the per-table series reported (500).", nil, nil),
	}
}

func (c *tableStatsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.items
	ch <- c.size
	ch <- c.truncated
}

func (c *tableStatsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ms, truncated, err := c.eng.TableMetrics(ctx, c.accounts, maxTableSeries)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.items, err)
		return
	}
	for _, m := range ms {
		ch <- prometheus.MustNewConstMetric(c.items, prometheus.GaugeValue, float64(m.ItemCount), m.Account, m.Table)
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(m.SizeBytes), m.Account, m.Table)
	}
	t := 0.0
	if truncated {
		t = 1
	}
	ch <- prometheus.MustNewConstMetric(c.truncated, prometheus.GaugeValue, t)
}

func uniqueStrings(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// registerServerInfo adds extenddb_server_info{backend,backup_store} = 1
// (every backend, the memory one included, which exports no storage
// metrics) and, with a backup store, extenddb_backup_store_up: 1 while
// the store answers and holds this catalog's identity, read on each
// scrape through the jobs' readiness check (a positive answer is reused
// for backup.DefaultReadyCache, so a scrape rarely costs a store call).
// The web console's server page reads both.
func registerServerInfo(reg prometheus.Registerer, be backend.Backend, bk backupStore) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "extenddb_server_info",
		Help:        "The running server: always 1, labelled with its storage backend and its backup store (disabled when none).",
		ConstLabels: prometheus.Labels{"backend": be.Name(), "backup_store": bk.desc},
	})
	g.Set(1)
	reg.MustRegister(g)
	if bk.jobs == nil {
		return
	}
	jobs := bk.jobs
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "extenddb_backup_store_up",
		Help: "1 while the backup store is reachable and its identity is this catalog's, else 0 (/ready says why)."},
		func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if jobs.Ready(ctx) != nil {
				return 0
			}
			return 1
		}))
}

// planInfoCollector exports each configured backup plan's definition,
// extenddb_backup_plan_info{plan,account,tables,schedule,retention} = 1,
// and its next slot, extenddb_backup_plan_next_run_timestamp_seconds:
// with the runner's extenddb_backup_plan_* series (last run, result, last
// success, failures), what `extenddb backup plans` prints.
type planInfoCollector struct {
	plans []*plan.Plan
	now   func() time.Time
	info  *prometheus.Desc
	next  *prometheus.Desc
}

func newPlanInfoCollector(plans []*plan.Plan) *planInfoCollector {
	return &planInfoCollector{plans: plans, now: time.Now,
		info: prometheus.NewDesc("extenddb_backup_plan_info", "A configured backup plan ([[backup.plans]]): always 1, labelled with its account, tables, schedule and retention.",
			[]string{"plan", "account", "tables", "schedule", "retention"}, nil),
		next: prometheus.NewDesc("extenddb_backup_plan_next_run_timestamp_seconds", "The plan's next scheduled slot.", []string{"plan"}, nil)}
}

func (c *planInfoCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.info; ch <- c.next }

func (c *planInfoCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, p := range c.plans {
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, p.Name, p.Account, strings.Join(p.Tables, ","), planSchedule(p), p.Retention())
		ch <- prometheus.MustNewConstMetric(c.next, prometheus.GaugeValue, float64(p.Next(now).Unix()), p.Name)
	}
}

// planSchedule is a plan's schedule as written: its cron line and zone,
// or "every" and its interval.
func planSchedule(p *plan.Plan) string {
	if p.Every > 0 {
		return "every " + p.Every.String()
	}
	if p.TimeZone != "" {
		return p.Cron + " " + p.TimeZone
	}
	return p.Cron
}
