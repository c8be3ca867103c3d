package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/format/awsimport"
	"github.com/extenddb/extenddb/internal/storage"
	"github.com/extenddb/extenddb/internal/store"
)

// Imports (ImportTable; docs/imports.md, ADR 0050): a job reads every
// object under the request's key prefix in the named bucket
// (internal/format/awsimport), loads the valid items into the new table
// with the backend's bulk loader (ADR 0032) in batches fenced on the
// table, and flips the table ACTIVE. Its row is in the job catalog (kind
// "import"); the payload is the engine's ImportRequest, whose description
// carries the counters DescribeImport answers.
//
// Outcomes, as on DynamoDB: no items failing is COMPLETED; some items
// failing (at most Config.ImportMaxErrors) is FAILED with
// ItemValidationError and the table ACTIVE holding the valid items; more
// than that, or a source that cannot be read (no such bucket, an object
// that cannot be fetched), is FAILED and the table is removed. A job whose
// server dies is restarted from the beginning by the reconciler on a new
// incarnation of the table, so no item is loaded twice.

// KindImport is the job catalog kind of imports.
const KindImport = "import"

const kindImportMetric = "import"

// Import statuses, as on the wire.
const (
	ImportInProgress = "IN_PROGRESS"
	ImportCompleted  = "COMPLETED"
	ImportFailed     = "FAILED"
)

// DefaultImportMaxErrors is Config.ImportMaxErrors's default.
const DefaultImportMaxErrors = 1000

// importBatch is the number of items per load batch.
const importBatch = 500

// importProgressEvery paces the progress written to the import's row.
const importProgressEvery = 2 * time.Second

// Importer makes the imported table ACTIVE and recognises an import's
// target (the engine satisfies it, with Indexer).
type Importer interface {
	Indexer
	FinishImport(t *storage.Table) ([]byte, error)
	IsImportTarget(t *storage.Table, id string) bool
}

// ImportKey is a key attribute of the import's table or indexes.
type ImportKey struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Optional bool   `json:"optional,omitempty"`
}

// ImportDescription is the part of the wire's ImportTableDescription the
// job reads and writes; the rest of the description is kept as it came.
type ImportDescription struct {
	ImportStatus       string `json:"ImportStatus"`
	ErrorCount         int64  `json:"ErrorCount"`
	ProcessedSizeBytes int64  `json:"ProcessedSizeBytes"`
	ProcessedItemCount int64  `json:"ProcessedItemCount"`
	ImportedItemCount  int64  `json:"ImportedItemCount"`
	FailureCode        string `json:"FailureCode,omitempty"`
	FailureMessage     string `json:"FailureMessage,omitempty"`
	S3BucketSource     struct {
		S3Bucket    string `json:"S3Bucket"`
		S3KeyPrefix string `json:"S3KeyPrefix"`
	} `json:"S3BucketSource"`
	InputFormat          string `json:"InputFormat"`
	InputCompressionType string `json:"InputCompressionType"`
	InputFormatOptions   *struct {
		Csv *struct {
			Delimiter  *string  `json:"Delimiter"`
			HeaderList []string `json:"HeaderList"`
		} `json:"Csv"`
	} `json:"InputFormatOptions"`
}

// importRow is an import row's payload: the engine's request, with the
// description decoded both ways (raw keeps every field).
type importRow struct {
	ID        string          `json:"id"`
	TableName string          `json:"tableName"`
	Desc      json.RawMessage `json:"desc"`
	Table     json.RawMessage `json:"table"`
	Keys      []ImportKey     `json:"keys"`
}

// desc decodes the counters and source of a row's description.
func (r *importRow) desc() (ImportDescription, error) {
	var d ImportDescription
	err := json.Unmarshal(r.Desc, &d)
	return d, err
}

// setDesc merges d's fields into the raw description.
func (r *importRow) setDesc(d ImportDescription, end time.Time) error {
	var all map[string]any
	if err := json.Unmarshal(r.Desc, &all); err != nil {
		return err
	}
	all["ImportStatus"] = d.ImportStatus
	all["ErrorCount"] = d.ErrorCount
	all["ProcessedSizeBytes"] = d.ProcessedSizeBytes
	all["ProcessedItemCount"] = d.ProcessedItemCount
	all["ImportedItemCount"] = d.ImportedItemCount
	delete(all, "FailureCode")
	delete(all, "FailureMessage")
	if d.FailureCode != "" {
		all["FailureCode"], all["FailureMessage"] = d.FailureCode, d.FailureMessage
	}
	if !end.IsZero() {
		all["EndTime"] = epochSec(end)
	}
	raw, err := json.Marshal(all)
	if err != nil {
		return err
	}
	r.Desc = raw
	return nil
}

func (m *Manager) importer() (Importer, storage.JobCatalog, error) {
	if m.ctx == nil {
		return nil, nil, storage.Errorf(storage.KindUnavailable, "backup: the manager is not started")
	}
	imp, ok := m.cfg.Restorer.(Importer)
	if !ok {
		return nil, nil, storage.Errorf(storage.KindUnsupported, "imports are not configured on this server")
	}
	jobs := m.cfg.Backend.Capabilities().Jobs
	if jobs == nil {
		return nil, nil, storage.Errorf(storage.KindUnsupported, "imports need the job catalog, which the %s backend does not have", m.cfg.Backend.Name())
	}
	return imp, jobs, nil
}

// StartImport records the import's row (IN_PROGRESS, claimed by this
// server), creates its table from the request's stored description and
// starts the job; it answers the description. The row comes first, so
// that a crash never leaves a CREATING table without a job. Errors:
// KindTableExists (the name was taken meanwhile), KindLimitExceeded (job
// slots), storage errors.
func (m *Manager) StartImport(ctx context.Context, account string, req []byte) ([]byte, error) {
	imp, jobs, err := m.importer()
	if err != nil {
		return nil, err
	}
	var row importRow
	if err := json.Unmarshal(req, &row); err != nil {
		return nil, err
	}
	release, err := m.acquireSlot()
	if err != nil {
		return nil, err
	}
	res, err := jobs.InsertJob(ctx, storage.JobRecord{Kind: KindImport, ID: row.ID, Account: account, Status: ImportInProgress,
		Payload: req, Owner: m.cfg.Owner})
	if err != nil {
		release()
		return nil, err
	}
	if !res.Matched {
		release()
		return nil, storage.Errorf(storage.KindInternal, "import id %s minted twice", row.ID)
	}
	rec := *res.Record
	notRunning := m.runs(KindImport+"/"+rec.ID, rec.Generation)
	target, err := m.cfg.Backend.CreateTable(ctx, storage.CreateTableParams{Account: account, Name: row.TableName, Desc: row.Table})
	if err != nil {
		notRunning()
		release()
		// No table: the import did not start; its row goes, as its
		// ImportArn was never answered.
		_, _ = jobs.RemoveJob(context.WithoutCancel(ctx), storage.RemoveJobParams{Kind: KindImport, ID: rec.ID, Generation: rec.Generation, Status: ImportInProgress})
		return nil, err
	}
	m.startImport(imp, jobs, rec, row, target.Table, release, notRunning)
	return row.Desc, nil
}

func (m *Manager) startImport(imp Importer, jobs storage.JobCatalog, rec storage.JobRecord, row importRow, target *storage.Table, release, notRunning func()) {
	m.met.running.WithLabelValues(kindImportMetric).Inc()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer release()
		defer notRunning()
		m.runImport(imp, jobs, rec, row, target)
	}()
}

// importFailure is an import's end that removes its table.
type importFailure struct {
	code string
	err  error
}

func (f *importFailure) Error() string { return f.err.Error() }

func (m *Manager) runImport(imp Importer, jobs storage.JobCatalog, rec storage.JobRecord, row importRow, target *storage.Table) {
	ctx, cancel := context.WithCancelCause(m.ctx)
	defer cancel(nil)
	beat := func(ctx context.Context) (bool, error) {
		res, err := jobs.HeartbeatJob(ctx, storage.HeartbeatJobParams{Kind: KindImport, ID: rec.ID, Owner: m.cfg.Owner, Generation: rec.Generation})
		return err == nil && res.Matched, err
	}
	go m.keepAlive(ctx, cancel, beat)
	start := time.Now()
	d, err := row.desc()
	if err != nil {
		d = ImportDescription{}
	}
	arn := ""
	var all map[string]any
	if json.Unmarshal(row.Desc, &all) == nil {
		arn, _ = all["ImportArn"].(string)
	}
	log := m.log.With("import", arn, "table", target.Name)
	prog := m.met.progress.start(kindImportMetric, target.Account, target.Name, rec.ID, "load")
	save := func(ctx context.Context, d ImportDescription, status string, end time.Time) (bool, error) {
		if err := row.setDesc(d, end); err != nil {
			return false, err
		}
		payload, _ := json.Marshal(row)
		var msg *string
		if d.FailureMessage != "" {
			msg = &d.FailureMessage
		}
		res, err := jobs.UpdateJob(ctx, storage.UpdateJobParams{Kind: KindImport, ID: rec.ID, Generation: rec.Generation,
			Status: ImportInProgress, NewStatus: status, Payload: payload, Message: msg})
		if err != nil {
			return false, err
		}
		return res.Matched, nil
	}
	err = m.loadImport(ctx, imp, &d, row.Keys, target, log, prog, func(d ImportDescription) error {
		ok, err := save(ctx, d, ImportInProgress, time.Time{})
		if err == nil && !ok {
			err = errFenced
		}
		return err
	})
	prog.done()
	bg := context.WithoutCancel(ctx)
	result := "ok"
	switch {
	case err == nil && d.ErrorCount == 0:
		d.ImportStatus = ImportCompleted
		log.Info("import completed", "items", d.ImportedItemCount, "bytes", d.ProcessedSizeBytes, "duration", time.Since(start))
	case err == nil:
		d.ImportStatus = ImportFailed
		d.FailureCode = "ItemValidationError"
		d.FailureMessage = fmt.Sprintf("Some of the items failed validation checks and were not imported: %d of %d; the server's log names each (object and line)",
			d.ErrorCount, d.ProcessedItemCount)
		log.Warn("import ended with items not imported", "imported", d.ImportedItemCount, "errors", d.ErrorCount)
	case errors.Is(context.Cause(ctx), errFenced) || errors.Is(err, errFenced):
		log.Warn("import stopped: claim taken over")
		m.met.end(kindImportMetric, start, causeFenced)
		return
	case m.ctx.Err() != nil:
		log.Warn("import interrupted by shutdown; the reconciler restarts it", "err", err)
		m.met.end(kindImportMetric, start, causeShutdown)
		return
	default:
		d.ImportStatus = ImportFailed
		var f *importFailure
		if errors.As(err, &f) {
			d.FailureCode = f.code
		} else {
			d.FailureCode = "UNKNOWN"
		}
		d.FailureMessage = err.Error()
		result = cause(ctx, err)
		log.Warn("import failed; removing its table", "code", d.FailureCode, "err", err)
		m.dropImportTarget(bg, imp, target, rec.ID)
	}
	ok, uerr := save(bg, d, d.ImportStatus, time.Now())
	switch {
	case uerr != nil:
		result = causeOther
		log.Warn("import: recording its end", "err", uerr)
	case !ok:
		result = causeFenced
	}
	m.met.items.WithLabelValues(kindImportMetric).Add(float64(d.ImportedItemCount))
	m.met.end(kindImportMetric, start, result)
}

// dropImportTarget deletes the import's table if it is still the import's
// CREATING target (or the same incarnation).
func (m *Manager) dropImportTarget(ctx context.Context, imp Importer, target *storage.Table, id string) {
	cur, err := m.cfg.Backend.GetTable(ctx, storage.GetTableParams{Account: target.Account, Name: target.Name})
	if err != nil || (cur.Table.ID != target.ID && !imp.IsImportTarget(cur.Table, id)) {
		return
	}
	if _, err := m.cfg.Backend.DeleteTable(ctx, storage.DeleteTableParams{Account: target.Account, Name: target.Name}); err != nil {
		m.log.Warn("import: removing the table", "table", target.Name, "err", err)
	}
}

// loadImport reads the source and loads the table, updating d's counters
// (recorded through save every importProgressEvery), then flips the table
// ACTIVE. An *importFailure or another error ends the import FAILED with
// the table removed.
func (m *Manager) loadImport(ctx context.Context, imp Importer, d *ImportDescription, keys []ImportKey, target *storage.Table, log interface {
	Warn(string, ...any)
}, prog *jobProgress, save func(ImportDescription) error) error {
	src := d.S3BucketSource
	st, err := store.OpenBucket(ctx, m.cfg.Buckets, src.S3Bucket, "")
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "NoSuchBucket") {
			return &importFailure{"S3NoSuchBucket", fmt.Errorf("The specified bucket does not exist: %s", src.S3Bucket)}
		}
		return &importFailure{"S3AccessDenied", err}
	}
	objs, err := awsimport.List(ctx, st, src.S3KeyPrefix)
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchBucket") {
			return &importFailure{"S3NoSuchBucket", fmt.Errorf("The specified bucket does not exist: %s", src.S3Bucket)}
		}
		return &importFailure{"S3AccessDenied", fmt.Errorf("listing s3://%s/%s: %w", src.S3Bucket, src.S3KeyPrefix, err)}
	}
	opts := awsimport.Options{Format: d.InputFormat, Compression: d.InputCompressionType}
	if o := d.InputFormatOptions; o != nil && o.Csv != nil {
		if o.Csv.Delimiter != nil && *o.Csv.Delimiter != "" {
			opts.CSVDelimiter = rune((*o.Csv.Delimiter)[0])
		}
		opts.CSVHeader = o.Csv.HeaderList
	}
	maxErrors := m.cfg.ImportMaxErrors
	if maxErrors == 0 {
		maxErrors = DefaultImportMaxErrors
	}
	logged := 0
	opts.OnError = func(e awsimport.ItemError) {
		if logged < 1000 {
			log.Warn("import: item not imported", "object", e.Object, "line", e.Line, "err", e.Err)
		}
		logged++
	}
	for _, k := range keys {
		t, ok := attr.TypeFromName(k.Type)
		if !ok {
			return fmt.Errorf("import: key attribute %s has type %q", k.Name, k.Type)
		}
		opts.Keys = append(opts.Keys, awsimport.KeyAttr{Name: k.Name, Type: t, Optional: k.Optional})
	}
	if err := awsimport.CheckOptions(opts); err != nil {
		return &importFailure{"UNKNOWN", err}
	}
	load, err := imp.ItemLoader(target)
	if err != nil {
		return err
	}
	ref := target.Ref()
	var stats awsimport.Stats
	var batch []storage.BulkItem
	seen := map[string]int{}
	lastSave := time.Now()
	sync := func() {
		d.ProcessedItemCount, d.ErrorCount, d.ProcessedSizeBytes = stats.ProcessedItems, stats.Errors, stats.ProcessedBytes
	}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := m.writeImportBatch(ctx, ref, batch); err != nil {
			return err
		}
		d.ImportedItemCount += int64(len(batch))
		prog.add(int64(len(batch)), 0)
		batch, seen = batch[:0], map[string]int{}
		sync()
		if time.Since(lastSave) > importProgressEvery {
			lastSave = time.Now()
			return save(*d)
		}
		return nil
	}
	for _, o := range objs {
		err := awsimport.ReadObject(ctx, st, o, opts, &stats, func(it attr.Item) error {
			raw := attr.EncodeItem(it)
			pk, sk, ch, err := load(raw)
			if err != nil {
				stats.Errors++
				opts.OnError(awsimport.ItemError{Object: o.Key, Err: err})
				return nil
			}
			k := string(pk) + "\x00" + string(sk)
			if i, ok := seen[k]; ok {
				// The same key twice in one batch: the later item wins,
				// as a later PutItem would.
				batch[i] = storage.BulkItem{PK: pk, SK: sk, Change: ch}
				d.ImportedItemCount--
			} else {
				seen[k] = len(batch)
				batch = append(batch, storage.BulkItem{PK: pk, SK: sk, Change: ch})
			}
			if len(batch) >= importBatch {
				return flush()
			}
			return nil
		})
		if err != nil && awsimport.IsDataError(err) {
			// A truncated or corrupt object: what was read of it counts;
			// the object itself is one error.
			stats.Errors++
			opts.OnError(awsimport.ItemError{Object: o.Key, Err: err})
			err = nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return jobErr(ctx, err)
			}
			var f *importFailure
			if errors.As(err, &f) || errors.Is(err, errFenced) {
				return err
			}
			if errors.Is(err, store.ErrNotFound) {
				return &importFailure{"S3NoSuchKey", fmt.Errorf("object %s disappeared during the import", o.Key)}
			}
			return &importFailure{"UNKNOWN", err}
		}
		if stats.Errors > int64(maxErrors) {
			sync()
			return &importFailure{"ItemValidationError", fmt.Errorf("more than %d items failed validation checks (%d so far); the import stopped and its table was removed", maxErrors, stats.Errors)}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	sync()
	if err := save(*d); err != nil {
		return err
	}
	_, err = m.cfg.Backend.UpdateTable(ctx, storage.UpdateTableParams{Account: target.Account, Name: target.Name,
		Fn: func(old *storage.Table) ([]byte, error) {
			if old.ID != target.ID {
				return nil, errors.New("import: the table was replaced")
			}
			return imp.FinishImport(old)
		}})
	return err
}

// writeImportBatch writes one batch of blind puts with the backend's bulk
// loader (ADR 0032), or as restores do without one; a transient failure
// is retried.
func (m *Manager) writeImportBatch(ctx context.Context, ref storage.TableRef, items []storage.BulkItem) error {
	caps := m.cfg.Backend.Capabilities()
	for attempt := 0; ; attempt++ {
		var err error
		switch {
		case caps.PerItemAtomic:
			err = m.writeEach(ctx, blindPuts(ref, items))
		case caps.Bulk != nil:
			err = caps.Bulk.BulkLoad(ctx, storage.BulkLoadParams{Table: ref, Items: items})
		default:
			_, err = m.cfg.Backend.TransactWrite(ctx, storage.TransactWriteParams{Ops: blindPuts(ref, items)})
		}
		if err == nil || !storage.IsKind(err, storage.KindUnavailable) || ctx.Err() != nil || attempt >= restoreRetries {
			if storage.IsKind(err, storage.KindTableVersion) || storage.IsKind(err, storage.KindTableNotFound) {
				return fmt.Errorf("%w: the table changed under the import", errFenced)
			}
			return err
		}
		t := time.NewTimer(time.Duration(attempt+1) * restoreRetryPause)
		select {
		case <-ctx.Done():
			t.Stop()
			return jobErr(ctx, err)
		case <-t.C:
		}
	}
}

// reconcileImports restarts IN_PROGRESS imports whose claim is stale
// (their server stopped): the reconciler claims the row, removes the
// table the dead job was loading and loads a new one from the beginning,
// so no item is written twice. An import whose table had already turned
// ACTIVE ends with the counts it recorded before the flip.
func (m *Manager) reconcileImports(ctx context.Context) error {
	imp, jobs, err := m.importer()
	if err != nil {
		return nil
	}
	rows, err := jobs.ListJobs(ctx, storage.ListJobsParams{Kind: KindImport, Statuses: []string{ImportInProgress}})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range rows {
		if m.ownLive(KindImport+"/"+r.ID, r.Owner, r.Generation) {
			continue
		}
		res, err := jobs.ClaimJob(ctx, storage.ClaimJobParams{Kind: KindImport, ID: r.ID, Owner: m.cfg.Owner, Generation: r.Generation,
			Status: ImportInProgress, StaleAfter: m.cfg.StaleAfter})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !res.Matched {
			continue
		}
		if err := m.restartImport(ctx, imp, jobs, *res.Record); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) restartImport(ctx context.Context, imp Importer, jobs storage.JobCatalog, rec storage.JobRecord) error {
	var row importRow
	if err := json.Unmarshal(rec.Payload, &row); err != nil {
		return err
	}
	d, err := row.desc()
	if err != nil {
		return err
	}
	end := func(d ImportDescription) error {
		if err := row.setDesc(d, time.Now()); err != nil {
			return err
		}
		payload, _ := json.Marshal(row)
		msg := d.FailureMessage
		_, err := jobs.UpdateJob(ctx, storage.UpdateJobParams{Kind: KindImport, ID: rec.ID, Generation: rec.Generation,
			Status: ImportInProgress, NewStatus: d.ImportStatus, Payload: payload, Message: &msg})
		return err
	}
	var want struct {
		Desc struct{ TableId string } `json:"desc"`
	}
	_ = json.Unmarshal(row.Table, &want)
	cur, err := m.cfg.Backend.GetTable(ctx, storage.GetTableParams{Account: rec.Account, Name: row.TableName})
	switch {
	case err == nil && imp.IsImportTarget(cur.Table, rec.ID):
		if _, err := m.cfg.Backend.DeleteTable(ctx, storage.DeleteTableParams{Account: rec.Account, Name: row.TableName}); err != nil {
			return err
		}
	case err == nil:
		var have struct {
			Desc struct{ TableId string } `json:"desc"`
		}
		_ = json.Unmarshal(cur.Table.Desc, &have)
		if have.Desc.TableId == want.Desc.TableId && want.Desc.TableId != "" {
			// Loaded and ACTIVE before the server stopped.
			d.ImportStatus, d.FailureCode, d.FailureMessage = ImportCompleted, "", ""
			if d.ErrorCount > 0 {
				d.ImportStatus, d.FailureCode = ImportFailed, "ItemValidationError"
				d.FailureMessage = fmt.Sprintf("Some of the items failed validation checks and were not imported: %d of %d", d.ErrorCount, d.ProcessedItemCount)
			}
			m.met.reconciled.WithLabelValues("finished_import").Inc()
			return end(d)
		}
		d.ImportStatus, d.FailureCode = ImportFailed, "TableAlreadyExists"
		d.FailureMessage = "Table already exists: " + row.TableName
		return end(d)
	case !storage.IsKind(err, storage.KindTableNotFound):
		return err
	}
	release, err := m.acquireSlot()
	if err != nil {
		return nil // no slot: the claim goes stale again and is retried
	}
	notRunning := m.runs(KindImport+"/"+rec.ID, rec.Generation)
	d.ErrorCount, d.ProcessedItemCount, d.ImportedItemCount, d.ProcessedSizeBytes = 0, 0, 0, 0
	if err := row.setDesc(d, time.Time{}); err != nil {
		notRunning()
		release()
		return err
	}
	created, err := m.cfg.Backend.CreateTable(ctx, storage.CreateTableParams{Account: rec.Account, Name: row.TableName, Desc: row.Table})
	if err != nil {
		notRunning()
		release()
		if storage.IsKind(err, storage.KindTableExists) {
			d.ImportStatus, d.FailureCode = ImportFailed, "TableAlreadyExists"
			d.FailureMessage = "Table already exists: " + row.TableName
			return end(d)
		}
		return err
	}
	m.log.Info("import restarted after its server stopped", "import", rec.ID, "table", row.TableName)
	m.met.reconciled.WithLabelValues("restarted_import").Inc()
	m.startImport(imp, jobs, rec, row, created.Table, release, notRunning)
	return nil
}
