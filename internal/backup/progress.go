package backup

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// jobProgress is what a running job has done so far, exported on /metrics
// while it runs (`extenddb backup create|restore --wait` draws its
// progress bar from it). A backup is named by its source table and backup
// id, a restore by its target table and the backup id it restores.
type jobProgress struct {
	kind, account, table, job string

	phase                  atomic.Pointer[string]
	items, bytes           atomic.Int64
	totalItems, totalBytes atomic.Int64 // 0: unknown
	set                    *progressSet
}

func (p *jobProgress) setPhase(s string) {
	if p != nil {
		p.phase.Store(&s)
	}
}

func (p *jobProgress) add(items, bytes int64) {
	if p != nil {
		p.items.Add(items)
		p.bytes.Add(bytes)
	}
}

func (p *jobProgress) setTotals(items, bytes int64) {
	if p != nil {
		p.totalItems.Store(items)
		p.totalBytes.Store(bytes)
	}
}

// progressSet holds the running jobs' progress; it is the Prometheus
// collector of the per-job gauges. Series exist only while their job
// runs, so there are at most max_concurrent_jobs of each.
type progressSet struct {
	mu   sync.Mutex
	jobs map[*jobProgress]struct{}
}

func newProgressSet() *progressSet { return &progressSet{jobs: map[*jobProgress]struct{}{}} }

// start tracks a new job; the caller ends it with done.
func (s *progressSet) start(kind, account, table, job, phase string) *jobProgress {
	p := &jobProgress{kind: kind, account: account, table: table, job: job, set: s}
	p.setPhase(phase)
	s.mu.Lock()
	s.jobs[p] = struct{}{}
	s.mu.Unlock()
	return p
}

func (p *jobProgress) done() {
	p.set.mu.Lock()
	delete(p.set.jobs, p)
	p.set.mu.Unlock()
}

var (
	progressLabels = []string{"kind", "account", "table", "job", "phase"}
	descJobItems   = prometheus.NewDesc("extenddb_backup_job_items",
		"Items a running job has written into its backup (kind=backup) or loaded into its target (kind=restore) so far.", progressLabels, nil)
	descJobBytes = prometheus.NewDesc("extenddb_backup_job_bytes",
		"Uncompressed item bytes a running job has written (backup) or loaded (restore) so far.", progressLabels, nil)
	descJobTotalItems = prometheus.NewDesc("extenddb_backup_job_total_items",
		"Items a running restore will load (known once the backup's manifest is read).", progressLabels, nil)
	descJobTotalBytes = prometheus.NewDesc("extenddb_backup_job_total_bytes",
		"Uncompressed item bytes a running restore will load.", progressLabels, nil)
)

// Describe implements prometheus.Collector.
func (s *progressSet) Describe(ch chan<- *prometheus.Desc) {
	ch <- descJobItems
	ch <- descJobBytes
	ch <- descJobTotalItems
	ch <- descJobTotalBytes
}

// Collect implements prometheus.Collector.
func (s *progressSet) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	jobs := make([]*jobProgress, 0, len(s.jobs))
	for p := range s.jobs {
		jobs = append(jobs, p)
	}
	s.mu.Unlock()
	for _, p := range jobs {
		l := []string{p.kind, p.account, p.table, p.job, *p.phase.Load()}
		ch <- prometheus.MustNewConstMetric(descJobItems, prometheus.GaugeValue, float64(p.items.Load()), l...)
		ch <- prometheus.MustNewConstMetric(descJobBytes, prometheus.GaugeValue, float64(p.bytes.Load()), l...)
		if n := p.totalItems.Load(); n > 0 {
			ch <- prometheus.MustNewConstMetric(descJobTotalItems, prometheus.GaugeValue, float64(n), l...)
			ch <- prometheus.MustNewConstMetric(descJobTotalBytes, prometheus.GaugeValue, float64(p.totalBytes.Load()), l...)
		}
	}
}
