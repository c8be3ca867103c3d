package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// DynamoDB Streams (docs/adr/0023-streams-on-the-change-log.md).
//
// A table's streams live in its stored description: each stream (one per
// enabling) has a label, a view type and a list of shards. A shard is a
// generation number (Gen, table-wide, increasing) plus bounds on the
// table log's Seq: every record of the shard has From < Seq <= End (End
// is known once the shard closed and the close was settled). Every item
// write of a table with an enabled stream puts its record, tagged with
// the stream label and the open shard's Gen, in Change.Log. Writes are
// fenced on the description version, so a record always names a shard
// that was open when it committed, and closing a shard (an UpdateTable)
// is ordered after every record tagged with it.

// streamLabel is the label of a stream enabled at now (the service's
// form, e.g. 2026-11-30T12:40:01.123).
func streamLabel(now time.Time) string { return now.UTC().Format("2006-01-02T15:04:05.000") }

// stream finds a stream of the table by label.
func (t *table) streamByLabel(label string) *streamState {
	for i := range t.stored.Streams {
		if t.stored.Streams[i].Label == label {
			return &t.stored.Streams[i]
		}
	}
	return nil
}

// nextGen is the Gen of the next shard of the table.
func (st *storedTable) nextGen() int64 {
	var g int64
	for _, s := range st.Streams {
		for _, sh := range s.Shards {
			g = max(g, sh.Gen)
		}
	}
	return max(g, st.ShardGen) + 1
}

// Record encoding (Change.Log), compact and cheap to build from the bytes
// the write already has:
//
//	version(1) event(1) flags(1) uvarint(len label) label uvarint(gen)
//	uvarint(unix ms) uvarint(SizeBytes) uvarint(len keys) keys
//	uvarint(len new) new uvarint(len old) old
//	[flagTxn: txn id(16) uvarint(records of the transaction in this table)]
//
// keys, new and old are canonical DynamoDB-JSON items (new and old empty
// when the view type leaves them out, unless flagFull). Readers ignore
// bytes after what their flags name.
const recordVersion = 1

const (
	eventInsert byte = 1
	eventModify byte = 2
	eventRemove byte = 3
)

const (
	flagService byte = 1 // a TTL deletion
	// flagFull: both images are kept whatever the stream's view type
	// (point-in-time recovery is on); SizeBytes is then computed when read.
	flagFull byte = 2
	// flagTxn: a transaction marker follows the old image, so a restore
	// keeps the transaction's records all or nothing (ADR 0046).
	flagTxn byte = 4
	// flagHidden: not a stream event, a write of a transaction on a PITR
	// table that changed nothing, logged so the transaction's record
	// count is known before it runs.
	flagHidden byte = 8
)

// txnMark is the transaction marker of a TransactWriteItems' records on
// one PITR table: its id and how many records it writes to the table.
type txnMark struct {
	id    [16]byte
	count int
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// logRecord encodes the record of a write from old to ch (nil when the
// write changes nothing, unless it is part of a transaction on a PITR
// table, tx not nil: then it is a hidden record).
func (s *liveStream) logRecord(oldRaw []byte, ch *backend.Change, keys []byte, service bool, now int64, tx *txnMark) []byte {
	var ev byte
	var newRaw []byte
	var flags byte
	switch ch.Op {
	case backend.Put:
		if oldRaw == nil {
			ev = eventInsert
		} else {
			if bytes.Equal(oldRaw, ch.Item) {
				if tx == nil {
					return nil
				}
				flags |= flagHidden
			}
			ev = eventModify
		}
		newRaw = ch.Item
	case backend.Delete:
		if oldRaw == nil {
			if tx == nil {
				return nil
			}
			flags |= flagHidden
		}
		ev = eventRemove
	default:
		return nil
	}
	if s.full {
		flags |= flagFull
	} else {
		newRaw, oldRaw = viewImages(s.view, newRaw, oldRaw)
	}
	if service {
		flags |= flagService
	}
	if tx != nil {
		flags |= flagTxn
	}
	b := make([]byte, 0, 3+len(s.label)+24+len(keys)+len(newRaw)+len(oldRaw)+9+26)
	b = append(b, recordVersion, ev, flags)
	b = appendBytes(b, []byte(s.label))
	b = binary.AppendUvarint(b, uint64(s.gen))
	b = binary.AppendUvarint(b, uint64(now))
	// SizeBytes: sized once here (about a microsecond), not at every
	// read; a full record is sized when read, by the reader's view.
	var size int
	if !s.full {
		size = rawSize(keys) + rawSize(newRaw) + rawSize(oldRaw)
	}
	b = binary.AppendUvarint(b, uint64(size))
	b = appendBytes(b, keys)
	b = appendBytes(b, newRaw)
	b = appendBytes(b, oldRaw)
	if tx != nil {
		b = append(b, tx.id[:]...)
		b = binary.AppendUvarint(b, uint64(tx.count))
	}
	return b
}

// viewImages keeps the images a stream view type shows.
func viewImages(view byte, newRaw, oldRaw []byte) ([]byte, []byte) {
	if view == viewKeys || view == viewOld {
		newRaw = nil
	}
	if view == viewKeys || view == viewNew {
		oldRaw = nil
	}
	return newRaw, oldRaw
}

// record is a decoded change record.
type record struct {
	event   byte
	flags   byte
	service bool
	label   []byte
	gen     int64
	ms      int64
	size    int64
	keys    []byte
	newRaw  []byte
	oldRaw  []byte
	// txn and txnCount are the transaction marker (flagTxn), nil and 0
	// otherwise.
	txn      []byte
	txnCount int
}

var errRecord = errors.New("engine: corrupt stream record")

func readBytes(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return nil, nil, errRecord
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// decodeHeader decodes a record's flags, label and gen only.
func decodeHeader(b []byte) (flags byte, label []byte, gen int64, err error) {
	if len(b) < 3 || b[0] != recordVersion {
		return 0, nil, 0, errRecord
	}
	label, rest, err := readBytes(b[3:])
	if err != nil {
		return 0, nil, 0, err
	}
	g, k := binary.Uvarint(rest)
	if k <= 0 {
		return 0, nil, 0, errRecord
	}
	return b[2], label, int64(g), nil
}

func decodeRecord(b []byte) (*record, error) {
	if len(b) < 3 || b[0] != recordVersion {
		return nil, errRecord
	}
	r := &record{event: b[1], flags: b[2], service: b[2]&flagService != 0}
	var err error
	rest := b[3:]
	if r.label, rest, err = readBytes(rest); err != nil {
		return nil, err
	}
	g, k := binary.Uvarint(rest)
	if k <= 0 {
		return nil, errRecord
	}
	r.gen, rest = int64(g), rest[k:]
	ms, k := binary.Uvarint(rest)
	if k <= 0 {
		return nil, errRecord
	}
	r.ms, rest = int64(ms), rest[k:]
	size, k := binary.Uvarint(rest)
	if k <= 0 {
		return nil, errRecord
	}
	r.size, rest = int64(size), rest[k:]
	if r.keys, rest, err = readBytes(rest); err != nil {
		return nil, err
	}
	if r.newRaw, rest, err = readBytes(rest); err != nil {
		return nil, err
	}
	if r.oldRaw, rest, err = readBytes(rest); err != nil {
		return nil, err
	}
	if r.flags&flagTxn != 0 {
		if len(rest) < 16 {
			return nil, errRecord
		}
		r.txn, rest = rest[:16], rest[16:]
		c, k := binary.Uvarint(rest)
		if k <= 0 || c == 0 {
			return nil, errRecord
		}
		r.txnCount = int(c)
	}
	return r, nil
}

// keysJSON is the canonical JSON of an item's key attributes.
func (t *table) keysJSON(it attr.Item) []byte {
	k := attr.Item{t.Hash.Name: it[t.Hash.Name]}
	if t.Range != nil {
		k[t.Range.Name] = it[t.Range.Name]
	}
	return attr.EncodeItem(k)
}

// streamed adds the change record to a write of a table with an enabled
// stream or point-in-time recovery: the write is no longer blind (the
// record needs the old item) and its Change carries the record. keys is
// the item's keys JSON (nil: taken from the old or new item). It changes
// nothing for a table that logs no records.
func (e *Engine) streamed(t *table, p backend.WriteItemParams, keys []byte, service bool) backend.WriteItemParams {
	return e.logged(t, p, keys, service, nil)
}

// logged is streamed for a write that may belong to a transaction: with
// tx (a write operation of a TransactWriteItems on a PITR table) the
// record carries the transaction marker, and a write that would change
// nothing of an absent item becomes a Delete of the absent item (a
// no-op for every backend) with a hidden record, so that the
// transaction writes exactly tx.count records to the table.
func (e *Engine) logged(t *table, p backend.WriteItemParams, keys []byte, service bool, tx *txnMark) backend.WriteItemParams {
	s := t.logger()
	if s == nil {
		return p
	}
	if !t.pitr {
		tx = nil
	}
	fn := p.Fn
	p.Blind = false
	p.Fn = func(oldRaw []byte) (backend.Change, error) {
		ch, err := fn(oldRaw)
		if err != nil {
			return ch, err
		}
		if ch.Op == backend.Keep {
			if tx == nil || oldRaw != nil {
				return ch, err
			}
			ch = backend.Change{Op: backend.Delete}
		}
		k := keys
		if k == nil {
			src := ch.Item
			if ch.Op == backend.Delete {
				src = oldRaw
			}
			if src == nil {
				return ch, nil
			}
			it, err := decodeStored(src)
			if err != nil {
				return ch, err
			}
			k = t.keysJSON(it)
		}
		ch.Log = s.logRecord(oldRaw, &ch, k, service, e.now().UnixMilli(), tx)
		return ch, nil
	}
	return p
}

// countLogged counts the records a committed write stored.
func (e *Engine) countLogged(results ...backend.WriteItemResult) {
	n := 0
	for i := range results {
		if results[i].Change.Log != nil && results[i].Change.Op != backend.Keep {
			n++
		}
	}
	if n > 0 {
		e.sm.written.Add(float64(n))
	}
}

// changeLog returns the backend's change log capability.
func (e *Engine) changeLog() (backend.ChangeLog, bool) {
	cl := e.backend.Capabilities().ChangeLog
	return cl, cl != nil
}

// errNoStreams answers enabling a stream on a backend without a change log.
func (e *Engine) errNoStreams() error {
	return validationf("One or more parameter values were invalid: DynamoDB Streams are not supported by the %s storage backend", e.backend.Name())
}

// logLast returns the last Seq of a table's log (0 when empty).
func (e *Engine) logLast(ctx context.Context, ref backend.TableRef) (int64, error) {
	cl, ok := e.changeLog()
	if !ok {
		return 0, e.errNoStreams()
	}
	info, err := cl.LogInfo(ctx, backend.LogInfoParams{Table: ref})
	if err != nil {
		return 0, err
	}
	return info.Last, nil
}

// enableStream appends a new stream with one open shard to st.
func (st *storedTable) enableStream(view string, now time.Time, from int64) {
	d := &st.Desc
	label := streamLabel(now)
	// Two enablings within one millisecond would share a label.
	if n := len(st.Streams); n > 0 && st.Streams[n-1].Label >= label {
		prev, _ := time.Parse("2006-01-02T15:04:05.000", st.Streams[n-1].Label)
		label = streamLabel(prev.Add(time.Millisecond))
	}
	gen := st.nextGen()
	st.ShardGen = gen
	ms := now.UnixMilli()
	st.Streams = append(st.Streams, streamState{Label: label, View: view, Created: ms,
		Shards: []shardState{{Gen: gen, Created: ms, From: from}}})
	d.LatestStreamLabel = label
	d.LatestStreamArn = d.TableArn + "/stream/" + label
}

// disableStream ends the enabled stream and closes its open shard.
func (st *storedTable) disableStream(now time.Time) {
	n := len(st.Streams)
	if n == 0 {
		return
	}
	s := &st.Streams[n-1]
	if s.Ended != 0 {
		return
	}
	s.Ended = now.UnixMilli()
	if k := len(s.Shards); k > 0 && s.Shards[k-1].Closed == 0 {
		s.Shards[k-1].Closed = s.Ended
	}
}

func rawSize(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	n, err := attr.RawItemSize(b)
	if err != nil {
		return len(b)
	}
	return n
}
