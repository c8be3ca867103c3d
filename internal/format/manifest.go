package format

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
)

// FormatVersion is the newest backup format version this package writes
// and reads. A reader accepts 1..FormatVersion. Version 2 differs from 1
// only in the sidecar: it lists every file of the backup (data files, the
// AWS export manifests, the manifest), not the manifest alone.
const FormatVersion = 2

// MaxManifestBytes bounds the manifest a reader loads (a million data files
// fit comfortably).
const MaxManifestBytes = 512 << 20

// ItemOrder says how items are ordered across a backup's data files.
type ItemOrder string

// Item orders.
const (
	// OrderKey: ascending (partition key bytes, sort key bytes) across all files.
	OrderKey ItemOrder = "key"
	// OrderUnordered: no order; key ranges are null.
	OrderUnordered ItemOrder = "unordered"
)

// Manifest is extenddb-manifest.json.
type Manifest struct {
	FormatVersion          int
	BackupARN              string
	BackupName             string
	BackupCreationDateTime time.Time // the snapshot instant, millisecond precision
	Source                 Source
	Snapshot               Snapshot
	SourceTable            json.RawMessage // the full TableDescription
	ItemOrder              ItemOrder
	ItemCount              int64
	UncompressedBytes      int64
	CompressedBytes        int64
	DataFiles              []DataFile
}

// Source describes the server that took the backup.
type Source struct {
	Backend         string // storage backend name, e.g. "sqlite"
	ExtenddbVersion string
}

// Snapshot describes the consistent view the backup was read from.
type Snapshot struct {
	Kind   string  // e.g. sqlite_wal_read_txn, postgres_repeatable_read
	Marker *string // backend position, or nil (written as null)
}

// DataFile is one data file's entry.
type DataFile struct {
	Key               string // full object key
	ItemCount         int64
	UncompressedBytes int64
	CompressedBytes   int64
	SHA256            string    // hex, lowercase
	MD5               string    // base64 (std, padded), as in the AWS files manifest
	ETag              *string   // as the store reported it, or nil
	KeyRange          *KeyRange // nil when unordered or the file is empty
}

// KeyRange is the first and last key of a data file, as DynamoDB-JSON key
// maps.
type KeyRange struct {
	First attr.Item
	Last  attr.Item
}

// Member names, in the order they are written.
var (
	manifestMembers = []string{"format_version", "backup_arn", "backup_name", "backup_creation_date_time",
		"source", "snapshot", "source_table", "item_order", "item_count", "uncompressed_bytes",
		"compressed_bytes", "data_files"}
	sourceMembers   = []string{"backend", "extenddb_version"}
	snapshotMembers = []string{"kind", "marker"}
	fileMembers     = []string{"key", "item_count", "uncompressed_bytes", "compressed_bytes", "sha256", "md5", "etag", "key_range"}
	rangeMembers    = []string{"first", "last"}
)

type jsonSource struct {
	Backend         string `json:"backend"`
	ExtenddbVersion string `json:"extenddb_version"`
}

type jsonSnapshot struct {
	Kind   string  `json:"kind"`
	Marker *string `json:"marker"`
}

type jsonRange struct {
	First json.RawMessage `json:"first"`
	Last  json.RawMessage `json:"last"`
}

type jsonFile struct {
	Key               string     `json:"key"`
	ItemCount         int64      `json:"item_count"`
	UncompressedBytes int64      `json:"uncompressed_bytes"`
	CompressedBytes   int64      `json:"compressed_bytes"`
	SHA256            string     `json:"sha256"`
	MD5               string     `json:"md5"`
	ETag              *string    `json:"etag"`
	KeyRange          *jsonRange `json:"key_range"`
}

type jsonManifest struct {
	FormatVersion          int             `json:"format_version"`
	BackupARN              string          `json:"backup_arn"`
	BackupName             string          `json:"backup_name"`
	BackupCreationDateTime string          `json:"backup_creation_date_time"`
	Source                 jsonSource      `json:"source"`
	Snapshot               jsonSnapshot    `json:"snapshot"`
	SourceTable            json.RawMessage `json:"source_table"`
	ItemOrder              ItemOrder       `json:"item_order"`
	ItemCount              int64           `json:"item_count"`
	UncompressedBytes      int64           `json:"uncompressed_bytes"`
	CompressedBytes        int64           `json:"compressed_bytes"`
	DataFiles              []jsonFile      `json:"data_files"`
}

// Marshal returns the manifest's bytes: JSON indented by two spaces,
// members in the documented order, absent optional members as explicit
// null, a final newline. The bytes are hashed as they are (the sidecar),
// never re-serialized.
func (m *Manifest) Marshal() ([]byte, error) {
	jm := jsonManifest{
		FormatVersion:          m.FormatVersion,
		BackupARN:              m.BackupARN,
		BackupName:             m.BackupName,
		BackupCreationDateTime: FormatTime(m.BackupCreationDateTime),
		Source:                 jsonSource(m.Source),
		Snapshot:               jsonSnapshot(m.Snapshot),
		SourceTable:            m.SourceTable,
		ItemOrder:              m.ItemOrder,
		ItemCount:              m.ItemCount,
		UncompressedBytes:      m.UncompressedBytes,
		CompressedBytes:        m.CompressedBytes,
		DataFiles:              make([]jsonFile, len(m.DataFiles)),
	}
	for i, f := range m.DataFiles {
		jf := jsonFile{Key: f.Key, ItemCount: f.ItemCount, UncompressedBytes: f.UncompressedBytes,
			CompressedBytes: f.CompressedBytes, SHA256: f.SHA256, MD5: f.MD5, ETag: f.ETag}
		if f.KeyRange != nil {
			jf.KeyRange = &jsonRange{First: attr.EncodeItem(f.KeyRange.First), Last: attr.EncodeItem(f.KeyRange.Last)}
		}
		jm.DataFiles[i] = jf
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&jm); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, bytes.TrimSpace(buf.Bytes()), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// Parsed is a manifest with what a reader derives from it.
type Parsed struct {
	Manifest
	ARN    ARN
	Table  *TableDescription
	Schema KeySchema
	// Ranges holds each data file's key range in encoded form (nil entries
	// for null ranges), for order checks.
	ranges []*encRange
}

type encRange struct {
	first, last encKey
}

// ParseManifest parses and checks a manifest's bytes. It checks, in this
// order: JSON syntax, the version gate (1..FormatVersion; a newer version is
// ErrVersionTooNew naming both versions), every member present (optional
// ones as explicit null) and none unknown, value forms, ARN consistency
// (with source_table and the creation time), data file keys under the
// ARN's prefix and numbered in sequence, totals, and key ranges (ascending
// and disjoint when item_order is key). Errors are *FileError naming
// ManifestName. The steps run in that order (which decides the error a
// bad manifest reports): manifestShape, the values, checkARN,
// addDataFiles, the totals.
func ParseManifest(data []byte) (*Parsed, error) {
	bad := func(format string, args ...any) error { return fileErr(ManifestName, ErrManifest, format, args...) }
	top, jm, err := manifestShape(data)
	if err != nil {
		return nil, err
	}
	p := &Parsed{}
	m := &p.Manifest
	m.FormatVersion = jm.FormatVersion
	m.BackupARN = jm.BackupARN
	m.BackupName = jm.BackupName
	m.Source = Source(jm.Source)
	m.Snapshot = Snapshot(jm.Snapshot)
	var compact bytes.Buffer
	if err := json.Compact(&compact, top["source_table"]); err != nil {
		return nil, bad("source_table: %v", err)
	}
	m.SourceTable = compact.Bytes()
	m.ItemOrder = jm.ItemOrder
	m.ItemCount, m.UncompressedBytes, m.CompressedBytes = jm.ItemCount, jm.UncompressedBytes, jm.CompressedBytes

	if m.BackupCreationDateTime, err = ParseTime(jm.BackupCreationDateTime); err != nil {
		return nil, bad("backup_creation_date_time: %v", err)
	}
	if m.Source.Backend == "" {
		return nil, bad("source.backend is empty")
	}
	if m.Snapshot.Kind == "" {
		return nil, bad("snapshot.kind is empty")
	}
	if m.ItemOrder != OrderKey && m.ItemOrder != OrderUnordered {
		return nil, bad("item_order %q is neither key nor unordered", m.ItemOrder)
	}
	if m.ItemCount < 0 || m.UncompressedBytes < 0 || m.CompressedBytes < 0 {
		return nil, bad("negative total")
	}
	if err := p.checkARN(); err != nil {
		return nil, err
	}
	if err := p.addDataFiles(jm.DataFiles); err != nil {
		return nil, err
	}
	items, ub, cb := p.sums()
	if items != m.ItemCount || ub != m.UncompressedBytes || cb != m.CompressedBytes {
		return nil, bad("totals (items %d, uncompressed %d, compressed %d) differ from the data files' sums (%d, %d, %d)",
			m.ItemCount, m.UncompressedBytes, m.CompressedBytes, items, ub, cb)
	}
	if m.DataFiles == nil {
		m.DataFiles = []DataFile{}
	}
	return p, nil
}

// manifestShape checks a manifest's syntax, its version (first: a newer
// manifest may have any shape), then that every member is present
// (optional ones as explicit null) and none unknown, at every level. It
// returns the top-level members and the decoded manifest.
func manifestShape(data []byte) (map[string]json.RawMessage, *jsonManifest, error) {
	bad := func(format string, args ...any) error { return fileErr(ManifestName, ErrManifest, format, args...) }
	top, err := members(data, nil)
	if err != nil {
		return nil, nil, bad("%v", err)
	}
	vraw, ok := top["format_version"]
	if !ok {
		return nil, nil, bad("missing member format_version")
	}
	v, err := strconv.ParseInt(string(vraw), 10, 64)
	if err != nil {
		return nil, nil, bad("format_version %s is not an integer", vraw)
	}
	if v > FormatVersion {
		return nil, nil, fileErr(ManifestName, ErrVersionTooNew, "backup has format version %d, this reader reads versions 1 to %d", v, FormatVersion)
	}
	if v < 1 {
		return nil, nil, bad("format_version %d is not a version", v)
	}
	if _, err := members(data, manifestMembers); err != nil {
		return nil, nil, bad("%v", err)
	}
	if err := notNull(top, manifestMembers...); err != nil {
		return nil, nil, bad("%v", err)
	}
	var jm jsonManifest
	if err := strictUnmarshal(data, &jm); err != nil {
		return nil, nil, bad("%v", err)
	}
	if sm, err := members(top["source"], sourceMembers); err != nil {
		return nil, nil, bad("source: %v", err)
	} else if err := notNull(sm, sourceMembers...); err != nil {
		return nil, nil, bad("source: %v", err)
	}
	if sm, err := members(top["snapshot"], snapshotMembers); err != nil {
		return nil, nil, bad("snapshot: %v", err)
	} else if err := notNull(sm, "kind"); err != nil {
		return nil, nil, bad("snapshot: %v", err)
	}
	var rawFiles []json.RawMessage
	if err := json.Unmarshal(top["data_files"], &rawFiles); err != nil || rawFiles == nil {
		return nil, nil, bad("data_files is not an array")
	}
	for i, rf := range rawFiles {
		fm, err := members(rf, fileMembers)
		if err != nil {
			return nil, nil, bad("data_files[%d]: %v", i, err)
		}
		if err := notNull(fm, fileMembers[:6]...); err != nil {
			return nil, nil, bad("data_files[%d]: %v", i, err)
		}
		if kr := fm["key_range"]; string(kr) != "null" {
			rm, err := members(kr, rangeMembers)
			if err == nil {
				err = notNull(rm, rangeMembers...)
			}
			if err != nil {
				return nil, nil, bad("data_files[%d].key_range: %v", i, err)
			}
		}
	}
	return top, &jm, nil
}

// checkARN checks that the backup ARN agrees with the creation time and
// the source table's name and ARN, and reads the table's key schema.
func (p *Parsed) checkARN() error {
	m := &p.Manifest
	var err error
	if p.ARN, err = ParseARN(m.BackupARN); err != nil {
		return fileErrCause(ManifestName, ErrARNMismatch, err, "backup_arn")
	}
	idTime, _, _ := ParseBackupID(p.ARN.BackupID)
	if !idTime.Equal(m.BackupCreationDateTime) {
		return fileErr(ManifestName, ErrARNMismatch, "backup id %s encodes %s but backup_creation_date_time is %s",
			p.ARN.BackupID, FormatTime(idTime), FormatTime(m.BackupCreationDateTime))
	}
	if p.Table, err = ParseTableDescription(m.SourceTable); err != nil {
		return fileErr(ManifestName, ErrManifest, "%v", err)
	}
	if p.Table.TableName != p.ARN.Table {
		return fileErr(ManifestName, ErrARNMismatch, "backup_arn names table %q but source_table is %q", p.ARN.Table, p.Table.TableName)
	}
	if p.Table.TableArn != "" && p.Table.TableArn != p.ARN.TableARN() {
		return fileErr(ManifestName, ErrARNMismatch, "source_table.TableArn %q is not %q", p.Table.TableArn, p.ARN.TableARN())
	}
	p.Schema, _ = p.Table.Schema()
	return nil
}

// addDataFiles checks each data file (its key numbered in sequence under
// the ARN's prefix, sizes, digests, and key ranges ascending and disjoint
// when item_order is key) and adds it to the manifest.
func (p *Parsed) addDataFiles(files []jsonFile) error {
	bad := func(format string, args ...any) error { return fileErr(ManifestName, ErrManifest, format, args...) }
	m := &p.Manifest
	prefix := PrefixOf(p.ARN)
	p.ranges = make([]*encRange, len(files))
	var prev *encRange
	for i, jf := range files {
		f := DataFile{Key: jf.Key, ItemCount: jf.ItemCount, UncompressedBytes: jf.UncompressedBytes,
			CompressedBytes: jf.CompressedBytes, SHA256: jf.SHA256, MD5: jf.MD5, ETag: jf.ETag}
		if want := DataFileKey(prefix, i+1); f.Key != want {
			return fileErr(ManifestName, ErrPrefixMismatch, "data_files[%d].key is %q, want %q", i, f.Key, want)
		}
		if f.ItemCount < 0 || f.UncompressedBytes < 0 || f.CompressedBytes < 0 {
			return bad("data file %s: negative size or count", f.Key)
		}
		if (f.ItemCount == 0) != (f.UncompressedBytes == 0) {
			return bad("data file %s: %d items in %d bytes", f.Key, f.ItemCount, f.UncompressedBytes)
		}
		if !isLowerHex(f.SHA256, 64) {
			return bad("data file %s: sha256 %q is not 64 lowercase hex digits", f.Key, f.SHA256)
		}
		if md5, err := base64.StdEncoding.Strict().DecodeString(f.MD5); err != nil || len(md5) != 16 {
			return bad("data file %s: md5 %q is not base64 of 16 bytes", f.Key, f.MD5)
		}
		ordered := m.ItemOrder == OrderKey && f.ItemCount > 0
		switch {
		case jf.KeyRange == nil && ordered:
			return bad("data file %s: key_range is null but item_order is key", f.Key)
		case jf.KeyRange != nil && !ordered:
			return bad("data file %s: key_range must be null (unordered or empty file)", f.Key)
		case jf.KeyRange != nil:
			kr, er, err := parseRange(jf.KeyRange, p.Schema)
			if err != nil {
				return fileErrCause(ManifestName, ErrKeyRange, err, "data file %s", f.Key)
			}
			c := er.first.compare(&er.last)
			if c > 0 || (c == 0) != (f.ItemCount == 1) {
				return fileErr(ManifestName, ErrKeyRange, "data file %s: key_range first and last are out of order for %d items", f.Key, f.ItemCount)
			}
			if prev != nil && prev.last.compare(&er.first) >= 0 {
				return fileErr(ManifestName, ErrKeyRange, "data file %s: key_range overlaps or precedes the previous file's", f.Key)
			}
			prev = er
			f.KeyRange = kr
			p.ranges[i] = er
		}
		m.DataFiles = append(m.DataFiles, f)
	}
	return nil
}

// sums are the item count and byte totals of the manifest's data files.
func (p *Parsed) sums() (items, uncompressed, compressed int64) {
	for _, f := range p.Manifest.DataFiles {
		items += f.ItemCount
		uncompressed += f.UncompressedBytes
		compressed += f.CompressedBytes
	}
	return items, uncompressed, compressed
}

func parseRange(jr *jsonRange, s KeySchema) (*KeyRange, *encRange, error) {
	var kr KeyRange
	var er encRange
	for i, raw := range []json.RawMessage{jr.First, jr.Last} {
		it, err := attr.DecodeItem(raw)
		if err != nil {
			return nil, nil, err
		}
		n := 1
		if s.HasRange() {
			n = 2
		}
		if it == nil || len(it) != n {
			return nil, nil, fmt.Errorf("key_range key map must hold exactly the %d key attributes", n)
		}
		k, err := s.KeyOf(it)
		if err != nil {
			return nil, nil, err
		}
		e := &er.first
		if i == 0 {
			kr.First = it
		} else {
			kr.Last = it
			e = &er.last
		}
		if err := e.set(k, s.HasRange()); err != nil {
			return nil, nil, err
		}
	}
	return &kr, &er, nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// members decodes a JSON object's members. With want non-nil, the object
// must hold exactly those members (each present, null allowed, no others,
// no duplicates).
func members(data []byte, want []string) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("duplicate member %q", name)
		}
		out[name] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("data after the JSON object")
	}
	if want != nil {
		for _, w := range want {
			if _, ok := out[w]; !ok {
				return nil, fmt.Errorf("missing member %q", w)
			}
		}
		if len(out) != len(want) {
			var unknown []string
			for k := range out {
				found := false
				for _, w := range want {
					found = found || k == w
				}
				if !found {
					unknown = append(unknown, k)
				}
			}
			sort.Strings(unknown)
			return nil, fmt.Errorf("unknown members %q", unknown)
		}
	}
	return out, nil
}

// notNull refuses null for the named (required) members.
func notNull(m map[string]json.RawMessage, names ...string) error {
	for _, n := range names {
		if string(m[n]) == "null" {
			return fmt.Errorf("member %q is null", n)
		}
	}
	return nil
}

// strictUnmarshal decodes with unknown fields refused. Null is refused for
// non-pointer members by checking them separately (members()).
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
