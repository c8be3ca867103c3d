package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// Pruning of point-in-time recovery histories (a reconciler duty): what
// no instant of a table's recovery window needs any more is deleted from
// the store. For a history still shipped, that is every base older than
// the newest base at or before the window's start (minus pruneGrace),
// and every segment whose records are all at or below that base's
// position (never the newest segment with a sidecar, which shippers
// chain the next one to). A history no longer shipped (its table
// deleted, or point-in-time recovery turned off or on again) is deleted
// whole once its last restorable instant has left the window.
//
// Crash and race safety: a prune mark (pruned/<first>.json, written
// once, PutIfAbsent) names the first kept segment before any segment
// goes, and readers start at the newest mark, so a prune that stops
// midway leaves leftovers readers skip, never a restorable instant
// without its records; a base's position object goes before its files,
// so no reader picks a half-deleted base; each step is idempotent, so
// two servers pruning one history at once both succeed.

// pruneGrace widens every window the pruner keeps: a restore or an
// export of an instant near the window's start that planned before the
// prune still finds its base.
const pruneGrace = time.Hour

// pruneEvery is the least time between two pruning passes of one
// server's reconciler.
const pruneEvery = 10 * time.Minute

// Steps of pruning where Config.Hook is called.
const (
	PointPITRPruneMarked = "pitr.prune-marked" // the prune mark is written, no segment deleted yet
	PointPITRPruneMid    = "pitr.prune-mid"    // the first pruned segment is deleted
)

// PruneResult counts what one pruning pass deleted.
type PruneResult struct {
	Histories int // histories deleted whole
	Bases     int
	Segments  int
}

// histories walks the store for the heads of every history.
func histories(ctx context.Context, st blobstore.Store, fn func(prefix string) error) error {
	return st.Walk(ctx, "", func(o blobstore.ObjectInfo) error {
		parts := strings.Split(o.Key, "/")
		if len(parts) == 5 && parts[2] == format.PITRDir && parts[4] == "pitr.json" {
			return fn(strings.TrimSuffix(o.Key, "/pitr.json"))
		}
		return nil
	})
}

// maybePrune runs Prune from the reconciler, at most every pruneEvery.
func (s *Shipper) maybePrune(ctx context.Context) error {
	now := s.m.now()
	s.mu.Lock()
	due := s.prunedAt.IsZero() || now.Sub(s.prunedAt) >= pruneEvery
	if due {
		s.prunedAt = now
	}
	s.mu.Unlock()
	if !due {
		return nil
	}
	_, err := s.Prune(ctx)
	return err
}

// Prune runs one pruning pass over every history in the store, at the
// manager's clock (Config.Now).
func (s *Shipper) Prune(ctx context.Context) (PruneResult, error) {
	var res PruneResult
	if err := s.m.Healthy(ctx); err != nil {
		return res, err
	}
	tables, err := s.src.PITRTables(ctx)
	if err != nil {
		return res, err
	}
	live := map[string]int64{} // history prefix -> recovery period in days
	for _, t := range tables {
		live[format.PITRPrefix(t.Ref.Account, t.Ref.Name, t.Incarnation())] = t.Days
	}
	busy, err := s.m.restoringHistories(ctx)
	if err != nil {
		return res, err
	}
	var errs []error
	err = histories(ctx, s.m.st, func(prefix string) error {
		if busy[prefix] {
			return nil // a restore job pinned its base and segments
		}
		if err := s.m.pruneHistory(ctx, prefix, live, &res); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, fmt.Errorf("pitr: pruning %s: %w", prefix, err))
		}
		return nil
	})
	if res.Histories+res.Bases+res.Segments > 0 {
		s.m.log.Info("pitr: pruned histories", "histories", res.Histories, "bases", res.Bases, "segments", res.Segments)
	}
	return res, errors.Join(append(errs, err)...)
}

func (m *Manager) now() time.Time {
	if m.cfg.Now != nil {
		return m.cfg.Now()
	}
	return time.Now()
}

// restoringHistories answers the histories a running point-in-time
// restore job reads (on any server sharing the catalog).
func (m *Manager) restoringHistories(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	if m.rcat == nil {
		m.mu.Lock()
		for arn := range m.restoring {
			if prefix, _, _, ok := parsePITRJob(arn); ok {
				out[prefix] = true
			}
		}
		m.mu.Unlock()
		return out, nil
	}
	rows, err := m.rcat.ListRestores(ctx, []string{backend.RestoreRunning})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if prefix, _, _, ok := parsePITRJob(r.BackupARN); ok {
			out[prefix] = true
		}
	}
	return out, nil
}

// segmentObjects lists a history's segments by first Seq: whether each
// has its segment and its sidecar.
func segmentObjects(ctx context.Context, st blobstore.Store, prefix string) (firsts []int64, segs, sides map[int64]bool, err error) {
	objs, err := st.List(ctx, format.SegmentsPrefix(prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return nil, nil, nil, err
	}
	segs, sides = map[int64]bool{}, map[int64]bool{}
	for _, o := range objs {
		f, sc, ok := format.SegmentFirst(o.Key)
		if !ok {
			continue
		}
		if !segs[f] && !sides[f] {
			firsts = append(firsts, f)
		}
		if sc {
			sides[f] = true
		} else {
			segs[f] = true
		}
	}
	slices.Sort(firsts)
	return firsts, segs, sides, nil
}

func readSidecar(ctx context.Context, st blobstore.Store, prefix string, first int64) (format.SegmentSidecar, error) {
	key := format.SegmentSidecarKey(format.SegmentKey(prefix, first))
	b, err := readObject(ctx, st, key)
	if err != nil {
		return format.SegmentSidecar{}, err
	}
	return format.ParseSegmentSidecar(key, b)
}

// pruneHistory prunes one history (see the top of this file).
func (m *Manager) pruneHistory(ctx context.Context, prefix string, live map[string]int64, res *PruneResult) error {
	hb, err := readObject(ctx, m.st, format.PITRHeadKey(prefix))
	if err != nil {
		return err
	}
	var head pitrHead
	if err := json.Unmarshal(hb, &head); err != nil {
		return fmt.Errorf("%s: %w", format.PITRHeadKey(prefix), err)
	}
	days, shipped := live[prefix]
	if !shipped {
		days = head.RecoveryPeriodInDays
	}
	if days <= 0 {
		days = 35
	}
	start := m.now().Add(-time.Duration(days)*24*time.Hour - pruneGrace)
	bs, err := datedBases(ctx, m.st, prefix)
	if err != nil {
		return err
	}
	segs, err := listSegmentObjects(ctx, m.st, prefix)
	if err != nil {
		return err
	}
	if !shipped {
		return m.deleteEndedHistory(ctx, prefix, start, bs, segs, res)
	}
	// The newest base at or before the window's start is kept, with
	// everything after it.
	keep := -1
	for i, b := range bs {
		if !b.at.After(start) {
			keep = i
		}
	}
	if keep < 0 {
		return nil
	}
	if err := m.pruneBases(ctx, prefix, bs, keep, res); err != nil {
		return err
	}
	return m.pruneSegments(ctx, prefix, bs[keep], segs, res)
}

// datedBase is a base's position object with its snapshot instant.
type datedBase struct {
	b  format.PITRBase
	at time.Time
}

// datedBases lists a history's bases, oldest first.
func datedBases(ctx context.Context, st blobstore.Store, prefix string) ([]datedBase, error) {
	bases, err := listBases(ctx, st, prefix)
	if err != nil {
		return nil, err
	}
	var bs []datedBase
	for _, b := range bases {
		at, err := format.ParsePITRTime(b.SnapshotAt)
		if err != nil {
			return nil, fmt.Errorf("%s: bad snapshot_at", format.BaseKey(prefix, b.BackupID))
		}
		bs = append(bs, datedBase{b, at})
	}
	slices.SortFunc(bs, func(a, b datedBase) int { return a.at.Compare(b.at) })
	return bs, nil
}

// segmentObjectSet is a history's segments by first Seq: whether each
// has its segment and its sidecar.
type segmentObjectSet struct {
	firsts      []int64
	segs, sides map[int64]bool
}

func listSegmentObjects(ctx context.Context, st blobstore.Store, prefix string) (segmentObjectSet, error) {
	firsts, segs, sides, err := segmentObjects(ctx, st, prefix)
	return segmentObjectSet{firsts, segs, sides}, err
}

// whole tells whether the segment starting at f has both its objects.
func (o segmentObjectSet) whole(f int64) bool { return o.segs[f] && o.sides[f] }

// deleteEndedHistory deletes a history no server ships any more, whole,
// once its last instant (its newest segment's last record, or its
// newest base) is before start.
func (m *Manager) deleteEndedHistory(ctx context.Context, prefix string, start time.Time, bs []datedBase, segs segmentObjectSet, res *PruneResult) error {
	st := m.st
	var last time.Time
	if len(bs) > 0 {
		last = bs[len(bs)-1].at
	}
	for i := len(segs.firsts) - 1; i >= 0; i-- {
		if f := segs.firsts[i]; segs.whole(f) {
			side, err := readSidecar(ctx, st, prefix, f)
			if err != nil {
				return err
			}
			if side.LastAt.After(last) {
				last = side.LastAt
			}
			break
		}
	}
	if !last.Before(start) {
		return nil
	}
	// Position objects first: no reader picks a base from here on.
	for _, b := range bs {
		if err := st.DeletePrefix(ctx, format.BaseKey(prefix, b.b.BackupID)); err != nil {
			return err
		}
	}
	for _, p := range []string{format.SegmentsPrefix(prefix), format.BasesPrefix(prefix), format.PrunedPrefix(prefix), prefix} {
		if err := st.DeletePrefix(ctx, p); err != nil {
			return err
		}
	}
	res.Histories++
	m.log.Info("pitr: deleted a history past its recovery window", "history", prefix, "last", last)
	return nil
}

// pruneBases deletes the bases older than bs[keep] (the position object,
// then the files), and the files of older bases whose position object is
// gone (a prune that stopped, or a shipper that died before writing it;
// a base being written now is newer than the kept one).
func (m *Manager) pruneBases(ctx context.Context, prefix string, bs []datedBase, keep int, res *PruneResult) error {
	st := m.st
	for _, b := range bs[:keep] {
		if err := st.DeletePrefix(ctx, format.BaseKey(prefix, b.b.BackupID)); err != nil {
			return err
		}
		if err := st.DeletePrefix(ctx, format.BasesPrefix(prefix)+"/"+b.b.BackupID); err != nil {
			return err
		}
		res.Bases++
	}
	objs, err := st.List(ctx, format.BasesPrefix(prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return err
	}
	known := map[string]bool{}
	for _, b := range bs[keep:] {
		known[b.b.BackupID] = true
	}
	gone := map[string]bool{}
	for _, o := range objs {
		id, _, _ := strings.Cut(strings.TrimPrefix(o.Key, format.BasesPrefix(prefix)+"/"), "/")
		if known[id] || gone[id] {
			continue
		}
		if at, _, err := format.ParseBackupID(id); err == nil && at.Before(bs[keep].at) {
			gone[id] = true
			if err := st.DeletePrefix(ctx, format.BasesPrefix(prefix)+"/"+id); err != nil {
				return err
			}
		}
	}
	return nil
}

// pruneSegments deletes the segments whose records are all at or below
// the kept base's position, oldest first, never the newest with a
// sidecar: it writes the prune mark before any segment the mark covers
// goes, then the segments below the newest mark, then the older marks.
func (m *Manager) pruneSegments(ctx context.Context, prefix string, kept datedBase, segs segmentObjectSet, res *PruneResult) error {
	st := m.st
	mark, _, err := pruneMark(ctx, st, prefix)
	if err != nil {
		return err
	}
	drop, next, wait, err := segmentsToDrop(ctx, st, prefix, kept, segs, mark)
	if err != nil || wait {
		return err
	}
	if next != nil && (mark == nil || next.First > mark.First) {
		if mark, err = m.writePruneMark(ctx, prefix, drop, next, mark); err != nil {
			return err
		}
	}
	for i, f := range drop {
		if mark == nil || f >= mark.First {
			break
		}
		key := format.SegmentKey(prefix, f)
		if err := st.DeletePrefix(ctx, key); err != nil {
			return err
		}
		if err := st.DeletePrefix(ctx, format.SegmentSidecarKey(key)); err != nil {
			return err
		}
		res.Segments++
		if i == 0 {
			m.hook(PointPITRPruneMid)
		}
	}
	if mark == nil {
		return nil
	}
	marks, err := st.List(ctx, format.PrunedPrefix(prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return err
	}
	for _, o := range marks {
		if f, ok := format.PrunedFirst(o.Key); ok && f < mark.First {
			if err := st.DeletePrefix(ctx, o.Key); err != nil {
				return err
			}
		}
	}
	return nil
}

// segmentsToDrop picks, oldest first, the segments to delete: those left
// below the current mark by a prune that stopped, then those whose
// records are all at or below the kept base's position, stopping at the
// newest whole segment or a gap. next is the sidecar of the first kept
// segment when a new mark is due (nil when not); wait is true when that
// segment is not whole yet (a gap, or one being published): the next
// pass prunes.
func segmentsToDrop(ctx context.Context, st blobstore.Store, prefix string, kept datedBase, segs segmentObjectSet, mark *format.PITRPruned) (drop []int64, next *format.SegmentSidecar, wait bool, err error) {
	newest := int64(-1)
	for _, f := range segs.firsts {
		if segs.whole(f) {
			newest = f
		}
	}
	fresh := 0 // segments of drop at or above the newest mark
	for _, f := range segs.firsts {
		if mark != nil && f < mark.First {
			drop = append(drop, f) // left by a prune that stopped
			continue
		}
		if f == newest || !segs.whole(f) {
			break
		}
		side, err := readSidecar(ctx, st, prefix, f)
		if err != nil {
			return nil, nil, false, err
		}
		if side.Last > kept.b.Position {
			next = &side
			break
		}
		drop = append(drop, f)
		fresh++
	}
	if fresh == 0 {
		return drop, nil, false, nil // nothing new to prune: no new mark
	}
	if next == nil {
		// The loop stopped at the newest segment (or a gap): it is the
		// first kept one.
		for _, f := range segs.firsts {
			if f > drop[len(drop)-1] {
				if !segs.whole(f) {
					return nil, nil, true, nil
				}
				side, err := readSidecar(ctx, st, prefix, f)
				if err != nil {
					return nil, nil, false, err
				}
				next = &side
				break
			}
		}
	}
	return drop, next, false, nil
}

// writePruneMark writes the mark of a prune up to next, the first kept
// segment: the chain's hash before it, the pruned range's end and the
// transactions it leaves incomplete, counted from the segments of drop
// at or above the current mark. It answers the new mark.
func (m *Manager) writePruneMark(ctx context.Context, prefix string, drop []int64, next *format.SegmentSidecar, mark *format.PITRPruned) (*format.PITRPruned, error) {
	st := m.st
	nm := format.PITRPruned{First: next.First, Prev: next.Prev, At: format.PITRTime(m.now())}
	total, count := map[string]int{}, map[string]int{}
	from := int64(0)
	if mark != nil {
		from, nm.After = mark.First, mark.After
		for txn, n := range mark.Open {
			count[txn] = n
		}
	}
	for _, f := range drop {
		if f < from {
			continue // already below the last mark
		}
		side, recs, err := readVerified(ctx, st, prefix, f)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.Txn != "" {
				count[r.Txn]++
				total[r.Txn] = r.TxnCount
			}
		}
		nm.After = max(nm.After, side.Last)
	}
	for txn, n := range count {
		if t, ok := total[txn]; !ok || n < t {
			if nm.Open == nil {
				nm.Open = map[string]int{}
			}
			nm.Open[txn] = n
		}
	}
	b, err := json.Marshal(&nm)
	if err != nil {
		return nil, err
	}
	if err := st.PutIfAbsent(ctx, format.PrunedKey(prefix, nm.First), bytes.NewReader(b)); err != nil && !errors.Is(err, blobstore.ErrExists) {
		return nil, err
	}
	m.hook(PointPITRPruneMarked)
	return &nm, nil
}
