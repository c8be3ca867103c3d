package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// ErrRestoreTime: no state of the history can be restored at the asked
// instant (before its first base).
var ErrRestoreTime = errors.New("pitr: the instant is outside the restorable window")

// PITRPlan is a restore of a history to an instant, verified: the base
// to load and the records to replay after it (docs/backup-design.md
// section 7, "The cut"). Close removes the replay's spill file.
type PITRPlan struct {
	Prefix string
	Head   format.PITRHead
	Base   format.PITRBase
	// Backup is the base, opened and verified (every data file).
	Backup *format.Backup
	// Replay holds the changes after the base's position up to the cut,
	// in Seq order, hidden records left out, on disk (pitr_replay.go).
	Replay *replay
	// Cut is the last Seq the restore includes.
	Cut int64
}

// Close removes the plan's replay file.
func (p *PITRPlan) Close() error {
	if p == nil {
		return nil
	}
	return p.Replay.Close()
}

// mappedSource reads a base, whose files the backup names under its ARN's
// prefix, from where the history keeps them.
type mappedSource struct {
	src      StoreSource
	from, to string
}

func (s mappedSource) key(k string) string {
	if rest, ok := strings.CutPrefix(k, s.from); ok {
		return s.to + rest
	}
	return k
}

func (s mappedSource) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.src.Open(ctx, s.key(key))
}

// named makes a format error name the object's key in the store.
func (s mappedSource) named(err error) error {
	var fe *format.FileError
	if errors.As(err, &fe) {
		fe.Key = s.key(fe.Key)
	}
	return err
}

func (s mappedSource) Size(ctx context.Context, key string) (int64, error) {
	return s.src.Size(ctx, s.key(key))
}

// PlanPITRRestore picks the newest base taken at or before at and the
// newest segment of the history (pinPITR), then plans the restore from
// them (planPITR), its replay spilled into dir ("": the system's
// temporary directory). The caller closes the plan.
func PlanPITRRestore(ctx context.Context, st blobstore.Store, prefix string, at time.Time, dir string) (*PITRPlan, error) {
	pin, err := pinPITR(ctx, st, prefix, at)
	if err != nil {
		return nil, err
	}
	return planPITR(ctx, st, prefix, at, pin, dir)
}

// planPITRExport is PlanPITRRestore without the base's upfront read:
// an export checks each data file of the base as it streams it
// (format.Backup.Items) and, failing, removes what it wrote, and its
// manifest-summary.json is written last, so a damaged base leaves no
// export that looks whole. The base is read once instead of twice.
func planPITRExport(ctx context.Context, st blobstore.Store, prefix string, at time.Time, dir string) (*PITRPlan, error) {
	pin, err := pinPITR(ctx, st, prefix, at)
	if err != nil {
		return nil, err
	}
	return planPITRVerify(ctx, st, prefix, at, pin, dir, false)
}

// planPITR plans a restore of the history to at from the pinned base and
// the segments up to the pinned tail, and verifies everything it uses
// before anything is written: the base's position object, manifest and
// every data file (hashes, sizes; with verifyBase false only the sizes,
// for a reader that checks each file as it streams it), and every
// segment from the history's start (or its prune mark) on (hash, chain,
// ranges, the tail present). A damaged or missing object fails the plan
// naming its key in the store. The log is cut at the records with a
// write time at or before at, shortened so that every transaction in it
// is whole. The records after the base are spilled into dir as the
// history is read (pitr_replay.go): planning holds no image in memory.
func planPITR(ctx context.Context, st blobstore.Store, prefix string, at time.Time, pin pitrPin, dir string) (*PITRPlan, error) {
	return planPITRVerify(ctx, st, prefix, at, pin, dir, true)
}

func planPITRVerify(ctx context.Context, st blobstore.Store, prefix string, at time.Time, pin pitrPin, dir string, verifyBase bool) (*PITRPlan, error) {
	hb, err := readObject(ctx, st, format.PITRHeadKey(prefix))
	if err != nil {
		return nil, err
	}
	var head pitrHead
	if err := json.Unmarshal(hb, &head); err != nil {
		return nil, fmt.Errorf("%s: %w", format.PITRHeadKey(prefix), err)
	}
	baseKey := format.BaseKey(prefix, pin.Base)
	bb, err := readObject(ctx, st, baseKey)
	if err != nil {
		return nil, err
	}
	var base format.PITRBase
	if err := json.Unmarshal(bb, &base); err != nil || base.BackupID != pin.Base {
		return nil, fmt.Errorf("%w: %s: not the position object of base %s", format.ErrSegment, baseKey, pin.Base)
	}
	if baseAt, err := format.ParsePITRTime(base.SnapshotAt); err != nil || baseAt.After(at) {
		return nil, fmt.Errorf("%w: %s: bad snapshot_at %q", format.ErrSegment, baseKey, base.SnapshotAt)
	}
	src := mappedSource{src: StoreSource{st}, from: format.Prefix(head.Account, head.TableName, base.BackupID),
		to: format.BasesPrefix(prefix) + "/" + base.BackupID + "/"}
	b, err := format.Open(ctx, src, src.from)
	if err != nil {
		return nil, src.named(err)
	}
	if verifyBase {
		if err := b.Verify(ctx); err != nil {
			return nil, src.named(err)
		}
	} else if err := b.CheckSizes(ctx); err != nil {
		return nil, src.named(err)
	}
	rp, err := newReplayBuilder(dir, b.Schema)
	if err != nil {
		return nil, err
	}
	mark, last, spans, err := readReplay(ctx, st, prefix, at, pin.Tail, base.Position, rp)
	if err != nil {
		rp.abort()
		return nil, err
	}
	var pruned map[string]int
	if mark != nil {
		if mark.After > base.Position {
			// The records between the base and the prune are gone.
			rp.abort()
			return nil, fmt.Errorf("%w: %s: the history was pruned past this base (records up to %d are gone, the base covers %d)",
				format.ErrSegment, baseKey, mark.After, base.Position)
		}
		pruned = mark.Open
	}
	cut := wholeCut(spans, pruned, last)
	replay, err := rp.finish(cut)
	if err != nil {
		return nil, err
	}
	return &PITRPlan{Prefix: prefix, Head: head.PITRHead, Base: base, Backup: b, Replay: replay,
		Cut: max(base.Position, head.Start, cut)}, nil
}

// readReplay reads a history up to the instant at, for a plan from a
// base at position: every record whose write was decided at or before at
// (the longest such prefix of the log: a backend may make records
// readable later than their commit, so the log's At would cut late),
// each after the base into the replay builder, and every transaction's
// span, for the cut (a transaction may straddle the base's position).
// It answers the prune mark the read started from and the last Seq read.
func readReplay(ctx context.Context, st blobstore.Store, prefix string, at time.Time, tail, position int64, rp *replayBuilder) (*format.PITRPruned, int64, map[string]*txnSpan, error) {
	spans := map[string]*txnSpan{}
	var last int64
	mark, err := readHistory(ctx, st, prefix, tail, func(recs []format.PITRRecord) error {
		for i := range recs {
			r := &recs[i]
			ts := r.Time
			if ts == "" {
				ts = r.At
			}
			t, err := format.ParsePITRTime(ts)
			if err != nil {
				return fmt.Errorf("%w: record %d: bad Time", format.ErrSegment, r.Seq)
			}
			if t.After(at) {
				return errStopHistory
			}
			if r.Txn != "" {
				s := spans[r.Txn]
				if s == nil {
					s = &txnSpan{first: r.Seq, before: last}
					spans[r.Txn] = s
				}
				s.last, s.total = r.Seq, r.TxnCount
				s.count++
			}
			last = r.Seq
			if r.Seq > position && !r.Hidden {
				if err := rp.add(r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopHistory) {
		return nil, 0, nil, err
	}
	if mark != nil && last == 0 {
		last = mark.After
	}
	return mark, last, spans, nil
}

var errStopHistory = errors.New("stop")

// pitrJobScheme starts the key of a point-in-time restore job, which the
// job row keeps where a restore from a backup keeps the backup's ARN:
// "pitr:<history prefix>@<instant, unix ms>#<base id>#<tail>", the base
// and the last segment (pitrPin) fixed when the job started. A job taken
// over by the reconciler plans the same restore again from it. (A key
// without the pin, "pitr:<prefix>@<ms>", plans from what the store holds
// when the job runs.)
const pitrJobScheme = "pitr:"

// PITRJobKey is the job key of a restore of the history under prefix to
// the instant at from the base and up to the segment tail (0: none).
func PITRJobKey(prefix string, at time.Time, base string, tail int64) string {
	return pitrJobScheme + prefix + "@" + strconv.FormatInt(at.UnixMilli(), 10) + "#" + base + "#" + strconv.FormatInt(tail, 10)
}

// parsePITRJob reads a job key made by PITRJobKey (pin nil: an unpinned
// key).
func parsePITRJob(key string) (prefix string, at time.Time, pin *pitrPin, ok bool) {
	rest, ok := strings.CutPrefix(key, pitrJobScheme)
	if !ok {
		return "", time.Time{}, nil, false
	}
	i := strings.LastIndexByte(rest, '@')
	if i <= 0 {
		return "", time.Time{}, nil, false
	}
	prefix, rest = rest[:i], rest[i+1:]
	if ms, pinned, has := strings.Cut(rest, "#"); has {
		base, tail, ok := strings.Cut(pinned, "#")
		n, err := strconv.ParseInt(tail, 10, 64)
		if !ok || err != nil || n < 0 || base == "" || strings.ContainsAny(base, "/#") {
			return "", time.Time{}, nil, false
		}
		pin, rest = &pitrPin{Base: base, Tail: n}, ms
	}
	ms, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return "", time.Time{}, nil, false
	}
	return prefix, time.UnixMilli(ms), pin, true
}

// planJob plans the restore a job key names, its replay spilled into
// dir. The caller closes the plan.
func planJob(ctx context.Context, st blobstore.Store, key, dir string) (*PITRPlan, error) {
	prefix, at, pin, ok := parsePITRJob(key)
	if !ok {
		return nil, fmt.Errorf("restore: %q is not a point-in-time restore job", key)
	}
	if pin == nil {
		return PlanPITRRestore(ctx, st, prefix, at, dir)
	}
	return planPITR(ctx, st, prefix, at, *pin, dir)
}

// pitrJobRecord is the backup record a point-in-time restore job runs
// under (RestoreTable, reconcileRestores): its ARN is the job key, its
// prefix the history's.
func pitrJobRecord(key string) (backend.BackupRecord, bool) {
	prefix, at, _, ok := parsePITRJob(key)
	if !ok {
		return backend.BackupRecord{}, false
	}
	return backend.BackupRecord{ARN: key, BackupID: "pitr-" + strconv.FormatInt(at.UnixMilli(), 10), Prefix: prefix,
		Status: backend.BackupAvailable}, true
}

// RestorePITR starts restoring the history under prefix, as it was at
// the instant at, into the table account/name: a restore job like
// RestoreTable's (claims, fencing, progress, the reconciler), whose load
// is the plan's base then its replay (planPITR verifies both before the
// first item is written). The base and the last segment are pinned
// first, into the job key, which create receives and the target's
// description must keep (Restorer.IsRestoreTarget).
func (m *Manager) RestorePITR(ctx context.Context, prefix string, at time.Time, account, name string,
	create func(ctx context.Context, job string) (*backend.Table, error)) error {
	return m.RestorePITRUpTo(ctx, prefix, at, 0, account, name, create)
}

// RestorePITRUpTo is RestorePITR when the segment whose first Seq is
// shipped is known to be in the history (Shipper.LastSegment): the job
// reads up to it at least, so a restore fails, naming it, when the
// newest segments are gone from the store rather than restoring without
// them.
func (m *Manager) RestorePITRUpTo(ctx context.Context, prefix string, at time.Time, shipped int64, account, name string,
	create func(ctx context.Context, job string) (*backend.Table, error)) error {
	if err := m.Healthy(ctx); err != nil {
		return unavailable(err)
	}
	pin, err := pinPITR(ctx, m.st, prefix, at)
	if err != nil {
		return backend.Errorf(backend.KindUnavailable, "point-in-time recovery: reading the history in the backup store: %v", err)
	}
	pin.Tail = max(pin.Tail, shipped)
	key := PITRJobKey(prefix, at, pin.Base, pin.Tail)
	b, _ := pitrJobRecord(key)
	return m.RestoreTable(ctx, b, account, name, func(ctx context.Context) (*backend.Table, error) { return create(ctx, key) })
}

// StoreHistory is a table's history found in the store alone (no
// catalog row): for a restore whose source is not in the catalog.
type StoreHistory struct {
	Prefix string
	Head   format.PITRHead
	// Earliest and Latest bound the restorable instants as the store
	// holds them (both zero: no base yet).
	Earliest, Latest time.Time
}

// FindHistory finds the newest history in the store of the table
// account/name whose ARN is arn (nil when there is none), and its
// restorable window: from the later of its oldest base and now minus
// its recovery period, to the later of its last sidecar's last record
// and its newest base.
func (m *Manager) FindHistory(ctx context.Context, account, name, arn string) (*StoreHistory, error) {
	parent := format.PITRPrefix(account, name, "")
	objs, err := m.st.List(ctx, strings.TrimSuffix(parent, "/"))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return nil, err
	}
	var best *StoreHistory
	var bestSince int64
	for _, o := range objs {
		inc, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, parent), "/pitr.json")
		if !ok || strings.Contains(inc, "/") || !strings.HasPrefix(o.Key, parent) {
			continue
		}
		since, err := strconv.ParseInt(inc[strings.LastIndexByte(inc, '.')+1:], 10, 64)
		if err != nil {
			continue
		}
		hb, err := readObject(ctx, m.st, o.Key)
		if err != nil {
			return nil, err
		}
		var h format.PITRHead
		if err := json.Unmarshal(hb, &h); err != nil {
			return nil, fmt.Errorf("%s: %w", o.Key, err)
		}
		if h.TableArn != arn || best != nil && since <= bestSince {
			continue
		}
		best, bestSince = &StoreHistory{Prefix: parent + inc, Head: h}, since
	}
	if best == nil {
		return nil, nil
	}
	if err := historyWindow(ctx, m.st, best, m.now()); err != nil {
		return nil, err
	}
	return best, nil
}

// historyWindow sets a history's restorable window from the store: from
// the later of its oldest base and now minus its recovery period, to the
// later of its last sidecar's last record and its newest base (both
// zero while it has no base).
func historyWindow(ctx context.Context, st blobstore.Store, best *StoreHistory, now time.Time) error {
	bases, err := listBases(ctx, st, best.Prefix)
	if err != nil {
		return err
	}
	var first, last time.Time
	for _, b := range bases {
		at, err := format.ParsePITRTime(b.SnapshotAt)
		if err != nil {
			continue
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	if first.IsZero() {
		return nil
	}
	segs, err := st.List(ctx, format.SegmentsPrefix(best.Prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return err
	}
	top := int64(-1)
	for _, o := range segs {
		if f, sc, ok := format.SegmentFirst(o.Key); ok && sc && f > top {
			top = f
		}
	}
	if top >= 0 {
		key := format.SegmentSidecarKey(format.SegmentKey(best.Prefix, top))
		b, err := readObject(ctx, st, key)
		if err != nil {
			return err
		}
		side, err := format.ParseSegmentSidecar(key, b)
		if err != nil {
			return err
		}
		if side.LastAt.After(last) {
			last = side.LastAt
		}
	}
	best.Latest = last.Truncate(time.Millisecond)
	best.Earliest = first
	if w := now.Add(-time.Duration(best.Head.RecoveryPeriodInDays) * 24 * time.Hour); w.After(best.Earliest) {
		best.Earliest = w
	}
	if best.Earliest.After(best.Latest) {
		best.Earliest = best.Latest
	}
	return nil
}

// ListHistories lists every point-in-time recovery history in the store
// with its restorable window, by account, table and start: what a server
// can restore with RestoreTableToPointInTime by the table's ARN, although
// its catalog does not hold the table (a history no longer shipped keeps
// its window until the reconciler prunes it).
func ListHistories(ctx context.Context, st blobstore.Store) ([]StoreHistory, error) {
	var out []StoreHistory
	err := histories(ctx, st, func(prefix string) error {
		hb, err := readObject(ctx, st, format.PITRHeadKey(prefix))
		if err != nil {
			return err
		}
		var h format.PITRHead
		if err := json.Unmarshal(hb, &h); err != nil {
			return fmt.Errorf("%s: %w", format.PITRHeadKey(prefix), err)
		}
		out = append(out, StoreHistory{Prefix: prefix, Head: h})
		return nil
	})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for i := range out {
		if err := historyWindow(ctx, st, &out[i], now); err != nil {
			return nil, err
		}
	}
	return out, nil
}
