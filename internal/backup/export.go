package backup

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store"
)

// Exports (ExportTableToPointInTime; docs/exports.md, ADR 0049): a job
// reads the table's snapshot, pinned when the export is requested, and
// writes AWS's export layout into the named bucket:
// <prefix>/AWSDynamoDB/<export id>/ with an empty _started, gzip data
// files under data/, manifest-files.json, manifest-summary.json and their
// .checksum files (the MD5 of each, hex). Its row is in the job catalog
// (kind "export"), its payload the DynamoDB ExportDescription.

// KindExport is the job catalog kind of exports.
const KindExport = "export"

// Export statuses, as on the wire.
const (
	ExportInProgress = "IN_PROGRESS"
	ExportCompleted  = "COMPLETED"
	ExportFailed     = "FAILED"
)

// ExportDescription is an export row's payload: DynamoDB's
// ExportDescription, in its wire form (times in epoch seconds).
type ExportDescription struct {
	ExportArn       string  `json:"ExportArn"`
	ExportStatus    string  `json:"ExportStatus"`
	StartTime       float64 `json:"StartTime,omitempty"`
	EndTime         float64 `json:"EndTime,omitempty"`
	ExportManifest  string  `json:"ExportManifest,omitempty"`
	TableArn        string  `json:"TableArn"`
	TableId         string  `json:"TableId,omitempty"`
	ExportTime      float64 `json:"ExportTime,omitempty"`
	ClientToken     string  `json:"ClientToken,omitempty"`
	S3Bucket        string  `json:"S3Bucket"`
	S3BucketOwner   string  `json:"S3BucketOwner,omitempty"`
	S3Prefix        string  `json:"S3Prefix,omitempty"`
	S3SseAlgorithm  string  `json:"S3SseAlgorithm,omitempty"`
	S3SseKmsKeyId   string  `json:"S3SseKmsKeyId,omitempty"`
	FailureCode     string  `json:"FailureCode,omitempty"`
	FailureMessage  string  `json:"FailureMessage,omitempty"`
	ExportFormat    string  `json:"ExportFormat"`
	ExportType      string  `json:"ExportType"`
	BilledSizeBytes *int64  `json:"BilledSizeBytes,omitempty"`
	ItemCount       *int64  `json:"ItemCount,omitempty"`
}

// ExportRequest is what StartExport needs: the source table and the
// description's request fields (ExportFormat, S3*, ClientToken, TableArn,
// TableId).
type ExportRequest struct {
	Account, Table string
	Desc           ExportDescription
}

// exportFileBytes closes a data file at this many uncompressed bytes.
const exportFileBytes = 256 << 20

func epochSec(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// StartExport opens the table's snapshot (which fixes ExportTime), mints
// the export id and ARN from it, records the IN_PROGRESS row with this
// server's claim and starts the job. Errors are storage errors
// (KindTableNotFound, KindLimitExceeded, KindUnavailable).
func (m *Manager) StartExport(ctx context.Context, req ExportRequest) (*ExportDescription, error) {
	if m.ctx == nil {
		return nil, storage.Errorf(storage.KindUnavailable, "backup: the manager is not started")
	}
	jobs := m.cfg.Backend.Capabilities().Jobs
	if jobs == nil {
		return nil, storage.Errorf(storage.KindUnsupported, "exports need the job catalog, which the %s backend does not have", m.cfg.Backend.Name())
	}
	// The job waits for a job slot (backup.max_concurrent_jobs) rather
	// than refusing the request: AWS runs many exports and imports at
	// once, and a client has no way to retry one "later" on its own.
	started := false
	snap, err := m.snaps.OpenTableSnapshot(ctx, storage.OpenSnapshotParams{Account: req.Account, Name: req.Table})
	if err != nil {
		return nil, err
	}
	defer func() {
		if !started {
			snap.Items.Close()
		}
	}()
	at := snap.At.UTC().Truncate(time.Millisecond)
	id, err := format.MintBackupID(at, nil)
	if err != nil {
		return nil, err
	}
	d := req.Desc
	d.ExportArn = strings.TrimSuffix(d.TableArn, "/") + "/export/" + id
	d.ExportStatus = ExportInProgress
	d.ExportTime = epochSec(at)
	d.StartTime = epochSec(time.Now())
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	res, err := jobs.InsertJob(ctx, storage.JobRecord{Kind: KindExport, ID: id, Account: req.Account, Status: ExportInProgress,
		CreatedAt: at, Payload: raw, Owner: m.cfg.Owner})
	if err != nil {
		return nil, err
	}
	if !res.Matched {
		return nil, storage.Errorf(storage.KindInternal, "export id %s minted twice", id)
	}
	started = true
	m.met.running.WithLabelValues(kindExport).Inc()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if !m.waitSlot() {
			snap.Items.Close()
			return // shutting down: the reconciler of a server fails the export
		}
		defer m.releaseSlot()
		m.runExport(jobs, snap, *res.Record, d)
	}()
	return &d, nil
}

// runExport writes the export and records its end.
func (m *Manager) runExport(jobs storage.JobCatalog, snap *storage.TableSnapshot, row storage.JobRecord, d ExportDescription) {
	defer m.runs(KindExport+"/"+row.ID, row.Generation)()
	ctx, cancel := context.WithCancelCause(m.ctx)
	defer cancel(nil)
	go m.keepAlive(ctx, cancel, func(ctx context.Context) (bool, error) {
		res, err := jobs.HeartbeatJob(ctx, storage.HeartbeatJobParams{Kind: KindExport, ID: row.ID, Owner: m.cfg.Owner, Generation: row.Generation})
		return err == nil && res.Matched, err
	})
	start := time.Now()
	log := m.log.With("export", d.ExportArn)
	prog := m.met.progress.start(kindExport, row.Account, d.TableArn[strings.LastIndexByte(d.TableArn, '/')+1:], row.ID, "write")
	items, bytes, manifest, err := m.writeExport(ctx, snap, row.ID, &d, prog)
	prog.done()
	snap.Items.Close()
	status := ExportCompleted
	if err != nil {
		status = ExportFailed
		d.FailureCode, d.FailureMessage = exportFailure(err)
		log.Warn("export failed", "code", d.FailureCode, "err", err)
	} else {
		d.ItemCount, d.BilledSizeBytes, d.ExportManifest = &items, &bytes, manifest
		log.Info("export completed", "items", items, "bytes", bytes, "duration", time.Since(start))
	}
	d.ExportStatus, d.EndTime = status, epochSec(time.Now())
	raw, _ := json.Marshal(d)
	msg := d.FailureMessage
	res, uerr := jobs.UpdateJob(context.WithoutCancel(ctx), storage.UpdateJobParams{Kind: KindExport, ID: row.ID,
		Generation: row.Generation, Status: ExportInProgress, NewStatus: status, Payload: raw, Message: &msg})
	result := "ok"
	switch {
	case uerr != nil:
		result = causeOther
		log.Warn("export: recording its end", "err", uerr)
	case !res.Matched:
		result = causeFenced
	case err != nil:
		result = cause(ctx, err)
	}
	m.met.end(kindExport, start, result)
}

// exportFailure maps an export's error to DynamoDB's FailureCode and a
// message.
func exportFailure(err error) (code, msg string) {
	msg = err.Error()
	switch {
	case errors.Is(err, errNoBucket) || strings.Contains(msg, "NoSuchBucket"):
		return "S3NoSuchBucket", msg
	case strings.Contains(msg, "AccessDenied") || strings.Contains(msg, "StatusCode: 403"):
		return "S3AccessDenied", msg
	}
	return "UNKNOWN", msg
}

var errNoBucket = errors.New("the bucket does not exist")

// writeExport writes the export's objects; it answers the item count,
// the uncompressed bytes and the manifest-summary key.
func (m *Manager) writeExport(ctx context.Context, snap *storage.TableSnapshot, id string, d *ExportDescription, prog *jobProgress) (int64, int64, string, error) {
	st, err := store.OpenBucket(ctx, m.cfg.Buckets, d.S3Bucket, strings.Trim(d.S3Prefix, "/"))
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			err = fmt.Errorf("%w: %v", errNoBucket, err)
		}
		return 0, 0, "", err
	}
	dir := "AWSDynamoDB/" + id + "/"
	full := func(key string) string { // the key as S3 names it (manifests)
		if p := strings.Trim(d.S3Prefix, "/"); p != "" {
			return p + "/" + key
		}
		return key
	}
	if err := st.Put(ctx, dir+"_started", bytes.NewReader(nil)); err != nil {
		return 0, 0, "", err
	}
	ext := ".json.gz"
	if d.ExportFormat == "ION" {
		ext = ".ion.gz"
	}
	var files []format.AWSFileEntry
	var total, ubytes int64
	var f *exportFile
	closeFile := func() error {
		if f == nil {
			return nil
		}
		e, err := f.close()
		f = nil
		if err != nil {
			return err
		}
		e.DataFileS3Key = full(e.DataFileS3Key)
		files = append(files, e)
		return nil
	}
	fail := func(err error) (int64, int64, string, error) {
		if f != nil {
			f.abort(err)
		}
		return 0, 0, "", jobErr(ctx, err)
	}
	rctx, stop := context.WithCancel(ctx)
	batches := readAhead(rctx, snap.Items)
	defer func() {
		stop()
		for range batches {
		}
	}()
	var line []byte
	for {
		rb, ok := <-batches
		if !ok {
			break
		}
		if rb.err != nil {
			return fail(rb.err)
		}
		for i := range rb.rows {
			item, _, _ := rb.row(i)
			line = line[:0]
			if d.ExportFormat == "ION" {
				it, err := attr.DecodeItem(item)
				if err != nil {
					return fail(err)
				}
				line = format.AppendIonLine(line, it)
			} else {
				line = format.AppendLine(line, item)
			}
			if f != nil && f.ubytes+int64(len(line)) > exportFileBytes {
				if err := closeFile(); err != nil {
					return fail(err)
				}
			}
			if f == nil {
				if f, err = newExportFile(ctx, st, dir+"data/"+randomName()+ext, d.ExportFormat == "ION"); err != nil {
					return fail(err)
				}
			}
			if err := f.write(line); err != nil {
				return fail(err)
			}
			total++
			ubytes += int64(len(line))
		}
		prog.add(int64(rb.rows), int64(rb.itemBytes()))
		rb.free()
	}
	if err := closeFile(); err != nil {
		return fail(err)
	}
	var mf []byte
	for _, e := range files {
		b, _ := json.Marshal(e)
		mf = append(append(mf, b...), '\n')
	}
	if err := putWithChecksum(ctx, st, dir+"manifest-files", mf); err != nil {
		return fail(err)
	}
	summary := format.AWSSummary{
		Version: format.AWSManifestVersion, ExportArn: d.ExportArn,
		StartTime: format.FormatTime(timeOf(d.StartTime)), EndTime: format.FormatTime(time.Now()),
		TableArn: d.TableArn, TableID: optional(d.TableId), ExportTime: format.FormatTime(timeOf(d.ExportTime)),
		S3Bucket: optional(d.S3Bucket), S3Prefix: optional(d.S3Prefix), S3SseAlgorithm: optional(d.S3SseAlgorithm),
		S3SseKmsKeyID: optional(d.S3SseKmsKeyId), ManifestFilesS3Key: full(dir + "manifest-files.json"),
		BilledSizeBytes: ubytes, ItemCount: total, OutputFormat: d.ExportFormat, ExportType: "FULL_EXPORT",
	}
	sb, _ := json.Marshal(summary)
	if err := putWithChecksum(ctx, st, dir+"manifest-summary", append(sb, '\n')); err != nil {
		return fail(err)
	}
	return total, ubytes, full(dir + "manifest-summary.json"), nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func timeOf(sec float64) time.Time { return time.UnixMilli(int64(sec*1000 + 0.5)).UTC() }

// putWithChecksum writes name.json and name.checksum (the MD5 of the
// former, hex).
func putWithChecksum(ctx context.Context, st store.Store, name string, data []byte) error {
	if err := st.Put(ctx, name+".json", bytes.NewReader(data)); err != nil {
		return err
	}
	sum := md5.Sum(data)
	return st.Put(ctx, name+".checksum", strings.NewReader(hex.EncodeToString(sum[:])))
}

func randomName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString(b[:]), "="))
}

// exportFile is one gzip data file being uploaded through a pipe.
type exportFile struct {
	key    string
	pw     *io.PipeWriter
	gz     *gzip.Writer
	md5    hash.Hash
	done   chan error
	items  int64
	ubytes int64
}

func newExportFile(ctx context.Context, st store.Store, key string, ion bool) (*exportFile, error) {
	pr, pw := io.Pipe()
	f := &exportFile{key: key, pw: pw, md5: md5.New(), done: make(chan error, 1)}
	f.gz = gzip.NewWriter(io.MultiWriter(pw, f.md5))
	go func() {
		err := st.Put(ctx, key, pr)
		pr.CloseWithError(err)
		f.done <- err
	}()
	if ion {
		if _, err := f.gz.Write([]byte(format.IonVersionMarker)); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func (f *exportFile) write(line []byte) error {
	if _, err := f.gz.Write(line); err != nil {
		return err
	}
	f.items++
	f.ubytes += int64(len(line))
	return nil
}

func (f *exportFile) close() (format.AWSFileEntry, error) {
	err := f.gz.Close()
	f.pw.CloseWithError(err)
	if perr := <-f.done; err == nil {
		err = perr
	}
	return format.AWSFileEntry{ItemCount: f.items, MD5Checksum: base64.StdEncoding.EncodeToString(f.md5.Sum(nil)), DataFileS3Key: f.key}, err
}

func (f *exportFile) abort(err error) {
	f.pw.CloseWithError(err)
	<-f.done
}

// reconcileExports fails IN_PROGRESS exports whose claim is stale: their
// server stopped (an export is not resumed; its partial objects carry no
// manifest, which readers of AWS exports require).
func (m *Manager) reconcileExports(ctx context.Context) error {
	jobs := m.cfg.Backend.Capabilities().Jobs
	if jobs == nil {
		return nil
	}
	rows, err := jobs.ListJobs(ctx, storage.ListJobsParams{Kind: KindExport, Statuses: []string{ExportInProgress}})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rows {
		if m.ownLive(KindExport+"/"+r.ID, r.Owner, r.Generation) {
			continue
		}
		res, err := jobs.ClaimJob(ctx, storage.ClaimJobParams{Kind: KindExport, ID: r.ID, Owner: m.cfg.Owner, Generation: r.Generation,
			Status: ExportInProgress, StaleAfter: m.cfg.StaleAfter})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !res.Matched {
			continue
		}
		var d ExportDescription
		_ = json.Unmarshal(res.Record.Payload, &d)
		d.ExportStatus, d.EndTime = ExportFailed, epochSec(time.Now())
		d.FailureCode, d.FailureMessage = "UNKNOWN", "the server running the export stopped"
		raw, _ := json.Marshal(d)
		msg := d.FailureMessage
		if _, err := jobs.UpdateJob(ctx, storage.UpdateJobParams{Kind: KindExport, ID: r.ID, Generation: res.Record.Generation,
			Status: ExportInProgress, NewStatus: ExportFailed, Payload: raw, Message: &msg}); err != nil {
			errs = append(errs, err)
		}
		m.met.reconciled.WithLabelValues("failed_stale_export").Inc()
	}
	return errors.Join(errs...)
}
