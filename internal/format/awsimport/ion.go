package awsimport

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/amazon-ion/ion-go/ion"

	"github.com/extenddb/extenddb/internal/attr"
)

// The annotations DynamoDB's Ion export puts on the lists that stand for
// sets; every other Ion value maps to the DynamoDB type of its Ion type
// (string S, decimal or int N, blob B, bool BOOL, null NULL, list L,
// struct M).
const (
	ionSS = "$dynamodb_SS"
	ionNS = "$dynamodb_NS"
	ionBS = "$dynamodb_BS"
)

// ion reads a stream of top-level {Item:{...}} structs. Ion has no line
// structure to resynchronise on, so a value that cannot be parsed ends
// the object (counted as one error); a well-formed value of the wrong
// shape is counted and skipped.
func (p *parser) ion(r io.Reader) error {
	rd := &ionReader{Reader: ion.NewReader(r)}
	var n int64
	for rd.Next() {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		if isIVM(rd) {
			continue // a version marker written as a symbol between values
		}
		n++
		p.st.ProcessedItems++
		it, err := ionTop(rd)
		if err != nil {
			if rd.Err() != nil {
				break // the stream is broken: reported below
			}
			itemErr(p.opts, p.st, p.key, n, err)
			if err := rd.unwind(); err != nil {
				return nil
			}
			continue
		}
		if err := p.item(n, it); err != nil {
			return err
		}
	}
	if err := rd.Err(); err != nil {
		var ioe *ion.IOError
		if errors.As(err, &ioe) {
			return &dataErr{fmt.Errorf("s3 object %s value %d: %w", p.key, n, err)}
		}
		if rd.depth == 0 {
			n++ // the broken value was never counted by Next
			p.st.ProcessedItems++
		}
		itemErr(p.opts, p.st, p.key, n, fmt.Errorf("invalid Ion, the rest of the object is skipped: %v", err))
	}
	return nil
}

func isIVM(rd ion.Reader) bool {
	if rd.Type() != ion.SymbolType || rd.IsNull() {
		return false
	}
	if anns, _ := rd.Annotations(); len(anns) > 0 {
		return false
	}
	sym, err := rd.SymbolValue()
	return err == nil && sym != nil && sym.Text != nil && *sym.Text == "$ion_1_0"
}

// ionReader counts the containers stepped into, so that a value found
// bad halfway can be left for the next top-level value.
type ionReader struct {
	ion.Reader
	depth int
}

func (r *ionReader) StepIn() error {
	if err := r.Reader.StepIn(); err != nil {
		return err
	}
	r.depth++
	return nil
}

func (r *ionReader) StepOut() error {
	if err := r.Reader.StepOut(); err != nil {
		return err
	}
	r.depth--
	return nil
}

func (r *ionReader) unwind() error {
	for r.depth > 0 {
		if err := r.StepOut(); err != nil {
			return err
		}
	}
	return nil
}

func ionTop(rd *ionReader) (attr.Item, error) {
	if rd.Type() != ion.StructType || rd.IsNull() {
		return nil, fmt.Errorf("a value must be a struct {Item:{...}}, found %v", rd.Type())
	}
	if err := rd.StepIn(); err != nil {
		return nil, err
	}
	var item attr.Item
	fields := 0
	for rd.Next() {
		fields++
		name, err := rd.FieldName()
		if err != nil {
			return nil, err
		}
		if name == nil || name.Text == nil || *name.Text != "Item" {
			return nil, errors.New("a value must be a struct whose only field is Item")
		}
		v, err := ionValue(rd, 0)
		if err != nil {
			return nil, err
		}
		if v.Type != attr.M {
			return nil, errors.New("Item must be a struct")
		}
		item = attr.Item(v.Map)
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	if err := rd.StepOut(); err != nil {
		return nil, err
	}
	if fields != 1 || item == nil {
		return nil, errors.New("a value must be a struct whose only field is Item")
	}
	return item, nil
}

func ionNumber(rd ion.Reader) (string, error) {
	var text string
	switch rd.Type() {
	case ion.IntType:
		b, err := rd.BigIntValue()
		if err != nil {
			return "", err
		}
		text = b.String()
	case ion.DecimalType:
		d, err := rd.DecimalValue()
		if err != nil {
			return "", err
		}
		co, ex := d.CoEx()
		text = co.String() + "E" + strconv.Itoa(int(ex))
	case ion.FloatType:
		f, err := rd.FloatValue()
		if err != nil {
			return "", err
		}
		text = strconv.FormatFloat(*f, 'g', -1, 64)
	default:
		return "", fmt.Errorf("expected a number, found %v", rd.Type())
	}
	return attr.ParseNumber(text)
}

func ionValue(rd *ionReader, depth int) (attr.Value, error) {
	if depth > attr.MaxDepth {
		return attr.Value{}, errors.New("nesting deeper than 32 levels")
	}
	if rd.IsNull() {
		return attr.NullValue(), nil
	}
	anns, err := rd.Annotations()
	if err != nil {
		return attr.Value{}, err
	}
	set := ""
	for _, a := range anns {
		if a.Text != nil && (*a.Text == ionSS || *a.Text == ionNS || *a.Text == ionBS) {
			set = *a.Text
		}
	}
	switch rd.Type() {
	case ion.StringType, ion.SymbolType:
		s, err := rd.StringValue()
		if err != nil || s == nil {
			return attr.Value{}, fmt.Errorf("bad string: %v", err)
		}
		return attr.StrValue(*s), nil
	case ion.IntType, ion.DecimalType, ion.FloatType:
		s, err := ionNumber(rd)
		if err != nil {
			return attr.Value{}, err
		}
		return attr.Value{Type: attr.N, Str: s}, nil
	case ion.BlobType, ion.ClobType:
		b, err := rd.ByteValue()
		if err != nil {
			return attr.Value{}, err
		}
		return attr.BinValue(append([]byte{}, b...)), nil
	case ion.BoolType:
		b, err := rd.BoolValue()
		if err != nil || b == nil {
			return attr.Value{}, fmt.Errorf("bad bool: %v", err)
		}
		return attr.BoolValue(*b), nil
	case ion.StructType:
		if err := rd.StepIn(); err != nil {
			return attr.Value{}, err
		}
		m := map[string]attr.Value{}
		for rd.Next() {
			name, err := rd.FieldName()
			if err != nil || name == nil || name.Text == nil {
				return attr.Value{}, fmt.Errorf("bad field name: %v", err)
			}
			v, err := ionValue(rd, depth+1)
			if err != nil {
				return attr.Value{}, err
			}
			m[*name.Text] = v
		}
		if err := rd.Err(); err != nil {
			return attr.Value{}, err
		}
		return attr.MapValue(m), rd.StepOut()
	case ion.ListType, ion.SexpType:
		if err := rd.StepIn(); err != nil {
			return attr.Value{}, err
		}
		v, err := ionList(rd, set, depth)
		if err != nil {
			return attr.Value{}, err
		}
		return v, rd.StepOut()
	}
	return attr.Value{}, fmt.Errorf("Ion type %v has no DynamoDB type", rd.Type())
}

func ionList(rd *ionReader, set string, depth int) (attr.Value, error) {
	var v attr.Value
	switch set {
	case ionSS:
		v.Type = attr.SS
	case ionNS:
		v.Type = attr.NS
	case ionBS:
		v.Type = attr.BS
	default:
		v.Type = attr.L
		v.List = []attr.Value{}
	}
	for rd.Next() {
		switch v.Type {
		case attr.SS:
			s, err := rd.StringValue()
			if err != nil || s == nil || rd.Type() != ion.StringType {
				return v, errors.New("a $dynamodb_SS member must be a string")
			}
			v.Strs = append(v.Strs, *s)
		case attr.NS:
			s, err := ionNumber(rd)
			if err != nil {
				return v, fmt.Errorf("a $dynamodb_NS member: %v", err)
			}
			v.Strs = append(v.Strs, s)
		case attr.BS:
			b, err := rd.ByteValue()
			if err != nil || rd.Type() != ion.BlobType {
				return v, errors.New("a $dynamodb_BS member must be a blob")
			}
			v.Bins = append(v.Bins, append([]byte{}, b...))
		default:
			e, err := ionValue(rd, depth+1)
			if err != nil {
				return v, err
			}
			v.List = append(v.List, e)
		}
	}
	if err := rd.Err(); err != nil {
		return v, err
	}
	if v.Type.IsSet() {
		if err := attr.CheckSet(&v); err != nil {
			return v, err
		}
	}
	return v, nil
}
