package format

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/extenddb/extenddb/internal/attr"
)

// A segment line is a PITRRecord as encoding/json writes it, and a
// restore or an export reads every line of a history: encoding/json
// scans each line twice (json.Unmarshal validates the whole line before
// decoding it, then skips the images again), which made it most of a
// point-in-time plan's CPU. decodeRecord reads the lines the shipper
// writes in one pass: a flat object of known members, scalars without
// escapes, images in the canonical item encoding (attr.RawItemEnd checks
// each as it finds its end). Anything else (escapes, other spacing,
// other member types) it refuses, and the line is decoded by
// encoding/json instead, so that any line encoding/json accepts is read
// the same way, with its errors.

var errSlowPath = errors.New("format: not a line decodeRecord reads")

// decodeRecord decodes one segment line into r. The images are copies
// (line is the reader's buffer).
func decodeRecord(line []byte, r *PITRRecord) error {
	if err := decodeRecordFast(line, r); err != nil {
		*r = PITRRecord{}
		return json.Unmarshal(line, r)
	}
	return nil
}

func decodeRecordFast(line []byte, r *PITRRecord) error {
	d := lineDecoder{b: line}
	if !d.byte('{') {
		return errSlowPath
	}
	if d.byte('}') {
		return d.end()
	}
	for {
		key, ok := d.plain()
		if !ok || !d.byte(':') {
			return errSlowPath
		}
		switch string(key) {
		case "Seq":
			r.Seq, ok = d.int()
		case "TxnCount":
			var n int64
			n, ok = d.int()
			r.TxnCount = int(n)
		case "At":
			r.At, ok = d.text()
		case "Time":
			r.Time, ok = d.text()
		case "Event":
			r.Event, ok = d.text()
		case "Txn":
			r.Txn, ok = d.text()
		case "Hidden":
			r.Hidden, ok = d.bool()
		case "Service":
			r.Service, ok = d.bool()
		case "Keys":
			r.Keys, ok = d.image()
		case "NewImage":
			r.NewImage, ok = d.image()
		case "OldImage":
			r.OldImage, ok = d.image()
		default:
			return errSlowPath
		}
		if !ok {
			return errSlowPath
		}
		if d.byte('}') {
			return d.end()
		}
		if !d.byte(',') {
			return errSlowPath
		}
	}
}

type lineDecoder struct {
	b []byte
	i int
}

func (d *lineDecoder) byte(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *lineDecoder) end() error {
	if d.i != len(d.b) {
		return errSlowPath
	}
	return nil
}

// plain reads a string without escapes or control characters, in valid
// UTF-8 (encoding/json replaces invalid bytes).
func (d *lineDecoder) plain() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	for d.i < len(d.b) {
		switch c := d.b[d.i]; {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			return s, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		d.i++
	}
	return nil, false
}

func (d *lineDecoder) text() (string, bool) {
	s, ok := d.plain()
	return string(s), ok
}

// int reads an integer as encoding/json writes an int64.
func (d *lineDecoder) int() (int64, bool) {
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i-digits > 1 && d.b[digits] == '0' { // JSON has no leading zeros
		return 0, false
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func (d *lineDecoder) bool() (bool, bool) {
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return true, true
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return false, true
	}
	return false, false
}

// image reads a canonical item or null (as encoding/json reads them into
// a json.RawMessage: a copy of the bytes).
func (d *lineDecoder) image() (json.RawMessage, bool) {
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return json.RawMessage("null"), true
	}
	n, err := attr.RawItemEnd(d.b[d.i:])
	if err != nil {
		return nil, false
	}
	img := bytes.Clone(d.b[d.i : d.i+n])
	d.i += n
	return img, true
}
