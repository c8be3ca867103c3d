package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// CreateBackup takes a backup of a table (docs/backup-design.md section
// 4): within the call it opens the snapshot, which pins the backup's
// instant, mints the id and ARN from that instant and inserts the CREATING
// row with this server's claim; the job then runs in the background and
// flips the row to AVAILABLE (or FAILED). Errors are storage errors:
// KindTableNotFound, KindLimitExceeded (job slots or snapshots),
// KindUnavailable (store unhealthy or unreachable).
func (m *Manager) CreateBackup(ctx context.Context, account, table, name string) (*backend.BackupRecord, error) {
	return m.CreateBackupAs(ctx, account, table, name, Origin{Type: "USER"})
}

// Origin says who takes a backup: its BackupType (USER for CreateBackup,
// SYSTEM, AWS_BACKUP for a backup plan), the plan that took it, and when
// the reconciler deletes it (zero: never).
type Origin struct {
	Type      string
	Plan      string
	ExpiresAt time.Time
}

// CreateSystemBackup takes the SYSTEM backup of a table with
// point-in-time recovery that is being deleted (engine.BackupService).
func (m *Manager) CreateSystemBackup(ctx context.Context, account, table, name string, expiresAt time.Time) (*backend.BackupRecord, error) {
	return m.CreateBackupAs(ctx, account, table, name, Origin{Type: "SYSTEM", ExpiresAt: expiresAt})
}

// CreateBackupAs is CreateBackup for a backup of the given origin.
func (m *Manager) CreateBackupAs(ctx context.Context, account, table, name string, o Origin) (*backend.BackupRecord, error) {
	if m.ctx == nil {
		return nil, backend.Errorf(backend.KindUnavailable, "backup: the manager is not started")
	}
	if err := m.Healthy(ctx); err != nil {
		return nil, unavailable(err)
	}
	release, err := m.acquireSlot()
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			release()
		}
	}()
	snap, err := m.openSnapshot(ctx, account, table)
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
	arn := format.ARN{Partition: m.cfg.Partition, Region: m.cfg.Region, Account: account, Table: table, BackupID: id}
	if err := arn.Validate(); err != nil {
		return nil, backend.Wrap(backend.KindInternal, err, "backup: ARN")
	}
	desc, err := m.cfg.Describer.TableDescriptionJSON(snap.Table)
	if err != nil {
		return nil, backend.Wrap(backend.KindInternal, err, "backup: table description")
	}
	storeID := ""
	if p := m.storeID.Load(); p != nil {
		storeID = *p
	}
	rec, err := m.cat.InsertBackup(ctx, backend.InsertBackupParams{Record: backend.BackupRecord{
		ARN: arn.String(), Account: account, TableName: table, TableID: snap.Table.ID, BackupID: id,
		Name: name, Type: o.Type, Plan: o.Plan, ExpiresAt: o.ExpiresAt, Status: backend.BackupCreating, CreatedAt: at,
		TableDesc: snap.Table.Desc, StoreID: storeID, Prefix: prefixKey(account, table, id), Owner: m.cfg.Owner,
	}})
	if err != nil {
		return nil, err
	}
	started = true
	m.met.running.WithLabelValues(kindBackup).Inc()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer release()
		m.runBackup(snap, *rec, arn, desc)
	}()
	return rec, nil
}

// snapshotSlotWait bounds how long CreateBackup waits for one of the
// backend's open-snapshot slots (backend.SnapshotLimiter) before it
// answers LimitExceededException.
const snapshotSlotWait = 5 * time.Second

// openSnapshot opens the table's snapshot, waiting up to
// snapshotSlotWait while the backend's snapshots are all open: backups
// requested one after another hold a snapshot each until they finish,
// and a request a moment after two others should not fail for it. The
// snapshot's instant, which the backup records as its creation time, is
// when it opens.
func (m *Manager) openSnapshot(ctx context.Context, account, table string) (*backend.TableSnapshot, error) {
	deadline := time.Now().Add(snapshotSlotWait)
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 250*time.Millisecond) {
		snap, err := m.snaps.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: account, Name: table})
		if err == nil || !backend.IsKind(err, backend.KindLimitExceeded) || time.Now().Add(wait).After(deadline) {
			return snap, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

var errFenced = errors.New("backup: the job's claim was taken over (fenced)")

// keepClaim heartbeats a backup claim until ctx ends (see keepAlive).
func (m *Manager) keepClaim(ctx context.Context, cancel context.CancelCauseFunc, arn string, gen int64) {
	m.keepAlive(ctx, cancel, func(ctx context.Context) (bool, error) {
		res, err := m.cat.HeartbeatBackup(ctx, backend.HeartbeatBackupParams{ARN: arn, Owner: m.cfg.Owner, Generation: gen})
		return err == nil && res.Matched, err
	})
}

// keepAlive runs beat every HeartbeatInterval until ctx ends; when the
// claim cannot be confirmed (taken over, or not confirmed for
// StaleAfter) it cancels the job with the cause.
func (m *Manager) keepAlive(ctx context.Context, cancel context.CancelCauseFunc, beat func(context.Context) (bool, error)) {
	t := time.NewTicker(m.cfg.HeartbeatInterval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := beat(ctx)
		switch {
		case ok:
			last = time.Now()
		case err == nil:
			cancel(errFenced)
			return
		case time.Since(last) > m.cfg.StaleAfter:
			cancel(fmt.Errorf("backup: the claim could not be confirmed for %s: %w", m.cfg.StaleAfter, err))
			return
		}
	}
}

// runBackup is the backup job.
func (m *Manager) runBackup(snap *backend.TableSnapshot, rec backend.BackupRecord, arn format.ARN, desc []byte) {
	defer m.runs(rec.ARN, rec.Generation)()
	ctx, cancel := context.WithCancelCause(m.ctx)
	defer cancel(nil)
	go m.keepClaim(ctx, cancel, rec.ARN, rec.Generation)
	log := m.log.With("backup", rec.ARN)
	start := time.Now()
	result := "ok"
	defer func() { m.met.end(kindBackup, start, result) }()
	prog := m.met.progress.start(kindBackup, rec.Account, rec.TableName, rec.BackupID, "write")
	defer prog.done()
	res, err := m.writeBackup(ctx, snap, rec, arn, desc, prog)
	snap.Items.Close()
	m.met.snapshotOpen.Observe(time.Since(start).Seconds())
	if err == nil {
		m.met.items.WithLabelValues(kindBackup).Add(float64(res.Manifest.ItemCount))
		m.met.bytes.WithLabelValues(kindBackup).Add(float64(res.Manifest.UncompressedBytes))
		m.hook(PointBeforeAvailable)
		size, n := res.Manifest.UncompressedBytes, res.Manifest.ItemCount
		w, uerr := m.cat.UpdateBackup(context.WithoutCancel(ctx), backend.UpdateBackupParams{ARN: rec.ARN, Generation: rec.Generation,
			Status: backend.BackupCreating, NewStatus: backend.BackupAvailable, SizeBytes: &size, ItemCount: &n})
		switch {
		case uerr != nil:
			err = uerr
		case !w.Matched:
			result = causeFenced
			// Another server owns the row now; it decides what happens.
			log.Warn("backup finished but its claim was taken over; leaving the row to its new owner")
			return
		default:
			log.Info("backup available", "items", n, "bytes", size, "compressed_bytes", res.Manifest.CompressedBytes,
				"files", len(res.Manifest.DataFiles), "duration", time.Since(start))
			return
		}
	}
	result = cause(ctx, err)
	if c := context.Cause(ctx); c != nil && errors.Is(c, errFenced) {
		log.Warn("backup stopped: claim taken over")
		return
	}
	log.Error("backup failed", "err", err)
	prog.fail(err)
	m.failBackup(context.WithoutCancel(ctx), rec, err.Error())
}

// failBackup writes FAILED under the job's generation and, only when that
// write matched, deletes what the job uploaded.
func (m *Manager) failBackup(ctx context.Context, rec backend.BackupRecord, msg string) {
	w, err := m.cat.UpdateBackup(ctx, backend.UpdateBackupParams{ARN: rec.ARN, Generation: rec.Generation,
		Status: backend.BackupCreating, NewStatus: backend.BackupFailed, Message: &msg})
	if err != nil || !w.Matched {
		return
	}
	if err := m.st.DeletePrefix(ctx, rec.Prefix); err != nil {
		m.log.Warn("backup: removing a failed backup's objects", "backup", rec.ARN, "err", err)
	}
}

// writeBackup streams the snapshot into the format writer, whose sink
// uploads each object to the store as it is written.
func (m *Manager) writeBackup(ctx context.Context, snap *backend.TableSnapshot, rec backend.BackupRecord, arn format.ARN, desc []byte, prog *jobProgress) (*format.Result, error) {
	m.hook(PointSnapshotOpen)
	var marker *string
	if snap.Descriptor.Marker != "" {
		mk := snap.Descriptor.Marker
		marker = &mk
	}
	order := format.OrderUnordered
	if snap.KeyOrder {
		order = format.OrderKey
	}
	sink := &storeSink{st: m.st, m: m, prefix: format.PrefixOf(arn)}
	if p := rec.Prefix + "/"; p != sink.prefix {
		// A point-in-time recovery base: the backup names its files
		// under its ARN's prefix, the store keeps them under the base's.
		sink.to = p
	}
	w, err := format.NewWriter(ctx, sink, format.WriterConfig{
		ARN: arn, BackupName: rec.Name,
		Source:          format.Source{Backend: m.cfg.Backend.Name(), ExtenddbVersion: m.cfg.Version},
		Snapshot:        format.Snapshot{Kind: snap.Descriptor.Kind, Marker: marker},
		SourceTable:     desc,
		ItemOrder:       order,
		TargetFileBytes: m.cfg.TargetFileBytes,
	})
	if err != nil {
		return nil, err
	}
	opened := time.Now()
	hooked := false
	// The snapshot is read ahead on another goroutine, a few batches at
	// most, so the backend's reads overlap with encoding and compression.
	// The reader must be gone before the stream is closed (it is not safe
	// for concurrent use): stop it and drain on every return.
	rctx, stop := context.WithCancel(ctx)
	batches := readAhead(rctx, snap.Items)
	defer func() {
		stop()
		for range batches {
		}
	}()
	for n := 0; ; {
		rb, ok := <-batches
		if !ok {
			break
		}
		if rb.err != nil {
			w.Abort(rb.err)
			return nil, jobErr(ctx, rb.err)
		}
		for i := range rb.rows {
			if m.cfg.MaxSnapshotAge > 0 && n%1024 == 0 && time.Since(opened) > m.cfg.MaxSnapshotAge {
				err := fmt.Errorf("backup: the snapshot stayed open longer than %s (backup.max_snapshot_age)", m.cfg.MaxSnapshotAge)
				w.Abort(err)
				return nil, err
			}
			n++
			// The row's key bytes are the item's key as storage keeps it:
			// the item is not decoded (the restore checks every line's
			// key again).
			item, pk, sk := rb.row(i)
			if err := w.AppendKeyBytes(item, pk, sk); err != nil {
				w.Abort(err)
				return nil, jobErr(ctx, err)
			}
			if !hooked {
				hooked = true
				m.hook(PointMidData)
			}
		}
		prog.add(int64(rb.rows), int64(rb.itemBytes()))
		rb.free()
	}
	prog.setPhase("finish")
	res, err := w.Finish()
	if err != nil {
		w.Abort(err)
		return nil, jobErr(ctx, err)
	}
	return res, nil
}

// jobErr prefers the job's cancellation cause (fenced, shut down).
func jobErr(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil {
		return c
	}
	return err
}

// storeSink is the format writer's sink: every object is streamed into
// blobstore.Put through a pipe, so it is uploaded while it is written and
// published (atomically) when the writer closes it.
type storeSink struct {
	st     blobstore.Store
	m      *Manager
	prefix string
	// to, when set, replaces prefix in the keys stored.
	to string
}

func (s *storeSink) Create(ctx context.Context, key string) (io.WriteCloser, error) {
	switch key {
	case format.ManifestFilesKey(s.prefix):
		s.m.hook(PointBeforeManifest)
	case format.SidecarKey(s.prefix):
		s.m.hook(PointBeforeSidecar)
	}
	if s.to != "" {
		key = s.to + strings.TrimPrefix(key, s.prefix)
	}
	return blobstore.NewUpload(ctx, s.st, key), nil
}

// rowBatch is a batch of rows read ahead from a snapshot, copied into one
// buffer (item, PK, SK of row i at ends[3i..3i+3]), or the error that
// ended the stream.
type rowBatch struct {
	buf  []byte
	ends []int
	rows int
	err  error
	pool *sync.Pool
}

func (b *rowBatch) add(r backend.Row) {
	for _, p := range [3][]byte{r.Item, r.PK, r.SK} {
		b.buf = append(b.buf, p...)
		b.ends = append(b.ends, len(b.buf))
	}
	b.rows++
}

// row returns row i's item and key bytes (valid until free).
func (b *rowBatch) row(i int) (item, pk, sk []byte) {
	start := 0
	if i > 0 {
		start = b.ends[3*i-1]
	}
	e := b.ends[3*i : 3*i+3]
	return b.buf[start:e[0]:e[0]], b.buf[e[0]:e[1]:e[1]], b.buf[e[1]:e[2]:e[2]]
}

// itemBytes is the size of the batch's data file lines.
func (b *rowBatch) itemBytes() int {
	n := b.rows * (len(format.LinePrefix) + len(format.LineSuffix))
	for i := 0; i < b.rows; i++ {
		start := 0
		if i > 0 {
			start = b.ends[3*i-1]
		}
		n += b.ends[3*i] - start
	}
	return n
}

// free returns the batch's buffers for reuse by the reader.
func (b *rowBatch) free() {
	if b.pool != nil && cap(b.buf) <= 4*readAheadBytes {
		b.buf, b.ends, b.rows, b.err = b.buf[:0], b.ends[:0], 0, nil
		b.pool.Put(b)
	}
}

// readAheadBytes and readAheadDepth bound what is read ahead: a batch
// closes at readAheadBytes of rows (or readAheadRows rows) and at most
// depth+2 batches exist at once.
const (
	readAheadBytes = 1 << 20
	readAheadRows  = 4096
	readAheadDepth = 2
)

// readAhead drains a snapshot stream on its own goroutine into batches of
// copied rows; the channel closes after the last batch (or an error
// batch). It stops when ctx ends.
func readAhead(ctx context.Context, s *backend.SnapshotStream) <-chan *rowBatch {
	out := make(chan *rowBatch, readAheadDepth)
	pool := &sync.Pool{New: func() any { return &rowBatch{buf: make([]byte, 0, readAheadBytes+64<<10)} }}
	go func() {
		defer close(out)
		for {
			b := pool.Get().(*rowBatch)
			b.pool = pool
			eof := false
			for len(b.buf) < readAheadBytes && b.rows < readAheadRows {
				row, err := s.Next(ctx)
				if err == io.EOF {
					eof = true
					break
				}
				if err != nil {
					b.err = err
					break
				}
				b.add(row)
			}
			if b.rows == 0 && b.err == nil {
				return
			}
			last := b.err != nil || eof // b belongs to the consumer once sent
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
			if last {
				return
			}
		}
	}()
	return out
}
