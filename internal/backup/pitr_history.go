package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"time"

	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/format"
)

// zeroPrev is the chain's previous-sidecar hash of a history's first
// segment.
var zeroPrev = strings.Repeat("0", 64)

// pruneMark reads a history's newest prune mark (nil: never pruned). The
// reconciler writes a mark before it deletes anything below it, and
// marks only move forward (each is a new object, named by the first
// segment it keeps), so the newest names where the history starts.
func pruneMark(ctx context.Context, st blobstore.Store, prefix string) (*format.PITRPruned, string, error) {
	objs, err := st.List(ctx, format.PrunedPrefix(prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return nil, "", err
	}
	best, key := int64(-1), ""
	for _, o := range objs {
		if f, ok := format.PrunedFirst(o.Key); ok && f > best {
			best, key = f, o.Key
		}
	}
	if key == "" {
		return nil, "", nil
	}
	b, err := readObject(ctx, st, key)
	if err != nil {
		return nil, "", err
	}
	var m format.PITRPruned
	if err := json.Unmarshal(b, &m); err != nil || m.First != best || len(m.Prev) != 64 {
		return nil, "", fmt.Errorf("%w: %s: not a prune mark", format.ErrSegment, key)
	}
	return &m, key, nil
}

// readHistory reads and verifies a history's segments in order (see
// ReadHistory), from its start or, once pruned, from the segment its
// newest prune mark names (whose sidecar must name the mark's hash as
// the one before it). tail pins the last segment to read: below zero,
// every segment (a last one without its sidecar is being published and
// left out); zero, none; above zero, every segment up to the one named
// by it, which must be there with its sidecar unless fn stops earlier.
// It answers the prune mark the read started from.
func readHistory(ctx context.Context, st blobstore.Store, prefix string, tail int64, fn func([]format.PITRRecord) error) (*format.PITRPruned, error) {
	mark, markKey, err := pruneMark(ctx, st, prefix)
	if err != nil {
		return nil, err
	}
	objs, err := st.List(ctx, format.SegmentsPrefix(prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return nil, err
	}
	var firsts []int64
	sidecars := map[int64]bool{}
	segs := map[int64]bool{}
	for _, o := range objs {
		f, sc, ok := format.SegmentFirst(o.Key)
		if !ok {
			return nil, fmt.Errorf("%w: %s: not a segment", format.ErrSegment, o.Key)
		}
		if mark != nil && f < mark.First {
			continue // pruned (a prune that stopped midway leaves some)
		}
		if !sidecars[f] && !segs[f] {
			firsts = append(firsts, f)
		}
		if sc {
			sidecars[f] = true
		} else {
			segs[f] = true
		}
	}
	slices.Sort(firsts)
	prev, last, prevKey := zeroPrev, int64(0), ""
	if mark != nil {
		prev, last = mark.Prev, mark.After
		if tail != 0 && (len(firsts) == 0 || firsts[0] != mark.First) {
			return mark, fmt.Errorf("%w: %s: missing (the first segment kept by %s)", format.ErrSegment,
				format.SegmentKey(prefix, mark.First), markKey)
		}
	}
	reached := tail <= 0
	// What to read, in order; a missing object fails the read when it
	// is reached (fn may stop before).
	var todo []readSegment
	for i, f := range firsts {
		if tail >= 0 && f > tail {
			break
		}
		key := format.SegmentKey(prefix, f)
		switch {
		case !sidecars[f] && tail < 0 && i == len(firsts)-1:
			// being published: not part of the history yet
		case !sidecars[f]:
			todo = append(todo, readSegment{err: fmt.Errorf("%w: %s: missing", format.ErrSegment, format.SegmentSidecarKey(key))})
		case !segs[f]:
			todo = append(todo, readSegment{err: fmt.Errorf("%w: %s: missing (its sidecar is there)", format.ErrSegment, key)})
		default:
			todo = append(todo, readSegment{key: key, first: f})
		}
	}
	// The segments are read and verified ahead, on a goroutine of their
	// own, while fn takes the ones before (two in flight at most).
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ahead := make(chan readSegment, 1)
	go func() {
		defer close(ahead)
		for _, r := range todo {
			if r.err == nil {
				r.side, r.recs, r.err = readVerified(rctx, st, prefix, r.first)
				if r.err == nil && r.side.First != r.first {
					r.err = fmt.Errorf("%w: %s: range %d-%d overlaps or does not match its name", format.ErrSegment, r.key, r.side.First, r.side.Last)
				}
			}
			select {
			case ahead <- r:
			case <-rctx.Done():
				return
			}
			if r.err != nil {
				return
			}
		}
	}()
	defer func() {
		cancel()
		for range ahead {
		}
	}()
	for r := range ahead {
		if r.err != nil {
			return mark, r.err
		}
		f, key, side := r.side.First, r.key, r.side
		if side.Prev != prev {
			if prevKey == "" {
				return mark, fmt.Errorf("%w: %s: does not start the history (a segment before it is missing, or it was replaced)", format.ErrSegment, key)
			}
			return mark, fmt.Errorf("%w: %s: does not follow %s (a segment between them is missing, or one was reordered or replaced)",
				format.ErrSegment, key, prevKey)
		}
		if side.First <= last {
			return mark, fmt.Errorf("%w: %s: range %d-%d overlaps or does not match its name", format.ErrSegment, key, side.First, side.Last)
		}
		if err := fn(r.recs); err != nil {
			return mark, err
		}
		prev, last, prevKey = side.Hash(), side.Last, key
		if f == tail {
			reached = true
		}
	}
	if !reached {
		key := format.SegmentKey(prefix, tail)
		if segs[tail] {
			key = format.SegmentSidecarKey(key)
		}
		return mark, fmt.Errorf("%w: %s: missing (the restore was planned with it)", format.ErrSegment, key)
	}
	return mark, nil
}

// readSegment is a segment read and verified against its sidecar.
type readSegment struct {
	key   string
	first int64
	side  format.SegmentSidecar
	recs  []format.PITRRecord
	err   error
}

// readVerified reads segment first of the history under prefix and its
// sidecar, and verifies the one against the other (hash, records,
// range).
func readVerified(ctx context.Context, st blobstore.Store, prefix string, first int64) (format.SegmentSidecar, []format.PITRRecord, error) {
	side, err := readSidecar(ctx, st, prefix, first)
	if err != nil {
		return side, nil, err
	}
	key := format.SegmentKey(prefix, first)
	data, err := readObject(ctx, st, key)
	if err != nil {
		return side, nil, err
	}
	recs, err := format.VerifySegment(key, data, side)
	return side, recs, err
}

// pitrPin is what a point-in-time restore job reads, fixed when the job
// starts and kept in its job key: the base it loads and the last segment
// it may read (0: none). A job taken over by another server reads the
// same objects, whatever was shipped, based or pruned since, so it
// restores the same state (or fails, naming the object it misses).
type pitrPin struct {
	Base string
	Tail int64
}

// pinPITR picks a restore's base (the newest at or before at) and its
// tail (the newest segment with its sidecar).
func pinPITR(ctx context.Context, st blobstore.Store, prefix string, at time.Time) (pitrPin, error) {
	bases, err := listBases(ctx, st, prefix)
	if err != nil {
		return pitrPin{}, err
	}
	var pin pitrPin
	var best int64 = -1
	for _, b := range bases {
		t, err := format.ParsePITRTime(b.SnapshotAt)
		if err != nil {
			return pitrPin{}, fmt.Errorf("%w: %s: bad snapshot_at", format.ErrSegment, format.BaseKey(prefix, b.BackupID))
		}
		if ms := t.UnixMilli(); ms <= at.UnixMilli() && ms > best {
			best, pin.Base = ms, b.BackupID
		}
	}
	if pin.Base == "" {
		return pitrPin{}, fmt.Errorf("%w: no base of %s at or before %s", ErrRestoreTime, prefix, strconv.FormatInt(at.UnixMilli(), 10))
	}
	objs, err := st.List(ctx, format.SegmentsPrefix(prefix))
	if err != nil && !errors.Is(err, blobstore.ErrNotFound) {
		return pitrPin{}, err
	}
	segs, sides := map[int64]bool{}, map[int64]bool{}
	for _, o := range objs {
		if f, sc, ok := format.SegmentFirst(o.Key); ok {
			if sc {
				sides[f] = true
			} else {
				segs[f] = true
			}
		}
	}
	for f := range sides {
		if segs[f] && f > pin.Tail {
			pin.Tail = f
		}
	}
	return pin, nil
}
