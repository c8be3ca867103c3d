package awsimport

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/format"
	"github.com/extenddb/extenddb/internal/store"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// dirSource reads a testdata directory as a bucket.
type dirSource string

func (d dirSource) Walk(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	var keys []store.ObjectInfo
	err := filepath.WalkDir(string(d), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(string(d), p)
		key := filepath.ToSlash(rel)
		if prefix == "" || key == prefix || strings.HasPrefix(key, prefix+"/") {
			fi, _ := e.Info()
			keys = append(keys, store.ObjectInfo{Key: key, Size: fi.Size()})
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
	for _, k := range keys {
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}

func (d dirSource) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return os.Open(filepath.Join(string(d), filepath.FromSlash(key)))
}

var tableKeys = []KeyAttr{{Name: "pk", Type: attr.S}, {Name: "sk", Type: attr.N}}

// readAll reads every object under prefix and renders the items (sorted),
// the errors and the counts as golden text.
func readAll(t *testing.T, src Source, prefix string, opts Options) (string, Stats) {
	t.Helper()
	ctx := context.Background()
	objs, err := List(ctx, src, prefix)
	if err != nil {
		t.Fatal(err)
	}
	var items, errs []string
	opts.OnError = func(e ItemError) { errs = append(errs, e.Error()) }
	var st Stats
	for _, o := range objs {
		err := ReadObject(ctx, src, o, opts, &st, func(it attr.Item) error {
			items = append(items, string(attr.EncodeItem(it)))
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", o.Key, err)
		}
	}
	sort.Strings(items)
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "object %s\n", o.Key)
	}
	for _, it := range items {
		fmt.Fprintf(&b, "item %s\n", it)
	}
	for _, e := range errs {
		fmt.Fprintf(&b, "error %s\n", e)
	}
	fmt.Fprintf(&b, "objects=%d processed=%d errors=%d bytes=%d\n", st.Objects, st.ProcessedItems, st.Errors, st.ProcessedBytes)
	return b.String(), st
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name+".txt")
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n%s", name, p, got)
	}
}

func TestGolden(t *testing.T) {
	cases := []struct {
		name, dir, prefix string
		opts              Options
		items, errors     int64
	}{
		// Pointing at an export's folder reads its data files only.
		{"full-json-export-folder", "aws-full-json", "AWSDynamoDB/01700000000000-a1b2c3d4", Options{Format: FormatDynamoDBJSON, Compression: CompressionGZIP}, 3, 0},
		{"full-json-data", "aws-full-json", "AWSDynamoDB/01700000000000-a1b2c3d4/data/", Options{Format: FormatDynamoDBJSON, Compression: CompressionGZIP}, 3, 0},
		// A raw key prefix, not a folder: "AWSDynamoDB/0170000000000" matches the export.
		{"full-json-raw-prefix", "aws-full-json", "AWSDynamoDB/0170000000000", Options{Format: FormatDynamoDBJSON, Compression: CompressionGZIP}, 3, 0},
		{"full-ion", "aws-full-ion", "", Options{Format: FormatION, Compression: CompressionGZIP}, 3, 0},
		// An incremental export's records are not items: import counts each
		// as an error, as DynamoDB's import reads {"Item":...} lines only.
		{"incremental", "aws-incremental", "AWSDynamoDB/", Options{Format: FormatDynamoDBJSON, Compression: CompressionGZIP}, 0, 2},
		{"csv-header", "csv", "csv/header.csv", Options{Format: FormatCSV}, 3, 0},
		{"csv-headerlist", "csv", "csv/noheader", Options{Format: FormatCSV, CSVDelimiter: ';', CSVHeader: []string{"pk", "sk", "name"}}, 3, 0},
		{"csv-errors", "csv", "csv/bad.csv", Options{Format: FormatCSV}, 1, 4},
		{"json-errors", "json-errors", "", Options{Format: FormatDynamoDBJSON, Compression: CompressionNone}, 2, 5},
		// The wrong compression is one error per object, not a crash.
		{"json-not-gzip", "json-errors", "", Options{Format: FormatDynamoDBJSON, Compression: CompressionGZIP}, 0, 1},
		{"gzip-not-plain", "aws-full-json", "AWSDynamoDB/01700000000000-a1b2c3d4/data/zv", Options{Format: FormatDynamoDBJSON}, 0, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := dirSource(filepath.Join("testdata", c.dir))
			if c.dir == "csv" {
				src = dirSource("testdata")
			}
			c.opts.Keys = tableKeys
			got, st := readAll(t, src, c.prefix, c.opts)
			if st.ProcessedItems-st.Errors != c.items || st.Errors != c.errors {
				t.Errorf("imported %d errors %d, want %d and %d", st.ProcessedItems-st.Errors, st.Errors, c.items, c.errors)
			}
			golden(t, c.name, got)
		})
	}
}

// Every format yields the same items from the same table.
func TestFormatsAgree(t *testing.T) {
	j, _ := readAll(t, dirSource("testdata/aws-full-json"), "", Options{Format: FormatDynamoDBJSON, Compression: CompressionGZIP, Keys: tableKeys})
	i, _ := readAll(t, dirSource("testdata/aws-full-ion"), "", Options{Format: FormatION, Compression: CompressionGZIP, Keys: tableKeys})
	items := func(s string) string {
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "item ") {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	if items(j) != items(i) || items(j) == "" {
		t.Fatalf("DYNAMODB_JSON and ION differ:\n%s\n---\n%s", j, i)
	}
}

// An extenddb backup's data/ prefix (zstd, {"Item":...} lines) imports as
// it is, and its manifest beside it is not read as data.
func TestBackupDataPrefix(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "acct", "t", "bk", "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for f := 1; f <= 2; f++ {
		var buf bytes.Buffer
		enc, err := format.NewEncoder(&buf)
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		for i := 0; i < 100; i++ {
			it := attr.Item{"pk": attr.StrValue(fmt.Sprintf("k%d-%03d", f, i)), "sk": attr.MustNum(fmt.Sprint(i)), "v": attr.StrValue(strings.Repeat("x", i))}
			enc := attr.EncodeItem(it)
			want = append(want, string(enc))
			raw = format.AppendLine(raw, enc)
		}
		if _, err := enc.Write(raw); err != nil {
			t.Fatal(err)
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(format.DataFileKey("acct/t/bk/", f))), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "acct/t/bk/extenddb-manifest.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"acct/t/bk/data/", "acct/t/bk"} {
		got, st := readAll(t, dirSource(dir), prefix, Options{Format: FormatDynamoDBJSON, Compression: CompressionZSTD, Keys: tableKeys})
		sort.Strings(want)
		if st.Errors != 0 || st.ProcessedItems != 200 || st.Objects != 2 {
			t.Fatalf("prefix %s: %s", prefix, got)
		}
		for _, w := range want {
			if !strings.Contains(got, "item "+w+"\n") {
				t.Fatalf("prefix %s: item %s missing", prefix, w)
			}
		}
	}
}

// An item over 400 KB and a line over MaxLineBytes are errors; reading
// goes on past them.
func TestSizeLimits(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("a", attr.MaxItemSize)
	huge := strings.Repeat("b", MaxLineBytes+10)
	body := `{"Item":{"pk":{"S":"u1"},"sk":{"N":"1"},"v":{"S":"` + big + `"}}}` + "\n" +
		`{"Item":{"pk":{"S":"u2"},"sk":{"N":"2"},"v":{"S":"` + huge + `"}}}` + "\n" +
		`{"Item":{"pk":{"S":"u3"},"sk":{"N":"3"}}}` // no final newline
	if err := os.WriteFile(filepath.Join(dir, "x.json"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got, st := readAll(t, dirSource(dir), "", Options{Format: FormatDynamoDBJSON, Keys: tableKeys})
	if st.Errors != 2 || st.ProcessedItems != 3 || !strings.Contains(got, `"u3"`) ||
		!strings.Contains(got, "line 1: item size") || !strings.Contains(got, "line 2: line longer") {
		t.Fatalf("got:\n%.2000s", got)
	}
}

// Index key attributes are optional but typed.
func TestIndexKeys(t *testing.T) {
	keys := append(append([]KeyAttr{}, tableKeys...), KeyAttr{Name: "g", Type: attr.N, Optional: true})
	ok := attr.Item{"pk": attr.StrValue("a"), "sk": attr.MustNum("1")}
	if err := CheckItem(ok, keys); err != nil {
		t.Fatal(err)
	}
	ok["g"] = attr.StrValue("x")
	if err := CheckItem(ok, keys); err == nil || !strings.Contains(err.Error(), "key attribute g is S") {
		t.Fatalf("got %v", err)
	}
}

func TestSkipped(t *testing.T) {
	for k, want := range map[string]bool{
		"a/_started": true, "a/manifest-summary.json": true, "a/manifest-files.md5": true,
		"a/manifest-summary.checksum": true, "a/extenddb-manifest.json.sha256": true, "a/": true,
		"a/data/x.json.gz": false, "a/data/000001.json.zst": false, "started": false,
	} {
		if Skipped(k) != want {
			t.Errorf("Skipped(%q) = %v", k, !want)
		}
	}
}

func TestCheckOptions(t *testing.T) {
	for _, o := range []Options{
		{Format: "XML", Keys: tableKeys},
		{Format: FormatCSV, Compression: "BZIP2", Keys: tableKeys},
		{Format: FormatCSV},
	} {
		if CheckOptions(o) == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
