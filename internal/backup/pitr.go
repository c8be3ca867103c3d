package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// Shipping of point-in-time recovery history (docs/backup-design.md
// section 7, ADR 0046): every ship interval, each table with PITR on has
// the change log records after its shipped cursor written to the store
// as a segment (PutIfAbsent on a name derived from its first Seq, so of
// several servers shipping one table exactly one publishes each record),
// its sidecar chained to the previous one; bases are backups of the
// table taken through the snapshot capability on a schedule and when the
// log shipped since the last base grows past a size.

// PITRTable is a table with point-in-time recovery on, as shipping needs
// it; the server builds it from the engine's description.
type PITRTable struct {
	Ref      backend.TableRef
	TableID  string // the DynamoDB TableId (unique across catalogs)
	TableArn string
	Days     int64
	// Since is when PITR was turned on (a history per enabling).
	Since time.Time
	// Description is the DynamoDB TableDescription (JSON).
	Description json.RawMessage
}

// Incarnation names the table's history in the store: the table id and
// the enabling, so a table re-enabled (or created again under its name)
// starts a history of its own.
func (t PITRTable) Incarnation() string {
	return t.TableID + "." + strconv.FormatInt(t.Since.UnixMilli(), 10)
}

// PITRSource is what shipping needs of the engine, passed in by the
// server (this package never imports the engine).
type PITRSource interface {
	// PITRTables lists the tables with PITR on.
	PITRTables(ctx context.Context) ([]PITRTable, error)
	// PITRRecord decodes a change record into a segment line (Seq and At
	// are set by the caller).
	PITRRecord(data []byte) (format.PITRRecord, error)
}

// PITRConfig configures shipping ([backup.pitr]).
type PITRConfig struct {
	// ShipInterval paces shipping (default 1 s): the recovery point
	// objective is about one interval.
	ShipInterval time.Duration
	// SegmentMaxBytes closes a segment at this many bytes of records
	// (default 16 MiB).
	SegmentMaxBytes int
	// BaseInterval is the most time between two bases (default 24 h).
	BaseInterval time.Duration
	// BaseAfterBytes takes a base once this many bytes of records were
	// shipped since the last one (default 1 GiB).
	BaseAfterBytes int64
}

// Defaults of PITRConfig.
const (
	DefaultShipInterval    = time.Second
	DefaultSegmentMaxBytes = 16 << 20
	DefaultBaseInterval    = 24 * time.Hour
	DefaultBaseAfterBytes  = 1 << 30
)

// listEvery is how often shipping lists the PITR tables again: a table
// whose PITR was just turned on is shipped within it.
const listEvery = 5 * time.Second

// Steps of shipping where Config.Hook is called.
const (
	PointPITRAfterSegment = "pitr.after-segment" // a segment is published, its sidecar not yet
	PointPITRAfterBase    = "pitr.after-base"    // a base's backup is complete, its position object not yet
)

// Shipper ships the change logs of PITR tables to the store. It is the
// engine's PITR service (Window).
type Shipper struct {
	m   *Manager
	src PITRSource
	cl  backend.ChangeLog
	cfg PITRConfig

	mu     sync.Mutex
	tables map[int64]*shipState // by TableRef.ID

	// list is the PITR tables as last listed (at listed); used by
	// ShipOnce only, which runs on one goroutine at a time.
	list   []PITRTable
	listed time.Time
	// prunedAt is when the reconciler last pruned (maybePrune).
	prunedAt time.Time

	lag      *prometheus.GaugeVec
	records  prometheus.Counter
	segments prometheus.Counter
	bases    prometheus.Counter
	errs     prometheus.Counter
}

// shipState is what this server knows of one table's history.
type shipState struct {
	table  PITRTable
	prefix string
	loaded bool
	// last is the cursor: every record with Seq <= last is in the store
	// (in a segment, or covered by the history's start).
	last int64
	// prev is the hash of the last segment's sidecar ("" before any).
	prev string
	// lastFirst names the last segment with its sidecar (its first Seq).
	lastFirst int64
	// lastAt is the log time of the last shipped record.
	lastAt time.Time
	// checkedAt: every record acknowledged before it is shipped.
	checkedAt time.Time
	// firstBase and lastBase are the oldest and newest bases' instants.
	firstBase, lastBase time.Time
	// sinceBase is the record bytes shipped since the newest base.
	sinceBase int64
}

// NewShipper builds the shipper over the manager's store and backend;
// the backend must keep a change log.
func NewShipper(m *Manager, src PITRSource, cfg PITRConfig, reg prometheus.Registerer) (*Shipper, error) {
	cl := m.cfg.Backend.Capabilities().ChangeLog
	if cl == nil {
		return nil, fmt.Errorf("pitr: the %s backend keeps no change log", m.cfg.Backend.Name())
	}
	if cfg.ShipInterval <= 0 {
		cfg.ShipInterval = DefaultShipInterval
	}
	if cfg.SegmentMaxBytes <= 0 {
		cfg.SegmentMaxBytes = DefaultSegmentMaxBytes
	}
	if cfg.BaseInterval <= 0 {
		cfg.BaseInterval = DefaultBaseInterval
	}
	if cfg.BaseAfterBytes <= 0 {
		cfg.BaseAfterBytes = DefaultBaseAfterBytes
	}
	s := &Shipper{m: m, src: src, cl: cl, cfg: cfg, tables: map[int64]*shipState{},
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "extenddb_pitr_lag_seconds",
			Help: "Seconds between now and the latest restorable instant of a table with point-in-time recovery."}, []string{"account", "table"}),
		records:  prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_pitr_shipped_records_total", Help: "Change records shipped to the backup store."}),
		segments: prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_pitr_segments_total", Help: "Segments this server published to the backup store."}),
		bases:    prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_pitr_bases_total", Help: "Base snapshots this server wrote for point-in-time recovery."}),
		errs:     prometheus.NewCounter(prometheus.CounterOpts{Name: "extenddb_pitr_ship_errors_total", Help: "Failed shipping rounds (store or database errors); shipping retries every interval."}),
	}
	if reg != nil {
		reg.MustRegister(lagCollector{s}, s.records, s.segments, s.bases, s.errs)
	}
	m.pitr.Store(s) // the reconciler prunes through it
	return s, nil
}

// lagCollector exposes the lag gauge as of the scrape: a value set only
// when a ship round ends would read about zero right after each round
// (the round just made everything restorable) and miss the interval's
// growth, and would stop growing while a round hangs on the store.
type lagCollector struct{ s *Shipper }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) { c.s.lag.Describe(ch) }

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	s.mu.Lock()
	for _, st := range s.tables {
		if l := st.latest(); !l.IsZero() {
			s.lag.WithLabelValues(st.table.Ref.Account, st.table.Ref.Name).Set(time.Since(l).Seconds())
		}
	}
	s.mu.Unlock()
	s.lag.Collect(ch)
}

// Run ships every interval until ctx ends. Rounds start an interval
// apart (a round that took longer is followed at once), not an interval
// after the previous round ended: the lag of a busy table stays within
// about one interval plus one round.
func (s *Shipper) Run(ctx context.Context) {
	for {
		started := time.Now()
		s.ShipOnce(ctx)
		wait := s.cfg.ShipInterval - time.Since(started)
		if wait <= 0 {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// ShipOnce runs one shipping round over every PITR table (one call at a
// time per Shipper); errors are logged and counted, and the next round
// retries (a store outage stalls shipping, never a write).
func (s *Shipper) ShipOnce(ctx context.Context) {
	if err := s.m.Healthy(ctx); err != nil {
		// A store this catalog does not own (or cannot reach) gets
		// nothing; shipping resumes where it stopped. The lag grows.
		s.fail("pitr: store", "", err)
		s.mu.Lock()
		states := make([]*shipState, 0, len(s.tables))
		for _, st := range s.tables {
			states = append(states, st)
		}
		s.mu.Unlock()
		for _, st := range states {
			s.setLag(st)
		}
		return
	}
	// The table list costs a read of every table's description: it is
	// refreshed every listEvery, or at once after a table went missing.
	if s.listed.IsZero() || time.Since(s.listed) >= listEvery {
		tables, err := s.src.PITRTables(ctx)
		if err != nil {
			s.fail("pitr: listing tables", "", err)
			return
		}
		s.list, s.listed = tables, time.Now()
	}
	tables := s.list
	live := map[int64]bool{}
	for _, t := range tables {
		live[t.Ref.ID] = true
		st := s.state(t)
		if err := s.ship(ctx, st); err != nil && ctx.Err() == nil {
			if backend.IsKind(err, backend.KindTableNotFound) {
				s.listed = time.Time{}
				continue
			}
			s.fail("pitr: shipping", t.Ref.Name, err)
		}
		s.setLag(st)
	}
	s.mu.Lock()
	for id, st := range s.tables {
		if !live[id] {
			s.lag.DeleteLabelValues(st.table.Ref.Account, st.table.Ref.Name)
			delete(s.tables, id)
		}
	}
	s.mu.Unlock()
}

func (s *Shipper) fail(what, table string, err error) {
	s.errs.Inc()
	s.m.log.Warn(what, "table", table, "err", err)
}

// state returns the table's state, a new one when its history changed.
func (s *Shipper) state(t PITRTable) *shipState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tables[t.Ref.ID]
	if st == nil || st.table.Incarnation() != t.Incarnation() {
		st = &shipState{table: t, prefix: format.PITRPrefix(t.Ref.Account, t.Ref.Name, t.Incarnation())}
		s.tables[t.Ref.ID] = st
	}
	st.table.Days, st.table.Description = t.Days, t.Description
	return st
}

// ship brings one table's history up to date: head, base, segments.
func (s *Shipper) ship(ctx context.Context, st *shipState) error {
	if !st.loaded {
		if err := s.load(ctx, st); err != nil {
			return err
		}
	}
	if s.baseDue(st) {
		// Another server shipping this table may have written the base
		// since this one loaded the history: read the bases again first.
		if err := s.refreshBases(ctx, st); err != nil {
			return fmt.Errorf("base: %w", err)
		}
		if s.baseDue(st) {
			if err := s.takeBase(ctx, st); err != nil {
				return fmt.Errorf("base: %w", err)
			}
		}
	}
	for {
		started := time.Now()
		res, err := s.cl.ReadLog(ctx, backend.ReadLogParams{Table: st.table.Ref, After: st.last, Limit: 10000, MaxBytes: s.cfg.SegmentMaxBytes})
		if err != nil {
			return err
		}
		if len(res.Records) == 0 {
			s.mu.Lock()
			st.checkedAt = started
			s.mu.Unlock()
			return nil
		}
		if err := s.publish(ctx, st, res.Records); err != nil {
			return err
		}
	}
}

// baseDue tells whether the history needs a new base: it has none, its
// newest is older than base_interval, or base_after_bytes of records
// were shipped since.
func (s *Shipper) baseDue(st *shipState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.lastBase.IsZero() || time.Since(st.lastBase) > s.cfg.BaseInterval || st.sinceBase > s.cfg.BaseAfterBytes
}

// refreshBases reads the history's complete bases from the store and
// takes a newer one than this server knows as its newest (its bytes
// shipped since then are counted from zero again). Two servers that
// start a base at the same instant still both write one; a server that
// comes later does not.
func (s *Shipper) refreshBases(ctx context.Context, st *shipState) error {
	bases, err := s.listBases(ctx, st.prefix)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range bases {
		at, _ := format.ParsePITRTime(b.SnapshotAt)
		if st.noteBase(at) {
			st.sinceBase = 0
		}
	}
	return nil
}

// noteBase takes a complete base of the history at instant at into the
// state's first and newest base; it tells whether at is the new newest.
// The caller holds the shipper's mu.
func (st *shipState) noteBase(at time.Time) bool {
	if st.firstBase.IsZero() || at.Before(st.firstBase) {
		st.firstBase = at
	}
	if !at.After(st.lastBase) {
		return false
	}
	st.lastBase = at
	return true
}

// publish writes one segment of recs after the cursor.
func (s *Shipper) publish(ctx context.Context, st *shipState, recs []backend.LogRecord) error {
	lines := make([]format.PITRRecord, len(recs))
	size := 0
	for i, r := range recs {
		l, err := s.src.PITRRecord(r.Data)
		if err != nil {
			return fmt.Errorf("record %d: %w", r.Seq, err)
		}
		l.Seq, l.At = r.Seq, format.PITRTime(r.At)
		lines[i] = l
		size += len(r.Data)
	}
	seg, err := format.EncodeSegment(lines, st.prev)
	if err != nil {
		return err
	}
	key := format.SegmentKey(st.prefix, recs[0].Seq)
	if err := s.m.st.PutIfAbsent(ctx, key, bytes.NewReader(seg.Data)); err != nil {
		if errors.Is(err, blobstore.ErrExists) {
			// Another server shipped these records: take its history.
			st.loaded = false
			return s.load(ctx, st)
		}
		return err
	}
	s.m.hook(PointPITRAfterSegment)
	if err := s.putSidecar(ctx, key, seg.Side); err != nil {
		return err
	}
	s.mu.Lock()
	st.last, st.prev, st.lastAt = seg.Side.Last, seg.Side.Hash(), seg.Side.LastAt
	st.lastFirst = seg.Side.First
	st.sinceBase += int64(size)
	s.mu.Unlock()
	s.records.Add(float64(len(recs)))
	s.segments.Inc()
	return nil
}

// putSidecar publishes a segment's sidecar; one already there must be the
// same bytes (every shipper computes it alike).
func (s *Shipper) putSidecar(ctx context.Context, key string, side format.SegmentSidecar) error {
	b := side.Encode()
	err := s.m.st.PutIfAbsent(ctx, format.SegmentSidecarKey(key), bytes.NewReader(b))
	if errors.Is(err, blobstore.ErrExists) {
		got, gerr := s.getSmall(ctx, format.SegmentSidecarKey(key))
		if gerr != nil {
			return gerr
		}
		if !bytes.Equal(got, b) {
			return fmt.Errorf("%w: %s: differs from the sidecar its segment needs", format.ErrSegment, format.SegmentSidecarKey(key))
		}
		return nil
	}
	return err
}

func (s *Shipper) getSmall(ctx context.Context, key string) ([]byte, error) {
	r, err := s.m.st.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return format.ReadAllLimited(r, 1<<30)
}

// load reads the table's history from the store: the head (created,
// with the history's start position, when absent), the last segment
// (completing its sidecar when a shipper died between the two) and the
// bases.
func (s *Shipper) load(ctx context.Context, st *shipState) error {
	head, err := s.head(ctx, st)
	if err != nil {
		return err
	}
	objs, err := s.m.st.List(ctx, format.SegmentsPrefix(st.prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return err
	}
	var firsts []int64
	sidecars := map[int64]bool{}
	for _, o := range objs {
		f, sc, ok := format.SegmentFirst(o.Key)
		if !ok {
			continue
		}
		if sc {
			sidecars[f] = true
		} else {
			firsts = append(firsts, f)
		}
	}
	last, prev, lastAt, lastFirst := head.Start, "", time.Time{}, int64(0)
	if n := len(firsts); n > 0 {
		key := format.SegmentKey(st.prefix, firsts[n-1])
		if !sidecars[firsts[n-1]] {
			// Published without its sidecar: complete it.
			if n > 1 {
				b, err := s.getSmall(ctx, format.SegmentSidecarKey(format.SegmentKey(st.prefix, firsts[n-2])))
				if err != nil {
					return err
				}
				ps, err := format.ParseSegmentSidecar(format.SegmentSidecarKey(format.SegmentKey(st.prefix, firsts[n-2])), b)
				if err != nil {
					return err
				}
				prev = ps.Hash()
			}
			data, err := s.getSmall(ctx, key)
			if err != nil {
				return err
			}
			side, err := format.SidecarFor(key, data, prev)
			if err != nil {
				return err
			}
			if err := s.putSidecar(ctx, key, side); err != nil {
				return err
			}
		}
		b, err := s.getSmall(ctx, format.SegmentSidecarKey(key))
		if err != nil {
			return err
		}
		side, err := format.ParseSegmentSidecar(format.SegmentSidecarKey(key), b)
		if err != nil {
			return err
		}
		last, prev, lastAt, lastFirst = side.Last, side.Hash(), side.LastAt, firsts[n-1]
	}
	bases, err := s.listBases(ctx, st.prefix)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.last, st.prev, st.lastAt, st.lastFirst = last, prev, lastAt, lastFirst
	st.firstBase, st.lastBase = time.Time{}, time.Time{}
	for _, b := range bases {
		at, _ := format.ParsePITRTime(b.SnapshotAt)
		st.noteBase(at)
	}
	st.loaded = true
	return nil
}

// pitrHead is the head as written: the format's head plus the history's
// start position.
type pitrHead struct {
	format.PITRHead
	// Start is the log position the history starts after: the log's last
	// Seq read before its first base's snapshot.
	Start int64 `json:"start"`
}

// head reads the history's head, creating it when absent: the first
// server to create it fixes the start position for all.
func (s *Shipper) head(ctx context.Context, st *shipState) (*pitrHead, error) {
	key := format.PITRHeadKey(st.prefix)
	b, err := s.getSmall(ctx, key)
	if err == nil {
		var h pitrHead
		if err := json.Unmarshal(b, &h); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		return &h, nil
	}
	if !errors.Is(err, blobstore.ErrNotFound) {
		return nil, err
	}
	info, err := s.cl.LogInfo(ctx, backend.LogInfoParams{Table: st.table.Ref})
	if err != nil {
		return nil, err
	}
	t := st.table
	h := pitrHead{PITRHead: format.PITRHead{FormatVersion: format.PITRFormatVersion, TableArn: t.TableArn, TableID: t.TableID,
		Account: t.Ref.Account, TableName: t.Ref.Name, RecoveryPeriodInDays: t.Days, Enabled: true, SourceTable: t.Description}, Start: info.Last}
	hb, err := json.Marshal(&h)
	if err != nil {
		return nil, err
	}
	if err := s.m.st.PutIfAbsent(ctx, key, bytes.NewReader(hb)); err != nil {
		if errors.Is(err, blobstore.ErrExists) {
			return s.head(ctx, st)
		}
		return nil, err
	}
	return &h, nil
}

// listBases reads the position objects of a history's complete bases.
func (s *Shipper) listBases(ctx context.Context, prefix string) ([]format.PITRBase, error) {
	return listBases(ctx, s.m.st, prefix)
}

func listBases(ctx context.Context, st blobstore.Store, prefix string) ([]format.PITRBase, error) {
	objs, err := st.List(ctx, format.BasesPrefix(prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return nil, err
	}
	var out []format.PITRBase
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, "/extenddb-base.json") {
			continue
		}
		b, err := readObject(ctx, st, o.Key)
		if err != nil {
			return nil, err
		}
		var pb format.PITRBase
		if err := json.Unmarshal(b, &pb); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Key, err)
		}
		out = append(out, pb)
	}
	return out, nil
}

// takeBase writes a base: the log position first, then a backup of the
// table from a snapshot opened after it (every record after the position
// is replayed onto it), then the position object, which makes the base
// exist.
func (s *Shipper) takeBase(ctx context.Context, st *shipState) error {
	t := st.table
	info, err := s.cl.LogInfo(ctx, backend.LogInfoParams{Table: t.Ref})
	if err != nil {
		return err
	}
	release, err := s.m.acquireSlot()
	if err != nil {
		return err
	}
	defer release()
	snap, err := s.m.snaps.OpenTableSnapshot(ctx, backend.OpenSnapshotParams{Account: t.Ref.Account, Name: t.Ref.Name})
	if err != nil {
		return err
	}
	defer snap.Items.Close()
	if snap.Table.ID != t.Ref.ID {
		return backend.Errorf(backend.KindTableNotFound, "pitr: table %s was replaced", t.Ref.Name)
	}
	at := snap.At.UTC().Truncate(time.Millisecond)
	id, err := format.MintBackupID(at, nil)
	if err != nil {
		return err
	}
	arn := format.ARN{Partition: s.m.cfg.Partition, Region: s.m.cfg.Region, Account: t.Ref.Account, Table: t.Ref.Name, BackupID: id}
	desc, err := s.m.cfg.Describer.TableDescriptionJSON(snap.Table)
	if err != nil {
		return err
	}
	rec := backend.BackupRecord{ARN: arn.String(), Account: t.Ref.Account, TableName: t.Ref.Name, BackupID: id,
		Name: "pitr-base", Type: "SYSTEM", Prefix: format.BasesPrefix(st.prefix) + "/" + id}
	if _, err := s.m.writeBackup(ctx, snap, rec, arn, desc, nil); err != nil {
		return err
	}
	s.m.hook(PointPITRAfterBase)
	pb, err := json.Marshal(format.PITRBase{Position: info.Last, SnapshotAt: format.PITRTime(at), BackupID: id})
	if err != nil {
		return err
	}
	if err := s.m.st.Put(ctx, format.BaseKey(st.prefix, id), bytes.NewReader(pb)); err != nil {
		return err
	}
	s.bases.Inc()
	s.mu.Lock()
	st.noteBase(at)
	st.sinceBase = 0
	s.mu.Unlock()
	return nil
}

// latest is the latest restorable instant of a state (zero: none).
func (st *shipState) latest() time.Time {
	if st.firstBase.IsZero() {
		return time.Time{}
	}
	l := st.lastAt
	if st.checkedAt.After(l) {
		l = st.checkedAt
	}
	if st.lastBase.After(l) {
		l = st.lastBase
	}
	return l.Truncate(time.Millisecond)
}

func (s *Shipper) setLag(st *shipState) {
	s.mu.Lock()
	l := st.latest()
	s.mu.Unlock()
	if !l.IsZero() {
		s.lag.WithLabelValues(st.table.Ref.Account, st.table.Ref.Name).Set(time.Since(l).Seconds())
	}
}

// Window answers a table's restorable window as this server shipped or
// loaded it (zero while this server has not shipped it yet).
func (s *Shipper) Window(ref backend.TableRef, days int64) (earliest, latest, shipped time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.tables[ref.ID]
	if st == nil || !st.loaded {
		return
	}
	latest = st.latest()
	if latest.IsZero() {
		return time.Time{}, time.Time{}, st.lastAt
	}
	earliest = st.firstBase
	if w := time.Now().Add(-time.Duration(days) * 24 * time.Hour); w.After(earliest) {
		earliest = w
	}
	if earliest.After(latest) {
		earliest = latest
	}
	return earliest, latest, st.lastAt
}

// LastSegment names the newest segment this server knows shipped (with
// its sidecar) of the history under prefix, by its first Seq (0: none
// known): a restore must find it in the store (RestorePITRUpTo).
func (s *Shipper) LastSegment(prefix string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.tables {
		if st.prefix == prefix && st.loaded {
			return st.lastFirst
		}
	}
	return 0
}

// ReadHistory reads and verifies every segment of a history in order:
// each against its sidecar (hash, records, range) and the sidecars as a
// chain (each names the hash of the one before, the first the zero
// hash; after pruning, the hash its prune mark names), so a missing,
// reordered, replaced or damaged segment fails,
// naming the object. fn receives each segment's records in Seq order.
func ReadHistory(ctx context.Context, st blobstore.Store, prefix string, fn func([]format.PITRRecord) error) error {
	_, err := readHistory(ctx, st, prefix, -1, fn)
	return err
}

func readObject(ctx context.Context, st blobstore.Store, key string) ([]byte, error) {
	r, err := st.Get(ctx, key)
	if err != nil {
		if errors.Is(err, blobstore.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s: missing", format.ErrSegment, key)
		}
		return nil, err
	}
	defer r.Close()
	return format.ReadAllLimited(r, 1<<30)
}
