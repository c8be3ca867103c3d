package expr

import (
	"strconv"
	"unicode/utf8"

	"github.com/extenddb/extenddb/internal/attr"
)

type tokKind uint8

const (
	tEOF     tokKind = iota
	tIdent           // attribute name, function name or keyword
	tName            // #placeholder
	tValue           // :placeholder
	tNumber          // digits (list index)
	tLParen          // (
	tRParen          // )
	tLBrack          // [
	tRBrack          // ]
	tComma           // ,
	tDot             // .
	tEq              // =
	tNe              // <>
	tLt              // <
	tLe              // <=
	tGt              // >
	tGe              // >=
	tPlus            // +
	tMinus           // -
	tInvalid         // any other character
)

type token struct {
	kind  tokKind
	start int // byte offset in the source
	end   int
	text  string
}

// isIdentStart: a name in an expression starts with a letter. An
// underscore may follow but not start one ("_a" is a syntax error at "_"),
// as in DynamoDB's tokenizer.
func isIdentStart(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) || c == '_' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// lex splits src into tokens. It never fails: unknown characters become
// tInvalid tokens that the parser reports as syntax errors. The result
// always ends with a tEOF token.
func lex(src string) []token {
	toks := make([]token, 0, len(src)/3+2)
	i := 0
	for {
		for i < len(src) && isSpace(src[i]) {
			i++
		}
		if i >= len(src) {
			toks = append(toks, token{kind: tEOF, start: len(src), end: len(src), text: "<EOF>"})
			return toks
		}
		start := i
		c := src[i]
		var k tokKind
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			k = tIdent
		case c == '#' || c == ':':
			i++
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			if i-start == 1 {
				k = tInvalid
			} else if c == '#' {
				k = tName
			} else {
				k = tValue
			}
		case isDigit(c):
			for i < len(src) && isDigit(src[i]) {
				i++
			}
			k = tNumber
		default:
			i++
			switch c {
			case '(':
				k = tLParen
			case ')':
				k = tRParen
			case '[':
				k = tLBrack
			case ']':
				k = tRBrack
			case ',':
				k = tComma
			case '.':
				k = tDot
			case '=':
				k = tEq
			case '+':
				k = tPlus
			case '-':
				k = tMinus
			case '<':
				k = tLt
				if i < len(src) && src[i] == '=' {
					i++
					k = tLe
				} else if i < len(src) && src[i] == '>' {
					i++
					k = tNe
				}
			case '>':
				k = tGt
				if i < len(src) && src[i] == '=' {
					i++
					k = tGe
				}
			default:
				k = tInvalid
				if c >= utf8.RuneSelf {
					_, n := utf8.DecodeRuneInString(src[start:])
					i = start + n
				}
			}
		}
		toks = append(toks, token{kind: k, start: start, end: i, text: src[start:i]})
	}
}

// Semantic error categories, in the order the service reports them when an
// expression has several problems.
const (
	catParens = iota
	catUnknownFunction
	catMisusedFunction
	catReserved
	catSection
	catUndefined
	catOverlap
	catOperandCount
	catDistinct
	catFunction
	numCats
)

// syntaxError is a parse failure at token index at.
type syntaxError struct {
	at  int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// parser is the shared recursive-descent machinery.
type parser struct {
	kind Kind
	src  string
	toks []token
	i    int
	env  *Env
	errs [numCats]string
	// update: whether we parse an update expression (changes which
	// functions are allowed and which words are keywords).
	update bool
	// proj: a projection expression has no keywords.
	proj bool
	// ops counts operators (comparators, AND, OR, NOT, BETWEEN, IN, and
	// + and - in update expressions; function calls do not count) for
	// the service's limit of MaxOperators per expression.
	ops int
	// steps counts parse work (tokens consumed, operands and primaries
	// started); tests check it stays linear in the number of tokens.
	steps int
}

func newParser(kind Kind, src string, env *Env) *parser {
	p := &parser{kind: kind, src: src, toks: lex(src), env: env}
	if newParserHook != nil {
		newParserHook(p)
	}
	return p
}

// newParserHook, when set (by tests only), sees every parser created, so a
// test can read its work counter after the parse.
var newParserHook func(*parser)

// prelude checks the length and emptiness rules every expression shares.
func prelude(kind Kind, s string) error {
	if len(s) > MaxExpressionLength {
		return attr.Validation("Invalid " + kind.String() + ": Expression size has exceeded the maximum allowed size; expression size: " + strconv.Itoa(len(s)))
	}
	empty := true
	for i := 0; i < len(s); i++ {
		if !isSpace(s[i]) {
			empty = false
			break
		}
	}
	if empty {
		return attr.Validation("Invalid " + kind.String() + ": The expression can not be empty;")
	}
	return nil
}

func (p *parser) peek() token       { return p.toks[p.i] }
func (p *parser) peekKind() tokKind { return p.toks[p.i].kind }

func (p *parser) next() token {
	p.steps++
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// countOperator counts one operator and aborts the parse when the
// expression has more than MaxOperators, as the service does (its message
// reports the count at which it stopped: MaxOperators+1).
func (p *parser) countOperator() *syntaxError {
	p.ops++
	if p.ops > MaxOperators {
		return &syntaxError{at: p.i, msg: "The expression contains too many operators; operator count: " + strconv.Itoa(p.ops)}
	}
	return nil
}

// fail records a semantic error; the first of each category wins.
func (p *parser) fail(cat int, msg string) {
	if p.errs[cat] == "" {
		p.errs[cat] = msg
	}
}

// semanticError returns the highest-priority recorded error.
func (p *parser) semanticError() error {
	for _, m := range p.errs {
		if m != "" {
			return attr.Validation("Invalid " + p.kind.String() + ": " + m)
		}
	}
	return nil
}

// syntax returns a syntax error at the current token. Its "near" text runs
// from the previous token to the next one, as the service quotes it
// ("a-b" for the "-" in "a-b").
func (p *parser) syntax() *syntaxError {
	t := p.toks[p.i]
	nearStart, nearEnd := t.start, t.end
	if p.i > 0 {
		nearStart = p.toks[p.i-1].start
	}
	if t.kind != tEOF && p.toks[p.i+1].kind != tEOF {
		nearEnd = p.toks[p.i+1].end
	}
	near := p.src[nearStart:nearEnd]
	return &syntaxError{at: p.i, msg: "Syntax error; token: \"" + t.text + "\", near: \"" + near + "\""}
}

func (p *parser) wrapSyntax(err *syntaxError) error {
	return attr.Validation("Invalid " + p.kind.String() + ": " + err.msg)
}

func (p *parser) expect(k tokKind) *syntaxError {
	if p.peekKind() != k {
		return p.syntax()
	}
	p.next()
	return nil
}

// isKeyword reports whether t is the (case-insensitive) keyword kw.
func isKeyword(t token, kw string) bool {
	if t.kind != tIdent || len(t.text) != len(kw) {
		return false
	}
	for i := 0; i < len(kw); i++ {
		c := t.text[i]
		if c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != kw[i] {
			return false
		}
	}
	return true
}

// isConditionKeyword reports words that end or join condition operands.
func isConditionKeyword(t token) bool {
	return isKeyword(t, "AND") || isKeyword(t, "OR") || isKeyword(t, "NOT") ||
		isKeyword(t, "BETWEEN") || isKeyword(t, "IN")
}

func isUpdateKeyword(t token) bool {
	return isKeyword(t, "SET") || isKeyword(t, "REMOVE") || isKeyword(t, "ADD") || isKeyword(t, "DELETE")
}

// pathStartWord reports whether an identifier token may start a path (it
// is not one of the grammar's keywords).
func (p *parser) pathWord(t token) bool {
	if t.kind != tIdent {
		return false
	}
	if p.proj {
		return true
	}
	if p.update {
		return !isUpdateKeyword(t)
	}
	return !isConditionKeyword(t)
}

// parsePathElem parses one name step (identifier or #placeholder).
func (p *parser) parsePathName() (string, *syntaxError) {
	t := p.peek()
	switch {
	case t.kind == tName:
		p.next()
		v, ok := p.env.name(t.text)
		if !ok {
			p.fail(catUndefined, "An expression attribute name used in the document path is not defined; attribute name: "+t.text)
			return t.text, nil
		}
		return v, nil
	case p.pathWord(t):
		p.next()
		if IsReserved(t.text) {
			p.fail(catReserved, "Attribute name is a reserved keyword; reserved keyword: "+t.text)
		}
		return t.text, nil
	}
	return "", p.syntax()
}

// parsePathRest parses the .name and [n] steps after a first name.
func (p *parser) parsePathRest(first string) (Path, *syntaxError) {
	path := Path{{Name: first}}
	for {
		switch p.peekKind() {
		case tDot:
			p.next()
			n, err := p.parsePathName()
			if err != nil {
				return nil, err
			}
			path = append(path, PathElem{Name: n})
		case tLBrack:
			p.next()
			t := p.peek()
			if t.kind != tNumber {
				return nil, p.syntax()
			}
			idx, convErr := strconv.Atoi(t.text)
			if convErr != nil || idx > 1<<30 {
				return nil, p.syntax()
			}
			p.next()
			if err := p.expect(tRBrack); err != nil {
				return nil, err
			}
			path = append(path, PathElem{Index: idx, IsIndex: true})
		default:
			if len(path) > MaxPathDepth {
				p.fail(catFunction, "The document path has too many nesting levels; nesting levels: "+strconv.Itoa(len(path)))
			}
			return path, nil
		}
	}
}

func (p *parser) parsePath() (Path, *syntaxError) {
	first, err := p.parsePathName()
	if err != nil {
		return nil, err
	}
	return p.parsePathRest(first)
}

// opKind is the kind of an operand.
type opKind uint8

const (
	opPath opKind = iota
	opValue
	opFunc
)

// operand is a value-producing piece of an expression: a document path, an
// expression attribute value or a function call (size, if_not_exists,
// list_append), or in update expressions a + or - of two operands.
type operand struct {
	kind opKind
	path Path
	val  attr.Value
	fn   string // function name, or "+" / "-"
	args []*operand
	// defined is false for a placeholder that was not defined (a semantic
	// error is recorded; the operand is never evaluated).
	defined bool
}

// staticType returns the operand's type when it is known before
// evaluation: a literal's type, size()'s N.
func (o *operand) staticType() (attr.Type, bool) {
	switch o.kind {
	case opValue:
		if !o.defined {
			return attr.TypeInvalid, false
		}
		return o.val.Type, true
	case opFunc:
		switch o.fn {
		case "size", "+", "-":
			return attr.N, true
		case "list_append":
			return attr.L, true
		}
	}
	return attr.TypeInvalid, false
}

// parseOperand parses a path, value or function call, with optional
// surrounding parentheses.
func (p *parser) parseOperand() (*operand, *syntaxError) {
	o, _, err := p.parseOperandParen()
	return o, err
}

// parseOperandParen is parseOperand that also tells whether the operand was
// parenthesized, for the redundant-parentheses rule: "((a))" is redundant
// outside update expressions. One pass, no backtracking.
func (p *parser) parseOperandParen() (*operand, bool, *syntaxError) {
	p.steps++
	t := p.peek()
	switch t.kind {
	case tLParen:
		p.next()
		o, innerParen, err := p.parseOperandParen()
		if err != nil {
			return nil, false, err
		}
		if err := p.expect(tRParen); err != nil {
			return nil, false, err
		}
		if innerParen && !p.update {
			p.fail(catParens, "The expression has redundant parentheses;")
		}
		return o, true, nil
	case tValue:
		p.next()
		v, ok := p.env.value(t.text)
		if !ok {
			p.fail(catUndefined, "An expression attribute value used in expression is not defined; attribute value: "+t.text)
		}
		return &operand{kind: opValue, val: v, defined: ok}, false, nil
	case tName:
		path, err := p.parsePath()
		if err != nil {
			return nil, false, err
		}
		return &operand{kind: opPath, path: path, defined: true}, false, nil
	case tIdent:
		if !p.pathWord(t) {
			return nil, false, p.syntax()
		}
		if p.toks[p.i+1].kind == tLParen {
			o, err := p.parseFuncCall()
			return o, false, err
		}
		path, err := p.parsePath()
		if err != nil {
			return nil, false, err
		}
		return &operand{kind: opPath, path: path, defined: true}, false, nil
	}
	return nil, false, p.syntax()
}

// parseFuncCall parses name(arg, ...) and validates it.
func (p *parser) parseFuncCall() (*operand, *syntaxError) {
	name := p.next().text
	p.next() // (
	args, err := p.parseOperandList()
	if err != nil {
		return nil, err
	}
	o := &operand{kind: opFunc, fn: name, args: args, defined: true}
	if p.update {
		p.checkUpdateFunc(o)
	} else {
		p.checkConditionFunc(o)
	}
	return o, nil
}

var conditionFuncArity = map[string]int{
	"attribute_exists":     1,
	"attribute_not_exists": 1,
	"attribute_type":       2,
	"begins_with":          2,
	"contains":             2,
	"size":                 1,
}

var updateFuncArity = map[string]int{
	"if_not_exists": 2,
	"list_append":   2,
}

func operandTypeMsg(fn string, t attr.Type) string {
	return "Incorrect operand type for operator or function; operator or function: " + fn + ", operand type: " + t.String()
}

func (p *parser) checkConditionFunc(o *operand) {
	n, ok := conditionFuncArity[o.fn]
	if !ok {
		if _, upd := updateFuncArity[o.fn]; upd {
			p.fail(catUnknownFunction, "The function is not allowed in a condition expression; function: "+o.fn)
		} else {
			p.fail(catUnknownFunction, "Invalid function name; function: "+o.fn)
		}
		return
	}
	// Functions other than size cannot be arguments.
	for _, a := range o.args {
		if a.kind == opFunc && a.fn != "size" {
			p.fail(catMisusedFunction, "The function is not allowed to be used this way in an expression; function: "+a.fn)
		}
	}
	if len(o.args) != n {
		p.fail(catOperandCount, "Incorrect number of operands for operator or function; operator or function: "+o.fn+", number of operands: "+strconv.Itoa(len(o.args)))
		return
	}
	p.checkDistinct(o.fn, o.args)
	switch o.fn {
	case "attribute_exists", "attribute_not_exists":
		if o.args[0].kind != opPath {
			p.fail(catFunction, "Operator or function requires a document path; operator or function: "+o.fn)
		}
	case "size":
		// size takes any operand (a path, a value, size of something)
		// whose type has a size.
		if t, ok := o.args[0].staticType(); ok && (t == attr.N || t == attr.BOOL || t == attr.NULL) {
			p.fail(catFunction, operandTypeMsg(o.fn, t))
		}
	case "attribute_type":
		// The first operand may be a path or a value; the second is the
		// type name, a string value.
		t, ok := o.args[1].staticType()
		if !ok {
			if o.args[1].kind == opValue {
				return // undefined placeholder, reported already
			}
			p.fail(catFunction, "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: {NS,SS,L,BS,N,M,B,BOOL,NULL,S}")
			return
		}
		if t != attr.S {
			p.fail(catFunction, operandTypeMsg(o.fn, t))
			return
		}
		if _, valid := attr.TypeFromName(o.args[1].val.Str); !valid {
			p.fail(catFunction, "Invalid attribute type name found; type: "+o.args[1].val.Str+", valid types: { B,NULL,SS,BOOL,L,BS,N,NS,S,M }")
		}
	case "begins_with":
		for _, a := range o.args {
			if t, ok := a.staticType(); ok && t != attr.S && t != attr.B {
				p.fail(catFunction, operandTypeMsg(o.fn, t))
				return
			}
		}
	}
}

func (p *parser) checkUpdateFunc(o *operand) {
	n, ok := updateFuncArity[o.fn]
	if !ok {
		if _, cond := conditionFuncArity[o.fn]; cond {
			p.fail(catUnknownFunction, "The function is not allowed in an update expression; function: "+o.fn)
		} else {
			p.fail(catUnknownFunction, "Invalid function name; function: "+o.fn)
		}
		return
	}
	if len(o.args) != n {
		p.fail(catOperandCount, "Incorrect number of operands for operator or function; operator or function: "+o.fn+", number of operands: "+strconv.Itoa(len(o.args)))
		return
	}
	switch o.fn {
	case "if_not_exists":
		if o.args[0].kind != opPath {
			p.fail(catFunction, "Operator or function requires a document path; operator or function: "+o.fn)
		}
	case "list_append":
		// Every operand whose type is known before evaluation (a value,
		// a nested list_append, an arithmetic result) must be a list.
		for _, a := range o.args {
			if t, ok := a.staticType(); ok && t != attr.L {
				p.fail(catFunction, operandTypeMsg(o.fn, t))
				return
			}
		}
	}
}

// checkDistinct rejects an operator whose two operands are the same path.
func (p *parser) checkDistinct(op string, args []*operand) {
	if len(args) != 2 || args[0].kind != opPath || args[1].kind != opPath {
		return
	}
	if args[0].path.Equal(args[1].path) {
		p.fail(catDistinct, "The first operand must be distinct from the remaining operands for this operator or function; operator: "+op+", first operand: "+args[0].path.MessageString())
	}
}

// parseOperandList parses "operand, operand, ... )" after an opening
// parenthesis (function arguments, IN lists).
func (p *parser) parseOperandList() ([]*operand, *syntaxError) {
	var list []*operand
	for {
		o, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		list = append(list, o)
		if p.peekKind() == tComma {
			p.next()
			continue
		}
		if err := p.expect(tRParen); err != nil {
			return nil, err
		}
		return list, nil
	}
}
