package format

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/amazon-ion/ion-go/ion"

	"github.com/extenddb/extenddb/internal/attr"
)

// Readers of ImportTable's input formats (docs/exports.md, "Importing"):
// each calls fn with every item of one (decompressed) object, in
// DynamoDB JSON form, or with the line's error; a bad line does not stop
// the object. The returned error is the object's own (unreadable).

// maxImportLine bounds one input line (an item is at most 400 KB; its
// text in DynamoDB JSON or Ion a few times that).
const maxImportLine = 4 << 20

// ReadDynamoJSONLines reads lines {"Item":{...}} (AWS exports, extenddb
// backups' data files); blank lines are skipped.
func ReadDynamoJSONLines(r io.Reader, fn func(line int, item attr.Item, err error) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxImportLine)
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		it, err := dynamoJSONLine(b)
		if err := fn(n, it, err); err != nil {
			return err
		}
	}
	return sc.Err()
}

// dynamoJSONLine parses one line {"Item":{...}}. A line spelled exactly
// so (what exports write) is parsed in one pass by the item decoder: its
// item must then be one valid item and nothing else, and the line is
// valid JSON with that Item. Any other line (spacing, other members, the
// name in another case, a bad item) goes through encoding/json as a
// whole, which gives the same item or the line's error.
func dynamoJSONLine(b []byte) (attr.Item, error) {
	const head = `{"Item":`
	if len(b) > len(head) && string(b[:len(head)]) == head && b[len(b)-1] == '}' {
		if it, err := attr.DecodeItem(b[len(head) : len(b)-1]); err == nil {
			return it, nil
		}
	}
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

// ReadIonLines reads AWS's Ion export lines: {Item:{...}} values after an
// optional $ion_1_0, with the mapping AppendIonLine writes.
func ReadIonLines(r io.Reader, fn func(line int, item attr.Item, err error) error) error {
	rd := ion.NewReader(r)
	n := 0
	for rd.Next() {
		if rd.Type() == ion.SymbolType && !rd.IsNull() {
			if s, err := rd.SymbolValue(); err == nil && s != nil && s.Text != nil && *s.Text == "$ion_1_0" {
				continue // a version marker the reader passes on
			}
		}
		n++
		var it attr.Item
		err := func() error {
			if rd.Type() != ion.StructType || rd.IsNull() {
				return fmt.Errorf("value %d is not a struct", n)
			}
			if err := rd.StepIn(); err != nil {
				return err
			}
			defer rd.StepOut()
			for rd.Next() {
				name, err := rd.FieldName()
				if err != nil {
					return err
				}
				if name == nil || name.Text == nil || *name.Text != "Item" {
					continue
				}
				v, err := ionValue(rd, 0)
				if err != nil {
					return err
				}
				if v.Type != attr.M {
					return errors.New("the Item is not a struct")
				}
				it = attr.Item(v.Map)
			}
			if it == nil {
				return errors.New("the value has no Item")
			}
			return rd.Err()
		}()
		if err := fn(n, it, err); err != nil {
			return err
		}
	}
	return rd.Err()
}

func ionValue(rd ion.Reader, depth int) (attr.Value, error) {
	if depth > attr.MaxDepth {
		return attr.Value{}, errors.New("nested too deep")
	}
	anns, err := rd.Annotations()
	if err != nil {
		return attr.Value{}, err
	}
	set := ""
	for _, a := range anns {
		if a.Text != nil && strings.HasPrefix(*a.Text, "$dynamodb_") {
			set = strings.TrimPrefix(*a.Text, "$dynamodb_")
		}
	}
	if rd.IsNull() {
		return attr.Value{Type: attr.NULL}, nil
	}
	switch rd.Type() {
	case ion.StringType:
		s, err := rd.StringValue()
		if err != nil || s == nil {
			return attr.Value{}, fmt.Errorf("string: %v", err)
		}
		return attr.Value{Type: attr.S, Str: *s}, nil
	case ion.SymbolType:
		s, err := rd.SymbolValue()
		if err != nil || s == nil || s.Text == nil {
			return attr.Value{}, fmt.Errorf("symbol: %v", err)
		}
		return attr.Value{Type: attr.S, Str: *s.Text}, nil
	case ion.IntType, ion.DecimalType, ion.FloatType:
		n, err := ionNumber(rd)
		if err != nil {
			return attr.Value{}, err
		}
		return attr.Value{Type: attr.N, Str: n}, nil
	case ion.BlobType, ion.ClobType:
		b, err := rd.ByteValue()
		if err != nil {
			return attr.Value{}, err
		}
		return attr.Value{Type: attr.B, Bin: b}, nil
	case ion.BoolType:
		b, err := rd.BoolValue()
		if err != nil || b == nil {
			return attr.Value{}, fmt.Errorf("bool: %v", err)
		}
		return attr.Value{Type: attr.BOOL, Bool: *b}, nil
	case ion.StructType:
		if err := rd.StepIn(); err != nil {
			return attr.Value{}, err
		}
		m := map[string]attr.Value{}
		for rd.Next() {
			name, err := rd.FieldName()
			if err != nil || name == nil || name.Text == nil {
				return attr.Value{}, fmt.Errorf("field name: %v", err)
			}
			v, err := ionValue(rd, depth+1)
			if err != nil {
				return attr.Value{}, err
			}
			m[*name.Text] = v
		}
		if err := rd.StepOut(); err != nil {
			return attr.Value{}, err
		}
		return attr.Value{Type: attr.M, Map: m}, nil
	case ion.ListType, ion.SexpType:
		if err := rd.StepIn(); err != nil {
			return attr.Value{}, err
		}
		var list []attr.Value
		for rd.Next() {
			v, err := ionValue(rd, depth+1)
			if err != nil {
				return attr.Value{}, err
			}
			list = append(list, v)
		}
		if err := rd.StepOut(); err != nil {
			return attr.Value{}, err
		}
		switch set {
		case "":
			return attr.Value{Type: attr.L, List: list}, nil
		case "SS", "NS":
			v := attr.Value{Type: attr.SS}
			if set == "NS" {
				v.Type = attr.NS
			}
			for _, e := range list {
				if (set == "SS" && e.Type != attr.S) || (set == "NS" && e.Type != attr.N) {
					return attr.Value{}, fmt.Errorf("a $dynamodb_%s member is not a %s", set, set[:1])
				}
				v.Strs = append(v.Strs, e.Str)
			}
			return v, attr.CheckSet(&v) // sorted, no duplicates, not empty
		case "BS":
			v := attr.Value{Type: attr.BS}
			for _, e := range list {
				if e.Type != attr.B {
					return attr.Value{}, errors.New("a $dynamodb_BS member is not a blob")
				}
				v.Bins = append(v.Bins, e.Bin)
			}
			return v, attr.CheckSet(&v)
		}
		return attr.Value{}, fmt.Errorf("unknown annotation $dynamodb_%s", set)
	}
	return attr.Value{}, fmt.Errorf("the Ion type %v has no DynamoDB type", rd.Type())
}

// ionNumber is an Ion int, decimal or float as DynamoDB number text.
func ionNumber(rd ion.Reader) (string, error) {
	switch rd.Type() {
	case ion.IntType:
		b, err := rd.BigIntValue()
		if err != nil || b == nil {
			return "", fmt.Errorf("int: %v", err)
		}
		return b.String(), nil
	case ion.DecimalType:
		d, err := rd.DecimalValue()
		if err != nil || d == nil {
			return "", fmt.Errorf("decimal: %v", err)
		}
		co, ex := d.CoEx()
		// DynamoDB keeps numbers in canonical form (9.50 is 9.5).
		return attr.ParseNumber(co.String() + "E" + strconv.Itoa(int(ex)))
	}
	f, err := rd.FloatValue()
	if err != nil || f == nil {
		return "", fmt.Errorf("float: %v", err)
	}
	return attr.ParseNumber(strconv.FormatFloat(*f, 'g', -1, 64))
}

// CSVOptions are ImportTable's InputFormatOptions.Csv.
type CSVOptions struct {
	// Delimiter is one character (default ',').
	Delimiter string
	// HeaderList names the columns; empty: the first line is the header.
	HeaderList []string
	// KeyTypes types the key attributes (AttributeDefinitions: S, N,
	// B in base64); every other column is a string.
	KeyTypes map[string]string
}

// ReadCSV reads CSV rows as items: each non-empty cell is an attribute.
func ReadCSV(r io.Reader, o CSVOptions, fn func(line int, item attr.Item, err error) error) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = false
	if o.Delimiter != "" {
		cr.Comma = []rune(o.Delimiter)[0]
	}
	header := o.HeaderList
	n := 0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		n++
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				if err := fn(n, nil, err); err != nil {
					return err
				}
				continue
			}
			return err
		}
		if header == nil {
			header = rec
			continue
		}
		it := attr.Item{}
		var rerr error
		if len(rec) > len(header) {
			rerr = fmt.Errorf("%d values for %d columns", len(rec), len(header))
		}
		for i := 0; rerr == nil && i < len(rec); i++ {
			if rec[i] == "" {
				continue
			}
			switch o.KeyTypes[header[i]] {
			case "N":
				c, err := attr.ParseNumber(rec[i])
				if err != nil {
					rerr = fmt.Errorf("column %s: %v", header[i], err)
				}
				it[header[i]] = attr.Value{Type: attr.N, Str: c}
			case "B":
				b, err := base64.StdEncoding.DecodeString(rec[i])
				if err != nil {
					rerr = fmt.Errorf("column %s: not base64", header[i])
				}
				it[header[i]] = attr.Value{Type: attr.B, Bin: b}
			default:
				it[header[i]] = attr.Value{Type: attr.S, Str: rec[i]}
			}
		}
		if err := fn(n, it, rerr); err != nil {
			return err
		}
	}
}
