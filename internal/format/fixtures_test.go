package format

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

var update = flag.Bool("update", false, "rewrite the golden fixtures of the current format version")

type fixtureCase struct {
	name      string
	hashType  string
	rangeType string
	order     ItemOrder
	target    int64
	items     []attr.Item
}

// keyValues returns key values of a type whose byte order, text order and
// numeric or collation order disagree.
func keyValues(typ string) []attr.Value {
	switch typ {
	case "S":
		return []attr.Value{attr.StrValue("a"), attr.StrValue("B"), attr.StrValue("Z"), attr.StrValue("é"),
			attr.StrValue("ab"), attr.StrValue("a\x00b"), attr.StrValue(`"q\`)}
	case "N":
		return []attr.Value{mustNum("-1E+10"), mustNum("-5"), mustNum("-0.5"), mustNum("0"), mustNum("0.001"),
			mustNum("2"), mustNum("10"), mustNum("9.99E+125"), mustNum("1E-130"),
			mustNum("12345678901234567890123456789012345678")}
	case "B":
		return []attr.Value{attr.BinValue([]byte{0}), attr.BinValue([]byte{0xff}), attr.BinValue([]byte{0, 1}),
			attr.BinValue([]byte{0x7f}), attr.BinValue([]byte("hello"))}
	}
	return nil
}

// everyType is an item body with every attribute type, nested.
func everyType(i int) attr.Item {
	ns, _ := attr.NumValue("1")
	set := attr.Value{Type: attr.NS, Strs: []string{"10", "9", "-1", "1.5"}}
	attr.SortSet(&set)
	ss := attr.Value{Type: attr.SS, Strs: []string{"b", "a", "é", "A"}}
	attr.SortSet(&ss)
	bs := attr.Value{Type: attr.BS, Bins: [][]byte{{2}, {1, 0}, {0xff}}}
	attr.SortSet(&bs)
	return attr.Item{
		"s":     attr.StrValue(fmt.Sprintf("line %d \"quoted\" \\ tab\t nl\n ctl\x01 <&> ü 日本", i)),
		"empty": attr.StrValue(""),
		"n":     ns,
		"b":     attr.BinValue([]byte{0, 1, 2, 0xfe, 0xff}),
		"t":     attr.BoolValue(true),
		"f":     attr.BoolValue(false),
		"null":  attr.NullValue(),
		"m": attr.MapValue(map[string]attr.Value{
			"inner": attr.MapValue(map[string]attr.Value{"deep": attr.ListValue([]attr.Value{attr.NullValue()})}),
			"x":     mustNum("-0.25"),
		}),
		"l":                               attr.ListValue([]attr.Value{attr.StrValue("x"), mustNum("3"), attr.ListValue([]attr.Value{}), attr.MapValue(map[string]attr.Value{})}),
		"ss":                              ss,
		"ns":                              set,
		"bs":                              bs,
		"name with spaces and \"quotes\"": attr.BoolValue(true),
	}
}

func fixtureCases() []fixtureCase {
	var cases []fixtureCase
	for _, h := range []string{"S", "N", "B"} {
		for _, r := range []string{"", "S", "N", "B"} {
			c := fixtureCase{hashType: h, rangeType: r, order: OrderKey}
			c.name = "key_" + h
			if r != "" {
				c.name += "_" + r
			}
			hv := keyValues(h)
			rv := keyValues(r)
			for i, v := range hv {
				if r == "" {
					c.items = append(c.items, attr.Item{"pk": v, "v": mustNum(fmt.Sprint(i))})
					continue
				}
				for j, w := range rv {
					if (i+j)%2 == 0 || i < 2 {
						c.items = append(c.items, attr.Item{"pk": v, "sk": w, "v": mustNum(fmt.Sprint(i*100 + j))})
					}
				}
			}
			cases = append(cases, c)
		}
	}
	all := fixtureCase{name: "every_type", hashType: "S", rangeType: "N", order: OrderKey}
	for i := 0; i < 5; i++ {
		it := everyType(i)
		it["pk"] = attr.StrValue("item")
		it["sk"] = mustNum(fmt.Sprint(i))
		all.items = append(all.items, it)
	}
	cases = append(cases, all)
	multi := fixtureCase{name: "multi_file", hashType: "S", rangeType: "N", order: OrderKey, target: 600}
	for i := 0; i < 40; i++ {
		multi.items = append(multi.items, attr.Item{"pk": attr.StrValue(fmt.Sprintf("p%02d", i/10)), "sk": mustNum(fmt.Sprint(i % 10)),
			"payload": attr.StrValue(strings.Repeat("x", i))})
	}
	cases = append(cases, multi)
	unordered := fixtureCase{name: "unordered", hashType: "N", order: OrderUnordered, target: 200}
	for _, n := range []string{"5", "-1", "3", "100", "0"} {
		unordered.items = append(unordered.items, attr.Item{"pk": mustNum(n), "e": everyType(0)["m"]})
	}
	cases = append(cases, unordered)
	cases = append(cases, fixtureCase{name: "empty", hashType: "S", rangeType: "S", order: OrderKey})
	return cases
}

func (c fixtureCase) write(t testing.TB) (*memStore, *Result, ARN) {
	a := testARN(t, "tbl-"+strings.ReplaceAll(c.name, "_", "-"))
	td := tableJSON(a, c.hashType, c.rangeType)
	items := append([]attr.Item(nil), c.items...)
	if c.order == OrderKey {
		parsed, err := ParseTableDescription(td)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := parsed.Schema()
		sortItems(t, s, items)
	}
	s, res := writeBackup(t, writerConfig(a, td, c.order, c.target), items)
	return s, res, a
}

const fixtureVersionDir = "testdata/v2"

func decompressLines(t testing.TB, data []byte) []string {
	t.Helper()
	dec, err := NewDecoder(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	var lines []string
	sc := bufio.NewScanner(dec)
	sc.Buffer(nil, MaxLineBytes+1)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestGoldenFixtures writes every case and compares it with the committed
// fixture: data files line for line after decompression, the manifest in
// every member that does not depend on the compressor's exact bytes, and
// the AWS summary byte for byte. -update rewrites the fixtures.
func TestGoldenFixtures(t *testing.T) {
	for _, c := range fixtureCases() {
		t.Run(c.name, func(t *testing.T) {
			s, res, _ := c.write(t)
			root := filepath.Join(fixtureVersionDir, c.name)
			if *update {
				os.RemoveAll(root)
				for k, v := range s.objects {
					p := filepath.Join(root, filepath.FromSlash(k))
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, v, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			src := dirSource(root)
			b, err := Open(context.Background(), src, res.Prefix)
			if err != nil {
				t.Fatalf("fixture missing or unreadable (run with -update): %v", err)
			}
			got := res.Manifest
			want := b.Manifest
			if got.FormatVersion != FormatVersion || want.FormatVersion != FormatVersion {
				t.Errorf("format version %d, fixture %d, want %d", got.FormatVersion, want.FormatVersion, FormatVersion)
			}
			gs, err := ParseSidecarLines(res.Sidecar)
			if err != nil {
				t.Fatal(err)
			}
			ws, err := ParseSidecarLines(mustRead(t, src, SidecarKey(res.Prefix)))
			if err != nil {
				t.Fatal(err)
			}
			if len(gs) != len(ws) {
				t.Fatalf("sidecar of %d lines, fixture %d", len(gs), len(ws))
			}
			for i := range gs {
				if gs[i].Name != ws[i].Name {
					t.Errorf("sidecar line %d names %s, fixture %s", i+1, gs[i].Name, ws[i].Name)
				}
			}
			if len(got.DataFiles) != len(want.DataFiles) {
				t.Fatalf("%d data files, fixture has %d", len(got.DataFiles), len(want.DataFiles))
			}
			for i, f := range got.DataFiles {
				wf := want.DataFiles[i]
				gl := decompressLines(t, s.objects[f.Key])
				wl := decompressLines(t, mustRead(t, src, wf.Key))
				if len(gl) != len(wl) {
					t.Fatalf("%s: %d lines, fixture %d", f.Key, len(gl), len(wl))
				}
				for j := range gl {
					if gl[j] != wl[j] {
						t.Errorf("%s line %d:\n got %s\nwant %s", f.Key, j+1, gl[j], wl[j])
					}
				}
				if f.Key != wf.Key || f.ItemCount != wf.ItemCount || f.UncompressedBytes != wf.UncompressedBytes ||
					(f.KeyRange == nil) != (wf.KeyRange == nil) ||
					f.KeyRange != nil && (!attr.ItemsEqual(f.KeyRange.First, wf.KeyRange.First) || !attr.ItemsEqual(f.KeyRange.Last, wf.KeyRange.Last)) {
					t.Errorf("%s: manifest entry differs:\n got %+v\nwant %+v", f.Key, f, wf)
				}
			}
			if got.BackupARN != want.BackupARN || got.BackupName != want.BackupName || !got.BackupCreationDateTime.Equal(want.BackupCreationDateTime) ||
				got.Source != want.Source || got.Snapshot.Kind != want.Snapshot.Kind || got.ItemOrder != want.ItemOrder ||
				got.ItemCount != want.ItemCount || got.UncompressedBytes != want.UncompressedBytes ||
				!bytes.Equal(got.SourceTable, want.SourceTable) {
				t.Errorf("manifest differs from the fixture")
			}
			if !bytes.Equal(s.objects[ManifestSummaryKey(res.Prefix)], mustRead(t, src, ManifestSummaryKey(res.Prefix))) {
				t.Errorf("manifest-summary.json differs from the fixture")
			}
		})
	}
}

func mustRead(t testing.TB, src dirSource, key string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(string(src), filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// findBackups returns every backup prefix (directory holding a sidecar)
// under root, relative to the fixture directory that holds the key space.
func findBackups(t *testing.T, root string) map[string]string {
	out := map[string]string{} // fixture dir -> prefix
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != SidecarName {
			return err
		}
		dir := filepath.Dir(p)
		// dir is <fixture>/<account>/<table>/<id>
		fixture := filepath.Dir(filepath.Dir(filepath.Dir(dir)))
		rel, _ := filepath.Rel(fixture, dir)
		out[fixture] = filepath.ToSlash(rel) + "/"
		return nil
	})
	return out
}

// TestReadReleasedFixtures reads and verifies every fixture of every
// released format version (testdata/v*), and for the current version
// compares the items with the cases that produced them.
func TestReadReleasedFixtures(t *testing.T) {
	versions, _ := filepath.Glob("testdata/v*")
	if len(versions) == 0 {
		t.Fatal("no fixtures")
	}
	cases := map[string]fixtureCase{}
	for _, c := range fixtureCases() {
		cases[c.name] = c
	}
	n := 0
	for _, v := range versions {
		for fixture, prefix := range findBackups(t, v) {
			n++
			t.Run(filepath.ToSlash(fixture), func(t *testing.T) {
				ctx := context.Background()
				b, err := Open(ctx, dirSource(fixture), prefix)
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Verify(ctx); err != nil {
					t.Fatal(err)
				}
				var got []attr.Item
				err = b.Items(ctx, func(r *Record) error {
					it, err := r.Decode()
					if err != nil {
						return err
					}
					got = append(got, it)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if int64(len(got)) != b.ItemCount {
					t.Fatalf("%d items, manifest says %d", len(got), b.ItemCount)
				}
				c, ok := cases[filepath.Base(fixture)]
				if !ok {
					return
				}
				want := append([]attr.Item(nil), c.items...)
				if c.order == OrderKey {
					sortItems(t, b.Schema, want)
				}
				if len(want) != len(got) {
					t.Fatalf("%d items, case has %d", len(got), len(want))
				}
				for i := range want {
					if !attr.ItemsEqual(want[i], got[i]) {
						t.Errorf("item %d differs", i)
					}
				}
			})
		}
	}
	if n < len(cases) {
		t.Errorf("found %d fixtures, want at least %d", n, len(cases))
	}
}

// TestSha256sumAcceptsSidecar runs sha256sum -c from inside a fixture's
// backup directory.
func TestSha256sumAcceptsSidecar(t *testing.T) {
	bin, err := exec.LookPath("sha256sum")
	if err != nil {
		t.Skip("sha256sum not installed")
	}
	for fixture, prefix := range findBackups(t, fixtureVersionDir) {
		cmd := exec.Command(bin, "-c", "--strict", SidecarName)
		cmd.Dir = filepath.Join(fixture, filepath.FromSlash(prefix))
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), ManifestName+": OK") {
			t.Errorf("%s: sha256sum -c: %v\n%s", cmd.Dir, err, out)
		}
		// Every file of the backup but the sidecar is checked.
		var files int
		filepath.WalkDir(cmd.Dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() != SidecarName {
				files++
			}
			return nil
		})
		if ok := strings.Count(string(out), ": OK\n"); ok != files || files < 4 {
			t.Errorf("%s: sha256sum -c checked %d files of %d:\n%s", cmd.Dir, ok, files, out)
		}
	}
}
