package format

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

func collect(t *testing.T, read func(fn func(int, attr.Item, error) error) error) (items []string, errs []int) {
	t.Helper()
	err := read(func(line int, it attr.Item, err error) error {
		if err != nil {
			errs = append(errs, line)
			return nil
		}
		items = append(items, string(attr.AppendItem(nil, it)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return items, errs
}

const sample = `{"pk":{"S":"a\"b"},"n":{"N":"-12.5"},"i":{"N":"7"},"b":{"B":"AAE="},"t":{"BOOL":true},"z":{"NULL":true},` +
	`"l":{"L":[{"S":"x"},{"N":"1"}]},"m":{"M":{"it's":{"S":"é"}}},"ss":{"SS":["a","b"]},"ns":{"NS":["1","2.5"]},"bs":{"BS":["AQ=="]}}`

// TestImportReadersRoundTrip: what the export writes in DynamoDB JSON
// and in Ion reads back to the same item; bad lines are reported by
// number without stopping the object.
func TestImportReadersRoundTrip(t *testing.T) {
	it, err := attr.DecodeItem([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	want := string(attr.AppendItem(nil, it))
	jl := string(AppendLine(nil, attr.AppendItem(nil, it))) + "\n" + `{"Item":` + "\n" + `{"Other":{}}` + "\n" + string(AppendLine(nil, attr.AppendItem(nil, it)))
	items, errs := collect(t, func(fn func(int, attr.Item, error) error) error {
		return ReadDynamoJSONLines(strings.NewReader(jl), fn)
	})
	if len(items) != 2 || items[0] != want || fmt.Sprint(errs) != "[3 4]" {
		t.Fatalf("json lines: %d items, errors on lines %v; %v", len(items), errs, items)
	}
	ion := IonVersionMarker + string(AppendIonLine(nil, it)) + string(AppendIonLine(nil, it))
	items, errs = collect(t, func(fn func(int, attr.Item, error) error) error { return ReadIonLines(strings.NewReader(ion), fn) })
	if len(items) != 2 || items[0] != want || len(errs) != 0 {
		t.Fatalf("ion: %v, errors %v\nwant %s", items, errs, want)
	}
}

func TestReadCSV(t *testing.T) {
	in := "pk;n;note\n" + "a;1;hello\n" + "b;x;bad number\n" + "c;2;\n"
	items, errs := collect(t, func(fn func(int, attr.Item, error) error) error {
		return ReadCSV(strings.NewReader(in), CSVOptions{Delimiter: ";", KeyTypes: map[string]string{"n": "N"}}, fn)
	})
	if fmt.Sprint(items) != `[{"n":{"N":"1"},"note":{"S":"hello"},"pk":{"S":"a"}} {"n":{"N":"2"},"pk":{"S":"c"}}]` || fmt.Sprint(errs) != "[3]" {
		t.Fatalf("csv: %v errors %v", items, errs)
	}
	items, _ = collect(t, func(fn func(int, attr.Item, error) error) error {
		return ReadCSV(bytes.NewReader([]byte("x,y\n")), CSVOptions{HeaderList: []string{"pk", "v"}}, fn)
	})
	if fmt.Sprint(items) != `[{"pk":{"S":"x"},"v":{"S":"y"}}]` {
		t.Fatalf("csv with HeaderList: %v", items)
	}
}
