package engine

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/expr"
)

// projector projects an item; nil means the whole item.
type projector interface {
	Apply(attr.Item) attr.Item
}

// namesProjection projects top-level attributes (legacy AttributesToGet).
type namesProjection []string

func (n namesProjection) Apply(it attr.Item) attr.Item {
	out := attr.Item{}
	for _, name := range n {
		if v, ok := it[name]; ok {
			out[name] = v
		}
	}
	return out
}

// The legacy condition parameters (Expected, KeyConditions, QueryFilter,
// ScanFilter, AttributeUpdates) are translated to expressions with
// generated placeholders, so one evaluator serves both.

type legacyBuilder struct {
	names  map[string]string
	values map[string]attr.Value
}

func newLegacyBuilder() *legacyBuilder {
	return &legacyBuilder{names: map[string]string{}, values: map[string]attr.Value{}}
}

func (b *legacyBuilder) name(n string) string {
	k := fmt.Sprintf("#l%d", len(b.names))
	b.names[k] = n
	return k
}

func (b *legacyBuilder) value(v attr.Value) string {
	k := fmt.Sprintf(":l%d", len(b.values))
	b.values[k] = v
	return k
}

var legacyArgCount = map[string][2]int{
	"EQ": {1, 1}, "NE": {1, 1}, "LE": {1, 1}, "LT": {1, 1}, "GE": {1, 1}, "GT": {1, 1},
	"NOT_NULL": {0, 0}, "NULL": {0, 0}, "CONTAINS": {1, 1}, "NOT_CONTAINS": {1, 1},
	"BEGINS_WITH": {1, 1}, "IN": {1, expr.MaxInOperands}, "BETWEEN": {2, 2},
}

// cond renders one legacy comparison.
func (b *legacyBuilder) cond(attrName, op string, args []attr.Value) (string, error) {
	n, ok := legacyArgCount[op]
	if !ok {
		return "", validationf("1 validation error detected: Value '%s' at 'comparisonOperator' failed to satisfy constraint: Member must satisfy enum value set: [IN, NULL, BETWEEN, LT, NOT_CONTAINS, EQ, GT, NOT_NULL, NE, LE, BEGINS_WITH, GE, CONTAINS]", op)
	}
	if len(args) < n[0] || len(args) > n[1] {
		return "", invalidParam("Invalid number of argument(s) for the %s ComparisonOperator", op)
	}
	if err := checkLegacyArgs(op, args); err != nil {
		return "", err
	}
	p := b.name(attrName)
	vals := make([]string, len(args))
	for i, a := range args {
		vals[i] = b.value(a)
	}
	switch op {
	case "EQ":
		return p + " = " + vals[0], nil
	case "NE":
		return p + " <> " + vals[0], nil
	case "LE":
		return p + " <= " + vals[0], nil
	case "LT":
		return p + " < " + vals[0], nil
	case "GE":
		return p + " >= " + vals[0], nil
	case "GT":
		return p + " > " + vals[0], nil
	case "NOT_NULL":
		return "attribute_exists(" + p + ")", nil
	case "NULL":
		return "attribute_not_exists(" + p + ")", nil
	case "CONTAINS":
		return "contains(" + p + ", " + vals[0] + ")", nil
	case "NOT_CONTAINS":
		return "(attribute_exists(" + p + ") AND NOT contains(" + p + ", " + vals[0] + "))", nil
	case "BEGINS_WITH":
		return "begins_with(" + p + ", " + vals[0] + ")", nil
	case "IN":
		return p + " IN (" + strings.Join(vals, ", ") + ")", nil
	case "BETWEEN":
		return p + " BETWEEN " + vals[0] + " AND " + vals[1], nil
	}
	return "", validationf("Unsupported ComparisonOperator %s", op)
}

// checkNames applies the attribute-name limits to the names of a legacy
// parameter map (they become placeholders, whose own checks would word
// the error for ExpressionAttributeNames).
func checkNames[V any](m map[string]V) error {
	for n := range m {
		if err := attr.CheckName(n); err != nil {
			return err
		}
	}
	return nil
}

// legacyArgTypes lists the AttributeValue types each ComparisonOperator
// takes (API reference, Condition): ordering, IN, BETWEEN and CONTAINS
// take scalars, BEGINS_WITH strings and binaries; EQ and NE take any type.
var legacyArgTypes = map[string]string{
	"LE": "S N B", "LT": "S N B", "GE": "S N B", "GT": "S N B", "BETWEEN": "S N B", "IN": "S N B",
	"CONTAINS": "S N B", "NOT_CONTAINS": "S N B", "BEGINS_WITH": "S B",
}

// checkLegacyArgs validates a legacy condition's AttributeValueList with
// the service's legacy wording (not the expression wording the translated
// condition would otherwise produce).
func checkLegacyArgs(op string, args []attr.Value) error {
	for _, a := range args[min(1, len(args)):] {
		if a.Type != args[0].Type {
			return invalidParam("AttributeValues inside AttributeValueList must be of same type")
		}
	}
	if allowed, ok := legacyArgTypes[op]; ok {
		for _, a := range args {
			if !strings.Contains(" "+allowed+" ", " "+a.Type.String()+" ") {
				return invalidParam("ComparisonOperator %s is not valid for %s AttributeValue type", op, a.Type)
			}
		}
	}
	if op == "BETWEEN" && legacyGreater(args[0], args[1]) {
		return validationf("The BETWEEN condition was provided a range where the lower bound is greater than the upper bound")
	}
	return nil
}

// legacyGreater reports a > b for two scalars of one type.
func legacyGreater(a, b attr.Value) bool {
	switch a.Type {
	case attr.S:
		return a.Str > b.Str
	case attr.N:
		return attr.CompareNumbers(a.Str, b.Str) > 0
	case attr.B:
		return bytes.Compare(a.Bin, b.Bin) > 0
	}
	return false
}

// sortedNames answers a map's keys in ascending order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func joinOp(op string) (string, error) {
	switch op {
	case "", "AND":
		return " AND ", nil
	case "OR":
		return " OR ", nil
	}
	return "", validationf("1 validation error detected: Value '%s' at 'conditionalOperator' failed to satisfy constraint: Member must satisfy enum value set: [OR, AND]", op)
}

// legacyExpected translates Expected/ConditionalOperator.
func legacyExpected(exp map[string]ExpectedAttributeValue, condOp string) (*expr.Condition, error) {
	return legacyJoin(exp, condOp, expr.KindCondition, func(b *legacyBuilder, n string, x ExpectedAttributeValue) (string, error) {
		if err := checkExpected(n, x); err != nil {
			return "", err
		}
		switch {
		case x.ComparisonOperator != "":
			return b.cond(n, x.ComparisonOperator, x.AttributeValueList)
		case x.Exists != nil && !*x.Exists:
			return "attribute_not_exists(" + b.name(n) + ")", nil
		}
		return b.name(n) + " = " + b.value(*x.Value), nil
	})
}

// checkExpected refuses an Expected entry whose members do not go
// together, in the service's order and words.
func checkExpected(n string, x ExpectedAttributeValue) error {
	op, list := x.ComparisonOperator, x.AttributeValueList != nil
	switch {
	case x.Exists != nil && op != "":
		return invalidParam("Exists and ComparisonOperator cannot be used together for Attribute: %s", n)
	case x.Value != nil && list:
		return invalidParam("Value and AttributeValueList cannot be used together for Attribute: %s", n)
	case op == "" && list:
		return invalidParam("AttributeValueList can only be used with a ComparisonOperator for Attribute: %s", n)
	case x.Exists != nil && !*x.Exists && x.Value != nil:
		return invalidParam("Value cannot be used when Exists is false for Attribute: %s", n)
	case op != "" && x.Value != nil:
		// The API reference: Value and Exists do not go with
		// AttributeValueList and ComparisonOperator.
		return invalidParam("Value and ComparisonOperator cannot be used together for Attribute: %s", n)
	case op != "" && !list && op != "NULL" && op != "NOT_NULL":
		return invalidParam("Value or AttributeValueList must be used with ComparisonOperator: %s for Attribute: %s", op, n)
	case op == "" && x.Value == nil && (x.Exists == nil || *x.Exists):
		return invalidParam("Value must be provided when Exists is %s for Attribute: %s", map[bool]string{true: "true", false: "null"}[x.Exists != nil], n)
	}
	return nil
}

// checkCondOp applies the service's rule for ConditionalOperator: it
// goes with a legacy filter (QueryFilter, ScanFilter) or Expected of two
// or more conditions; n is their number.
func checkCondOp(condOp string, n int) error {
	if condOp == "" {
		return nil
	}
	if _, err := joinOp(condOp); err != nil {
		return err
	}
	switch n {
	case 0:
		return validationf("ConditionalOperator cannot be used without Filter or Expected")
	case 1:
		return validationf("ConditionalOperator can only be used when Filter or Expected has two or more elements")
	}
	return nil
}

// legacyJoin translates a legacy condition map (Expected, QueryFilter,
// ScanFilter): the names are checked, then ConditionalOperator; term
// translates each attribute's entry, in name order, and the terms are
// joined with the operator and parsed as a condition of kind.
func legacyJoin[V any](m map[string]V, condOp string, kind expr.Kind, term func(b *legacyBuilder, n string, x V) (string, error)) (*expr.Condition, error) {
	if len(m) == 0 {
		return nil, checkCondOp(condOp, 0)
	}
	if err := checkNames(m); err != nil {
		return nil, err
	}
	if err := checkCondOp(condOp, len(m)); err != nil {
		return nil, err
	}
	join, err := joinOp(condOp)
	if err != nil {
		return nil, err
	}
	b := newLegacyBuilder()
	var parts []string
	for _, n := range sortedNames(m) {
		s, err := term(b, n, m[n])
		if err != nil {
			return nil, err
		}
		parts = append(parts, s)
	}
	return b.parseCondition(kind, strings.Join(parts, join))
}

// env returns the placeholder environment (maps left nil when empty, as
// a request without them would have).
func (b *legacyBuilder) env() (*expr.Env, error) {
	var names map[string]string
	var values map[string]attr.Value
	if len(b.names) > 0 {
		names = b.names
	}
	if len(b.values) > 0 {
		values = b.values
	}
	return expr.NewEnv(names, values)
}

func (b *legacyBuilder) parseCondition(kind expr.Kind, s string) (*expr.Condition, error) {
	env, err := b.env()
	if err != nil {
		return nil, err
	}
	return expr.ParseCondition(kind, s, env)
}

// legacyFilter translates QueryFilter/ScanFilter.
func legacyFilter(f map[string]Condition, condOp string) (*expr.Condition, error) {
	return legacyJoin(f, condOp, expr.KindFilter, func(b *legacyBuilder, n string, c Condition) (string, error) {
		return b.cond(n, c.ComparisonOperator, c.AttributeValueList)
	})
}

// legacyKeyConditions translates KeyConditions to a key condition.
func legacyKeyConditions(kc map[string]Condition) (*expr.KeyCondition, error) {
	if err := checkNames(kc); err != nil {
		return nil, err
	}
	b := newLegacyBuilder()
	var parts []string
	for _, n := range sortedNames(kc) {
		c := kc[n]
		s, err := b.cond(n, c.ComparisonOperator, c.AttributeValueList)
		if err != nil {
			return nil, err
		}
		switch c.ComparisonOperator {
		case "EQ", "LE", "LT", "GE", "GT", "BEGINS_WITH", "BETWEEN":
		default:
			return nil, validationf("Attempted conditional constraint is not an indexable operation")
		}
		parts = append(parts, s)
	}
	env, err := b.env()
	if err != nil {
		return nil, err
	}
	return expr.ParseKeyCondition(strings.Join(parts, " AND "), env)
}

// legacyUpdates translates AttributeUpdates.
func legacyUpdates(u map[string]AttributeValueUpdate) (*expr.Update, error) {
	if len(u) == 0 {
		return nil, nil
	}
	if err := checkNames(u); err != nil {
		return nil, err
	}
	b := newLegacyBuilder()
	var set, remove, add, del []string
	for _, n := range sortedNames(u) {
		x := u[n]
		switch x.Action {
		case "", "PUT":
			if x.Value == nil {
				return nil, invalidParam("Only DELETE action is allowed when no attribute value is specified")
			}
			set = append(set, b.name(n)+" = "+b.value(*x.Value))
		case "DELETE":
			if x.Value == nil {
				remove = append(remove, b.name(n))
			} else {
				if !x.Value.Type.IsSet() {
					return nil, invalidParam("DELETE action with value is not supported for the type %s", x.Value.Type)
				}
				del = append(del, b.name(n)+" "+b.value(*x.Value))
			}
		case "ADD":
			if x.Value == nil {
				return nil, invalidParam("Only DELETE action is allowed when no attribute value is specified")
			}
			if x.Value.Type == attr.L {
				p := b.name(n)
				set = append(set, p+" = list_append(if_not_exists("+p+", "+b.value(attr.ListValue([]attr.Value{}))+"), "+b.value(*x.Value)+")")
				continue
			}
			add = append(add, b.name(n)+" "+b.value(*x.Value))
		default:
			return nil, validationf("1 validation error detected: Value '%s' at 'attributeUpdates.%s.member.action' failed to satisfy constraint: Member must satisfy enum value set: [ADD, PUT, DELETE]", x.Action, n)
		}
	}
	var clauses []string
	if len(set) > 0 {
		clauses = append(clauses, "SET "+strings.Join(set, ", "))
	}
	if len(remove) > 0 {
		clauses = append(clauses, "REMOVE "+strings.Join(remove, ", "))
	}
	if len(add) > 0 {
		clauses = append(clauses, "ADD "+strings.Join(add, ", "))
	}
	if len(del) > 0 {
		clauses = append(clauses, "DELETE "+strings.Join(del, ", "))
	}
	env, err := b.env()
	if err != nil {
		return nil, err
	}
	return expr.ParseUpdate(strings.Join(clauses, " "), env)
}
