package txledger

import (
	"encoding/binary"
	"errors"

	"github.com/extenddb/extenddb/internal/backend"
)

// Portable encodings a backend may use to store a lock's change and a
// transaction record's keys as bytes. Each starts with a format byte.

const (
	changeFormat = 1
	keysFormat   = 1
)

// ErrMalformed is returned when stored ledger bytes do not decode.
var ErrMalformed = errors.New("txledger: malformed stored value")

type enc struct{ b []byte }

func (e *enc) bytes(v []byte) {
	if v == nil {
		e.b = append(e.b, 0)
		return
	}
	e.b = append(e.b, 1)
	e.b = binary.AppendUvarint(e.b, uint64(len(v)))
	e.b = append(e.b, v...)
}

func (e *enc) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }

type dec struct {
	b   []byte
	err error
}

func (d *dec) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = ErrMalformed
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = ErrMalformed
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) bytes() []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) == 0 {
		d.err = ErrMalformed
		return nil
	}
	present := d.b[0]
	d.b = d.b[1:]
	if present == 0 {
		return nil
	}
	n := d.uint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = ErrMalformed
		return nil
	}
	v := make([]byte, n)
	copy(v, d.b[:n])
	d.b = d.b[n:]
	return v
}

// count reads a length that cannot exceed the bytes left (each element
// takes at least one byte).
func (d *dec) count() int {
	n := d.uint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = ErrMalformed
	}
	return int(n)
}

// EncodeChange serializes a change (op, item, index deletes and puts,
// change record).
func EncodeChange(ch backend.Change) []byte {
	e := &enc{b: []byte{changeFormat, byte(ch.Op)}}
	e.bytes(ch.Item)
	e.uint(uint64(len(ch.DeleteIndex)))
	for _, k := range ch.DeleteIndex {
		e.bytes([]byte(k.Index))
		e.bytes(k.PK)
		e.bytes(k.SK)
	}
	e.uint(uint64(len(ch.PutIndex)))
	for _, p := range ch.PutIndex {
		e.bytes([]byte(p.Index))
		e.bytes(p.PK)
		e.bytes(p.SK)
		e.bytes(p.Item)
	}
	e.bytes(ch.Log)
	return e.b
}

// DecodeChange is the inverse of EncodeChange.
func DecodeChange(b []byte) (backend.Change, error) {
	var ch backend.Change
	if len(b) < 2 || b[0] != changeFormat || b[1] > byte(backend.Delete) {
		return ch, ErrMalformed
	}
	ch.Op = backend.ChangeOp(b[1])
	d := &dec{b: b[2:]}
	ch.Item = d.bytes()
	for n := d.count(); n > 0 && d.err == nil; n-- {
		ch.DeleteIndex = append(ch.DeleteIndex, backend.IndexKey{Index: string(d.bytes()), PK: d.bytes(), SK: d.bytes()})
	}
	for n := d.count(); n > 0 && d.err == nil; n-- {
		ch.PutIndex = append(ch.PutIndex, backend.IndexEntry{IndexKey: backend.IndexKey{Index: string(d.bytes()), PK: d.bytes(), SK: d.bytes()}, Item: d.bytes()})
	}
	ch.Log = d.bytes()
	if d.err == nil && len(d.b) != 0 {
		d.err = ErrMalformed
	}
	if d.err != nil {
		return backend.Change{}, d.err
	}
	return ch, nil
}

// EncodeKeys serializes a transaction's item keys (table account, name,
// id and version, pk, sk).
func EncodeKeys(keys []Key) []byte {
	e := &enc{b: []byte{keysFormat}}
	e.uint(uint64(len(keys)))
	for _, k := range keys {
		e.bytes([]byte(k.Table.Account))
		e.bytes([]byte(k.Table.Name))
		e.int(k.Table.ID)
		e.int(k.Table.Version)
		e.bytes(k.PK)
		e.bytes(k.SK)
	}
	return e.b
}

// DecodeKeys is the inverse of EncodeKeys.
func DecodeKeys(b []byte) ([]Key, error) {
	if len(b) < 1 || b[0] != keysFormat {
		return nil, ErrMalformed
	}
	d := &dec{b: b[1:]}
	n := d.count()
	keys := make([]Key, 0, n)
	for ; n > 0 && d.err == nil; n-- {
		var k Key
		k.Table.Account = string(d.bytes())
		k.Table.Name = string(d.bytes())
		k.Table.ID = d.int()
		k.Table.Version = d.int()
		k.PK = d.bytes()
		k.SK = d.bytes()
		keys = append(keys, k)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = ErrMalformed
	}
	if d.err != nil {
		return nil, d.err
	}
	return keys, nil
}

// After is the committed item a record shows once lock l rolls forward:
// the change's item for Put, nil for Delete, the stored item for Keep.
func After(item []byte, l *Lock) []byte {
	if l == nil {
		return item
	}
	switch l.Change.Op {
	case backend.Put:
		return l.Change.Item
	case backend.Delete:
		return nil
	}
	return item
}
