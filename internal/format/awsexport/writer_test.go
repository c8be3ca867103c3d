package awsexport

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/blobstore"
	"github.com/extenddb/extenddb/internal/blobstore/memstore"
)

func get(t *testing.T, st blobstore.Store, key string) []byte {
	t.Helper()
	rc, err := st.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testItems covers every attribute type, nested.
func testItems(n int) []attr.Item {
	var out []attr.Item
	for i := 0; i < n; i++ {
		it := attr.Item{
			"pk":   attr.StrValue(fmt.Sprintf("key-%05d", i)),
			"n":    attr.MustNum(fmt.Sprint(i*7 - 3)),
			"frac": attr.MustNum("0.000123"),
			"big":  attr.MustNum("1E+30"),
			"b":    attr.BinValue([]byte{0, 1, byte(i)}),
			"t":    attr.BoolValue(i%2 == 0),
			"z":    attr.NullValue(),
			"ss":   {Type: attr.SS, Strs: []string{"a", "b\"q", "ü"}},
			"ns":   {Type: attr.NS, Strs: []string{"-1.5", "2", "300"}},
			"bs":   {Type: attr.BS, Bins: [][]byte{{1}, {2, 3}}},
			"l":    attr.ListValue([]attr.Value{attr.StrValue("x"), attr.MustNum("1"), attr.ListValue([]attr.Value{})}),
			"m": attr.MapValue(map[string]attr.Value{"in": attr.StrValue("<&>"), "deep": attr.MapValue(map[string]attr.Value{
				"k": {Type: attr.SS, Strs: []string{"only"}}})}),
			"weird name": attr.StrValue("line\nbreak"),
		}
		out = append(out, it)
	}
	return out
}

func runExport(t *testing.T, st blobstore.Store, p Params, items []attr.Item) *Result {
	t.Helper()
	ctx := context.Background()
	w, err := Create(ctx, st, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := w.Add(ctx, attr.EncodeItem(it)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := w.Finish(ctx, p.StartTime.Add(90*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func params(f string) Params {
	start := time.Date(2026, 3, 4, 7, 28, 34, 28e6, time.UTC)
	return Params{
		ExportArn:  "arn:aws:dynamodb:us-east-1:000000000000:table/T/export/01772609314028-a1b2c3d4",
		ExportID:   "01772609314028-a1b2c3d4",
		TableArn:   "arn:aws:dynamodb:us-east-1:000000000000:table/T",
		TableID:    "12345a12-abcd-123a-ab12-1234abc12345",
		ExportTime: start.Add(-time.Minute), StartTime: start,
		S3Bucket: "bkt", S3Prefix: "exports/2026", Format: f,
	}
}

func TestRoundTripBothFormats(t *testing.T) {
	for _, f := range []string{FormatJSON, FormatION} {
		t.Run(f, func(t *testing.T) {
			st := memstore.New()
			p := params(f)
			p.MaxFileBytes = 2000 // several data files
			items := testItems(40)
			res := runExport(t, st, p, items)
			if res.ItemCount != 40 || len(res.Files) < 3 {
				t.Fatalf("items %d files %d; want 40 items in several files", res.ItemCount, len(res.Files))
			}
			var want int64
			for _, it := range items {
				want += int64(attr.ItemSize(it))
			}
			if res.BilledSizeBytes != want {
				t.Fatalf("billed %d, want the items' size %d", res.BilledSizeBytes, want)
			}
			ext := map[string]string{FormatJSON: ".json.gz", FormatION: ".ion.gz"}[f]
			name := regexp.MustCompile(`^exports/2026/AWSDynamoDB/01772609314028-a1b2c3d4/data/[a-z2-7]{26}` + regexp.QuoteMeta(ext) + `$`)
			var got []attr.Item
			var counted int64
			for _, fe := range res.Files {
				if !name.MatchString(fe.DataFileS3Key) {
					t.Fatalf("data key %q", fe.DataFileS3Key)
				}
				body := get(t, st, fe.DataFileS3Key)
				sum := md5.Sum(body)
				if fe.MD5Checksum != base64.StdEncoding.EncodeToString(sum[:]) || fe.ETag != hex.EncodeToString(sum[:]) {
					t.Fatalf("%s: checksum/etag do not match the object", fe.DataFileS3Key)
				}
				var n int64
				if err := ReadDataFile(bytes.NewReader(body), f, func(it attr.Item) error {
					got = append(got, it)
					n++
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if n != fe.ItemCount {
					t.Fatalf("%s: itemCount %d, file holds %d", fe.DataFileS3Key, fe.ItemCount, n)
				}
				counted += n
			}
			if counted != 40 || len(got) != len(items) {
				t.Fatalf("read back %d items", len(got))
			}
			for i := range items {
				if !attr.Equal(attr.MapValue(items[i]), attr.MapValue(got[i])) {
					t.Fatalf("item %d:\n got %s\nwant %s", i, attr.EncodeItem(got[i]), attr.EncodeItem(items[i]))
				}
			}
		})
	}
}

// TestManifestsFieldByField checks the manifests against the documented
// schema: every field, its JSON type and value, and nothing else.
func TestManifestsFieldByField(t *testing.T) {
	st := memstore.New()
	p := params(FormatJSON)
	res := runExport(t, st, p, testItems(3))
	dir := "exports/2026/AWSDynamoDB/01772609314028-a1b2c3d4/"
	if res.ManifestSummaryKey != dir+"manifest-summary.json" {
		t.Fatalf("summary key %q", res.ManifestSummaryKey)
	}
	if b := get(t, st, dir+"_started"); len(b) != 0 {
		t.Fatalf("_started holds %d bytes", len(b))
	}
	summary := get(t, st, dir+"manifest-summary.json")
	var m map[string]any
	if err := json.Unmarshal(summary, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"version":            "2020-06-30",
		"exportArn":          p.ExportArn,
		"startTime":          "2026-03-04T07:28:34.028Z",
		"endTime":            "2026-03-04T07:30:04.028Z",
		"tableArn":           p.TableArn,
		"tableId":            p.TableID,
		"exportTime":         "2026-03-04T07:27:34.028Z",
		"s3Bucket":           "bkt",
		"s3Prefix":           "exports/2026",
		"s3SseAlgorithm":     "AES256",
		"s3SseKmsKeyId":      nil,
		"manifestFilesS3Key": dir + "manifest-files.json",
		"billedSizeBytes":    float64(res.BilledSizeBytes),
		"itemCount":          float64(3),
		"outputFormat":       "DYNAMODB_JSON",
		"exportType":         "FULL_EXPORT",
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("manifest-summary.json:\n got %v\nwant %v", m, want)
	}
	if bytes.Count(summary, []byte("\n")) != 1 || summary[len(summary)-1] != '\n' {
		t.Fatalf("summary is not one JSON line: %q", summary)
	}
	files := get(t, st, dir+"manifest-files.json")
	lines := strings.Split(strings.TrimSuffix(string(files), "\n"), "\n")
	if len(lines) != len(res.Files) {
		t.Fatalf("%d lines for %d files", len(lines), len(res.Files))
	}
	for _, l := range lines {
		var fm map[string]any
		if err := json.Unmarshal([]byte(l), &fm); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(fm))
		for k := range fm {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if !reflect.DeepEqual(keys, []string{"dataFileS3Key", "etag", "itemCount", "md5Checksum"}) {
			t.Fatalf("manifest-files line fields %v", keys)
		}
		if _, ok := fm["itemCount"].(float64); !ok {
			t.Fatalf("itemCount is not a number: %v", fm["itemCount"])
		}
	}
	for _, c := range [][2]string{{"manifest-files.json", "manifest-files.checksum"}, {"manifest-summary.json", "manifest-summary.checksum"}} {
		s := md5.Sum(get(t, st, dir+c[0]))
		if got := string(get(t, st, dir+c[1])); got != hex.EncodeToString(s[:]) {
			t.Fatalf("%s = %q, want the md5 of %s", c[1], got, c[0])
		}
	}
}

func TestEmptyTableAndNoPrefix(t *testing.T) {
	st := memstore.New()
	p := params(FormatION)
	p.S3Prefix = ""
	p.S3SseAlgorithm = "KMS"
	p.S3SseKmsKeyID = "arn:aws:kms:us-east-1:000000000000:key/k"
	res := runExport(t, st, p, nil)
	if res.ItemCount != 0 || len(res.Files) != 1 || res.Files[0].ItemCount != 0 {
		t.Fatalf("empty export: %+v", res)
	}
	if !strings.HasPrefix(res.ManifestSummaryKey, "AWSDynamoDB/") {
		t.Fatalf("no prefix: %q", res.ManifestSummaryKey)
	}
	var s Summary
	if err := json.Unmarshal(get(t, st, res.ManifestSummaryKey), &s); err != nil {
		t.Fatal(err)
	}
	if s.S3Prefix != nil || s.S3SseAlgorithm != "KMS" || s.S3SseKmsKeyID == nil || s.OutputFormat != "ION" {
		t.Fatalf("summary %+v", s)
	}
	n := 0
	if err := ReadDataFile(bytes.NewReader(get(t, st, res.Files[0].DataFileS3Key)), FormatION, func(attr.Item) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("empty ION file: %d items, %v", n, err)
	}
}

// TestIonText pins the Ion type mapping on one item.
func TestIonText(t *testing.T) {
	st := memstore.New()
	res := runExport(t, st, params(FormatION), []attr.Item{{
		"Id": attr.MustNum("103"), "S": attr.StrValue("x"), "A": {Type: attr.SS, Strs: []string{"a"}},
		"N": {Type: attr.NS, Strs: []string{"1.5"}}, "B": attr.BinValue([]byte("hi")), "Z": attr.NullValue(),
	}})
	var text bytes.Buffer
	gz := get(t, st, res.Files[0].DataFileS3Key)
	r, err := gzipReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(&text, r)
	got := text.String()
	for _, want := range []string{"$ion_1_0\n", "{Item:{", "A:$dynamodb_SS::[\"a\"]", "B:{{aGk=}}", "Id:103.", "N:$dynamodb_NS::[1.5]", "S:\"x\"", "Z:null"} {
		if !strings.Contains(got, want) {
			t.Errorf("Ion text %q lacks %q", got, want)
		}
	}
}

func TestFailedPutAborts(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	p := params(FormatJSON)
	w, err := Create(ctx, st, p)
	if err != nil {
		t.Fatal(err)
	}
	w.Add(ctx, attr.EncodeItem(testItems(1)[0]))
	w.Abort(fmt.Errorf("stop"))
	if _, err := w.Finish(ctx, time.Now()); err == nil {
		t.Fatal("Finish after Abort succeeded")
	}
	if err := Cleanup(ctx, st, p.S3Prefix, p.ExportID); err != nil {
		t.Fatal(err)
	}
	if objs, _ := st.List(ctx, ""); len(objs) != 0 {
		t.Fatalf("cleanup left %v", objs)
	}
}

// TestIncrementalLayout: an incremental export's lines carry Metadata,
// Keys, NewImage and (NEW_AND_OLD_IMAGES) OldImage, and its summary has
// version 2023-08-01 with the period and the view.
func TestIncrementalLayout(t *testing.T) {
	for _, view := range []string{ViewNewImage, ViewNewAndOldImages} {
		ctx := context.Background()
		st := memstore.New()
		p := params(FormatJSON)
		p.Incremental = &Incremental{From: p.ExportTime.Add(-time.Hour), To: p.ExportTime, View: view}
		w, err := Create(ctx, st, p)
		if err != nil {
			t.Fatal(err)
		}
		changes := []Change{
			{Keys: []byte(`{"pk":{"S":"a"}}`), NewImage: []byte(`{"pk":{"S":"a"},"v":{"N":"2"}}`), OldImage: []byte(`{"pk":{"S":"a"},"v":{"N":"1"}}`), WriteMicros: 1772609314028123},
			{Keys: []byte(`{"pk":{"S":"gone"}}`), OldImage: []byte(`{"pk":{"S":"gone"}}`), WriteMicros: 1772609314028999},
		}
		for _, c := range changes {
			if err := w.AddChange(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
		res, err := w.Finish(ctx, p.StartTime.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if err := json.Unmarshal(get(t, st, res.ManifestSummaryKey), &s); err != nil {
			t.Fatal(err)
		}
		if s["version"] != "2023-08-01" || s["exportType"] != "INCREMENTAL_EXPORT" || s["outputView"] != view ||
			s["exportFromTime"] != "2026-03-04T06:27:34.028Z" || s["exportToTime"] != "2026-03-04T07:27:34.028Z" || s["itemCount"] != float64(2) {
			t.Fatalf("summary %v", s)
		}
		if _, ok := s["exportTime"]; ok {
			t.Fatalf("an incremental summary has exportTime: %v", s)
		}
		r, err := gzipReader(get(t, st, res.Files[0].DataFileS3Key))
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(r)
		lines := strings.Split(strings.TrimSpace(string(text)), "\n")
		want0 := `{"Metadata":{"WriteTimestampMicros":{"N":"1772609314028123"}},"Keys":{"pk":{"S":"a"}},"NewImage":{"pk":{"S":"a"},"v":{"N":"2"}}`
		want1 := `{"Metadata":{"WriteTimestampMicros":{"N":"1772609314028999"}},"Keys":{"pk":{"S":"gone"}}`
		if view == ViewNewAndOldImages {
			want0 += `,"OldImage":{"pk":{"S":"a"},"v":{"N":"1"}}`
			want1 += `,"OldImage":{"pk":{"S":"gone"}}`
		}
		if len(lines) != 2 || lines[0] != want0+"}" || lines[1] != want1+"}" {
			t.Fatalf("%s lines:\n%s", view, text)
		}
	}
}
