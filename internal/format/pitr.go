package format

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Point-in-time recovery history in the store (docs/backup-design.md
// section 7, ADR 0046): per table incarnation, a head, hashed and chained
// log segments, and base backups.
//
//	<account>/<table>/pitr/<incarnation>/
//	  pitr.json
//	  segments/<first seq, 20 digits>.jsonl.zst
//	  segments/<first seq, 20 digits>.jsonl.zst.sha256
//	  bases/<backup id>/…   (a backup, section 1) and extenddb-base.json
//
// A segment is named by its first Seq only, so PutIfAbsent on its name
// lets exactly one shipper publish the records that start there.

// PITRDir is the component under a table's prefix that holds its
// point-in-time recovery histories (never a backup id).
const PITRDir = "pitr"

// PITRPrefix is the history prefix of a table incarnation (incarnation:
// the table's TableId, unique across catalogs).
func PITRPrefix(account, table, incarnation string) string {
	return account + "/" + table + "/" + PITRDir + "/" + incarnation
}

// PITRHeadKey is the head object of a history.
func PITRHeadKey(prefix string) string { return prefix + "/pitr.json" }

// SegmentsPrefix holds a history's segments.
func SegmentsPrefix(prefix string) string { return prefix + "/segments" }

// SegmentKey is the object of the segment whose first record is first.
func SegmentKey(prefix string, first int64) string {
	return fmt.Sprintf("%s/segments/%020d.jsonl.zst", prefix, first)
}

// SegmentSidecarKey is a segment's sidecar.
func SegmentSidecarKey(segmentKey string) string { return segmentKey + ".sha256" }

// SegmentFirst parses the first Seq from a segment or sidecar key; ok is
// false for any other key.
func SegmentFirst(key string) (first int64, sidecar, ok bool) {
	base := path.Base(key)
	if s, found := strings.CutSuffix(base, ".jsonl.zst.sha256"); found {
		base, sidecar = s, true
	} else if s, found := strings.CutSuffix(base, ".jsonl.zst"); found {
		base = s
	} else {
		return 0, false, false
	}
	if len(base) != 20 {
		return 0, false, false
	}
	n, err := strconv.ParseInt(base, 10, 64)
	if err != nil || n <= 0 {
		return 0, false, false
	}
	return n, sidecar, true
}

// PITRHead describes a history: which table it is of, and its setting as
// last shipped. It is rewritten (plain Put) when the setting changes.
type PITRHead struct {
	FormatVersion int    `json:"format_version"`
	TableArn      string `json:"table_arn"`
	TableID       string `json:"table_id"`
	Account       string `json:"account"`
	TableName     string `json:"table_name"`
	// RecoveryPeriodInDays is the period of the setting last shipped.
	RecoveryPeriodInDays int64 `json:"recovery_period_in_days"`
	// Enabled is false once PITR was turned off or the table deleted.
	Enabled bool `json:"enabled"`
	// SourceTable is the table's DynamoDB TableDescription.
	SourceTable json.RawMessage `json:"source_table"`
}

// PITRFormatVersion is the version of heads, segments and sidecars.
const PITRFormatVersion = 1

// PITRRecord is one line of a segment: one change of one item.
type PITRRecord struct {
	Seq int64 `json:"Seq"`
	// At is the log's time of the record (RFC 3339, milliseconds, UTC):
	// when it became readable, non-decreasing in Seq.
	At string `json:"At"`
	// Time is when the write was decided (the engine's clock, as
	// ApproximateCreationDateTime); a restore to an instant replays the
	// longest prefix of records whose Time is at or before it.
	Time  string `json:"Time"`
	Event string `json:"Event"` // INSERT, MODIFY, REMOVE
	// Keys, NewImage and OldImage are canonical DynamoDB-JSON items
	// (absent when empty).
	Keys     json.RawMessage `json:"Keys"`
	NewImage json.RawMessage `json:"NewImage,omitempty"`
	OldImage json.RawMessage `json:"OldImage,omitempty"`
	// Txn (hex) and TxnCount are the transaction marker: the
	// transaction wrote TxnCount records to this table.
	Txn      string `json:"Txn,omitempty"`
	TxnCount int    `json:"TxnCount,omitempty"`
	// Hidden marks a write that changed nothing (kept for TxnCount).
	Hidden  bool `json:"Hidden,omitempty"`
	Service bool `json:"Service,omitempty"`
}

// PITRTime formats a record time as segments and sidecars hold it.
func PITRTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// ParsePITRTime parses PITRTime's form.
func ParsePITRTime(s string) (time.Time, error) {
	return time.Parse("2006-01-02T15:04:05.000Z", s)
}

// zeroHash is the previous-sidecar hash of a history's first segment.
var zeroHash = strings.Repeat("0", 64)

// Segment is an encoded segment with what its sidecar says.
type Segment struct {
	Data []byte
	Side SegmentSidecar
}

// SegmentSidecar is a segment's sidecar: the segment's SHA-256 in
// sha256sum form, then comment lines with the hash of the previous
// segment's sidecar (the chain), the Seq range and the time of the last
// record.
type SegmentSidecar struct {
	SHA256      string
	Name        string
	Prev        string
	First, Last int64
	LastAt      time.Time
	Records     int
}

// Encode renders the sidecar.
func (s SegmentSidecar) Encode() []byte {
	return fmt.Appendf(nil, "%s  %s\n# prev %s\n# range %d %d\n# records %d\n# at %s\n",
		s.SHA256, s.Name, s.Prev, s.First, s.Last, s.Records, PITRTime(s.LastAt))
}

// Hash is the SHA-256 (hex) of the encoded sidecar: the next segment's
// Prev.
func (s SegmentSidecar) Hash() string {
	h := sha256.Sum256(s.Encode())
	return hex.EncodeToString(h[:])
}

// ErrSegment is the kind of every damaged or inconsistent segment.
var ErrSegment = errors.New("pitr segment")

// ParseSegmentSidecar parses a sidecar's bytes (key names it in errors).
func ParseSegmentSidecar(key string, b []byte) (SegmentSidecar, error) {
	var s SegmentSidecar
	bad := func(why string) (SegmentSidecar, error) {
		return SegmentSidecar{}, fmt.Errorf("%w: %s: %s", ErrSegment, key, why)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) != 6 || lines[5] != "" {
		return bad("not a segment sidecar (want 5 lines)")
	}
	h, name, ok := strings.Cut(lines[0], "  ")
	if !ok || !isHex64(h) || name == "" {
		return bad("first line is not '<sha256>  <name>'")
	}
	s.SHA256, s.Name = h, name
	var at string
	if _, err := fmt.Sscanf(lines[1], "# prev %s", &s.Prev); err != nil || !isHex64(s.Prev) {
		return bad("bad prev line")
	}
	if _, err := fmt.Sscanf(lines[2], "# range %d %d", &s.First, &s.Last); err != nil || s.First <= 0 || s.Last < s.First {
		return bad("bad range line")
	}
	if _, err := fmt.Sscanf(lines[3], "# records %d", &s.Records); err != nil || s.Records <= 0 {
		return bad("bad records line")
	}
	if _, err := fmt.Sscanf(lines[4], "# at %s", &at); err != nil {
		return bad("bad at line")
	}
	t, err := ParsePITRTime(at)
	if err != nil {
		return bad("bad at time")
	}
	s.LastAt = t
	if !bytes.Equal(s.Encode(), b) {
		return bad("not in canonical form")
	}
	return s, nil
}

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// EncodeSegment builds a segment of records (non-empty, Seq strictly
// increasing) chained after the sidecar whose hash is prev ("" for a
// history's first segment).
//
// Shipping encodes a segment of every PITR table every ship interval, so
// this is on the path of every write's cost: the lines are appended by
// hand (AppendPITRLine) into a pooled buffer and compressed in one call
// of a shared encoder, instead of a reflective json.Marshal per line
// (which re-validates and compacts each image) and an encoder built per
// segment.
func EncodeSegment(recs []PITRRecord, prev string) (*Segment, error) {
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: no records", ErrSegment)
	}
	if prev == "" {
		prev = zeroHash
	}
	bp := segmentBufs.Get().(*[]byte)
	defer segmentBufs.Put(bp)
	raw := (*bp)[:0]
	var last time.Time
	for i := range recs {
		if i > 0 && recs[i].Seq <= recs[i-1].Seq {
			return nil, fmt.Errorf("%w: Seq %d after %d", ErrSegment, recs[i].Seq, recs[i-1].Seq)
		}
		var err error
		if raw, err = AppendPITRLine(raw, &recs[i]); err != nil {
			return nil, err
		}
		if i == len(recs)-1 {
			if last, err = ParsePITRTime(recs[i].At); err != nil {
				return nil, fmt.Errorf("%w: record %d: bad At %q", ErrSegment, recs[i].Seq, recs[i].At)
			}
		}
	}
	*bp = raw
	data := segmentEncoder().EncodeAll(raw, make([]byte, 0, len(raw)/2+64))
	sum := sha256.Sum256(data)
	first := recs[0].Seq
	return &Segment{Data: data, Side: SegmentSidecar{
		SHA256: hex.EncodeToString(sum[:]), Name: path.Base(SegmentKey("", first)), Prev: prev,
		First: first, Last: recs[len(recs)-1].Seq, LastAt: last, Records: len(recs)}}, nil
}

// segmentBufs holds the uncompressed lines of a segment being encoded
// (up to segment_max_bytes plus the lines' framing).
var segmentBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// segmentEncoder is the zstd encoder of segments, shared (EncodeAll is
// safe for concurrent use): one frame with a checksum per segment.
var segmentEncoder = sync.OnceValue(func() *zstd.Encoder {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1),
		zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic(err) // only bad options fail
	}
	return enc
})

// AppendPITRLine appends r as one segment line (JSON and a newline). It
// writes what json.Marshal writes for r, but copies the images as they
// are (they are canonical DynamoDB-JSON from the engine's encoder, so
// not re-validated; json.Marshal would also escape <, > and & in them,
// which a reader decodes alike). An image that cannot be a JSON object
// on one line (not {...}, or holding a line break) is refused: the line
// framing of the segment must hold whatever the log returned.
func AppendPITRLine(dst []byte, r *PITRRecord) ([]byte, error) {
	dst = append(dst, `{"Seq":`...)
	dst = strconv.AppendInt(dst, r.Seq, 10)
	dst = append(dst, `,"At":`...)
	dst = appendJSONString(dst, r.At)
	dst = append(dst, `,"Time":`...)
	dst = appendJSONString(dst, r.Time)
	dst = append(dst, `,"Event":`...)
	dst = appendJSONString(dst, r.Event)
	dst = append(dst, `,"Keys":`...)
	var err error
	if len(r.Keys) == 0 {
		dst = append(dst, "null"...)
	} else if dst, err = appendImage(dst, r.Keys, r.Seq); err != nil {
		return nil, err
	}
	if len(r.NewImage) > 0 {
		dst = append(dst, `,"NewImage":`...)
		if dst, err = appendImage(dst, r.NewImage, r.Seq); err != nil {
			return nil, err
		}
	}
	if len(r.OldImage) > 0 {
		dst = append(dst, `,"OldImage":`...)
		if dst, err = appendImage(dst, r.OldImage, r.Seq); err != nil {
			return nil, err
		}
	}
	if r.Txn != "" {
		dst = append(dst, `,"Txn":`...)
		dst = appendJSONString(dst, r.Txn)
	}
	if r.TxnCount != 0 {
		dst = append(dst, `,"TxnCount":`...)
		dst = strconv.AppendInt(dst, int64(r.TxnCount), 10)
	}
	if r.Hidden {
		dst = append(dst, `,"Hidden":true`...)
	}
	if r.Service {
		dst = append(dst, `,"Service":true`...)
	}
	return append(dst, '}', '\n'), nil
}

func appendImage(dst, img []byte, seq int64) ([]byte, error) {
	if img[0] != '{' || img[len(img)-1] != '}' || bytes.IndexByte(img, '\n') >= 0 || bytes.IndexByte(img, '\r') >= 0 {
		return nil, fmt.Errorf("%w: record %d: an image that is not a one-line JSON object", ErrSegment, seq)
	}
	return append(dst, img...), nil
}

// appendJSONString appends s as json.Marshal does: plain printable ASCII
// (every string the shipper writes) directly, anything else through
// encoding/json.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// SidecarFor computes the sidecar of a published segment's bytes (a
// shipper that finds a segment without its sidecar completes it).
func SidecarFor(key string, data []byte, prev string) (SegmentSidecar, error) {
	if prev == "" {
		prev = zeroHash
	}
	recs, err := DecodeSegment(key, data)
	if err != nil {
		return SegmentSidecar{}, err
	}
	sum := sha256.Sum256(data)
	last, err := ParsePITRTime(recs[len(recs)-1].At)
	if err != nil {
		return SegmentSidecar{}, fmt.Errorf("%w: %s: bad At", ErrSegment, key)
	}
	return SegmentSidecar{SHA256: hex.EncodeToString(sum[:]), Name: path.Base(key), Prev: prev,
		First: recs[0].Seq, Last: recs[len(recs)-1].Seq, LastAt: last, Records: len(recs)}, nil
}

// maxSegmentLine bounds one decompressed line (an item of 400 KB twice,
// escaped, fits many times over).
const maxSegmentLine = 32 << 20

// DecodeSegment reads a segment's records, checking that Seqs strictly
// increase; key names the object in errors.
func DecodeSegment(key string, data []byte) ([]PITRRecord, error) {
	dec, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	sc := bufio.NewScanner(dec)
	sc.Buffer(make([]byte, 0, 64<<10), maxSegmentLine)
	var recs []PITRRecord
	for sc.Scan() {
		var r PITRRecord
		if err := decodeRecord(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%w: %s: line %d: %v", ErrSegment, key, len(recs)+1, err)
		}
		if len(recs) > 0 && r.Seq <= recs[len(recs)-1].Seq || r.Seq <= 0 {
			return nil, fmt.Errorf("%w: %s: line %d: Seq %d out of order", ErrSegment, key, len(recs)+1, r.Seq)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSegment, key, err)
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: %s: no records", ErrSegment, key)
	}
	return recs, nil
}

// VerifySegment checks a segment's bytes against its sidecar: hash,
// records, range and order. key names the object in errors.
func VerifySegment(key string, data []byte, side SegmentSidecar) ([]PITRRecord, error) {
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != side.SHA256 {
		return nil, fmt.Errorf("%w: %s: SHA-256 does not match its sidecar", ErrSegment, key)
	}
	recs, err := DecodeSegment(key, data)
	if err != nil {
		return nil, err
	}
	if len(recs) != side.Records || recs[0].Seq != side.First || recs[len(recs)-1].Seq != side.Last {
		return nil, fmt.Errorf("%w: %s: records do not match its sidecar's range", ErrSegment, key)
	}
	return recs, nil
}

// ReadAllLimited reads r up to max bytes (a segment or sidecar).
func ReadAllLimited(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: object over %d bytes", ErrSegment, max)
	}
	return b, nil
}

// PITRBase is a base's extenddb-base.json: the log position it covers.
type PITRBase struct {
	// Position is the log's last Seq read before the snapshot opened:
	// every record after it is replayed onto the base.
	Position int64 `json:"position"`
	// SnapshotAt is the base snapshot's instant.
	SnapshotAt string `json:"snapshot_at"`
	BackupID   string `json:"backup_id"`
}

// BasesPrefix holds a history's bases.
func BasesPrefix(prefix string) string { return prefix + "/bases" }

// BaseKey is a base's position object; it is written after the base's
// backup is complete (its sidecar), so a base exists when this does.
func BaseKey(prefix, backupID string) string {
	return prefix + "/bases/" + backupID + "/extenddb-base.json"
}

// PrunedPrefix holds a history's prune marks: each names the segment the
// history starts at after the reconciler pruned what came before it.
func PrunedPrefix(prefix string) string { return prefix + "/pruned" }

// PrunedKey is the prune mark whose history starts at the segment first.
func PrunedKey(prefix string, first int64) string {
	return fmt.Sprintf("%s/pruned/%020d.json", prefix, first)
}

// PrunedFirst parses the first Seq from a prune mark's key.
func PrunedFirst(key string) (int64, bool) {
	s, ok := strings.CutSuffix(path.Base(key), ".json")
	if !ok || len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

// PITRPruned is a prune mark: the history's first kept segment, the hash
// its sidecar names as the one before it (the chain's new start), the
// last Seq of the pruned segments (no restore may start from a base
// whose position is below it) and, for the transactions whose records
// straddle the cut, how many of their records were pruned.
type PITRPruned struct {
	First int64          `json:"first"`
	Prev  string         `json:"prev"`
	After int64          `json:"after"`
	Open  map[string]int `json:"open,omitempty"`
	At    string         `json:"at"`
}
