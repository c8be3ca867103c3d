package format

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
)

func TestBackupID(t *testing.T) {
	id, err := MintBackupID(time.UnixMilli(1732908000123), bytes.NewReader([]byte{0x1a, 0x2b, 0x3c, 0x4d}))
	if err != nil || id != "01732908000123-1a2b3c4d" {
		t.Fatalf("id %q %v", id, err)
	}
	tm, suf, err := ParseBackupID(id)
	if err != nil || tm.UnixMilli() != 1732908000123 || suf != "1a2b3c4d" {
		t.Fatalf("parse: %v %q %v", tm, suf, err)
	}
	if id, err := MintBackupID(time.Now(), nil); err != nil || len(id) != BackupIDLen {
		t.Fatalf("random id %q %v", id, err)
	}
	for _, bad := range []string{"", "1732908000123-1a2b3c4d", "01732908000123-1A2B3C4D", "01732908000123_1a2b3c4d",
		"0173290800012x-1a2b3c4d", "01732908000123-1a2b3c4", "01732908000123-1a2b3c4d0", "+1732908000123-1a2b3c4d"} {
		if _, _, err := ParseBackupID(bad); !errors.Is(err, ErrBackupID) {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := MintBackupID(time.UnixMilli(-1), nil); err == nil {
		t.Error("negative time accepted")
	}
}

func TestARN(t *testing.T) {
	for _, p := range []string{"aws", "aws-cn", "aws-us-gov"} {
		s := "arn:" + p + ":dynamodb:us-west-2:123456789012:table/Music.v2_x-y/backup/01489602797149-73d8d5bc"
		a, err := ParseARN(s)
		if err != nil {
			t.Fatal(err)
		}
		if a.String() != s || a.Partition != p || a.Table != "Music.v2_x-y" || a.BackupID != "01489602797149-73d8d5bc" {
			t.Errorf("round trip %q -> %+v -> %q", s, a, a.String())
		}
		if a.TableARN() != "arn:"+p+":dynamodb:us-west-2:123456789012:table/Music.v2_x-y" {
			t.Errorf("table arn %q", a.TableARN())
		}
	}
	for _, bad := range []string{
		"", "arn:aws:dynamodb:us-east-1:123456789012:table/Music",
		"arn:aws-eu:dynamodb:us-east-1:123456789012:table/Music/backup/01489602797149-73d8d5bc",
		"arn:aws:s3:us-east-1:123456789012:table/Music/backup/01489602797149-73d8d5bc",
		"arn:aws:dynamodb::123456789012:table/Music/backup/01489602797149-73d8d5bc",
		"arn:aws:dynamodb:us-east-1::table/Music/backup/01489602797149-73d8d5bc",
		"arn:aws:dynamodb:us-east-1:123/456:table/Music/backup/01489602797149-73d8d5bc",
		"arn:aws:dynamodb:us-east-1:123456789012:table/Mu/backup/01489602797149-73d8d5bc",
		"arn:aws:dynamodb:us-east-1:123456789012:table/Music/backup/01489602797149-73d8d5bc/x",
		"arn:aws:dynamodb:us-east-1:123456789012:table/Music/export/01489602797149-73d8d5bc",
		"arn:aws:dynamodb:us-east-1:123456789012:table/Music/backup/1489602797149-73d8d5bc",
		"arn:aws:dynamodb:US-EAST-1:123456789012:table/Music/backup/01489602797149-73d8d5bc",
		"arn:aws:dynamodb:us-east-1:123456789012:table/Mus ic/backup/01489602797149-73d8d5bc",
	} {
		if _, err := ParseARN(bad); !errors.Is(err, ErrARN) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestKeysAndPrefix(t *testing.T) {
	p := Prefix("123456789012", "Music", "01489602797149-73d8d5bc")
	if p != "123456789012/Music/01489602797149-73d8d5bc/" {
		t.Fatal(p)
	}
	if DataFileKey(p, 1) != p+"data/000001.json.zst" || DataFileKey(p, 1234567) != p+"data/1234567.json.zst" {
		t.Error(DataFileKey(p, 1))
	}
	if SidecarKey(p) != p+"extenddb-manifest.json.sha256" || ManifestKey(p) != p+"extenddb-manifest.json" ||
		ManifestFilesKey(p) != p+"manifest-files.json" || ManifestSummaryKey(p) != p+"manifest-summary.json" || DataPrefix(p) != p+"data/" {
		t.Error("object names")
	}
	if a, tb, id, err := ParsePrefix(p); err != nil || a != "123456789012" || tb != "Music" || id != "01489602797149-73d8d5bc" {
		t.Error(err)
	}
	for _, bad := range []string{"a/b", "123/Music/x/", "123/../01489602797149-73d8d5bc/", "/Music/01489602797149-73d8d5bc"} {
		if _, _, _, err := ParsePrefix(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSidecar(t *testing.T) {
	m := []byte("{}\n")
	sc := Sidecar(m)
	if err := CheckSidecar("k", sc, m); err != nil {
		t.Fatal(err)
	}
	if err := CheckSidecar("k", sc, []byte("{} \n")); !errors.Is(err, ErrSidecarMismatch) {
		t.Errorf("mismatch: %v", err)
	}
	bads := [][]byte{
		bytes.ToUpper(sc[:64]),
		append(append([]byte{}, sc[:64]...), " *extenddb-manifest.json\n"...),
		sc[:len(sc)-1],
		append(append([]byte{}, sc...), '\n'),
		bytes.Replace(sc, []byte("  "), []byte(" "), 1),
		bytes.Replace(sc, []byte("manifest.json"), []byte("manifest.jsox"), 1),
		append(append([]byte{}, sc[:len(sc)-1]...), '\r', '\n'),
	}
	for i, b := range bads {
		var fe *FileError
		if err := CheckSidecar("k", b, m); !errors.Is(err, ErrSidecarForm) || !errors.As(err, &fe) || fe.Key != "k" {
			t.Errorf("bad sidecar %d (%q): %v", i, b, err)
		}
	}
}

func TestScanLine(t *testing.T) {
	s := KeySchema{HashName: "pk", HashType: attr.S, RangeName: "sk", RangeType: attr.N}
	good := `{"Item":{"a":{"L":[{"S":"}]\"{"}]},"pk":{"S":"x\"y"},"sk":{"N":"-1.5"},"z":{"M":{"pk":{"S":"no"}}}}}`
	item, k, err := ScanLine([]byte(good), s)
	if err != nil {
		t.Fatal(err)
	}
	if k.Hash.Str != `x"y` || k.Range.Str != "-1.5" || string(item) != good[8:len(good)-1] {
		t.Errorf("%+v %s", k, item)
	}
	// Fed in every split, the scanner agrees.
	for i := 0; i <= len(good); i++ {
		sc := lineScanner{schema: s}
		sc.reset()
		if err := sc.feed([]byte(good[:i])); err != nil {
			t.Fatal(i, err)
		}
		if err := sc.feed([]byte(good[i:])); err != nil {
			t.Fatal(i, err)
		}
		if k2, err := sc.finish(); err != nil || CompareKeys(k, k2) != 0 {
			t.Fatal(i, err)
		}
	}
	for _, bad := range []string{
		``, `{"Item":`, `{"Item":{}}`, `{"item":{"pk":{"S":"a"},"sk":{"N":"1"}}}`,
		`{"Item":{"pk":{"S":"a"}}}`, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1x"}}}`, `{"Item":{"pk":{"S":"a"},"sk":{"S":"1"}}}`,
		`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"}}}x`, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1"}}`,
		`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},}}`, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1"}]}`,
		`{"Item":{"pk":{"S":"a"}, "sk":{"N":"1"}}}`, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"pk":{"S":"b"}}}`,
		`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"x":}}`, `{"Item":{"pk":{"S":"a"},"sk":{"N":"1"},"x":{"S":"a}}}`,
		`{"Item":{"pk" :{"S":"a"},"sk":{"N":"1"}}}`, `{"Item":[]}`, `{"Item":{"pk":{"S":"a","S":"b"},"sk":{"N":"1"}}}`,
		`{"Item":{"p\u006b":{"S":"a"},"pk":{"S":"b"},"sk":{"N":"1"}}}`,
	} {
		if _, _, err := ScanLine([]byte(bad), s); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestRoundTripAndWriterChecks(t *testing.T) {
	ctx := context.Background()
	c := fixtureCases()[len(fixtureCases())-3] // multi_file
	s, res, a := c.write(t)
	if len(res.Manifest.DataFiles) < 3 {
		t.Fatalf("expected several files, got %d", len(res.Manifest.DataFiles))
	}
	for _, f := range res.Manifest.DataFiles[:len(res.Manifest.DataFiles)-1] {
		if f.UncompressedBytes > 600 {
			t.Errorf("%s: %d bytes over the target", f.Key, f.UncompressedBytes)
		}
	}
	// The sidecar is the last object written.
	if last := s.order[len(s.order)-1]; last != SidecarKey(res.Prefix) {
		t.Errorf("last object %s", last)
	}
	b, err := OpenARN(ctx, s, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	other := a
	other.Region = "eu-west-1"
	if _, err := OpenARN(ctx, s, other); !errors.Is(err, ErrARNMismatch) {
		t.Errorf("other region: %v", err)
	}
	// Writer refuses out-of-order keys, wrong types, bad bytes.
	w, _ := NewWriter(ctx, newMemStore(), writerConfig(a, tableJSON(a, "S", "N"), OrderKey, 0))
	if err := w.Append([]byte(`{"pk":{"S":"b"},"sk":{"N":"1"}}`), Key{attr.StrValue("b"), mustNum("1")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte(`{"pk":{"S":"a"},"sk":{"N":"1"}}`), Key{attr.StrValue("a"), mustNum("1")}); !errors.Is(err, ErrKeyOrder) {
		t.Errorf("order: %v", err)
	}
	w, _ = NewWriter(ctx, newMemStore(), writerConfig(a, tableJSON(a, "S", "N"), OrderKey, 0))
	if err := w.Append([]byte(`{"pk":{"S":"a"},"sk":{"S":"1"}}`), Key{attr.StrValue("a"), attr.StrValue("1")}); !errors.Is(err, ErrLine) {
		t.Errorf("type: %v", err)
	}
	w, _ = NewWriter(ctx, newMemStore(), writerConfig(a, tableJSON(a, "S", "N"), OrderKey, 0))
	if err := w.Append([]byte("{\"pk\":{\"S\":\"a\"},\n\"sk\":{\"N\":\"1\"}}"), Key{attr.StrValue("a"), mustNum("1")}); !errors.Is(err, ErrLine) {
		t.Errorf("newline: %v", err)
	}
	cfg := writerConfig(a, tableJSON(a, "S", "N"), OrderKey, 0)
	cfg.ARN.Table = "other"
	if _, err := NewWriter(ctx, newMemStore(), cfg); !errors.Is(err, ErrARNMismatch) {
		t.Errorf("table mismatch: %v", err)
	}
}

// rewriteManifest applies f to the decoded manifest and rewrites it and its
// sidecar.
func rewriteManifest(t *testing.T, s *memStore, prefix string, f func(m map[string]any)) {
	t.Helper()
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(s.objects[ManifestKey(prefix)]))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	s.objects[ManifestKey(prefix)] = b
	s.objects[SidecarKey(prefix)] = resign(s, prefix, m, b)
}

// resign rewrites the sidecar for a rewritten manifest (m, stored as mb):
// the manifest's line and, in a version 2 sidecar, the data files' lines
// from m's hashes; the AWS manifests' lines stay.
func resign(s *memStore, prefix string, m map[string]any, mb []byte) []byte {
	lines, err := ParseSidecarLines(s.objects[SidecarKey(prefix)])
	if err != nil || len(lines) == 1 {
		return Sidecar(mb)
	}
	files, _ := m["data_files"].([]any)
	for i := range files {
		f, _ := files[i].(map[string]any)
		if sum, ok := f["sha256"].(string); ok && i < len(lines)-3 {
			hex.Decode(lines[i].Sum[:], []byte(sum))
		}
	}
	lines[len(lines)-1].Sum = sha256.Sum256(mb)
	return SidecarOf(lines)
}

func file0(m map[string]any) map[string]any { return m["data_files"].([]any)[0].(map[string]any) }

// lyingSource reports the recorded sizes but serves longer streams.
type lyingSource struct {
	*memStore
	extra map[string][]byte
}

func (l lyingSource) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	rc, err := l.memStore.Open(ctx, key)
	if err != nil || l.extra[key] == nil {
		return rc, err
	}
	return io.NopCloser(io.MultiReader(rc, bytes.NewReader(l.extra[key]))), nil
}

func TestVerificationErrors(t *testing.T) {
	ctx := context.Background()
	c := fixtureCases()[len(fixtureCases())-3] // multi_file: several files, ordered
	base, res, _ := c.write(t)
	p := res.Prefix
	f0 := res.Manifest.DataFiles[0].Key
	f1 := res.Manifest.DataFiles[1].Key
	mk, sk := ManifestKey(p), SidecarKey(p)

	// linesOf returns the decompressed lines of file k; setLines recompresses
	// and fixes the manifest's sizes and hashes so only content checks fail.
	setLines := func(t *testing.T, s *memStore, i int, lines []string, fix func(f map[string]any)) {
		var raw bytes.Buffer
		for _, l := range lines {
			raw.WriteString(l + "\n")
		}
		var comp bytes.Buffer
		hw := newHashWriter()
		hw.reset(&comp)
		enc, _ := NewEncoder(hw)
		enc.Write(raw.Bytes())
		enc.Close()
		key := res.Manifest.DataFiles[i].Key
		s.objects[key] = comp.Bytes()
		rewriteManifest(t, s, p, func(m map[string]any) {
			files := m["data_files"].([]any)
			f := files[i].(map[string]any)
			var dc, du int64
			dc = int64(comp.Len()) - mustInt(f["compressed_bytes"])
			du = int64(raw.Len()) - mustInt(f["uncompressed_bytes"])
			f["compressed_bytes"] = comp.Len()
			f["uncompressed_bytes"] = raw.Len()
			f["sha256"] = fmt.Sprintf("%x", hw.sha.Sum(nil))
			f["md5"] = b64(hw.md5.Sum(nil))
			m["compressed_bytes"] = mustInt(m["compressed_bytes"]) + dc
			m["uncompressed_bytes"] = mustInt(m["uncompressed_bytes"]) + du
			if fix != nil {
				fix(f)
			}
		})
	}
	lines0 := decompressLines(t, base.objects[f0])

	cases := []struct {
		name    string
		mutate  func(t *testing.T, s *memStore) FileSource
		want    error
		wantKey string
		atOpen  bool
	}{
		{"sidecar missing", func(t *testing.T, s *memStore) FileSource { delete(s.objects, sk); return s }, ErrFileMissing, sk, true},
		{"sidecar form", func(t *testing.T, s *memStore) FileSource {
			s.objects[sk] = bytes.ToUpper(s.objects[sk])
			return s
		}, ErrSidecarForm, sk, true},
		{"sidecar hash", func(t *testing.T, s *memStore) FileSource {
			s.objects[mk] = append(s.objects[mk], ' ')
			return s
		}, ErrSidecarMismatch, sk, true},
		{"manifest missing", func(t *testing.T, s *memStore) FileSource { delete(s.objects, mk); return s }, ErrFileMissing, mk, true},
		{"version newer", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) { m["format_version"] = FormatVersion + 1; m["new_member"] = true })
			return s
		}, ErrVersionTooNew, mk, true},
		{"unknown member", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) { m["extra"] = 1 })
			return s
		}, ErrManifest, mk, true},
		{"missing null member", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) { delete(file0(m), "etag") })
			return s
		}, ErrManifest, mk, true},
		{"arn table", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) {
				m["backup_arn"] = strings.Replace(m["backup_arn"].(string), "table/tbl-multi-file/", "table/tbl-other/", 1)
			})
			return s
		}, ErrARNMismatch, mk, true},
		{"arn time", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) { m["backup_creation_date_time"] = "2024-11-29T19:20:00.124Z" })
			return s
		}, ErrARNMismatch, mk, true},
		{"prefix", func(t *testing.T, s *memStore) FileSource {
			other := strings.Replace(p, "1a2b3c4d", "00000000", 1)
			rewriteManifest(t, s, p, func(m map[string]any) {
				m["backup_arn"] = strings.Replace(m["backup_arn"].(string), "1a2b3c4d", "00000000", 1)
				for _, f := range m["data_files"].([]any) {
					f := f.(map[string]any)
					f["key"] = strings.Replace(f["key"].(string), p, other, 1)
				}
			})
			return s
		}, ErrPrefixMismatch, mk, true},
		{"file key", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) { file0(m)["key"] = p + "data/000009.json.zst" })
			return s
		}, ErrPrefixMismatch, mk, true},
		{"totals", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) { m["item_count"] = mustInt(m["item_count"]) + 1 })
			return s
		}, ErrManifest, mk, true},
		{"ranges overlap", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) {
				files := m["data_files"].([]any)
				files[1].(map[string]any)["key_range"].(map[string]any)["first"] = file0(m)["key_range"].(map[string]any)["last"]
			})
			return s
		}, ErrKeyRange, mk, true},
		{"file missing", func(t *testing.T, s *memStore) FileSource { delete(s.objects, f1); return s }, ErrFileMissing, f1, false},
		{"stored size", func(t *testing.T, s *memStore) FileSource {
			s.objects[f1] = append(s.objects[f1], 0)
			return s
		}, ErrCompressedSize, f1, false},
		{"stream longer than recorded", func(t *testing.T, s *memStore) FileSource {
			return lyingSource{s, map[string][]byte{f1: {0x28, 0xb5, 0x2f, 0xfd}}}
		}, ErrCompressedSize, f1, false},
		{"sha256", func(t *testing.T, s *memStore) FileSource {
			s.objects[f1][len(s.objects[f1])/2] ^= 0x40
			return s
		}, ErrSHA256, f1, false},
		{"md5", func(t *testing.T, s *memStore) FileSource {
			rewriteManifest(t, s, p, func(m map[string]any) {
				m["data_files"].([]any)[1].(map[string]any)["md5"] = b64(make([]byte, 16))
			})
			return s
		}, ErrMD5, f1, false},
		{"item count", func(t *testing.T, s *memStore) FileSource {
			setLines(t, s, 0, lines0[:len(lines0)-1], func(f map[string]any) {})
			rewriteManifest(t, s, p, func(m map[string]any) {
				// keep the recorded count; fix only the range's last key
				kr := file0(m)["key_range"].(map[string]any)
				var it map[string]any
				json.Unmarshal([]byte(lines0[len(lines0)-2]), &it)
				item := it["Item"].(map[string]any)
				kr["last"] = map[string]any{"pk": item["pk"], "sk": item["sk"]}
			})
			return s
		}, ErrItemCount, f0, false},
		{"uncompressed size", func(t *testing.T, s *memStore) FileSource {
			setLines(t, s, 0, lines0, nil)
			rewriteManifest(t, s, p, func(m map[string]any) {
				file0(m)["uncompressed_bytes"] = mustInt(file0(m)["uncompressed_bytes"]) + 1
				m["uncompressed_bytes"] = mustInt(m["uncompressed_bytes"]) + 1
			})
			return s
		}, ErrUncompressedSize, f0, false},
		{"key order", func(t *testing.T, s *memStore) FileSource {
			l := append([]string(nil), lines0...)
			l[1], l[2] = l[2], l[1]
			setLines(t, s, 0, l, nil)
			return s
		}, ErrKeyOrder, f0, false},
		{"key range", func(t *testing.T, s *memStore) FileSource {
			setLines(t, s, 0, lines0[1:], func(f map[string]any) { f["item_count"] = len(lines0) - 1 })
			rewriteManifest(t, s, p, func(m map[string]any) {
				m["item_count"] = mustInt(m["item_count"]) - 1
			})
			return s
		}, ErrKeyRange, f0, false},
		{"bad line", func(t *testing.T, s *memStore) FileSource {
			l := append([]string(nil), lines0...)
			l[1] = strings.Replace(l[1], `{"Item":`, `{"item":`, 1)
			setLines(t, s, 0, l, nil)
			return s
		}, ErrLine, f0, false},
		{"not zstd", func(t *testing.T, s *memStore) FileSource {
			data := []byte("not zstd at all")
			s.objects[f0] = data
			rewriteManifest(t, s, p, func(m map[string]any) {
				f := file0(m)
				m["compressed_bytes"] = mustInt(m["compressed_bytes"]) - mustInt(f["compressed_bytes"]) + int64(len(data))
				f["compressed_bytes"] = len(data)
				f["sha256"] = fmt.Sprintf("%x", sha256Sum(data))
				f["md5"] = b64(md5Sum(data))
			})
			return s
		}, ErrCompression, f0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base.clone()
			src := tc.mutate(t, s)
			b, err := Open(ctx, src, p)
			if err == nil {
				if tc.atOpen {
					t.Fatalf("Open accepted it")
				}
				err = b.Verify(ctx)
			} else if !tc.atOpen {
				t.Fatalf("Open failed: %v", err)
			}
			var fe *FileError
			if !errors.Is(err, tc.want) || !errors.As(err, &fe) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.wantKey != "" && fe.Key != tc.wantKey {
				t.Errorf("error names %s, want %s", fe.Key, tc.wantKey)
			}
			if tc.want == ErrVersionTooNew && (!strings.Contains(err.Error(), fmt.Sprintf("version %d", FormatVersion+1)) ||
				!strings.Contains(err.Error(), fmt.Sprintf("1 to %d", FormatVersion))) {
				t.Errorf("version message: %v", err)
			}
			// Items must fail the same way.
			if b != nil {
				if err2 := b.Items(ctx, func(*Record) error { return nil }); !errors.Is(err2, tc.want) {
					t.Errorf("Items: %v", err2)
				}
			}
		})
	}
}

func mustInt(v any) int64 {
	switch x := v.(type) {
	case json.Number:
		n, _ := x.Int64()
		return n
	case int:
		return int64(x)
	case int64:
		return x
	}
	panic(fmt.Sprintf("%T", v))
}

// TestLineCapMemory writes a backup whose only data file is one 64 MiB
// line and checks, in a fresh process, that Open+Verify refuses it with the
// line-cap error while the process's memory grows by less than 16 MiB.
func TestLineCapMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	if os.Getenv("FORMAT_LINECAP_DIR") != "" {
		lineCapChild(t, os.Getenv("FORMAT_LINECAP_DIR"))
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("measures /proc/self/status")
	}
	dir := t.TempDir()
	a := testARN(t, "huge")
	prefix := PrefixOf(a)
	key := DataFileKey(prefix, 1)
	var comp bytes.Buffer
	hw := newHashWriter()
	hw.reset(&comp)
	enc, _ := NewEncoder(hw)
	head := `{"Item":{"big":{"S":"`
	tail := "\"},\"pk\":{\"S\":\"a\"}}}\n"
	chunk := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz012345"), 1<<15) // 1 MiB
	enc.Write([]byte(head))
	total := int64(len(head) + len(tail))
	for i := 0; i < 64; i++ {
		enc.Write(chunk)
		total += int64(len(chunk))
	}
	enc.Write([]byte(tail))
	enc.Close()
	m := &Manifest{
		FormatVersion: 1, BackupARN: a.String(), BackupName: "huge", BackupCreationDateTime: fixedNow,
		Source: Source{"sqlite", "0"}, Snapshot: Snapshot{Kind: "k"}, SourceTable: tableJSON(a, "S", ""),
		ItemOrder: OrderKey, ItemCount: 1, UncompressedBytes: total, CompressedBytes: int64(comp.Len()),
		DataFiles: []DataFile{{Key: key, ItemCount: 1, UncompressedBytes: total, CompressedBytes: int64(comp.Len()),
			SHA256: fmt.Sprintf("%x", hw.sha.Sum(nil)), MD5: b64(hw.md5.Sum(nil)),
			KeyRange: &KeyRange{First: attr.Item{"pk": attr.StrValue("a")}, Last: attr.Item{"pk": attr.StrValue("a")}}}},
	}
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string][]byte{key: comp.Bytes(), ManifestKey(prefix): mb, SidecarKey(prefix): Sidecar(mb)} {
		p := filepath.Join(dir, filepath.FromSlash(k))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, v, 0o644)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLineCapMemory$", "-test.v")
	cmd.Env = append(os.Environ(), "FORMAT_LINECAP_DIR="+dir)
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
}

func procStatus(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n << 10
		}
	}
	return -1
}

func lineCapChild(t *testing.T, dir string) {
	ctx := context.Background()
	a := testARN(t, "huge")
	runtime.GC()
	debug.FreeOSMemory()
	before := procStatus("VmRSS")
	hwmBefore := procStatus("VmHWM")
	b, err := Open(ctx, dirSource(dir), PrefixOf(a))
	if err != nil {
		t.Fatal(err)
	}
	err = b.Verify(ctx)
	after := procStatus("VmHWM")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("error: %v", err)
	t.Logf("VmRSS before %d KiB, VmHWM before %d KiB, VmHWM after %d KiB: growth %.2f MiB; Go heap total alloc %.2f MiB",
		before>>10, hwmBefore>>10, after>>10, float64(after-before)/(1<<20), float64(ms.TotalAlloc)/(1<<20))
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("want ErrLineTooLong, got %v", err)
	}
	limit := int64(16 << 20)
	if raceEnabled {
		limit = 64 << 20
	}
	if growth := int64(after - before); growth >= limit {
		t.Fatalf("memory grew by %d bytes", growth)
	}
}
