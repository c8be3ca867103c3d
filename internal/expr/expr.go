// Package expr implements DynamoDB's expression languages: condition and
// filter expressions, key condition expressions, update expressions and
// projection expressions. It lexes, parses, validates (with DynamoDB's
// ValidationException wording) and evaluates them against attr items. It
// does no I/O.
//
// A request's expressions share one Env (its ExpressionAttributeNames and
// ExpressionAttributeValues). Parse every expression of the request with the
// same Env, then call Env.CheckUnused.
package expr

import (
	"sort"
	"strconv"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
)

// MaxExpressionLength is DynamoDB's limit on the length of one expression,
// in bytes.
const MaxExpressionLength = 4096

// MaxPathDepth is DynamoDB's nesting limit for a document path.
const MaxPathDepth = 32

// MaxPlaceholderLength is the longest expression attribute name or value
// placeholder ("#name", ":val", sigil included), in bytes.
const MaxPlaceholderLength = 255

// MaxAttributeNameLength is the longest attribute name, in bytes.
const MaxAttributeNameLength = attr.MaxNameBytes

// MaxOperators is the most operators (comparators, logical operators,
// BETWEEN, IN, + and -) one expression may contain.
const MaxOperators = 300

// MaxInOperands is the most operands the right side of IN accepts.
const MaxInOperands = 100

// Kind is the kind of an expression; it names the expression in messages.
type Kind int

// The expression kinds.
const (
	KindCondition Kind = iota + 1
	KindFilter
	KindKeyCondition
	KindUpdate
	KindProjection
)

// String returns the request parameter name: "ConditionExpression", ...
func (k Kind) String() string {
	switch k {
	case KindCondition:
		return "ConditionExpression"
	case KindFilter:
		return "FilterExpression"
	case KindKeyCondition:
		return "KeyConditionExpression"
	case KindUpdate:
		return "UpdateExpression"
	case KindProjection:
		return "ProjectionExpression"
	}
	return "Expression"
}

// Env holds a request's ExpressionAttributeNames and
// ExpressionAttributeValues and records which of them the parsed
// expressions used. An Env is not safe for concurrent parsing.
type Env struct {
	names      map[string]string
	values     map[string]attr.Value
	usedNames  map[string]struct{}
	usedValues map[string]struct{}
}

// NewEnv validates the placeholder maps of a request. A nil map means the
// parameter was absent; a non-nil empty map is an error, as in DynamoDB.
// Names keys must look like "#name" and values keys like ":name" (letters,
// digits and underscores after the sigil).
func NewEnv(names map[string]string, values map[string]attr.Value) (*Env, error) {
	if names != nil {
		if len(names) == 0 {
			return nil, attr.Validation("ExpressionAttributeNames must not be empty")
		}
		for _, k := range sortedKeys(names) {
			if err := checkPlaceholderKey("ExpressionAttributeNames", k, '#'); err != nil {
				return nil, err
			}
			if names[k] == "" {
				return nil, attr.Validation("ExpressionAttributeNames contains invalid value: Empty attribute name for key " + k)
			}
			if len(names[k]) > MaxAttributeNameLength {
				return nil, attr.Validation("1 validation error detected: Attribute name is too large, must be less than " + strconv.Itoa(MaxAttributeNameLength+1) + " bytes")
			}
		}
	}
	if values != nil {
		if len(values) == 0 {
			return nil, attr.Validation("ExpressionAttributeValues must not be empty")
		}
		for _, k := range sortedKeys(values) {
			if err := checkPlaceholderKey("ExpressionAttributeValues", k, ':'); err != nil {
				return nil, err
			}
		}
	}
	return &Env{
		names:      names,
		values:     values,
		usedNames:  map[string]struct{}{},
		usedValues: map[string]struct{}{},
	}, nil
}

// checkPlaceholderKey checks a key of the placeholder map param: its
// length, then its syntax (sigil, then letters, digits and underscores).
func checkPlaceholderKey(param, k string, sigil byte) error {
	if len(k) > MaxPlaceholderLength {
		return attr.Validation(param + " contains invalid key: The key is too long; key length: " + strconv.Itoa(len(k)) + ", maximum: " + strconv.Itoa(MaxPlaceholderLength))
	}
	if !validPlaceholder(k, sigil) {
		return attr.Validation(param + " contains invalid key: Syntax error; key: \"" + k + "\"")
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func validPlaceholder(k string, sigil byte) bool {
	if len(k) < 2 || k[0] != sigil {
		return false
	}
	for i := 1; i < len(k); i++ {
		if !isIdentPart(k[i]) {
			return false
		}
	}
	return true
}

// CheckUnused reports placeholders that no parsed expression used. Names
// are checked before values, as the service does. Keys are listed sorted.
func (e *Env) CheckUnused() error {
	if e == nil {
		return nil
	}
	var unused []string
	for _, k := range sortedKeys(e.names) {
		if _, ok := e.usedNames[k]; !ok {
			unused = append(unused, k)
		}
	}
	if len(unused) > 0 {
		return attr.Validation("Value provided in ExpressionAttributeNames unused in expressions: keys: {" + strings.Join(unused, ", ") + "}")
	}
	for _, k := range sortedKeys(e.values) {
		if _, ok := e.usedValues[k]; !ok {
			unused = append(unused, k)
		}
	}
	if len(unused) > 0 {
		return attr.Validation("Value provided in ExpressionAttributeValues unused in expressions: keys: {" + strings.Join(unused, ", ") + "}")
	}
	return nil
}

func (e *Env) name(k string) (string, bool) {
	if e == nil {
		return "", false
	}
	v, ok := e.names[k]
	if ok {
		e.usedNames[k] = struct{}{}
	}
	return v, ok
}

func (e *Env) value(k string) (attr.Value, bool) {
	if e == nil {
		return attr.Value{}, false
	}
	v, ok := e.values[k]
	if ok {
		e.usedValues[k] = struct{}{}
	}
	return v, ok
}

// PathElem is one step of a document path: a map key (Name) or a list
// index (Index, with IsIndex set).
type PathElem struct {
	Name    string
	Index   int
	IsIndex bool
}

// Path is a resolved document path: a top-level attribute name followed by
// map keys and list indexes.
type Path []PathElem

// String formats the path as written in an expression: a.b[0].c (names are
// the resolved attribute names, not placeholders).
func (p Path) String() string {
	var b strings.Builder
	for i, e := range p {
		if e.IsIndex {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.Index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.Name)
	}
	return b.String()
}

// MessageString formats the path as DynamoDB's messages do: [a, b, [0]].
func (p Path) MessageString() string {
	var b strings.Builder
	b.WriteByte('[')
	for i, e := range p {
		if i > 0 {
			b.WriteString(", ")
		}
		if e.IsIndex {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.Index))
			b.WriteByte(']')
		} else {
			b.WriteString(e.Name)
		}
	}
	b.WriteByte(']')
	return b.String()
}

// Equal reports whether two paths are the same.
func (p Path) Equal(q Path) bool {
	if len(p) != len(q) {
		return false
	}
	for i := range p {
		if p[i] != q[i] {
			return false
		}
	}
	return true
}

// Resolve returns the value at path p in item.
func (p Path) Resolve(item attr.Item) (attr.Value, bool) {
	if len(p) == 0 || p[0].IsIndex {
		return attr.Value{}, false
	}
	v, ok := item[p[0].Name]
	if !ok {
		return attr.Value{}, false
	}
	for _, e := range p[1:] {
		if e.IsIndex {
			if v.Type != attr.L || e.Index < 0 || e.Index >= len(v.List) {
				return attr.Value{}, false
			}
			v = v.List[e.Index]
		} else {
			if v.Type != attr.M {
				return attr.Value{}, false
			}
			v, ok = v.Map[e.Name]
			if !ok {
				return attr.Value{}, false
			}
		}
	}
	return v, true
}

// pathRelation compares two paths for the overlap rule of update and
// projection expressions: 0 when independent, 1 when one is a prefix of the
// other (overlap), 2 when they step into the same value once by key and
// once by index (conflict).
func pathRelation(a, b Path) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i].IsIndex != b[i].IsIndex {
			return 2
		}
		if a[i] != b[i] {
			return 0
		}
	}
	return 1
}

func checkPathOverlaps(paths []Path) string {
	for j := 1; j < len(paths); j++ {
		for i := 0; i < j; i++ {
			switch pathRelation(paths[i], paths[j]) {
			case 1:
				return "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: " +
					paths[i].MessageString() + ", path two: " + paths[j].MessageString()
			case 2:
				return "Two document paths conflict with each other; must remove or rewrite one of these paths; path one: " +
					paths[i].MessageString() + ", path two: " + paths[j].MessageString()
			}
		}
	}
	return ""
}

// Runtime errors of UpdateExpression evaluation.
var (
	errMissingAttr = attr.Validation("The provided expression refers to an attribute that does not exist in the item")
	errOperandType = attr.Validation("An operand in the update expression has an incorrect data type")
	errInvalidPath = attr.Validation("The document path provided in the update expression is invalid for update")
	errNesting     = attr.Validation("Nesting Levels have exceeded supported limits")
)

// Static type names used by the ADD and DELETE operand checks.
var updateTypeWords = map[attr.Type]string{
	attr.S:    "STRING",
	attr.N:    "NUMBER",
	attr.B:    "BINARY",
	attr.NULL: "NULL",
	attr.BOOL: "BOOLEAN",
	attr.L:    "LIST",
	attr.M:    "MAP",
}
