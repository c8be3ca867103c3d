package expr

import (
	"github.com/extenddb/extenddb/internal/attr"
)

// KeyOp is the operator of one key condition term.
type KeyOp uint8

// The key condition operators.
const (
	EQ KeyOp = iota + 1
	LT
	LE
	GT
	GE
	BETWEEN
	BEGINS_WITH //nolint:revive // DynamoDB's name
)

// String returns DynamoDB's ComparisonOperator name.
func (o KeyOp) String() string {
	switch o {
	case EQ:
		return "EQ"
	case LT:
		return "LT"
	case LE:
		return "LE"
	case GT:
		return "GT"
	case GE:
		return "GE"
	case BETWEEN:
		return "BETWEEN"
	case BEGINS_WITH:
		return "BEGINS_WITH"
	}
	return "?"
}

// KeyTerm is one condition on one key attribute: Name Op Values (one value,
// or two for BETWEEN).
type KeyTerm struct {
	Name   string
	Op     KeyOp
	Values []attr.Value
}

// KeyCondition is a parsed KeyConditionExpression: one or two terms on
// distinct top-level attributes. The engine matches the terms to the key
// schema.
type KeyCondition struct {
	Terms []KeyTerm
	cond  *Condition
}

// Eval reports whether item satisfies every term.
func (k *KeyCondition) Eval(item attr.Item) bool { return k.cond.Eval(item) }

func keyErr(msg string) error { return attr.Validation(msg) }

// ParseKeyCondition parses a key condition expression and checks its shape:
// only AND of comparisons (=, <, <=, >, >=), BETWEEN and begins_with, each
// on one top-level attribute, one condition per attribute, at most two.
func ParseKeyCondition(s string, env *Env) (*KeyCondition, error) {
	c, err := ParseCondition(KindKeyCondition, s, env)
	if err != nil {
		return nil, err
	}
	if err := checkKeyOperators(c.root); err != nil {
		return nil, err
	}
	var nodes []cnode
	var flatten func(n cnode)
	flatten = func(n cnode) {
		if a, ok := n.(*cAnd); ok {
			flatten(a.l)
			flatten(a.r)
			return
		}
		nodes = append(nodes, n)
	}
	flatten(c.root)
	kc := &KeyCondition{cond: c}
	seen := map[string]bool{}
	for _, n := range nodes {
		t, err := keyTerm(n)
		if err != nil {
			return nil, err
		}
		if seen[t.Name] {
			return nil, keyErr("KeyConditionExpressions must only contain one condition per key")
		}
		seen[t.Name] = true
		kc.Terms = append(kc.Terms, t)
	}
	if len(kc.Terms) > 2 {
		return nil, keyErr("Conditions can be of length 1 or 2 only")
	}
	return kc, nil
}

func invalidKeyOp(op string) error {
	return keyErr("Invalid operator used in KeyConditionExpression: " + op)
}

func checkKeyOperators(n cnode) error {
	switch n := n.(type) {
	case *cAnd:
		if err := checkKeyOperators(n.l); err != nil {
			return err
		}
		return checkKeyOperators(n.r)
	case *cOr:
		return invalidKeyOp("OR")
	case *cNot:
		return invalidKeyOp("NOT")
	case *cIn:
		return invalidKeyOp("IN")
	case *cCmp:
		if n.op == "<>" {
			return invalidKeyOp("<>")
		}
	case *cFunc:
		if n.o.fn != "begins_with" {
			return invalidKeyOp(n.o.fn)
		}
	}
	return nil
}

var flipOp = map[string]KeyOp{"=": EQ, "<": GT, "<=": GE, ">": LT, ">=": LE}
var keyOps = map[string]KeyOp{"=": EQ, "<": LT, "<=": LE, ">": GT, ">=": GE}

// keyTerm validates one term and extracts it.
func keyTerm(n cnode) (KeyTerm, error) {
	var ops []*operand
	var name string
	switch n := n.(type) {
	case *cBetween:
		name = "BETWEEN"
		ops = []*operand{n.x, n.lo, n.hi}
	case *cFunc:
		name = "begins_with"
		ops = n.o.args
	case *cCmp:
		ops = []*operand{n.l, n.r}
	}
	if name != "" && ops[0].kind != opPath {
		return KeyTerm{}, keyErr("Invalid condition in KeyConditionExpression: " + name + " operator must have the key attribute as its first operand")
	}
	keyAt := -1
	for i, o := range ops {
		switch o.kind {
		case opFunc:
			return KeyTerm{}, keyErr("KeyConditionExpressions cannot contain nested operations")
		case opPath:
			if keyAt >= 0 {
				return KeyTerm{}, keyErr("Invalid condition in KeyConditionExpression: Multiple attribute names used in one condition")
			}
			if len(o.path) > 1 {
				return KeyTerm{}, keyErr("KeyConditionExpressions cannot have conditions on nested attributes")
			}
			keyAt = i
		}
	}
	if keyAt < 0 {
		return KeyTerm{}, keyErr("Invalid condition in KeyConditionExpression: No key attribute specified")
	}
	t := KeyTerm{Name: ops[keyAt].path[0].Name}
	for i, o := range ops {
		if i != keyAt {
			t.Values = append(t.Values, o.val)
		}
	}
	switch n := n.(type) {
	case *cBetween:
		t.Op = BETWEEN
	case *cFunc:
		t.Op = BEGINS_WITH
	case *cCmp:
		if keyAt == 0 {
			t.Op = keyOps[n.op]
		} else {
			t.Op = flipOp[n.op]
		}
	}
	return t, nil
}
