package expr

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
)

// cnode is a node of a condition tree.
type cnode interface{ isCond() }

type cAnd struct{ l, r cnode }
type cOr struct{ l, r cnode }
type cNot struct{ x cnode }

// cCmp is a comparison; op is one of = <> < <= > >=.
type cCmp struct {
	op   string
	l, r *operand
}

type cBetween struct{ x, lo, hi *operand }

type cIn struct {
	x    *operand
	list []*operand
}

// cFunc is a condition function call (attribute_exists, begins_with, ...).
type cFunc struct{ o *operand }

func (cAnd) isCond()     {}
func (cOr) isCond()      {}
func (cNot) isCond()     {}
func (cCmp) isCond()     {}
func (cBetween) isCond() {}
func (cIn) isCond()      {}
func (cFunc) isCond()    {}

// Condition is a parsed ConditionExpression or FilterExpression.
type Condition struct {
	root cnode
}

// ParseCondition parses and validates a condition or filter expression.
// kind selects the message prefix (KindCondition, KindFilter; the key
// condition parser also uses it).
func ParseCondition(kind Kind, s string, env *Env) (*Condition, error) {
	if err := prelude(kind, s); err != nil {
		return nil, err
	}
	p := newParser(kind, s, env)
	root, _, serr := p.parseOr(false)
	if serr == nil && p.peekKind() != tEOF {
		serr = p.syntax()
	}
	if serr != nil {
		return nil, p.wrapSyntax(serr)
	}
	if f, ok := root.(*cFunc); ok && f.o.fn == "size" {
		p.fail(catMisusedFunction, "The function is not allowed to be used this way in an expression; function: size")
	}
	if err := p.semanticError(); err != nil {
		return nil, err
	}
	return &Condition{root: root}, nil
}

// The parse functions return the node and whether it was a parenthesized
// condition (for the redundant-parentheses rule).
//
// The grammar is parsed in one pass, without backtracking, so that time is
// linear in the expression: "(" may open a parenthesized condition or a
// parenthesized operand ("(a) = :v", "(size(a)) > :n"), and the two are
// told apart after the closing parenthesis. Inside parentheses the parse
// functions accept a bare operand (bareOK) and return it as a *cBare, which
// the enclosing parsePrimary turns into the left side of a comparison or
// rejects.

// cBare is an operand met where a condition may start; it never appears in
// a finished tree.
type cBare struct{ o *operand }

func (cBare) isCond() {}

func (p *parser) parseOr(bareOK bool) (cnode, bool, *syntaxError) {
	return p.parseChain(bareOK, "OR", p.parseAnd, func(l, r cnode) cnode { return &cOr{l, r} })
}

func (p *parser) parseAnd(bareOK bool) (cnode, bool, *syntaxError) {
	return p.parseChain(bareOK, "AND", p.parseNot, func(l, r cnode) cnode { return &cAnd{l, r} })
}

// parseChain parses operand (kw operand)*, left-associative: OR over AND
// operands, AND over NOT operands; join builds each node.
func (p *parser) parseChain(bareOK bool, kw string, operand func(bareOK bool) (cnode, bool, *syntaxError),
	join func(l, r cnode) cnode) (cnode, bool, *syntaxError) {
	l, paren, err := operand(bareOK)
	if err != nil {
		return nil, false, err
	}
	for isKeyword(p.peek(), kw) {
		if _, bare := l.(*cBare); bare {
			return nil, false, p.syntax()
		}
		if err := p.countOperator(); err != nil {
			return nil, false, err
		}
		p.next()
		r, _, err := operand(false)
		if err != nil {
			return nil, false, err
		}
		p.checkSizeAsCondition(l)
		p.checkSizeAsCondition(r)
		l = join(l, r)
		paren = false
	}
	return l, paren, nil
}

func (p *parser) parseNot(bareOK bool) (cnode, bool, *syntaxError) {
	if isKeyword(p.peek(), "NOT") {
		if err := p.countOperator(); err != nil {
			return nil, false, err
		}
		p.next()
		x, _, err := p.parseNot(false)
		if err != nil {
			return nil, false, err
		}
		p.checkSizeAsCondition(x)
		return &cNot{x}, false, nil
	}
	return p.parsePrimary(bareOK)
}

func (p *parser) checkSizeAsCondition(n cnode) {
	if f, ok := n.(*cFunc); ok && f.o.fn == "size" {
		p.fail(catMisusedFunction, "The function is not allowed to be used this way in an expression; function: size")
	}
}

func isComparator(k tokKind) bool {
	switch k {
	case tEq, tNe, tLt, tLe, tGt, tGe:
		return true
	}
	return false
}

func (p *parser) followsOperand() bool {
	t := p.peek()
	return isComparator(t.kind) || isKeyword(t, "BETWEEN") || isKeyword(t, "IN")
}

func (p *parser) parsePrimary(bareOK bool) (cnode, bool, *syntaxError) {
	p.steps++
	if p.peekKind() != tLParen {
		n, err := p.parseSimple(bareOK)
		return n, false, err
	}
	p.next()
	inner, innerParen, err := p.parseOr(true)
	if err != nil {
		return nil, false, err
	}
	if err := p.expect(tRParen); err != nil {
		return nil, false, err
	}
	// A parenthesized operand, or a function call that turns out to be
	// the left operand of a comparison.
	var o *operand
	switch n := inner.(type) {
	case *cBare:
		o = n.o
	case *cFunc:
		o = n.o
	}
	if o != nil && p.followsOperand() {
		if innerParen {
			p.fail(catParens, "The expression has redundant parentheses;")
		}
		n, err := p.parseComparison(o)
		return n, false, err
	}
	if _, bare := inner.(*cBare); bare {
		if bareOK {
			return inner, true, nil
		}
		return nil, false, p.syntax()
	}
	if innerParen {
		p.fail(catParens, "The expression has redundant parentheses;")
	}
	return inner, true, nil
}

// parseSimple parses a comparison, BETWEEN, IN or a function call, or
// (when bareOK) a lone operand.
func (p *parser) parseSimple(bareOK bool) (cnode, *syntaxError) {
	x, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	if p.followsOperand() {
		return p.parseComparison(x)
	}
	if x.kind == opFunc {
		return &cFunc{o: x}, nil
	}
	if bareOK {
		return &cBare{o: x}, nil
	}
	return nil, p.syntax()
}

// parseComparison parses what follows the left operand x of a comparison,
// BETWEEN or IN.
func (p *parser) parseComparison(x *operand) (cnode, *syntaxError) {
	t := p.peek()
	if err := p.countOperator(); err != nil {
		return nil, err
	}
	switch {
	case isComparator(t.kind):
		p.next()
		y, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		p.checkMisused(x, y)
		if t.kind != tEq && t.kind != tNe {
			p.checkOrderable(t.text, x, y)
		}
		p.checkDistinct(t.text, []*operand{x, y})
		return &cCmp{op: t.text, l: x, r: y}, nil
	case isKeyword(t, "BETWEEN"):
		p.next()
		lo, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		if !isKeyword(p.peek(), "AND") {
			return nil, p.syntax()
		}
		p.next()
		hi, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		p.checkMisused(x, lo, hi)
		p.checkOrderable("BETWEEN", x, lo, hi)
		p.checkBetween(lo, hi)
		return &cBetween{x: x, lo: lo, hi: hi}, nil
	default: // IN
		p.next()
		if err := p.expect(tLParen); err != nil {
			return nil, err
		}
		list, err := p.parseOperandList()
		if err != nil {
			return nil, err
		}
		p.checkMisused(append([]*operand{x}, list...)...)
		if len(list) > MaxInOperands {
			p.fail(catFunction, "The IN operator is provided with too many operands; number of operands: "+strconv.Itoa(len(list)))
		}
		return &cIn{x: x, list: list}, nil
	}
}

// checkMisused rejects condition functions used as operands.
func (p *parser) checkMisused(ops ...*operand) {
	for _, o := range ops {
		if o.kind == opFunc && o.fn != "size" {
			p.fail(catMisusedFunction, "The function is not allowed to be used this way in an expression; function: "+o.fn)
		}
	}
}

// checkOrderable rejects constant operands of an ordering operator (<,
// <=, >, >=, BETWEEN) whose type has no order: only S, N and B compare.
func (p *parser) checkOrderable(op string, ops ...*operand) {
	for _, o := range ops {
		if t, ok := o.staticType(); ok && t != attr.S && t != attr.N && t != attr.B {
			p.fail(catFunction, operandTypeMsg(op, t))
			return
		}
	}
}

func (p *parser) checkBetween(lo, hi *operand) {
	if lo.kind != opValue || hi.kind != opValue || !lo.defined || !hi.defined {
		return
	}
	if lo.val.Type != hi.val.Type {
		p.fail(catFunction, "The BETWEEN operator requires same data type for lower and upper bounds; lower bound operand: AttributeValue: "+
			formatAV(lo.val)+", upper bound operand: AttributeValue: "+formatAV(hi.val))
		return
	}
	if c, ok := compareScalars(lo.val, hi.val); ok && c > 0 {
		p.fail(catFunction, "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: "+
			formatAV(lo.val)+", upper bound operand: AttributeValue: "+formatAV(hi.val))
	}
}

// formatAV formats a value the way the service's messages do: {N:5}.
func formatAV(v attr.Value) string {
	var s string
	switch v.Type {
	case attr.S, attr.N:
		s = v.Str
	case attr.B:
		s = base64.StdEncoding.EncodeToString(v.Bin)
	case attr.BOOL:
		s = strconv.FormatBool(v.Bool)
	case attr.NULL:
		s = "true"
	case attr.SS, attr.NS:
		s = "[" + strings.Join(v.Strs, ", ") + "]"
	case attr.BS:
		parts := make([]string, len(v.Bins))
		for i, b := range v.Bins {
			parts[i] = base64.StdEncoding.EncodeToString(b)
		}
		s = "[" + strings.Join(parts, ", ") + "]"
	default:
		s = string(attr.AppendValue(nil, v))
	}
	return "{" + v.Type.String() + ":" + s + "}"
}

// compareScalars orders two values of the same scalar type (S, N, B).
func compareScalars(a, b attr.Value) (int, bool) {
	if a.Type != b.Type {
		return 0, false
	}
	switch a.Type {
	case attr.S:
		return strings.Compare(a.Str, b.Str), true
	case attr.N:
		return attr.CompareNumbers(a.Str, b.Str), true
	case attr.B:
		return bytes.Compare(a.Bin, b.Bin), true
	}
	return 0, false
}

// Eval reports whether item satisfies the condition. A nil item is an
// absent item: every attribute is missing.
func (c *Condition) Eval(item attr.Item) bool {
	if c == nil {
		return true
	}
	return evalCond(c.root, item)
}

func evalCond(n cnode, item attr.Item) bool {
	switch n := n.(type) {
	case *cAnd:
		return evalCond(n.l, item) && evalCond(n.r, item)
	case *cOr:
		return evalCond(n.l, item) || evalCond(n.r, item)
	case *cNot:
		return !evalCond(n.x, item)
	case *cCmp:
		a, aok := evalOperand(n.l, item)
		b, bok := evalOperand(n.r, item)
		switch n.op {
		case "=":
			return aok && bok && attr.Equal(a, b)
		case "<>":
			return !(aok && bok && attr.Equal(a, b))
		}
		if !aok || !bok {
			return false
		}
		c, ok := compareScalars(a, b)
		if !ok {
			return false
		}
		switch n.op {
		case "<":
			return c < 0
		case "<=":
			return c <= 0
		case ">":
			return c > 0
		case ">=":
			return c >= 0
		}
		return false
	case *cBetween:
		x, ok := evalOperand(n.x, item)
		if !ok {
			return false
		}
		lo, ok := evalOperand(n.lo, item)
		if !ok {
			return false
		}
		hi, ok := evalOperand(n.hi, item)
		if !ok {
			return false
		}
		c1, ok1 := compareScalars(lo, x)
		c2, ok2 := compareScalars(x, hi)
		return ok1 && ok2 && c1 <= 0 && c2 <= 0
	case *cIn:
		x, ok := evalOperand(n.x, item)
		if !ok {
			return false
		}
		for _, o := range n.list {
			if v, ok := evalOperand(o, item); ok && attr.Equal(x, v) {
				return true
			}
		}
		return false
	case *cFunc:
		return evalCondFunc(n.o, item)
	}
	return false
}

func evalCondFunc(o *operand, item attr.Item) bool {
	switch o.fn {
	case "attribute_exists":
		_, ok := o.args[0].path.Resolve(item)
		return ok
	case "attribute_not_exists":
		_, ok := o.args[0].path.Resolve(item)
		return !ok
	case "attribute_type":
		v, ok := evalOperand(o.args[0], item)
		if !ok {
			return false
		}
		t, ok := evalOperand(o.args[1], item)
		return ok && t.Type == attr.S && v.Type.String() == t.Str
	case "begins_with":
		a, aok := evalOperand(o.args[0], item)
		b, bok := evalOperand(o.args[1], item)
		if !aok || !bok || a.Type != b.Type {
			return false
		}
		switch a.Type {
		case attr.S:
			return strings.HasPrefix(a.Str, b.Str)
		case attr.B:
			return bytes.HasPrefix(a.Bin, b.Bin)
		}
		return false
	case "contains":
		a, aok := evalOperand(o.args[0], item)
		b, bok := evalOperand(o.args[1], item)
		if !aok || !bok {
			return false
		}
		return contains(a, b)
	}
	return false
}

// contains implements the contains function: substring of S, member of a
// set, element of a list.
func contains(a, b attr.Value) bool {
	switch a.Type {
	case attr.S:
		return b.Type == attr.S && strings.Contains(a.Str, b.Str)
	case attr.B:
		return b.Type == attr.B && bytes.Contains(a.Bin, b.Bin)
	case attr.SS:
		if b.Type != attr.S {
			return false
		}
		for _, s := range a.Strs {
			if s == b.Str {
				return true
			}
		}
	case attr.NS:
		if b.Type != attr.N {
			return false
		}
		for _, s := range a.Strs {
			if attr.CompareNumbers(s, b.Str) == 0 {
				return true
			}
		}
	case attr.BS:
		if b.Type != attr.B {
			return false
		}
		for _, x := range a.Bins {
			if bytes.Equal(x, b.Bin) {
				return true
			}
		}
	case attr.L:
		for _, e := range a.List {
			if attr.Equal(e, b) {
				return true
			}
		}
	}
	return false
}

// evalOperand evaluates a condition operand; ok is false when the value is
// missing (absent path, size of an unsized value).
func evalOperand(o *operand, item attr.Item) (attr.Value, bool) {
	switch o.kind {
	case opValue:
		return o.val, o.defined
	case opPath:
		return o.path.Resolve(item)
	case opFunc:
		if o.fn == "size" {
			v, ok := evalOperand(o.args[0], item)
			if !ok {
				return attr.Value{}, false
			}
			n, ok := sizeOf(v)
			if !ok {
				return attr.Value{}, false
			}
			return attr.Value{Type: attr.N, Str: strconv.Itoa(n)}, true
		}
	}
	return attr.Value{}, false
}

// sizeOf is the size function: bytes of S and B, members of sets, entries
// of M and L.
func sizeOf(v attr.Value) (int, bool) {
	switch v.Type {
	case attr.S:
		return len(v.Str), true
	case attr.B:
		return len(v.Bin), true
	case attr.SS, attr.NS:
		return len(v.Strs), true
	case attr.BS:
		return len(v.Bins), true
	case attr.M:
		return len(v.Map), true
	case attr.L:
		return len(v.List), true
	}
	return 0, false
}
