package backup

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// Metrics of the jobs. Labels are bounded: the kind of job and the cause
// of a failure, never a table or a backup (the log lines carry them),
// except the progress of running jobs (at most max_concurrent_jobs series
// of each, gone when the job ends).
type metrics struct {
	running      *prometheus.GaugeVec
	items        *prometheus.CounterVec
	bytes        *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	finished     *prometheus.CounterVec
	snapshotOpen prometheus.Histogram
	reconciled   *prometheus.CounterVec
	// skipped: items resumed restores did not load again (recorded
	// progress covered them); progressRecords: progress rows written.
	skipped         prometheus.Counter
	progressRecords prometheus.Counter
	progress        *progressSet // per running job (labels: its table and backup id)
}

// Job kinds and failure causes (label values).
const (
	kindBackup  = "backup"
	kindRestore = "restore"
	kindDelete  = "delete"
	kindExport  = "export"
	kindImport  = "import"

	causeStore    = "store"    // the store failed
	causeVerify   = "verify"   // a backup did not verify (restore)
	causeFenced   = "fenced"   // the claim was taken over
	causeShutdown = "shutdown" // the server stopped
	causeOther    = "other"
)

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{progress: newProgressSet(),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "extenddb_backup_jobs_running",
			Help: "Backup, restore and delete jobs running in this process."}, []string{"kind"}),
		items: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "extenddb_backup_items_total",
			Help: "Items written into backups (kind=backup) and loaded from them (kind=restore)."}, []string{"kind"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "extenddb_backup_bytes_total",
			Help: "Uncompressed item bytes written into backups (kind=backup) and read from them (kind=restore)."}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "extenddb_backup_job_duration_seconds",
			Help: "Duration of jobs that succeeded.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}, []string{"kind"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "extenddb_backup_jobs_finished_total",
			Help: "Jobs that ended, by kind and result (ok, or the cause of the failure: store, verify, fenced, shutdown, other)."}, []string{"kind", "result"}),
		snapshotOpen: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "extenddb_backup_snapshot_open_seconds",
			Help: "How long backups kept their table snapshot open.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 10)}),
		reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "extenddb_backup_reconciler_actions_total",
			Help: "Reconciler actions: failed_stale_backup, finished_delete, removed_orphans, resumed_restore, removed_spool, expired, resumed_export, restarted_import, failed_stale_import."}, []string{"action"}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_backup_restore_skipped_items_total",
			Help: "Items a resumed restore did not load again because its recorded progress covered them."}),
		progressRecords: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_backup_restore_progress_records_total",
			Help: "Progress records written by restore jobs (each after the batches it covers committed)."}),
	}
	for _, k := range []string{kindBackup, kindRestore, kindDelete, kindExport, kindImport} {
		m.running.WithLabelValues(k)
		m.finished.WithLabelValues(k, "ok")
	}
	if reg != nil {
		reg.MustRegister(m.running, m.items, m.bytes, m.duration, m.finished, m.snapshotOpen, m.reconciled, m.skipped, m.progressRecords, m.progress)
	}
	return m
}

// cause classifies a job's error for the failure metric.
func cause(ctx context.Context, err error) string {
	var fe *format.FileError
	switch {
	case errors.Is(context.Cause(ctx), errFenced) || errors.Is(err, errFenced):
		return causeFenced
	case ctx.Err() != nil:
		return causeShutdown
	case errors.Is(err, format.ErrSource):
		return causeStore
	case errors.As(err, &fe):
		return causeVerify
	case errors.Is(err, blobstore.ErrNotFound), errors.Is(err, blobstore.ErrUnhealthy):
		return causeStore
	}
	return causeOther
}

// end records a job's end.
func (m *metrics) end(kind string, start time.Time, result string) {
	m.running.WithLabelValues(kind).Dec()
	m.finished.WithLabelValues(kind, result).Inc()
	if result == "ok" {
		m.duration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	}
}
