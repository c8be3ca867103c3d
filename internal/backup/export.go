package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/format/awsexport"
)

// Export jobs (docs/adr/0049-aws-format-exports.md): the engine inserts
// an export's row (JobCatalog, kind "export", IN_PROGRESS, claimed by
// this server) and hands it to RunExport; the job reads the table image
// at the export instant from the point-in-time history (the base and
// replay a point-in-time restore plans: PlanPITRRestore), writes it in
// AWS's layout to the bucket, and moves the row to COMPLETED or FAILED
// under its claim. A job whose server died is taken over by the
// reconciler of any server once its heartbeat is stale: the new owner
// removes the dead attempt's objects and runs the export again.

// Export row kind and statuses (engine.JobKindExport and its statuses).
const (
	jobKindExport    = "export"
	exportInProgress = "IN_PROGRESS"
	exportCompleted  = "COMPLETED"
	exportFailed     = "FAILED"
)

// Steps of an export where Config.Hook is called.
const (
	PointExportMidData = "export.mid-data" // the image is partly written
)

// ExportsConfig configures the export jobs.
type ExportsConfig struct {
	// Jobs keeps the export rows.
	Jobs backend.JobCatalog
	// Buckets says where the buckets exports name live ([s3]).
	Buckets blobstore.BucketConfig
	// MaxFileBytes bounds a data file's uncompressed bytes (default
	// awsexport.DefaultMaxFileBytes).
	MaxFileBytes int64
	// Latest answers the newest instant a table's history is shipped up
	// to (zero: not known here); a job waits until it reaches its
	// instant before reading the history. Nil: no waiting.
	Latest func(ref backend.TableRef, days int64) time.Time
	// WaitFor bounds that wait (default 5 minutes).
	WaitFor time.Duration
}

// Exports runs export jobs over a Manager (its store, claims, slots and
// reconciler).
type Exports struct {
	m   *Manager
	cfg ExportsConfig
	wg  sync.WaitGroup
}

// NewExports builds the export jobs and registers them with m's
// reconciler.
func NewExports(m *Manager, cfg ExportsConfig) *Exports {
	x := &Exports{m: m, cfg: cfg}
	m.mu.Lock()
	m.exports = x
	m.mu.Unlock()
	return x
}

// Owner names this server in the rows' claims.
func (x *Exports) Owner() string { return x.m.cfg.Owner }

// Wait waits for the jobs this process started (tests).
func (x *Exports) Wait() { x.wg.Wait() }

// exportJob is what the job reads of a row's payload (the engine's
// exportPayload, by member name).
type exportJob struct {
	ExportArn      string  `json:"ExportArn"`
	ExportID       string  `json:"ExportId"`
	TableArn       string  `json:"TableArn"`
	TableID        string  `json:"TableId"`
	StartTime      float64 `json:"StartTime"`
	S3Bucket       string  `json:"S3Bucket"`
	S3Prefix       *string `json:"S3Prefix"`
	S3SseAlgorithm string  `json:"S3SseAlgorithm"`
	S3SseKmsKeyID  *string `json:"S3SseKmsKeyId"`
	ExportFormat   string  `json:"ExportFormat"`
	HistoryPrefix  string  `json:"HistoryPrefix"`
	ExportTimeMs   int64   `json:"ExportTimeMs"`
	// An incremental export's type, period [FromMs, ToMs) and view.
	ExportTypeAsked string           `json:"ExportTypeAsked"`
	FromMs          int64            `json:"ExportFromTimeMs"`
	ToMs            int64            `json:"ExportToTimeMs"`
	View            string           `json:"ExportViewTypeAsked"`
	SourceRef       backend.TableRef `json:"SourceRef"`
	RecoveryDays    int64            `json:"RecoveryDays"`
	TimeDefault     bool             `json:"ExportTimeDefault"`
}

func (j *exportJob) prefix() string {
	if j.S3Prefix == nil {
		return ""
	}
	return *j.S3Prefix
}

// RunExport runs the job of a row claimed by this server in the
// background.
func (x *Exports) RunExport(rec backend.JobRecord) {
	x.wg.Add(1)
	x.m.wg.Add(1)
	go func() {
		defer x.wg.Done()
		defer x.m.wg.Done()
		x.run(rec)
	}()
}

// exportFailure is a job's failure as DescribeExport reports it.
type exportFailure struct {
	code, msg string
}

func (f *exportFailure) Error() string { return f.code + ": " + f.msg }

// failureOf classifies an error of an export or import job.
func failureOf(err error) *exportFailure {
	var f *exportFailure
	if errors.As(err, &f) {
		return f
	}
	s := err.Error()
	switch {
	case strings.Contains(s, "NoSuchBucket") || strings.Contains(s, "does not exist"):
		return &exportFailure{"S3NoSuchBucket", "The specified bucket does not exist (" + s + ")"}
	case strings.Contains(s, "AccessDenied") || strings.Contains(s, "permission denied"):
		return &exportFailure{"S3AccessDenied", "Access Denied (" + s + ")"}
	}
	return &exportFailure{"UNKNOWN", s}
}

func (x *Exports) run(rec backend.JobRecord) {
	m := x.m
	key := jobKindExport + "/" + rec.ID
	defer m.runs(key, rec.Generation)()
	ctx, cancel := context.WithCancelCause(m.ctx)
	defer cancel(nil)
	go m.keepAlive(ctx, cancel, func(ctx context.Context) (bool, error) {
		res, err := x.cfg.Jobs.HeartbeatJob(ctx, backend.HeartbeatJobParams{Kind: jobKindExport, ID: rec.ID, Owner: m.cfg.Owner, Generation: rec.Generation})
		return err == nil && res.Matched, err
	})
	log := m.log.With("export", rec.ID)
	var job exportJob
	if err := json.Unmarshal(rec.Payload, &job); err != nil {
		x.finish(ctx, rec, nil, &exportFailure{"UNKNOWN", "the export's row is unreadable: " + err.Error()})
		return
	}
	// A slot, waiting for one: the export was accepted, it runs when
	// this server has room.
	select {
	case m.slots <- struct{}{}:
		defer func() { <-m.slots }()
	case <-ctx.Done():
		return
	}
	m.met.running.WithLabelValues(kindExport).Inc()
	defer m.met.running.WithLabelValues(kindExport).Dec()
	res, err := x.export(ctx, &job)
	if err != nil {
		m.met.finished.WithLabelValues(kindExport, cause(ctx, err)).Inc()
	} else {
		m.met.finished.WithLabelValues(kindExport, "ok").Inc()
	}
	if ctx.Err() != nil {
		// Fenced or shut down: the row is someone else's, or the
		// reconciler of a later run takes it over.
		log.Warn("export stopped", "cause", context.Cause(ctx))
		return
	}
	if err != nil {
		log.Warn("export failed", "err", err)
		x.finish(ctx, rec, nil, failureOf(err))
		return
	}
	log.Info("export completed", "items", res.ItemCount, "files", len(res.Files))
	x.finish(ctx, rec, res, nil)
}

// export writes the image; on failure it removes what it wrote.
func (x *Exports) export(ctx context.Context, job *exportJob) (*awsexport.Result, error) {
	bst, err := blobstore.OpenBucket(ctx, x.cfg.Buckets, job.S3Bucket, "")
	if err != nil {
		return nil, err
	}
	// A taken-over job starts again: the dead attempt's objects go.
	if err := awsexport.Cleanup(ctx, bst, job.prefix(), job.ExportID); err != nil {
		return nil, err
	}
	if job.ExportTypeAsked == awsexport.TypeIncremental {
		return x.exportChanges(ctx, bst, job)
	}
	at := time.UnixMilli(job.ExportTimeMs)
	if err := x.waitShipped(ctx, job, at); err != nil {
		return nil, err
	}
	// The plan's replay spills into a spool directory of this server's.
	dir, err := x.m.newSpoolDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	plan, err := planPITRExport(ctx, x.m.st, job.HistoryPrefix, at, dir)
	if errors.Is(err, ErrRestoreTime) && job.TimeDefault {
		// Asked for within the first ship interval after point-in-time
		// recovery was turned on, before the history's first base: the
		// image is the first base's (the instant the history starts),
		// and ExportTime says so.
		if first, ferr := firstBaseTime(ctx, x.m.st, job.HistoryPrefix); ferr == nil && !first.IsZero() {
			at = first
			plan, err = planPITRExport(ctx, x.m.st, job.HistoryPrefix, at, dir)
		}
	}
	if err != nil {
		return nil, &exportFailure{"UNKNOWN", "the table's point-in-time history cannot be read at the export time: " + err.Error()}
	}
	defer plan.Close()
	w, err := awsexport.Create(ctx, bst, awsexport.Params{
		ExportArn: job.ExportArn, ExportID: job.ExportID, TableArn: job.TableArn, TableID: job.TableID,
		ExportTime: at, StartTime: time.UnixMilli(int64(job.StartTime * 1000)),
		S3Bucket: job.S3Bucket, S3Prefix: job.prefix(), S3SseAlgorithm: job.S3SseAlgorithm,
		S3SseKmsKeyID: deref(job.S3SseKmsKeyID), Format: job.ExportFormat, MaxFileBytes: x.cfg.MaxFileBytes,
	})
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*awsexport.Result, error) {
		w.Abort(err)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if cerr := awsexport.Cleanup(cctx, bst, job.prefix(), job.ExportID); cerr != nil {
			x.m.log.Warn("export: removing a failed export's objects", "export", job.ExportArn, "err", cerr)
		}
		return nil, err
	}
	if err := writeImage(ctx, plan, w, x.m.hook); err != nil {
		return fail(err)
	}
	res, err := w.Finish(ctx, time.Now())
	if err != nil {
		return fail(err)
	}
	return res, nil
}

// exportChanges writes an incremental export: for each item written in
// [From, To), one line with its key, its image at To (none when deleted),
// its image at From (NEW_AND_OLD_IMAGES; none when it did not exist) and
// the time of its last write in the period, read from the history's
// segments (verified as a restore reads them). The final state of the
// keys the period touches is held in memory, as a restore's replay is.
func (x *Exports) exportChanges(ctx context.Context, bst blobstore.Store, job *exportJob) (*awsexport.Result, error) {
	from, to := time.UnixMilli(job.FromMs), time.UnixMilli(job.ToMs)
	w, err := awsexport.Create(ctx, bst, awsexport.Params{
		ExportArn: job.ExportArn, ExportID: job.ExportID, TableArn: job.TableArn, TableID: job.TableID,
		StartTime: time.UnixMilli(int64(job.StartTime * 1000)),
		S3Bucket:  job.S3Bucket, S3Prefix: job.prefix(), S3SseAlgorithm: job.S3SseAlgorithm,
		S3SseKmsKeyID: deref(job.S3SseKmsKeyID), Format: job.ExportFormat, MaxFileBytes: x.cfg.MaxFileBytes,
		Incremental: &awsexport.Incremental{From: from, To: to, View: job.View},
	})
	if err != nil {
		return nil, err
	}
	type change struct {
		keys, old, new []byte
		micros         int64
	}
	changes := map[string]*change{}
	var order []string
	err = ReadHistory(ctx, x.m.st, job.HistoryPrefix, func(recs []format.PITRRecord) error {
		for _, r := range recs {
			ts := r.Time
			if ts == "" {
				ts = r.At
			}
			t, err := format.ParsePITRTime(ts)
			if err != nil {
				return fmt.Errorf("%w: record %d: bad Time", format.ErrSegment, r.Seq)
			}
			if !t.Before(to) {
				return errStopHistory
			}
			if t.Before(from) || r.Hidden || len(r.Keys) == 0 {
				continue
			}
			k := string(r.Keys)
			c := changes[k]
			if c == nil {
				c = &change{keys: r.Keys}
				if len(r.OldImage) > 0 && string(r.OldImage) != "null" {
					c.old = r.OldImage
				}
				changes[k] = c
				order = append(order, k)
			}
			c.new = nil
			if len(r.NewImage) > 0 && string(r.NewImage) != "null" {
				c.new = r.NewImage
			}
			c.micros = t.UnixMicro()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopHistory) {
		w.Abort(err)
		_ = awsexport.Cleanup(context.WithoutCancel(ctx), bst, job.prefix(), job.ExportID)
		return nil, &exportFailure{"UNKNOWN", "the table's point-in-time history cannot be read for the export period: " + err.Error()}
	}
	for _, k := range order {
		c := changes[k]
		if err := w.AddChange(ctx, awsexport.Change{Keys: c.keys, NewImage: c.new, OldImage: c.old, WriteMicros: c.micros}); err != nil {
			_ = awsexport.Cleanup(context.WithoutCancel(ctx), bst, job.prefix(), job.ExportID)
			return nil, err
		}
	}
	res, err := w.Finish(ctx, time.Now())
	if err != nil {
		_ = awsexport.Cleanup(context.WithoutCancel(ctx), bst, job.prefix(), job.ExportID)
		return nil, err
	}
	return res, nil
}

// firstBaseTime is the snapshot instant of a history's oldest base.
func firstBaseTime(ctx context.Context, st blobstore.Store, prefix string) (time.Time, error) {
	bases, err := listBases(ctx, st, prefix)
	if err != nil {
		return time.Time{}, err
	}
	var first time.Time
	for _, b := range bases {
		t, err := format.ParsePITRTime(b.SnapshotAt)
		if err == nil && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first, nil
}

// waitShipped waits until the source's history is shipped up to at.
func (x *Exports) waitShipped(ctx context.Context, job *exportJob, at time.Time) error {
	if x.cfg.Latest == nil || job.SourceRef.ID == 0 {
		return nil
	}
	limit := x.cfg.WaitFor
	if limit <= 0 {
		limit = 5 * time.Minute
	}
	deadline := time.Now().Add(limit)
	for {
		if l := x.cfg.Latest(job.SourceRef, job.RecoveryDays); !l.IsZero() && !l.Before(at.Truncate(time.Millisecond)) {
			return nil
		}
		if time.Now().After(deadline) {
			return &exportFailure{"UNKNOWN", fmt.Sprintf("the table's point-in-time history was not shipped up to the export time %s within %s",
				format.PITRTime(at), limit)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// writeImage writes the table as it was at the plan's instant: the
// base's items whose key no replayed record touches, then the final
// image of each key the records leave present (its last record's, in
// Seq order). The replay is on disk (pitr_replay.go); the base streams.
func writeImage(ctx context.Context, plan *PITRPlan, w *awsexport.Writer, hook func(string)) error {
	if err := writeBase(ctx, plan, w, hook); err != nil {
		return err
	}
	return plan.Replay.EachPut(func(img []byte) error {
		// The writer encodes the image before it returns.
		return w.Add(ctx, img)
	})
}

// exportBatch is how many of the base's items travel together from
// the base's reader to the export's encoder.
const exportBatch = 256

// writeBase writes the base's items that no replayed record touches.
// The base is read (zstd, line checks, hashes) on a goroutine of its own
// while this one encodes (DynamoDB JSON or Ion, gzip), so that the two
// halves use two cores; at most a few batches are in flight.
func writeBase(ctx context.Context, plan *PITRPlan, w *awsexport.Writer, hook func(string)) error {
	// The reader's context ends with this function; the writer's is the
	// job's (a data file it opens streams on after this returns).
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan [][]byte, 4)
	free := make(chan [][]byte, 6)
	var rerr error
	go func() {
		defer close(batches)
		var buf []byte
		var batch [][]byte
		rerr = plan.Backup.Items(rctx, func(rec *format.Record) error {
			if plan.Replay.Touches(rec.Key) {
				return nil
			}
			if batch == nil {
				select {
				case batch = <-free:
					batch, buf = batch[:0], nil
				default:
					batch = make([][]byte, 0, exportBatch)
				}
			}
			// The record's bytes are the reader's: copy them, many
			// items to one allocation.
			if cap(buf)-len(buf) < len(rec.Item) {
				buf = make([]byte, 0, max(64<<10, len(rec.Item)))
			}
			start := len(buf)
			buf = append(buf, rec.Item...)
			batch = append(batch, buf[start:len(buf):len(buf)])
			if len(batch) == exportBatch {
				select {
				case batches <- batch:
				case <-rctx.Done():
					return rctx.Err()
				}
				batch = nil
			}
			return nil
		})
		if rerr == nil && len(batch) > 0 {
			select {
			case batches <- batch:
			case <-rctx.Done():
			}
		}
	}()
	n := 0
	for batch := range batches {
		for _, it := range batch {
			if n++; n == 1 {
				hook(PointExportMidData)
			}
			if err := w.Add(ctx, it); err != nil {
				cancel()
				for range batches {
				}
				return err
			}
		}
		select {
		case free <- batch:
		default:
		}
	}
	return rerr
}

// finish writes the job's outcome to its row under its claim.
func (x *Exports) finish(ctx context.Context, rec backend.JobRecord, res *awsexport.Result, fail *exportFailure) {
	var pay map[string]any
	if err := json.Unmarshal(rec.Payload, &pay); err != nil || pay == nil {
		pay = map[string]any{}
	}
	end := float64(time.Now().UnixMilli()) / 1000
	pay["EndTime"] = end
	status := exportCompleted
	var msg *string
	if fail != nil {
		status = exportFailed
		pay["ExportStatus"] = exportFailed
		pay["FailureCode"] = fail.code
		pay["FailureMessage"] = fail.msg
		msg = &fail.msg
	} else {
		pay["ExportStatus"] = exportCompleted
		pay["ItemCount"] = res.ItemCount
		pay["BilledSizeBytes"] = res.BilledSizeBytes
		pay["ExportManifest"] = res.ManifestSummaryKey
		if !res.ExportTime.IsZero() {
			pay["ExportTime"] = epochSec(res.ExportTime)
		}
	}
	raw, err := json.Marshal(pay)
	if err != nil {
		x.m.log.Error("export: encoding the outcome", "export", rec.ID, "err", err)
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	r, err := x.cfg.Jobs.UpdateJob(wctx, backend.UpdateJobParams{Kind: jobKindExport, ID: rec.ID, Generation: rec.Generation,
		Status: exportInProgress, NewStatus: status, Payload: raw, Message: msg})
	switch {
	case err != nil:
		x.m.log.Warn("export: recording the outcome failed; the reconciler runs it again", "export", rec.ID, "err", err)
	case !r.Matched:
		x.m.log.Warn("export: the claim was lost before the outcome was recorded", "export", rec.ID)
	}
}

// reconcile takes over IN_PROGRESS exports whose claim is stale (their
// server stopped) and runs them again.
func (x *Exports) reconcile(ctx context.Context) error {
	rows, err := x.cfg.Jobs.ListJobs(ctx, backend.ListJobsParams{Kind: jobKindExport, Statuses: []string{exportInProgress}})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rows {
		if x.m.ownLive(jobKindExport+"/"+r.ID, r.Owner, r.Generation) {
			continue
		}
		res, err := x.cfg.Jobs.ClaimJob(ctx, backend.ClaimJobParams{Kind: jobKindExport, ID: r.ID, Owner: x.m.cfg.Owner,
			Generation: r.Generation, Status: exportInProgress, StaleAfter: x.m.cfg.StaleAfter})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !res.Matched {
			continue
		}
		x.m.met.reconciled.WithLabelValues("resumed_export").Inc()
		x.m.log.Warn("backup reconciler: an export's owner stopped; running it again", "export", r.ID, "owner", r.Owner)
		x.RunExport(*res.Record)
	}
	return errors.Join(errs...)
}

// epochSec is an instant as the wire's epoch seconds (millisecond
// precision).
func epochSec(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }
