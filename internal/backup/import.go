package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/errgroup"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// Imports (ImportTable; docs/exports.md "Importing", ADR 0050): the
// engine creates the new table in CREATING, marked with the import's id;
// the job reads every object of the bucket whose key starts with
// S3KeyPrefix, decompresses it, parses its items (DynamoDB JSON lines,
// Ion or CSV), checks each against the table (keys, size), writes the
// good ones in batches as restores do, and flips the table ACTIVE. As on
// the service, an item that fails its checks is counted (ErrorCount) and
// logged with its object and line, the others are imported, and the
// import ends FAILED (ItemValidationError) when any item failed; a source
// that cannot be read (no bucket) ends FAILED with no table.

// KindImport is the job catalog kind of imports.
const KindImport = "import"

// Import statuses, as on the wire.
const (
	ImportInProgress = "IN_PROGRESS"
	ImportCompleted  = "COMPLETED"
	ImportFailed     = "FAILED"
)

// Importer is what imports need of the engine: the description of the
// imported table once loaded (ACTIVE), and whether a table is the target
// of an import.
type Importer interface {
	FinishImport(t *backend.Table) ([]byte, error)
	IsImportTarget(t *backend.Table, importID string) bool
}

// ImportDescription is an import row's payload: DynamoDB's
// ImportTableDescription in its wire form; the job reads the fields it
// needs and keeps the others (Extra) as the engine wrote them.
type ImportDescription struct {
	ImportArn            string          `json:"ImportArn"`
	ImportStatus         string          `json:"ImportStatus"`
	TableArn             string          `json:"TableArn"`
	TableId              string          `json:"TableId,omitempty"`
	ClientToken          string          `json:"ClientToken,omitempty"`
	S3BucketSource       S3BucketSource  `json:"S3BucketSource"`
	InputFormat          string          `json:"InputFormat"`
	InputFormatOptions   json.RawMessage `json:"InputFormatOptions,omitempty"`
	InputCompressionType string          `json:"InputCompressionType"`
	TableCreation        json.RawMessage `json:"TableCreationParameters,omitempty"`
	StartTime            float64         `json:"StartTime,omitempty"`
	EndTime              float64         `json:"EndTime,omitempty"`
	ProcessedSizeBytes   *int64          `json:"ProcessedSizeBytes,omitempty"`
	ProcessedItemCount   int64           `json:"ProcessedItemCount"`
	ImportedItemCount    int64           `json:"ImportedItemCount"`
	ErrorCount           int64           `json:"ErrorCount"`
	FailureCode          string          `json:"FailureCode,omitempty"`
	FailureMessage       string          `json:"FailureMessage,omitempty"`
}

// S3BucketSource is where an import reads.
type S3BucketSource struct {
	S3Bucket      string `json:"S3Bucket"`
	S3BucketOwner string `json:"S3BucketOwner,omitempty"`
	S3KeyPrefix   string `json:"S3KeyPrefix,omitempty"`
}

// ImportRequest is what StartImport needs: the target table, the
// description's request fields, the key attributes' types (for CSV) and
// the function that creates the target in CREATING marked with the
// import id.
type ImportRequest struct {
	Account, Table string
	Desc           ImportDescription
	KeyTypes       map[string]string
	Create         func(ctx context.Context, importID string) (*backend.Table, error)
}

// DefaultImportMaxErrors is Config.ImportMaxErrors's default.
const DefaultImportMaxErrors = 1000

// tooManyErrors is the failure of an import that met more bad items than
// Config.ImportMaxErrors.
func tooManyErrors(max int) *exportFailure {
	return &exportFailure{"ItemValidationError", fmt.Sprintf("More than %d items failed validation checks and were not imported (backup.import_max_errors); the import stopped and its table was removed. Please check the server log for the object and line of each.", max)}
}

func (m *Manager) importMaxErrors() int {
	if m.cfg.ImportMaxErrors > 0 {
		return m.cfg.ImportMaxErrors
	}
	return DefaultImportMaxErrors
}

// validationFailure is the FailureMessage of an import with bad items,
// as the service words it.
const validationFailure = "Some of the items failed validation checks and were not imported. Please check the server log for the object and line of each."

// StartImport mints the import's id and ARN, records the IN_PROGRESS row
// with this server's claim, creates the target and starts the job.
func (m *Manager) StartImport(ctx context.Context, req ImportRequest) (*ImportDescription, error) {
	if m.ctx == nil {
		return nil, backend.Errorf(backend.KindUnavailable, "backup: the manager is not started")
	}
	jobs := m.cfg.Backend.Capabilities().Jobs
	if jobs == nil || m.cfg.Importer == nil {
		return nil, backend.Errorf(backend.KindUnsupported, "imports need the job catalog, which the %s backend does not have", m.cfg.Backend.Name())
	}
	// The job waits for a job slot (backup.max_concurrent_jobs) rather
	// than refusing the request: AWS runs many exports and imports at
	// once, and a client has no way to retry one "later" on its own.
	now := time.Now().UTC().Truncate(time.Millisecond)
	id, err := format.MintBackupID(now, nil)
	if err != nil {
		return nil, err
	}
	d := req.Desc
	d.ImportArn = strings.TrimSuffix(d.TableArn, "/") + "/import/" + id
	d.ImportStatus, d.StartTime = ImportInProgress, epochSec(now)
	raw, _ := json.Marshal(d)
	res, err := jobs.InsertJob(ctx, backend.JobRecord{Kind: KindImport, ID: id, Account: req.Account, Status: ImportInProgress,
		CreatedAt: now, Payload: raw, Owner: m.cfg.Owner})
	if err != nil {
		return nil, err
	}
	row := *res.Record
	target, err := req.Create(ctx, id)
	if err != nil {
		// The row says why; the caller answers the error.
		d.ImportStatus, d.EndTime = ImportFailed, epochSec(time.Now())
		d.FailureCode, d.FailureMessage = "TableAlreadyExists", err.Error()
		raw, _ := json.Marshal(d)
		_, _ = jobs.UpdateJob(context.WithoutCancel(ctx), backend.UpdateJobParams{Kind: KindImport, ID: id, Generation: row.Generation,
			Status: ImportInProgress, NewStatus: ImportFailed, Payload: raw, Message: &d.FailureMessage})
		return nil, err
	}
	m.startImportJob(jobs, target, row, d, req.KeyTypes)
	return &d, nil
}

// startImportJob runs an import whose row this server claims, in the
// background, once a job slot is free.
func (m *Manager) startImportJob(jobs backend.JobCatalog, target *backend.Table, row backend.JobRecord, d ImportDescription, keyTypes map[string]string) {
	m.met.running.WithLabelValues(kindImport).Inc()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		if !m.waitSlot() {
			return // shutting down: the reconciler of a server takes the import over
		}
		defer m.releaseSlot()
		m.runImport(jobs, target, row, d, keyTypes)
	}()
}

// runImport loads the target and records the import's end.
func (m *Manager) runImport(jobs backend.JobCatalog, target *backend.Table, row backend.JobRecord, d ImportDescription, keyTypes map[string]string) {
	defer m.runs(KindImport+"/"+row.ID, row.Generation)()
	ctx, cancel := context.WithCancelCause(m.ctx)
	defer cancel(nil)
	go m.keepAlive(ctx, cancel, func(ctx context.Context) (bool, error) {
		res, err := jobs.HeartbeatJob(ctx, backend.HeartbeatJobParams{Kind: KindImport, ID: row.ID, Owner: m.cfg.Owner, Generation: row.Generation})
		return err == nil && res.Matched, err
	})
	start := time.Now()
	log := m.log.With("import", d.ImportArn, "table", target.Name)
	prog := m.met.progress.start(kindImport, row.Account, target.Name, row.ID, "load")
	counts, err := m.importObjects(ctx, target, &d, keyTypes, prog, log)
	prog.done()
	d.ProcessedItemCount, d.ImportedItemCount, d.ErrorCount = counts.processed.Load(), counts.imported.Load(), counts.errors.Load()
	size := counts.bytes.Load()
	d.ProcessedSizeBytes = &size
	status := ImportCompleted
	switch {
	case err != nil:
		// Nothing usable was read (or the job was stopped): no table.
		status = ImportFailed
		f := failureOf(err)
		d.FailureCode, d.FailureMessage = f.code, f.msg
		m.dropTarget(context.WithoutCancel(ctx), target)
		log.Warn("import failed", "code", d.FailureCode, "err", err)
	default:
		if ferr := m.finishImport(ctx, target); ferr != nil {
			status = ImportFailed
			d.FailureCode, d.FailureMessage = "UNKNOWN", ferr.Error()
			m.dropTarget(context.WithoutCancel(ctx), target)
			log.Warn("import failed", "err", ferr)
			break
		}
		if d.ErrorCount > 0 {
			status = ImportFailed
			d.FailureCode, d.FailureMessage = "ItemValidationError", validationFailure
		}
		log.Info("import finished", "status", status, "processed", d.ProcessedItemCount, "imported", d.ImportedItemCount,
			"errors", d.ErrorCount, "duration", time.Since(start))
	}
	d.ImportStatus, d.EndTime = status, epochSec(time.Now())
	raw, _ := json.Marshal(d)
	msg := d.FailureMessage
	res, uerr := jobs.UpdateJob(context.WithoutCancel(ctx), backend.UpdateJobParams{Kind: KindImport, ID: row.ID,
		Generation: row.Generation, Status: ImportInProgress, NewStatus: status, Payload: raw, Message: &msg})
	result := "ok"
	switch {
	case uerr != nil:
		result = causeOther
		log.Warn("import: recording its end", "err", uerr)
	case !res.Matched:
		result = causeFenced
	case err != nil:
		result = cause(ctx, err)
	}
	m.met.end(kindImport, start, result)
}

type importCounts struct{ processed, imported, errors, bytes atomic.Int64 }

// importObjects reads every object under the key prefix and loads its
// good items. Its error is the source's (unreadable); bad items are
// counted.
func (m *Manager) importObjects(ctx context.Context, target *backend.Table, d *ImportDescription, keyTypes map[string]string, prog *jobProgress, log interface {
	Warn(string, ...any)
}) (*importCounts, error) {
	counts := &importCounts{}
	src := d.S3BucketSource
	st, err := blobstore.OpenBucket(ctx, m.cfg.Buckets, src.S3Bucket, "")
	if err != nil {
		return counts, err
	}
	// S3KeyPrefix is a raw prefix of the keys ("data" matches data/ and
	// data2): walk from its last slash and match.
	dir := ""
	if i := strings.LastIndexByte(src.S3KeyPrefix, '/'); i > 0 {
		dir = src.S3KeyPrefix[:i]
	}
	var objects []blobstore.ObjectInfo
	if err := st.Walk(ctx, dir, func(o blobstore.ObjectInfo) error {
		if strings.HasPrefix(o.Key, src.S3KeyPrefix) {
			objects = append(objects, o)
		}
		return nil
	}); err != nil {
		return counts, err
	}
	load, err := importLoader(m.cfg.Restorer, target)
	if err != nil {
		return counts, err
	}
	var opts struct {
		Csv *struct {
			Delimiter  string   `json:"Delimiter"`
			HeaderList []string `json:"HeaderList"`
		} `json:"Csv"`
	}
	_ = json.Unmarshal(d.InputFormatOptions, &opts)
	w := newImportWriter(ctx, m, target.Ref(), prog)
	defer w.close()
	for _, o := range objects {
		if err := ctx.Err(); err != nil {
			return counts, context.Cause(ctx)
		}
		err := m.importObject(ctx, st, o, d, opts.Csv, keyTypes, load, w, counts, log)
		if err != nil && ctx.Err() != nil {
			return counts, context.Cause(ctx)
		}
		var f *exportFailure
		if errors.As(err, &f) {
			return counts, err // past backup.import_max_errors
		}
		if err != nil && w.wctx.Err() != nil {
			// A batch could not be written: the target's backend
			// failed, not the object.
			return counts, context.Cause(w.wctx)
		}
		if err != nil {
			// An object that cannot be read whole (a bad compression
			// stream, cut short): counted and logged like a bad item.
			if counts.errors.Add(1) > int64(m.importMaxErrors()) {
				return counts, tooManyErrors(m.importMaxErrors())
			}
			log.Warn("import: an object could not be read", "object", o.Key, "err", err)
		}
	}
	if err := w.flush(ctx); err != nil {
		return counts, err
	}
	counts.imported.Store(w.written.Load())
	return counts, nil
}

func (m *Manager) importObject(ctx context.Context, st blobstore.Store, o blobstore.ObjectInfo, d *ImportDescription, csvOpts *struct {
	Delimiter  string   `json:"Delimiter"`
	HeaderList []string `json:"HeaderList"`
}, keyTypes map[string]string, load itemLoad, w *importWriter, counts *importCounts,
	log interface{ Warn(string, ...any) }) error {
	rc, err := st.Get(ctx, o.Key)
	if err != nil {
		return err
	}
	defer rc.Close()
	counted := &countingReader{r: rc, n: &counts.bytes}
	var r io.Reader = counted
	switch d.InputCompressionType {
	case "GZIP":
		gz, err := gzip.NewReader(counted)
		if err != nil {
			return err
		}
		defer gz.Close()
		r = gz
	case "ZSTD":
		zr, err := zstd.NewReader(counted)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	maxErrors := m.importMaxErrors()
	each := func(line int, it attr.Item, perr error) error {
		counts.processed.Add(1)
		var raw []byte
		if perr == nil {
			// The limit is DynamoDB's item size (names and values as
			// the service counts them), not the stored encoding's.
			if size := attr.ItemSize(it); size > attr.MaxItemSize {
				perr = errors.New("the item is larger than 400 KB")
			} else {
				// The encoding is the size plus about a dozen bytes of
				// type descriptor and quotes per attribute.
				raw = attr.AppendItem(make([]byte, 0, size+16*len(it)+16), it)
			}
			if it == nil {
				it = attr.Item{} // {"Item":null}: stored as {}, refused for its missing key
			}
		}
		var pk, sk []byte
		var ch backend.Change
		if perr == nil {
			pk, sk, ch, perr = load(it, raw)
		}
		if perr != nil {
			n := counts.errors.Add(1)
			if n <= int64(maxErrors) {
				log.Warn("import: an item was not imported", "object", o.Key, "line", line, "err", perr)
				return nil
			}
			return tooManyErrors(maxErrors)
		}
		return w.add(ctx, backend.BulkItem{PK: pk, SK: sk, Change: ch}, int64(len(raw)))
	}
	read := func(fn lineFunc) error { return format.ReadDynamoJSONLines(r, fn) }
	switch d.InputFormat {
	case "ION":
		read = func(fn lineFunc) error { return format.ReadIonLines(r, fn) }
	case "CSV":
		co := format.CSVOptions{KeyTypes: keyTypes}
		if csvOpts != nil {
			co.Delimiter, co.HeaderList = csvOpts.Delimiter, csvOpts.HeaderList
		}
		read = func(fn lineFunc) error { return format.ReadCSV(r, co, fn) }
	}
	return pipeLines(read, each)
}

// lineFunc takes one parsed line of an import: its item, or its error.
type lineFunc = func(line int, it attr.Item, err error) error

// pipeChunk is the number of parsed lines pipeLines hands over at once.
const pipeChunk = 128

var errPipeStopped = errors.New("import: stopped")

// pipeLines runs read (decompressing and parsing an object) on a
// goroutine of its own and each on the caller's, on the lines in their
// order, handed over in chunks of pipeChunk, so that parsing overlaps
// checking and loading. The first error of each stops read and is
// answered; otherwise read's error, once each had every line read
// parsed before it. At most three chunks are held at once.
func pipeLines(read func(lineFunc) error, each lineFunc) error {
	type parsed struct {
		line int
		it   attr.Item
		err  error
	}
	chunks := make(chan []parsed, 1)
	stop := make(chan struct{})
	var rerr error
	go func() {
		defer close(chunks)
		chunk := make([]parsed, 0, pipeChunk)
		send := func() bool {
			select {
			case chunks <- chunk:
				chunk = make([]parsed, 0, pipeChunk)
				return true
			case <-stop:
				return false
			}
		}
		rerr = read(func(line int, it attr.Item, err error) error {
			chunk = append(chunk, parsed{line, it, err})
			if len(chunk) == pipeChunk && !send() {
				return errPipeStopped
			}
			return nil
		})
		if len(chunk) > 0 {
			send()
		}
	}()
	var err error
	for c := range chunks {
		for i := 0; i < len(c) && err == nil; i++ {
			if err = each(c[i].line, c[i].it, c[i].err); err != nil {
				close(stop)
			}
		}
	}
	if err != nil {
		return err
	}
	return rerr
}

// itemLoad turns a decoded item and its canonical encoding into its
// key and storage write.
type itemLoad = func(it attr.Item, raw []byte) (pk, sk []byte, ch backend.Change, err error)

// importLoader is the Restorer's loader of decoded items, or its loader
// of encoded items when it has no other.
func importLoader(r Restorer, target *backend.Table) (itemLoad, error) {
	if d, ok := r.(DecodedIndexer); ok {
		return d.DecodedItemLoader(target)
	}
	load, err := r.ItemLoader(target)
	if err != nil {
		return nil, err
	}
	return func(_ attr.Item, raw []byte) ([]byte, []byte, backend.Change, error) { return load(raw) }, nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// importWriter writes an import's items in batches, as restores do: the
// backend's bulk loader (batches of restoreBatchFor items), item by item
// on a backend whose only atomic write is one item's, else a transaction
// of blind puts; restoreWriters batches are written at once while the
// objects are read and parsed. A key seen twice keeps its last item: a
// batch holds each key once, and an item whose key is in a batch still
// being written waits for that batch.
type importWriter struct {
	m     *Manager
	ref   backend.TableRef
	prog  *jobProgress
	size  int
	batch []backend.BulkItem
	bytes int64

	written atomic.Int64
	wctx    context.Context
	stop    context.CancelCauseFunc
	work    chan importWork
	writers errgroup.Group
	started bool
	closed  bool

	// inflight counts the keys of the batches sent to the writers and
	// not yet written; cond signals a batch's end.
	mu       sync.Mutex
	cond     *sync.Cond
	inflight map[string]int
}

type importWork struct {
	items []backend.BulkItem
	bytes int64
}

func newImportWriter(ctx context.Context, m *Manager, ref backend.TableRef, prog *jobProgress) *importWriter {
	w := &importWriter{m: m, ref: ref, prog: prog, size: restoreBatchFor(m.cfg.Backend),
		work: make(chan importWork), inflight: map[string]int{}}
	w.cond = sync.NewCond(&w.mu)
	w.wctx, w.stop = context.WithCancelCause(ctx)
	return w
}

func importKey(pk, sk []byte) string { return string(pk) + "\x00" + string(sk) }

func (w *importWriter) add(ctx context.Context, it backend.BulkItem, size int64) error {
	for i := range w.batch {
		if string(w.batch[i].PK) == string(it.PK) && string(w.batch[i].SK) == string(it.SK) {
			w.batch[i] = it // a batch writes each key once
			w.bytes += size
			return nil
		}
	}
	if w.started {
		k := importKey(it.PK, it.SK)
		w.mu.Lock()
		for w.inflight[k] > 0 && w.wctx.Err() == nil {
			w.cond.Wait()
		}
		w.mu.Unlock()
		if err := w.wctx.Err(); err != nil {
			return context.Cause(w.wctx)
		}
	}
	w.batch = append(w.batch, it)
	w.bytes += size
	if len(w.batch) >= w.size {
		return w.send(ctx)
	}
	return nil
}

// send hands the batch to the writers, starting them at the first.
func (w *importWriter) send(ctx context.Context) error {
	if len(w.batch) == 0 {
		return nil
	}
	if !w.started {
		w.started = true
		for range restoreWriters {
			w.writers.Go(func() error {
				for b := range w.work {
					err := w.write(w.wctx, b)
					w.mu.Lock()
					for _, it := range b.items {
						k := importKey(it.PK, it.SK)
						if w.inflight[k]--; w.inflight[k] <= 0 {
							delete(w.inflight, k)
						}
					}
					w.cond.Broadcast()
					w.mu.Unlock()
					if err != nil {
						w.stop(err)
						w.mu.Lock()
						w.cond.Broadcast()
						w.mu.Unlock()
						return err
					}
				}
				return nil
			})
		}
	}
	b := importWork{items: w.batch, bytes: w.bytes}
	w.mu.Lock()
	for _, it := range b.items {
		w.inflight[importKey(it.PK, it.SK)]++
	}
	w.mu.Unlock()
	w.batch, w.bytes = make([]backend.BulkItem, 0, w.size), 0
	select {
	case w.work <- b:
		return nil
	case <-w.wctx.Done():
		return context.Cause(w.wctx)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// flush sends the last batch and waits for the writers.
func (w *importWriter) flush(ctx context.Context) error {
	err := w.send(ctx)
	if werr := w.close(); werr != nil {
		return werr
	}
	return err
}

// close ends the writers (once) and answers their first error.
func (w *importWriter) close() error {
	if !w.closed {
		w.closed = true
		close(w.work)
	}
	err := w.writers.Wait()
	w.stop(nil)
	return err
}

// write writes one batch, again after a transient backend error.
func (w *importWriter) write(ctx context.Context, b importWork) error {
	caps := w.m.cfg.Backend.Capabilities()
	var err error
	for attempt := 0; ; attempt++ {
		switch {
		case caps.PerItemAtomic:
			err = w.m.writeEach(ctx, blindPuts(w.ref, b.items))
		case caps.Bulk != nil:
			err = caps.Bulk.BulkLoad(ctx, backend.BulkLoadParams{Table: w.ref, Items: b.items})
		default:
			_, err = w.m.cfg.Backend.TransactWrite(ctx, backend.TransactWriteParams{Ops: blindPuts(w.ref, b.items)})
		}
		if err == nil || !backend.IsKind(err, backend.KindUnavailable) || attempt >= restoreRetries || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * restoreRetryPause)
	}
	if err != nil {
		return err
	}
	w.written.Add(int64(len(b.items)))
	w.prog.add(int64(len(b.items)), b.bytes)
	return nil
}

// finishImport flips the target ACTIVE.
func (m *Manager) finishImport(ctx context.Context, target *backend.Table) error {
	_, err := m.cfg.Backend.UpdateTable(ctx, backend.UpdateTableParams{Account: target.Account, Name: target.Name,
		Fn: func(old *backend.Table) ([]byte, error) {
			if old.ID != target.ID {
				return nil, errors.New("import: the target table was replaced")
			}
			return m.cfg.Importer.FinishImport(old)
		}})
	return err
}

// reconcileImports takes over IN_PROGRESS imports whose claim is stale
// (their server stopped) and runs them again from the start: the partial
// target is replaced by an empty one of the same description (CREATING,
// marked with the import), which also fences the dead attempt's writes
// (they name the old table), and the objects are read again. An import
// whose target is gone or no longer its own ends FAILED.
func (m *Manager) reconcileImports(ctx context.Context) error {
	jobs := m.cfg.Backend.Capabilities().Jobs
	if jobs == nil || m.cfg.Importer == nil {
		return nil
	}
	rows, err := jobs.ListJobs(ctx, backend.ListJobsParams{Kind: KindImport, Statuses: []string{ImportInProgress}})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rows {
		if m.ownLive(KindImport+"/"+r.ID, r.Owner, r.Generation) {
			continue
		}
		res, err := jobs.ClaimJob(ctx, backend.ClaimJobParams{Kind: KindImport, ID: r.ID, Owner: m.cfg.Owner, Generation: r.Generation,
			Status: ImportInProgress, StaleAfter: m.cfg.StaleAfter})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !res.Matched {
			continue
		}
		var d ImportDescription
		_ = json.Unmarshal(res.Record.Payload, &d)
		name := d.TableArn[strings.LastIndexByte(d.TableArn, '/')+1:]
		msg := "the server running the import stopped, and its table is gone"
		if t, err := m.cfg.Backend.GetTable(ctx, backend.GetTableParams{Account: r.Account, Name: name}); err == nil &&
			m.cfg.Importer.IsImportTarget(t.Table, r.ID) {
			target, err := m.emptyTarget(ctx, t.Table)
			if err == nil {
				d.ProcessedItemCount, d.ImportedItemCount, d.ErrorCount, d.ProcessedSizeBytes = 0, 0, 0, nil
				m.met.reconciled.WithLabelValues("restarted_import").Inc()
				m.log.Warn("backup reconciler: an import's owner stopped; importing again into an empty table",
					"import", r.ID, "owner", r.Owner, "table", name)
				m.startImportJob(jobs, target, *res.Record, d, importKeyTypes(d.TableCreation))
				continue
			}
			msg = "the server running the import stopped, and its table could not be emptied: " + err.Error()
			m.dropTarget(ctx, t.Table)
		}
		d.ImportStatus, d.EndTime = ImportFailed, epochSec(time.Now())
		d.FailureCode, d.FailureMessage = "UNKNOWN", msg
		raw, _ := json.Marshal(d)
		if _, err := jobs.UpdateJob(ctx, backend.UpdateJobParams{Kind: KindImport, ID: r.ID, Generation: res.Record.Generation,
			Status: ImportInProgress, NewStatus: ImportFailed, Payload: raw, Message: &msg}); err != nil {
			errs = append(errs, err)
		}
		m.met.reconciled.WithLabelValues("failed_stale_import").Inc()
	}
	return errors.Join(errs...)
}

// emptyTarget replaces an import's partial target by an empty table of
// the same description (a new table id: writes naming the old one fail).
func (m *Manager) emptyTarget(ctx context.Context, t *backend.Table) (*backend.Table, error) {
	if _, err := m.cfg.Backend.DeleteTable(ctx, backend.DeleteTableParams{Account: t.Account, Name: t.Name}); err != nil {
		return nil, err
	}
	res, err := m.cfg.Backend.CreateTable(ctx, backend.CreateTableParams{Account: t.Account, Name: t.Name, Desc: t.Desc})
	if err != nil {
		return nil, err
	}
	return res.Table, nil
}

// importKeyTypes reads the key attributes' types (for CSV) from an
// import's TableCreationParameters.
func importKeyTypes(raw json.RawMessage) map[string]string {
	var p struct {
		AttributeDefinitions []struct{ AttributeName, AttributeType string }
	}
	_ = json.Unmarshal(raw, &p)
	out := map[string]string{}
	for _, ad := range p.AttributeDefinitions {
		out[ad.AttributeName] = ad.AttributeType
	}
	return out
}
