package format

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/extenddb/extenddb/internal/attr"
)

// KeySchema is a table's primary key: the partition (HASH) attribute and
// the optional sort (RANGE) attribute, each with its type (S, N or B).
type KeySchema struct {
	HashName  string
	HashType  attr.Type
	RangeName string // "" when the table has no sort key
	RangeType attr.Type
}

// HasRange reports whether the schema has a sort key.
func (s KeySchema) HasRange() bool { return s.RangeName != "" }

// Key is one item's primary key. Range has the zero Type when the table
// has no sort key.
type Key struct {
	Hash  attr.Value
	Range attr.Value
}

// KeyOf extracts an item's key, checking presence and types.
func (s KeySchema) KeyOf(it attr.Item) (Key, error) {
	var k Key
	v, ok := it[s.HashName]
	if !ok {
		return k, fmt.Errorf("item has no partition key attribute %q", s.HashName)
	}
	k.Hash = v
	if s.HasRange() {
		v, ok := it[s.RangeName]
		if !ok {
			return k, fmt.Errorf("item has no sort key attribute %q", s.RangeName)
		}
		k.Range = v
	}
	return k, s.Check(k)
}

// Check verifies that k has the schema's shape and types and that numbers
// are canonical (as attr.ParseNumber writes them).
func (s KeySchema) Check(k Key) error {
	if err := checkKeyValue(s.HashName, s.HashType, k.Hash); err != nil {
		return err
	}
	if s.HasRange() {
		return checkKeyValue(s.RangeName, s.RangeType, k.Range)
	}
	if k.Range.Type != attr.TypeInvalid {
		return fmt.Errorf("key has a sort key value but the table has no sort key")
	}
	return nil
}

func checkKeyValue(name string, t attr.Type, v attr.Value) error {
	if v.Type != t {
		return fmt.Errorf("key attribute %q has type %s, want %s", name, v.Type, t)
	}
	if t == attr.N {
		n, err := attr.ParseNumber(v.Str)
		if err != nil {
			return fmt.Errorf("key attribute %q: %w", name, err)
		}
		if n != v.Str {
			return fmt.Errorf("key attribute %q: number %q is not normalized (%q)", name, v.Str, n)
		}
	}
	return nil
}

// Item returns the key as a DynamoDB-JSON key map (attr.Item).
func (s KeySchema) Item(k Key) attr.Item {
	it := attr.Item{s.HashName: k.Hash}
	if s.HasRange() {
		it[s.RangeName] = k.Range
	}
	return it
}

// encKey is a key's order-preserving encoding: (partition key bytes, sort
// key bytes), each attr.KeyBytes of the value.
type encKey struct {
	h, r []byte
}

// set encodes k into e, reusing e's buffers (so e never aliases k).
func (e *encKey) set(k Key, hasRange bool) error {
	var ok bool
	if e.h, ok = appendKeyBytes(e.h[:0], k.Hash); !ok {
		return fmt.Errorf("partition key value of type %s cannot be a key", k.Hash.Type)
	}
	e.r = e.r[:0]
	if hasRange {
		if e.r, ok = appendKeyBytes(e.r, k.Range); !ok {
			return fmt.Errorf("sort key value of type %s cannot be a key", k.Range.Type)
		}
	}
	return nil
}

// appendKeyBytes appends attr.KeyBytes of v (without the copy KeyBytes
// makes of a string, nor its result slice).
func appendKeyBytes(dst []byte, v attr.Value) ([]byte, bool) {
	return attr.AppendKeyBytes(dst, v)
}

// compare orders by partition key bytes, then sort key bytes, bytewise.
func (e *encKey) compare(o *encKey) int {
	if c := bytes.Compare(e.h, o.h); c != 0 {
		return c
	}
	return bytes.Compare(e.r, o.r)
}

// CompareKeys orders two keys as backups and storage do: partition key
// bytes, then sort key bytes, compared bytewise, where the bytes are
// attr.KeyBytes of each value. Values that cannot be keys sort first.
func CompareKeys(a, b Key) int {
	var ea, eb encKey
	_ = ea.set(a, a.Range.Type != attr.TypeInvalid)
	_ = eb.set(b, b.Range.Type != attr.TypeInvalid)
	return ea.compare(&eb)
}

// TableDescription is the manifest's source_table: the full DynamoDB
// TableDescription as JSON (Raw), with the members this package needs
// decoded.
type TableDescription struct {
	TableName            string
	TableArn             string
	TableId              string
	KeySchema            []KeySchemaElement
	AttributeDefinitions []AttributeDefinition
	// Raw is the whole object as stored (every other member lives here).
	Raw json.RawMessage
}

// KeySchemaElement mirrors DynamoDB's KeySchemaElement.
type KeySchemaElement struct {
	AttributeName string
	KeyType       string // HASH or RANGE
}

// AttributeDefinition mirrors DynamoDB's AttributeDefinition.
type AttributeDefinition struct {
	AttributeName string
	AttributeType string // S, N or B
}

// ParseTableDescription decodes a TableDescription JSON object, keeping
// the raw bytes, and checks that it has a name and a valid key schema.
func ParseTableDescription(raw []byte) (*TableDescription, error) {
	var t struct {
		TableName            *string
		TableArn             *string
		TableId              *string
		KeySchema            []KeySchemaElement
		AttributeDefinitions []AttributeDefinition
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("source_table is not a JSON object")
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("source_table: %w", err)
	}
	if t.TableName == nil {
		return nil, fmt.Errorf("source_table has no TableName")
	}
	td := &TableDescription{
		TableName:            *t.TableName,
		KeySchema:            t.KeySchema,
		AttributeDefinitions: t.AttributeDefinitions,
		Raw:                  append(json.RawMessage(nil), raw...),
	}
	if t.TableArn != nil {
		td.TableArn = *t.TableArn
	}
	if t.TableId != nil {
		td.TableId = *t.TableId
	}
	if _, err := td.Schema(); err != nil {
		return nil, err
	}
	return td, nil
}

// Schema derives the key schema from KeySchema and AttributeDefinitions.
func (t *TableDescription) Schema() (KeySchema, error) {
	var s KeySchema
	typeOf := func(name string) (attr.Type, error) {
		found := attr.TypeInvalid
		for _, d := range t.AttributeDefinitions {
			if d.AttributeName == name {
				if found != attr.TypeInvalid {
					return 0, fmt.Errorf("source_table defines attribute %q twice", name)
				}
				switch d.AttributeType {
				case "S":
					found = attr.S
				case "N":
					found = attr.N
				case "B":
					found = attr.B
				default:
					return 0, fmt.Errorf("source_table: key attribute %q has type %q", name, d.AttributeType)
				}
			}
		}
		if found == attr.TypeInvalid {
			return 0, fmt.Errorf("source_table: key attribute %q has no attribute definition", name)
		}
		return found, nil
	}
	switch len(t.KeySchema) {
	case 1, 2:
	default:
		return s, fmt.Errorf("source_table: key schema has %d elements", len(t.KeySchema))
	}
	if t.KeySchema[0].KeyType != "HASH" || t.KeySchema[0].AttributeName == "" {
		return s, fmt.Errorf("source_table: first key schema element must be a named HASH")
	}
	var err error
	s.HashName = t.KeySchema[0].AttributeName
	if s.HashType, err = typeOf(s.HashName); err != nil {
		return s, err
	}
	if len(t.KeySchema) == 2 {
		e := t.KeySchema[1]
		if e.KeyType != "RANGE" || e.AttributeName == "" || e.AttributeName == s.HashName {
			return s, fmt.Errorf("source_table: second key schema element must be a distinct named RANGE")
		}
		s.RangeName = e.AttributeName
		if s.RangeType, err = typeOf(s.RangeName); err != nil {
			return s, err
		}
	}
	return s, nil
}
