package awsexport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/amazon-ion/ion-go/ion"
	"github.com/klauspost/compress/gzip"

	"github.com/extenddb/extenddb/internal/attr"
)

func sortedKeys(m map[string]attr.Value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ReadDataFile reads a full export's gzip data file in the given format
// and calls fn with each item, in file order. An error names the line
// (DYNAMODB_JSON) or value (ION) it is about.
func ReadDataFile(r io.Reader, outputFormat string, fn func(attr.Item) error) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return fmt.Errorf("awsexport: gzip: %w", err)
	}
	defer gz.Close()
	switch outputFormat {
	case FormatJSON:
		sc := bufio.NewScanner(gz)
		sc.Buffer(make([]byte, 64<<10), 2<<20)
		for n := 1; sc.Scan(); n++ {
			var line struct {
				Item json.RawMessage `json:"Item"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				return fmt.Errorf("awsexport: line %d: %w", n, err)
			}
			it, err := attr.DecodeItem(line.Item)
			if err != nil {
				return fmt.Errorf("awsexport: line %d: %w", n, err)
			}
			if err := fn(it); err != nil {
				return err
			}
		}
		return sc.Err()
	case FormatION:
		ir := ion.NewReader(gz)
		for n := 1; ir.Next(); n++ {
			if ir.Type() == ion.SymbolType {
				// The version marker, which this reader reports as a
				// symbol.
				if s, err := ir.SymbolValue(); err == nil && s != nil && s.Text != nil && *s.Text == "$ion_1_0" {
					n--
					continue
				}
			}
			it, err := readIonLine(ir)
			if err != nil {
				return fmt.Errorf("awsexport: value %d: %w", n, err)
			}
			if err := fn(it); err != nil {
				return err
			}
		}
		return ir.Err()
	}
	return fmt.Errorf("awsexport: unknown format %q", outputFormat)
}

func readIonLine(ir ion.Reader) (attr.Item, error) {
	if ir.Type() != ion.StructType {
		return nil, fmt.Errorf("not a struct")
	}
	if err := ir.StepIn(); err != nil {
		return nil, err
	}
	var it attr.Item
	for ir.Next() {
		fn, err := ir.FieldName()
		if err != nil {
			return nil, err
		}
		if fn == nil || fn.Text == nil || *fn.Text != "Item" {
			continue
		}
		v, err := readIonValue(ir)
		if err != nil {
			return nil, err
		}
		if v.Type != attr.M {
			return nil, errors.New("the Item is not a struct")
		}
		it = attr.Item(v.Map)
	}
	if err := ir.Err(); err != nil {
		return nil, err
	}
	if err := ir.StepOut(); err != nil {
		return nil, err
	}
	if it == nil {
		return nil, fmt.Errorf("no Item field")
	}
	return it, nil
}

func ionNumber(d *ion.Decimal) (string, error) {
	return attr.ParseNumber(strings.ReplaceAll(strings.ReplaceAll(d.String(), "d", "E"), "D", "E"))
}

func readIonValue(ir ion.Reader) (attr.Value, error) {
	if ir.IsNull() {
		return attr.NullValue(), nil
	}
	switch ir.Type() {
	case ion.StringType:
		s, err := ir.StringValue()
		if err != nil || s == nil {
			return attr.Value{}, fmt.Errorf("bad string: %v", err)
		}
		return attr.StrValue(*s), nil
	case ion.DecimalType:
		d, err := ir.DecimalValue()
		if err != nil {
			return attr.Value{}, err
		}
		n, err := ionNumber(d)
		if err != nil {
			return attr.Value{}, err
		}
		return attr.Value{Type: attr.N, Str: n}, nil
	case ion.IntType:
		b, err := ir.BigIntValue()
		if err != nil {
			return attr.Value{}, err
		}
		return attr.NumValue(b.String())
	case ion.FloatType:
		f, err := ir.FloatValue()
		if err != nil {
			return attr.Value{}, err
		}
		return attr.NumValue(strconv.FormatFloat(*f, 'g', -1, 64))
	case ion.BlobType, ion.ClobType:
		b, err := ir.ByteValue()
		if err != nil {
			return attr.Value{}, err
		}
		return attr.BinValue(b), nil
	case ion.BoolType:
		b, err := ir.BoolValue()
		if err != nil || b == nil {
			return attr.Value{}, fmt.Errorf("bad bool: %v", err)
		}
		return attr.BoolValue(*b), nil
	case ion.StructType:
		if err := ir.StepIn(); err != nil {
			return attr.Value{}, err
		}
		m := map[string]attr.Value{}
		for ir.Next() {
			fn, err := ir.FieldName()
			if err != nil || fn == nil || fn.Text == nil {
				return attr.Value{}, fmt.Errorf("bad field name: %v", err)
			}
			v, err := readIonValue(ir)
			if err != nil {
				return attr.Value{}, err
			}
			m[*fn.Text] = v
		}
		if err := ir.Err(); err != nil {
			return attr.Value{}, err
		}
		return attr.MapValue(m), ir.StepOut()
	case ion.ListType:
		anns, err := ir.Annotations()
		if err != nil {
			return attr.Value{}, err
		}
		set := attr.TypeInvalid
		for _, a := range anns {
			if a.Text != nil {
				switch *a.Text {
				case "$dynamodb_SS":
					set = attr.SS
				case "$dynamodb_NS":
					set = attr.NS
				case "$dynamodb_BS":
					set = attr.BS
				}
			}
		}
		if err := ir.StepIn(); err != nil {
			return attr.Value{}, err
		}
		var list []attr.Value
		for ir.Next() {
			v, err := readIonValue(ir)
			if err != nil {
				return attr.Value{}, err
			}
			list = append(list, v)
		}
		if err := ir.Err(); err != nil {
			return attr.Value{}, err
		}
		if err := ir.StepOut(); err != nil {
			return attr.Value{}, err
		}
		if set == attr.TypeInvalid {
			if list == nil {
				list = []attr.Value{}
			}
			return attr.ListValue(list), nil
		}
		return setValue(set, list)
	}
	return attr.Value{}, fmt.Errorf("unsupported Ion type %v", ir.Type())
}

// setValue builds a set from its members, through the DynamoDB-JSON
// codec so that members are checked and ordered canonically.
func setValue(t attr.Type, members []attr.Value) (attr.Value, error) {
	want := map[attr.Type]attr.Type{attr.SS: attr.S, attr.NS: attr.N, attr.BS: attr.B}[t]
	var raw []json.RawMessage
	for _, m := range members {
		if m.Type != want {
			return attr.Value{}, fmt.Errorf("%v member of type %v", t, m.Type)
		}
		b := attr.AppendValue(nil, m)
		var inner map[string]json.RawMessage
		if err := json.Unmarshal(b, &inner); err != nil {
			return attr.Value{}, err
		}
		raw = append(raw, inner[want.String()])
	}
	b, err := json.Marshal(map[string][]json.RawMessage{t.String(): raw})
	if err != nil {
		return attr.Value{}, err
	}
	return attr.DecodeValue(b)
}

// gzipReader opens a gzip stream held in memory.
func gzipReader(b []byte) (io.Reader, error) { return gzip.NewReader(bytes.NewReader(b)) }
