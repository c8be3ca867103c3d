package backup

import (
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	mu     sync.Mutex
	jobs   map[*jobProgress]struct{}
	failed []failedJob // the latest failures, oldest first
}

// failedJob is a job that ended FAILED, kept on /metrics for
// failedKeep so that a client following the job (the web console) can
// tell why it ended: a failed backup is not listed by the API and a failed
// restore's target table is removed.
type failedJob struct {
	kind, account, table, job, reason string
	at                                time.Time
}

const (
	failedKeep   = time.Hour
	failedMax    = 32  // series kept at most
	reasonMaxLen = 300 // bytes of the reason label
)

// fail records that the job ended FAILED because of reason.
func (s *progressSet) fail(kind, account, table, job, reason string, now time.Time) {
	if len(reason) > reasonMaxLen {
		reason = reason[:reasonMaxLen]
		for len(reason) > 0 && !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = append(s.failed, failedJob{kind: kind, account: account, table: table, job: job, reason: reason, at: now})
	s.prune(now)
}

// prune drops failures older than failedKeep or beyond failedMax.
func (s *progressSet) prune(now time.Time) {
	i := 0
	for i < len(s.failed) && (now.Sub(s.failed[i].at) > failedKeep || len(s.failed)-i > failedMax) {
		i++
	}
	s.failed = append(s.failed[:0], s.failed[i:]...)
}

// fail records p's job as FAILED because of err.
func (p *jobProgress) fail(err error) {
	if p != nil && err != nil {
		p.set.fail(p.kind, p.account, p.table, p.job, err.Error(), time.Now())
	}
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
	descJobFailed = prometheus.NewDesc("extenddb_backup_job_failed",
		"A job that ended FAILED in the last hour (at most 32): the Unix time it failed; reason is its error.",
		[]string{"kind", "account", "table", "job", "reason"}, nil)
	descJobTotalBytes = prometheus.NewDesc("extenddb_backup_job_total_bytes",
		"Uncompressed item bytes a running restore will load.", progressLabels, nil)
)

// Describe implements prometheus.Collector.
func (s *progressSet) Describe(ch chan<- *prometheus.Desc) {
	ch <- descJobItems
	ch <- descJobBytes
	ch <- descJobTotalItems
	ch <- descJobTotalBytes
	ch <- descJobFailed
}

// Collect implements prometheus.Collector.
func (s *progressSet) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	jobs := make([]*jobProgress, 0, len(s.jobs))
	for p := range s.jobs {
		jobs = append(jobs, p)
	}
	s.prune(time.Now())
	failed := append([]failedJob(nil), s.failed...)
	s.mu.Unlock()
	for _, f := range failed {
		ch <- prometheus.MustNewConstMetric(descJobFailed, prometheus.GaugeValue, float64(f.at.Unix()),
			f.kind, f.account, f.table, f.job, f.reason)
	}
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
