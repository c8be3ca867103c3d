package awsimport

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"io"

	"github.com/extenddb/extenddb/internal/attr"
)

// csv reads CSV records as DynamoDB's import does: the header (the
// HeaderList option, or else the object's first record) names the
// columns; a key attribute's value is typed by the table's attribute
// definitions and every other value is a string (S). An empty field
// leaves its attribute out, as CSV cannot tell an empty string from an
// absent value.
func (p *parser) csv(r io.Reader) error {
	cr := csv.NewReader(&bomSkipper{r: r})
	cr.Comma = ','
	if p.opts.CSVDelimiter != 0 {
		cr.Comma = p.opts.CSVDelimiter
	}
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = false
	cr.ReuseRecord = true
	header := p.opts.CSVHeader
	keyType := map[string]attr.Type{}
	for _, k := range p.opts.Keys {
		keyType[k.Name] = k.Type
	}
	for {
		if err := p.ctx.Err(); err != nil {
			return err
		}
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return &dataErr{fmt.Errorf("s3 object %s: %w", p.key, err)}
			}
			p.st.ProcessedItems++
			itemErr(p.opts, p.st, p.key, int64(pe.StartLine), fmt.Errorf("invalid CSV: %v", pe.Err))
			continue
		}
		line, _ := cr.FieldPos(0)
		if header == nil {
			header = append([]string(nil), rec...)
			continue
		}
		p.st.ProcessedItems++
		if len(rec) > len(header) {
			itemErr(p.opts, p.st, p.key, int64(line), fmt.Errorf("%d fields, the header names %d", len(rec), len(header)))
			continue
		}
		it, err := csvItem(header, rec, keyType)
		if err != nil {
			itemErr(p.opts, p.st, p.key, int64(line), err)
			continue
		}
		if err := p.item(int64(line), it); err != nil {
			return err
		}
	}
}

func csvItem(header, rec []string, keyType map[string]attr.Type) (attr.Item, error) {
	it := make(attr.Item, len(rec))
	for i, s := range rec {
		name := header[i]
		if s == "" {
			continue
		}
		if name == "" {
			return nil, fmt.Errorf("column %d has a value but no name in the header", i+1)
		}
		switch keyType[name] {
		case attr.N:
			n, err := attr.ParseNumber(s)
			if err != nil {
				return nil, fmt.Errorf("key attribute %s: %q is not a number", name, s)
			}
			it[name] = attr.Value{Type: attr.N, Str: n}
		case attr.B:
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return nil, fmt.Errorf("key attribute %s: %q is not base64", name, s)
			}
			it[name] = attr.BinValue(b)
		default:
			if err := attr.CheckText([]byte(s)); err != nil {
				return nil, fmt.Errorf("attribute %s: %v", name, err)
			}
			it[name] = attr.StrValue(s)
		}
	}
	return it, nil
}

// bomSkipper drops a UTF-8 byte order mark at the start of a CSV object.
type bomSkipper struct {
	r    io.Reader
	done bool
}

func (b *bomSkipper) Read(p []byte) (int, error) {
	if b.done {
		return b.r.Read(p)
	}
	b.done = true
	var head [3]byte
	n, err := io.ReadFull(b.r, head[:])
	if n == 3 && head == [3]byte{0xEF, 0xBB, 0xBF} {
		return b.r.Read(p)
	}
	if n == 0 {
		return 0, err
	}
	b.r = io.MultiReader(bytes.NewReader(append([]byte(nil), head[:n]...)), b.r)
	return b.r.Read(p)
}
