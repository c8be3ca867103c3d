package backup

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"os"
	"slices"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/format"
)

// A replay is a point-in-time plan's records after its base, kept on disk
// rather than in memory, so that restoring or exporting a history costs
// the same memory whatever it holds (docs/backup-design.md section 7,
// "The replay on disk"; ADR 0055). Planning streams the history once:
// each record after the base goes to a spill file (its Seq, its key's
// identity, and its new image, or its keys for a removal), and each key's
// identity and Seq to a slice that, once the cut is known, is sorted into
// every touched key's last record. A reader then needs the slice and one
// sequential read of the file:
//
//   - a base item is left out when its key is touched (the replay decides
//     its state);
//   - the replay's puts are the records that are their key's last record
//     and carry a new image, in Seq order.
//
// Memory: 32 bytes per record after the base (the slice), whatever the
// images' sizes. A key's identity is a 128-bit hash of its order-
// preserving key encoding (attr.AppendKeyBytes) under two seeds drawn
// per replay; two keys of a table share one with a probability below
// n²/2^129, about 10^-26 for ten million keys.

// keyID is a key's identity in a replay.
type keyID [2]uint64

func (a keyID) compare(b keyID) int {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return cmp.Compare(a[1], b[1])
}

// replayLast is a touched key's last record up to the cut.
type replayLast struct {
	id  keyID
	seq int64
	put bool
}

// replay is a plan's replay on disk (see above). Close removes its file.
type replay struct {
	seeds [2]maphash.Seed
	f     *os.File
	cut   int64        // records after it in the file are not part of the replay
	last  []replayLast // by id
	// records is the number of records in the replay (up to the cut),
	// puts the number of keys it leaves present.
	records, puts int64
}

// replayBuilder writes a replay's file while the history is read.
type replayBuilder struct {
	r      *replay
	w      *bufio.Writer
	schema format.KeySchema
	touch  []replayLast
	buf    []byte
}

func newReplayBuilder(dir string, schema format.KeySchema) (*replayBuilder, error) {
	f, err := os.CreateTemp(dir, "extenddb-pitr-replay-")
	if err != nil {
		return nil, fmt.Errorf("point-in-time replay: spill file: %w", err)
	}
	r := &replay{seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}, f: f}
	return &replayBuilder{r: r, w: bufio.NewWriterSize(f, 1<<20), schema: schema}, nil
}

// id is the identity of key k.
func (r *replay) id(k format.Key) (keyID, bool) {
	var buf [128]byte
	b, ok := attr.AppendKeyBytes(buf[:0], k.Hash)
	if !ok {
		return keyID{}, false
	}
	// The hash part's length keeps ("ab","c") apart from ("a","bc").
	b = binary.BigEndian.AppendUint32(b, uint32(len(b)))
	if k.Range.Type != attr.TypeInvalid {
		if b, ok = attr.AppendKeyBytes(b, k.Range); !ok {
			return keyID{}, false
		}
	}
	return keyID{maphash.Bytes(r.seeds[0], b), maphash.Bytes(r.seeds[1], b)}, true
}

// Record layout in the spill file: Seq (8 bytes), identity (16), put
// (1), the image's length (4), the image (the new image of a put, the
// keys of a removal).
const replayHeader = 8 + 16 + 1 + 4

// add spills record rec, which follows the base.
func (b *replayBuilder) add(rec *format.PITRRecord) error {
	img := rec.NewImage
	put := len(img) > 0 && string(img) != "null"
	if !put {
		img = rec.Keys
	}
	if len(img) == 0 {
		return fmt.Errorf("%w: record %d has neither keys nor a new image", format.ErrSegment, rec.Seq)
	}
	keys, err := attr.DecodeItem(rec.Keys)
	if err != nil {
		return fmt.Errorf("%w: record %d: keys: %v", format.ErrSegment, rec.Seq, err)
	}
	k, err := b.schema.KeyOf(keys)
	if err != nil {
		return fmt.Errorf("%w: record %d: %v", format.ErrSegment, rec.Seq, err)
	}
	id, ok := b.r.id(k)
	if !ok {
		return fmt.Errorf("%w: record %d: a key attribute is not a key type", format.ErrSegment, rec.Seq)
	}
	if len(img) > math.MaxUint32 {
		return fmt.Errorf("%w: record %d: image too large", format.ErrSegment, rec.Seq)
	}
	h := b.buf[:0]
	h = binary.BigEndian.AppendUint64(h, uint64(rec.Seq))
	h = binary.BigEndian.AppendUint64(h, id[0])
	h = binary.BigEndian.AppendUint64(h, id[1])
	if put {
		h = append(h, 1)
	} else {
		h = append(h, 0)
	}
	h = binary.BigEndian.AppendUint32(h, uint32(len(img)))
	b.buf = h
	if _, err := b.w.Write(h); err != nil {
		return b.spillErr(err)
	}
	if _, err := b.w.Write(img); err != nil {
		return b.spillErr(err)
	}
	b.touch = append(b.touch, replayLast{id: id, seq: rec.Seq, put: put})
	return nil
}

func (b *replayBuilder) spillErr(err error) error {
	return fmt.Errorf("point-in-time replay: spill file: %w", err)
}

// finish ends the replay at cut (the last Seq it includes): each touched
// key's last record up to it.
func (b *replayBuilder) finish(cut int64) (*replay, error) {
	if err := b.w.Flush(); err != nil {
		b.r.Close()
		return nil, b.spillErr(err)
	}
	r := b.r
	r.cut = cut
	touch := b.touch
	b.touch = nil
	n := len(touch)
	for n > 0 && touch[n-1].seq > cut {
		n-- // Seq order: the records past the cut are the last ones
	}
	touch = touch[:n]
	r.records = int64(n)
	slices.SortFunc(touch, func(a, b replayLast) int {
		if c := a.id.compare(b.id); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	last := touch[:0]
	for i, t := range touch {
		if i+1 < len(touch) && touch[i+1].id == t.id {
			continue
		}
		last = append(last, t)
		if t.put {
			r.puts++
		}
	}
	r.last = slices.Clip(last)
	return r, nil
}

// abort removes a replay never finished.
func (b *replayBuilder) abort() { b.r.Close() }

// Close removes the replay's file.
func (r *replay) Close() error {
	if r == nil || r.f == nil {
		return nil
	}
	name := r.f.Name()
	err := r.f.Close()
	r.f = nil
	if rerr := os.Remove(name); err == nil && !errors.Is(rerr, os.ErrNotExist) {
		err = rerr
	}
	return err
}

func (r *replay) find(id keyID) (replayLast, bool) {
	i, ok := slices.BinarySearchFunc(r.last, id, func(l replayLast, id keyID) int { return l.id.compare(id) })
	if !ok {
		return replayLast{}, false
	}
	return r.last[i], true
}

// Touches tells whether the replay decides key k's state (a base item
// with that key is not part of the image).
func (r *replay) Touches(k format.Key) bool {
	id, ok := r.id(k)
	if !ok {
		return false
	}
	_, ok = r.find(id)
	return ok
}

// each calls fn with every record of the replay in Seq order: the image
// (a put's new image, a removal's keys; fn must not keep it) and whether
// the record is its key's last.
func (r *replay) each(fn func(seq int64, put, last bool, img []byte) error) error {
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	rd := bufio.NewReaderSize(r.f, 1<<20)
	var h [replayHeader]byte
	var img []byte
	for {
		if _, err := io.ReadFull(rd, h[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("point-in-time replay: spill file: %w", err)
		}
		seq := int64(binary.BigEndian.Uint64(h[0:]))
		id := keyID{binary.BigEndian.Uint64(h[8:]), binary.BigEndian.Uint64(h[16:])}
		put := h[24] == 1
		n := int(binary.BigEndian.Uint32(h[25:]))
		if seq > r.cut {
			return nil
		}
		if cap(img) < n {
			img = make([]byte, n)
		}
		img = img[:n]
		if _, err := io.ReadFull(rd, img); err != nil {
			return fmt.Errorf("point-in-time replay: spill file: %w", err)
		}
		l, _ := r.find(id)
		if err := fn(seq, put, l.seq == seq, img); err != nil {
			return err
		}
	}
}

// EachPut calls fn with the new image of each key the replay leaves present
// (its last record's), in Seq order; fn must not keep img.
func (r *replay) EachPut(fn func(img []byte) error) error {
	return r.each(func(_ int64, put, last bool, img []byte) error {
		if put && last {
			return fn(img)
		}
		return nil
	})
}

// txnSpan is what the cut needs of a transaction's records in the
// history read: the first and last record's Seq, the Seq before the
// first, and how many records were read of how many it wrote.
type txnSpan struct {
	first, last, before int64
	count, total        int
}

// wholeCut answers the last Seq of the longest prefix of the read
// history (its records up to end) in which every transaction has all its
// records: the prefix ends before the first record of a transaction
// found incomplete, which may make another incomplete (one whose records
// straddle the new end), so it repeats until none is. pruned counts, per
// transaction, its records in segments pruned away: those count as read,
// and such a transaction's first record is taken to be the history's
// first (a cut there keeps nothing, and the answer is 0).
func wholeCut(spans map[string]*txnSpan, pruned map[string]int, end int64) int64 {
	const beforeAll = math.MinInt64
	for txn, n := range pruned {
		s := spans[txn]
		if s == nil {
			s = &txnSpan{last: beforeAll}
			spans[txn] = s
		}
		s.count += n
		s.first, s.before = beforeAll, 0
	}
	// The prefix holds the records with Seq below next; upto is its
	// last Seq.
	next, upto := end+1, end
	for _, s := range spans {
		if s.count < s.total && s.first < next {
			next, upto = s.first, s.before
		}
	}
	for moved := true; moved; {
		moved = false
		for _, s := range spans {
			if s.first < next && s.last >= next {
				next, upto, moved = s.first, s.before, true
			}
		}
	}
	return upto
}
