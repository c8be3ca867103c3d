package format

import (
	"bytes"
	"encoding/json"
	"errors"
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

// TestDynamoJSONLineFastPath: a line parsed by the item decoder alone
// gives what encoding/json and the decoder together give, item or error.
func TestDynamoJSONLineFastPath(t *testing.T) {
	slow := func(b []byte) (attr.Item, error) {
		var line struct {
			Item json.RawMessage `json:"Item"`
		}
		if err := json.Unmarshal(b, &line); err != nil {
			return nil, err
		}
		if len(line.Item) == 0 {
			return nil, errors.New(`the line has no "Item"`)
		}
		return attr.DecodeItem(line.Item)
	}
	for _, l := range []string{
		`{"Item":{"pk":{"S":"a"},"n":{"N":"1.50"}}}`,
		`{"Item": {"pk":{"S":"a"}} }`,
		`{"Item":{"pk":{"S":"a"}},"Item":{"pk":{"S":"b"}}}`,
		`{"Item":{"pk":{"S":"a"}},"x":1}`,
		`{"item":{"pk":{"S":"a"}}}`,
		`{"Item":null}`,
		`{"Item":{}}`,
		`{"Item":{"pk":{"S":"a\u00e9\n"}}}`,
		`{"Item":{"pk":{"S":"a"}}`,
		`{"Item":{"pk":{"S":"a"}}}}`,
		`{"Item":{"pk":{"Q":"a"}}}`,
		`{"Item":{"pk":{"S":"a"},"pk":{"S":"b"}}}`,
		`{"Item":{"m":{"M":{"l":{"L":[{"BOOL":true},{"NULL":true},{"NS":["2","1"]}]}}}}}`,
		`{"Item":"x"}`,
		`{"Other":1}`,
		`{"Item":{"b":{"B":"AAE="}}} x`,
	} {
		got, gerr := dynamoJSONLine([]byte(l))
		want, werr := slow([]byte(l))
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Errorf("%s: error %v, want %v", l, gerr, werr)
			continue
		}
		if string(attr.AppendItem(nil, got)) != string(attr.AppendItem(nil, want)) || (got == nil) != (want == nil) {
			t.Errorf("%s: %v, want %v", l, got, want)
		}
	}
}
