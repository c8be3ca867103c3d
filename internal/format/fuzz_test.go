package format

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

// fixtureFiles returns the contents of every fixture object named name.
func fixtureFiles(f *testing.F, name string) [][]byte {
	var out [][]byte
	filepath.WalkDir("testdata", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == name {
			b, _ := os.ReadFile(p)
			out = append(out, b)
		}
		return nil
	})
	if len(out) == 0 {
		f.Fatalf("no fixture %s", name)
	}
	return out
}

func FuzzParseManifest(f *testing.F) {
	for _, b := range fixtureFiles(f, ManifestName) {
		f.Add(b)
		f.Add(bytes.Replace(b, []byte(`"format_version": 1`), []byte(`"format_version": 2`), 1))
		f.Add(bytes.Replace(b, []byte(`"etag": null`), []byte(`"etag": "abc"`), 1))
		f.Add(bytes.Replace(b, []byte(`"key"`), []byte(`"Key"`), 1))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format_version":1}`))
	f.Add([]byte(`{"format_version":1e400}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseManifest(data)
		if err != nil {
			return
		}
		// An accepted manifest survives a round trip unchanged.
		out, err := p.Manifest.Marshal()
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		q, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("re-parse: %v\n%s", err, out)
		}
		out2, _ := q.Manifest.Marshal()
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip differs:\n%s\n%s", out, out2)
		}
		if q.ARN != p.ARN || q.Schema != p.Schema || len(q.DataFiles) != len(p.DataFiles) {
			t.Fatal("round trip changed the manifest")
		}
	})
}

func FuzzScanLine(f *testing.F) {
	for _, b := range fixtureFiles(f, "000001.json.zst") {
		dec, _ := NewDecoder(bytes.NewReader(b))
		var buf bytes.Buffer
		buf.ReadFrom(dec)
		dec.Close()
		for _, l := range strings.Split(buf.String(), "\n") {
			if l != "" {
				f.Add([]byte(l), uint16(len(l)/2))
			}
		}
	}
	f.Add([]byte(`{"Item":{"pk":{"S":"a\"b"},"sk":{"N":"1"}}}`), uint16(12))
	f.Add([]byte(`{"Item":{"p\u006b":{"S":"a"},"sk":{"N":"1"}}}`), uint16(3))
	f.Add([]byte(`{"Item":{"pk":{"S":"a"},"sk":{"N":"1"}}}}`), uint16(0))
	schema := KeySchema{HashName: "pk", HashType: attr.S, RangeName: "sk", RangeType: attr.N}
	f.Fuzz(func(t *testing.T, line []byte, split uint16) {
		if bytes.IndexByte(line, '\n') >= 0 {
			return
		}
		for _, sch := range []KeySchema{schema, {HashName: "pk", HashType: attr.S}} {
			item, k, err := ScanLine(line, sch)
			// Split feeding agrees with whole feeding.
			sc := lineScanner{schema: sch}
			sc.reset()
			cut := int(split) % (len(line) + 1)
			err2 := sc.feed(line[:cut])
			if err2 == nil {
				err2 = sc.feed(line[cut:])
			}
			var k2 Key
			if err2 == nil {
				k2, err2 = sc.finish()
			}
			if (err == nil) != (err2 == nil) {
				t.Fatalf("split %d disagrees: %v / %v", cut, err, err2)
			}
			if err == nil && (!attr.Equal(k.Hash, k2.Hash) || CompareKeys(k, k2) != 0) {
				t.Fatalf("split %d: keys differ", cut)
			}
			// A canonical item line is accepted with the item's own key;
			// an accepted line that decodes has the decoded key.
			inner := line
			if bytes.HasPrefix(line, []byte(LinePrefix)) && bytes.HasSuffix(line, []byte("}")) && len(line) > len(LinePrefix) {
				inner = line[len(LinePrefix) : len(line)-1]
			} else {
				inner = nil
			}
			if inner == nil {
				continue
			}
			it, derr := attr.DecodeItem(inner)
			if derr != nil || it == nil {
				continue
			}
			dk, kerr := sch.KeyOf(it)
			canonical := bytes.Equal(attr.EncodeItem(it), inner)
			if canonical && kerr == nil && err != nil {
				t.Fatalf("canonical line refused: %v", err)
			}
			if err == nil {
				if kerr != nil || !attr.Equal(dk.Hash, k.Hash) || sch.HasRange() && !attr.Equal(dk.Range, k.Range) {
					t.Fatalf("scanner key %+v, decoded key %+v (%v)", k, dk, kerr)
				}
				if !bytes.Equal(item, inner) {
					t.Fatal("item bytes")
				}
			}
		}
	})
}

func FuzzParseSidecar(f *testing.F) {
	for _, b := range fixtureFiles(f, SidecarName) {
		f.Add(b)
		f.Add(bytes.ToUpper(b))
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte(""))
	f.Add([]byte(strings.Repeat("0", 64) + " *" + ManifestName + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := ParseSidecarLines(data)
		sum, err2 := ParseSidecar(data)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("ParseSidecarLines %v, ParseSidecar %v", err, err2)
		}
		if err != nil {
			return
		}
		// Only the canonical form is accepted: it writes back byte for
		// byte, and the last line is the manifest's.
		if want := SidecarOf(lines); string(data) != string(want) {
			t.Fatalf("accepted %q, canonical form is %q", data, want)
		}
		last := lines[len(lines)-1]
		if last.Name != ManifestName || last.Sum != sum || !strings.HasSuffix(string(data), hex.EncodeToString(sum[:])+"  "+ManifestName+"\n") {
			t.Fatalf("accepted %q: the last line is not the manifest's", data)
		}
	})
}

func FuzzParseARN(f *testing.F) {
	f.Add("arn:aws:dynamodb:us-east-1:123456789012:table/Music/backup/01489602797149-73d8d5bc")
	f.Add("arn:aws-cn:dynamodb:cn-north-1:123456789012:table/a.b-c_d/backup/00000000000000-00000000")
	f.Add("arn:aws-us-gov:dynamodb:us-gov-west-1:000000000000:table/x..y/backup/99999999999999-ffffffff")
	f.Add("arn:aws:dynamodb:us-east-1:123456789012:table/Music/export/01489602797149-73d8d5bc")
	f.Add("arn:aws:dynamodb:us-east-1:123456789012:table/Music")
	f.Add("arn:aws:dynamodb:us-east-1:123456789012:table/Music/backup/01489602797149-73D8D5BC")
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseARN(s)
		if err != nil {
			return
		}
		if a.String() != s {
			t.Fatalf("%q formats as %q", s, a.String())
		}
		if strings.Contains(PrefixOf(a), "//") || strings.Count(PrefixOf(a), "/") != 3 {
			t.Fatalf("prefix %q", PrefixOf(a))
		}
		b, err := ParseARN(a.String())
		if err != nil || b != a {
			t.Fatalf("re-parse: %v", err)
		}
	})
}
