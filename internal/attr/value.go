// Package attr is the DynamoDB AttributeValue model: values, the
// DynamoDB-JSON codec, numbers, the canonical item encoding, item sizes and
// the byte-ordered key encoding shared by every backend and by backups.
package attr

import (
	"bytes"
	"sort"
)

// Type is an AttributeValue data type.
type Type uint8

// The AttributeValue data types. The zero Type is invalid.
const (
	TypeInvalid Type = iota
	S
	N
	B
	BOOL
	NULL
	M
	L
	SS
	NS
	BS
)

var typeNames = [...]string{"", "S", "N", "B", "BOOL", "NULL", "M", "L", "SS", "NS", "BS"}

// String returns the wire name of the type ("S", "NS", ...).
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "?"
}

// TypeFromName maps a wire type name to a Type; ok is false for unknown names.
func TypeFromName(name string) (Type, bool) {
	for i, n := range typeNames {
		if i > 0 && n == name {
			return Type(i), true
		}
	}
	return TypeInvalid, false
}

// IsSet reports whether t is one of SS, NS, BS.
func (t Type) IsSet() bool { return t == SS || t == NS || t == BS }

// Value is one AttributeValue. Exactly the field matching Type is meaningful:
//
//	S      Str
//	N      Str (canonical decimal text, see ParseNumber)
//	B      Bin
//	BOOL   Bool
//	NULL   (nothing; always true on the wire)
//	M      Map
//	L      List
//	SS, NS Strs (NS members canonical), kept in canonical order
//	BS     Bins, kept in canonical order
//
// Values are treated as immutable once built; operations that change an
// item build new values.
type Value struct {
	Type Type
	Bool bool
	Str  string
	Bin  []byte
	Map  map[string]Value
	List []Value
	Strs []string
	Bins [][]byte
}

// Item is a top-level attribute map.
type Item map[string]Value

// Constructors.

// Str returns an S value.
func StrValue(s string) Value { return Value{Type: S, Str: s} }

// BinValue returns a B value.
func BinValue(b []byte) Value { return Value{Type: B, Bin: b} }

// BoolValue returns a BOOL value.
func BoolValue(b bool) Value { return Value{Type: BOOL, Bool: b} }

// NullValue returns a NULL value.
func NullValue() Value { return Value{Type: NULL} }

// NumValue parses and normalizes a number; see ParseNumber.
func NumValue(s string) (Value, error) {
	n, err := ParseNumber(s)
	if err != nil {
		return Value{}, err
	}
	return Value{Type: N, Str: n}, nil
}

// MustNum is NumValue for constants known to be valid; it panics otherwise.
func MustNum(s string) Value {
	v, err := NumValue(s)
	if err != nil {
		panic(err)
	}
	return v
}

// MapValue returns an M value.
func MapValue(m map[string]Value) Value { return Value{Type: M, Map: m} }

// ListValue returns an L value.
func ListValue(l []Value) Value { return Value{Type: L, List: l} }

// Equal reports whether a and b are the same value (sets compare as sets).
func Equal(a, b Value) bool {
	if a.Type != b.Type {
		return false
	}
	switch a.Type {
	case S, N:
		return a.Str == b.Str
	case B:
		return bytes.Equal(a.Bin, b.Bin)
	case BOOL:
		return a.Bool == b.Bool
	case NULL:
		return true
	case M:
		if len(a.Map) != len(b.Map) {
			return false
		}
		for k, av := range a.Map {
			bv, ok := b.Map[k]
			if !ok || !Equal(av, bv) {
				return false
			}
		}
		return true
	case L:
		if len(a.List) != len(b.List) {
			return false
		}
		for i := range a.List {
			if !Equal(a.List[i], b.List[i]) {
				return false
			}
		}
		return true
	case SS, NS:
		if len(a.Strs) != len(b.Strs) {
			return false
		}
		for i := range a.Strs {
			if a.Strs[i] != b.Strs[i] {
				return false
			}
		}
		return true
	case BS:
		if len(a.Bins) != len(b.Bins) {
			return false
		}
		for i := range a.Bins {
			if !bytes.Equal(a.Bins[i], b.Bins[i]) {
				return false
			}
		}
		return true
	}
	return false
}

// ItemsEqual reports whether two items hold the same attributes and values.
func ItemsEqual(a, b Item) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !Equal(av, bv) {
			return false
		}
	}
	return true
}

// Nesting is how many levels of M and L v holds below itself (0 for a
// scalar or a set). An attribute value of an item may hold MaxDepth.
func Nesting(v Value) int {
	n := 0
	switch v.Type {
	case M:
		for _, c := range v.Map {
			n = max(n, 1+Nesting(c))
		}
	case L:
		for _, c := range v.List {
			n = max(n, 1+Nesting(c))
		}
	}
	return n
}

// SortSet puts a set value's members in canonical order: SS and BS by
// bytes, NS by numeric value. Members must already be canonical.
func SortSet(v *Value) {
	switch v.Type {
	case SS:
		sort.Strings(v.Strs)
	case NS:
		sort.Slice(v.Strs, func(i, j int) bool { return CompareNumbers(v.Strs[i], v.Strs[j]) < 0 })
	case BS:
		sort.Slice(v.Bins, func(i, j int) bool { return bytes.Compare(v.Bins[i], v.Bins[j]) < 0 })
	}
}

// Clone returns a deep copy of an item's top-level map (values are shared,
// which is safe because values are immutable).
func (it Item) Clone() Item {
	out := make(Item, len(it))
	for k, v := range it {
		out[k] = v
	}
	return out
}
