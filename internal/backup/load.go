package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/format"
)

// load writes a verified backup's items into the target, then, for a
// point-in-time restore (plan not nil), the replay's final state of the
// keys its records touch, and flips the target ACTIVE. The job's item
// order is the backup's items (those whose key the replay touches count
// without being written), then the replay's puts (each key's last
// record, when it has a new image, in Seq order).
func (m *Manager) load(ctx context.Context, b backend.BackupRecord, bk *format.Backup, plan *PITRPlan, target *backend.Table, job backend.RestoreRecord, beat func(context.Context) (bool, error), prog *jobProgress) (n, skip int64, err error) {
	prog.setPhase("load")
	m.met.bytes.WithLabelValues(kindRestore).Add(float64(bk.UncompressedBytes))
	// Load in atomic batches, with the index entries the target needs,
	// after the recorded progress (ADR 0027: the first job.Loaded items of
	// the backup, in its item order, are durable in the target).
	itemOf, err := m.cfg.Restorer.ItemLoader(target)
	if err != nil {
		return 0, 0, err
	}
	total := bk.ItemCount
	var rp *replay
	if plan != nil {
		rp = plan.Replay
		total += rp.puts
	}
	skip = job.Loaded
	if skip < 0 || skip > total {
		m.log.Warn("restore: the recorded progress is outside the backup; loading it from the start",
			"restore", job.ID, "loaded", skip, "items", bk.ItemCount)
		skip = 0
	}
	if skip > 0 {
		m.log.Info("restore resumed after its recorded progress", "restore", job.ID, "target", target.Name,
			"skipped_items", skip, "items", bk.ItemCount)
	}
	l := m.newLoader(ctx, b.ARN, target, job, beat, prog, skip)
	defer l.stop(nil)
	err = l.finish(ctx, l.feed(ctx, bk, rp, itemOf))
	n = l.n
	if err != nil {
		return n, skip, err
	}
	if l.pos != total || plan == nil && skip+n != total {
		return n, skip, fmt.Errorf("restore: loaded %d items (%d skipped as recorded), the manifest has %d", n, skip, bk.ItemCount)
	}
	// Every batch is durable: record it, so that a restart from here
	// loads nothing again.
	if err := m.recordProgress(ctx, job, l.marks); err != nil {
		return n, skip, err
	}
	return n, skip, m.activate(ctx, l.target, b.ARN, beat, prog)
}

// activate flips the target ACTIVE, only on this incarnation of the
// target (a moved version is refenced while the job holds its claim).
func (m *Manager) activate(ctx context.Context, target *backend.Table, arn string, beat func(context.Context) (bool, error), prog *jobProgress) error {
	prog.setPhase("activate")
	m.hook(PointRestoreBeforeActive)
	for attempt := 0; ; attempt++ {
		_, err := m.cfg.Backend.UpdateTable(ctx, backend.UpdateTableParams{Account: target.Account, Name: target.Name,
			Fn: func(old *backend.Table) ([]byte, error) {
				if old.ID != target.ID {
					return nil, errors.New("restore: the target table was replaced")
				}
				if old.Version != target.Version {
					return nil, errTargetMoved
				}
				return m.cfg.Restorer.FinishRestore(old)
			}})
		if !errors.Is(err, errTargetMoved) || attempt >= 3 {
			return err
		}
		cur, ferr := m.refence(ctx, target, arn, beat)
		if ferr != nil {
			return ferr
		}
		target = cur
	}
}

// A loader writes one restore's items into its target in batches. The
// first batch is written inline (its progress is recorded and the
// mid-load hook runs after it, with nothing else in flight; or at the end
// of the load when there is no batch to write); the rest by
// restoreWriters writers of an errgroup, batches in any order (a backup
// holds each key once, and every write is a blind put).
type loader struct {
	m     *Manager
	arn   string
	job   backend.RestoreRecord
	beat  func(context.Context) (bool, error)
	prog  *jobProgress
	marks *loadMark

	perItem   bool               // write item by item (writeEach)
	bulk      backend.BulkLoader // nil: one TransactWrite per batch
	batchSize int                // items per batch after the first
	name      string             // the target's name, for logs

	// mu guards target and ref, which move when a writer meets a moved
	// version and the job still holds its claim (refence).
	mu     sync.Mutex
	target *backend.Table
	ref    backend.TableRef

	// The writers: wctx ends with the first writer's error or when the
	// recorder finds the claim taken over (stop's cause).
	wctx    context.Context
	stop    context.CancelCauseFunc
	work    chan restoreWork
	writers errgroup.Group
	started bool
	recStop context.CancelFunc
	recDone chan struct{}

	// The batch being filled and the positions in the job's item order:
	// pos the next item's, flushed where the next batch starts (the end
	// of the last one), skip the items recorded before this run, n the
	// items this run loaded.
	batch                 []backend.BulkItem
	batchBytes, skipped   int64
	pos, flushed, skip, n int64
}

func (m *Manager) newLoader(ctx context.Context, arn string, target *backend.Table, job backend.RestoreRecord, beat func(context.Context) (bool, error), prog *jobProgress, skip int64) *loader {
	caps := m.cfg.Backend.Capabilities()
	l := &loader{m: m, arn: arn, job: job, beat: beat, prog: prog, marks: newLoadMark(skip),
		perItem: caps.PerItemAtomic, bulk: caps.Bulk, batchSize: restoreBatchFor(m.cfg.Backend), name: target.Name,
		target: target, ref: target.Ref(),
		work: make(chan restoreWork, restoreWriters), recDone: make(chan struct{}),
		skip: skip, flushed: skip}
	l.wctx, l.stop = context.WithCancelCause(ctx)
	return l
}

// feed reads the backup's items (and the replay's puts after them) in the
// job's item order, past the recorded progress, into batches.
func (l *loader) feed(ctx context.Context, bk *format.Backup, rp *replay, itemOf func(item []byte) (pk, sk []byte, ch backend.Change, err error)) error {
	err := bk.Items(ctx, func(r *format.Record) error {
		size := int64(len(format.LinePrefix) + len(r.Item) + len(format.LineSuffix))
		if l.pos < l.skip {
			l.pos++
			l.skipped += size
			return nil
		}
		if l.pos == l.skip && l.skip > 0 {
			l.prog.add(l.skip, l.skipped)
		}
		if rp != nil && rp.Touches(r.Key) {
			// The replay decides this key's state: the base's item is
			// counted in the job's order, not written.
			l.pos++
			return nil
		}
		pk, sk, ch, err := itemOf(bytes.Clone(r.Item))
		if err != nil {
			return fmt.Errorf("restore: item %d of %s: %w", r.Index, bk.DataFiles[r.File].Key, err)
		}
		return l.add(ctx, backend.BulkItem{PK: pk, SK: sk, Change: ch}, size)
	})
	if err == nil && rp != nil {
		// The replay's puts follow the backup's items in the job's order.
		err = rp.EachPut(func(img []byte) error {
			if l.pos < l.skip {
				l.pos++
				return nil
			}
			// The image is the replay's buffer: the change may keep it.
			pk, sk, ch, err := itemOf(bytes.Clone(img))
			if err != nil {
				return fmt.Errorf("restore: replayed item %d: %w", l.pos, err)
			}
			return l.add(ctx, backend.BulkItem{PK: pk, SK: sk, Change: ch}, int64(len(format.LinePrefix)+len(img)+len(format.LineSuffix)))
		})
	}
	if err == nil {
		err = l.flush(ctx)
	}
	if err == nil && l.n == 0 && l.skip > 0 {
		l.prog.add(l.skip, l.skipped) // every item was loaded before
	}
	if err == nil && !l.started {
		// Nothing to load (an empty backup, or every item recorded by
		// the former owner): the load step still passes its hook once.
		l.m.hook(PointRestoreMidLoad)
	}
	return err
}

// add appends an item to the batch and writes the batch once full.
func (l *loader) add(ctx context.Context, it backend.BulkItem, size int64) error {
	l.batch = append(l.batch, it)
	l.pos++
	l.n++
	l.batchBytes += size
	// The first batch of a run holds restoreBatch items whatever the
	// backend: the first progress record and the mid-load step come
	// after as many items everywhere (ADR 0027), and early.
	if len(l.batch) == l.batchSize || !l.started && len(l.batch) == restoreBatch {
		return l.flush(ctx)
	}
	return nil
}

// flush writes the batch: the first inline, the others to the writers.
func (l *loader) flush(ctx context.Context) error {
	if len(l.batch) == 0 {
		return nil
	}
	w := restoreWork{items: l.batch, bytes: l.batchBytes, start: l.flushed, end: l.pos}
	l.flushed = l.pos
	l.batch, l.batchBytes = make([]backend.BulkItem, 0, l.batchSize), 0
	if !l.started {
		if err := l.write(ctx, w); err != nil {
			return err
		}
		if err := l.m.recordProgress(ctx, l.job, l.marks); err != nil {
			return err
		}
		l.m.hook(PointRestoreMidLoad)
		l.startWriters()
		return nil
	}
	select {
	case l.work <- w:
		return nil
	case <-l.wctx.Done():
		return context.Cause(l.wctx)
	}
}

// startWriters starts the progress recorder and the writers.
func (l *loader) startWriters() {
	l.started = true
	var recCtx context.Context
	recCtx, l.recStop = context.WithCancel(l.wctx)
	go func() {
		defer close(l.recDone)
		l.m.recordLoop(recCtx, l.stop, l.job, l.marks)
	}()
	for range restoreWriters {
		l.writers.Go(func() error {
			for w := range l.work {
				if err := l.write(l.wctx, w); err != nil {
					l.stop(err)
					return err
				}
			}
			return nil
		})
	}
}

// finish waits for the writers and the recorder and answers the load's
// error: feedErr, unless a writer's error caused it (or came first), or
// the recorder's when it found the claim taken over.
func (l *loader) finish(ctx context.Context, feedErr error) error {
	close(l.work)
	werr := l.writers.Wait()
	if l.started {
		l.recStop()
		<-l.recDone
	}
	err := feedErr
	if werr != nil && (err == nil || errors.Is(err, werr) || context.Cause(l.wctx) == werr) {
		err = werr
	}
	if c := context.Cause(l.wctx); err == nil && c != nil && !errors.Is(c, context.Canceled) {
		err = c // the recorder found the claim taken over
	}
	return err
}

// write writes one batch, again after a transient backend error, and
// into the refenced target after a moved version.
func (l *loader) write(ctx context.Context, w restoreWork) error {
	tr := l.currentRef()
	for attempt, unavailable := 0, 0; ; {
		err := l.writeBatch(ctx, tr, w.items)
		if err == nil {
			l.prog.add(int64(len(w.items)), w.bytes)
			l.marks.done(w.start, w.end)
			return nil
		}
		if backend.IsKind(err, backend.KindUnavailable) && ctx.Err() == nil && unavailable < restoreRetries {
			// A transient backend error (a write that timed out on a
			// loaded server): the batch is written again (blind puts of
			// the same items), rather than failing the restore and
			// dropping its target.
			unavailable++
			l.m.log.Warn("restore: a batch write failed; retrying", "target", l.name, "attempt", unavailable, "err", err)
			t := time.NewTimer(time.Duration(unavailable) * restoreRetryPause)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
			continue
		}
		if !backend.IsKind(err, backend.KindTableVersion) || attempt >= 3 {
			return err
		}
		attempt++
		if tr, err = l.moved(ctx, tr); err != nil {
			return err
		}
	}
}

// writeBatch writes the items into table tr the backend's way: item by
// item, with its bulk loader (ADR 0032: atomic and fenced like
// TransactWrite, without reads, locks or change-log records), or in one
// TransactWrite.
func (l *loader) writeBatch(ctx context.Context, tr backend.TableRef, items []backend.BulkItem) error {
	switch {
	case l.perItem:
		return l.m.writeEach(ctx, blindPuts(tr, items))
	case l.bulk != nil:
		return l.bulk.BulkLoad(ctx, backend.BulkLoadParams{Table: tr, Items: items})
	default:
		_, err := l.m.cfg.Backend.TransactWrite(ctx, backend.TransactWriteParams{Ops: blindPuts(tr, items)})
		return err
	}
}

// currentRef reads the target's current reference.
func (l *loader) currentRef() backend.TableRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ref
}

// moved answers the reference to write with after a write into tr met a
// moved version: the target refenced, unless another writer did since.
func (l *loader) moved(ctx context.Context, tr backend.TableRef) (backend.TableRef, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if tr.Version == l.ref.Version { // nobody refenced since
		cur, err := l.m.refence(ctx, l.target, l.arn, l.beat)
		if err != nil {
			return tr, err
		}
		l.target, l.ref = cur, cur.Ref()
	}
	return l.ref, nil
}
