package partiql

import (
	"strconv"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
)

// parser is a recursive-descent parser over the token slice. Every
// function consumes at least one token per loop iteration and never backs
// up more than one token, so work is linear in the tokens; steps counts it
// and a budget proportional to the input stops a parser bug from turning
// into a denial of service.
type parser struct {
	toks   []token
	i      int
	depth  int
	steps  int
	budget int
	params int
}

// errBudget is returned when the step budget is exhausted.
var errBudget = malformed("the statement is too complex")

// Parse parses one statement.
func Parse(src string) (*Statement, error) {
	if len(src) > MaxStatementLength {
		return nil, attr.Validation("1 validation error detected: Value at 'statement' failed to satisfy constraint: Member must have length less than or equal to " + itoa(MaxStatementLength))
	}
	if strings.TrimSpace(src) == "" {
		return nil, attr.Validation("1 validation error detected: Value at 'statement' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, budget: 8*len(toks) + 64}
	st, err := p.statement()
	if err != nil {
		return nil, err
	}
	if p.peek().kind == tPunct && p.peek().text == ";" {
		p.next()
	}
	if p.peek().kind != tEOF {
		if p.peek().kind == tIdent && (isKeyword(p.peek(), "SELECT") || isKeyword(p.peek(), "INSERT") ||
			isKeyword(p.peek(), "UPDATE") || isKeyword(p.peek(), "DELETE")) {
			return nil, attr.Validation("Only one operation is allowed in a statement.")
		}
		return nil, p.unexpected()
	}
	st.Params = p.params
	st.Steps = p.steps
	return st, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	p.steps++
	return t
}

// step counts one unit of work and fails when the budget is spent.
func (p *parser) step() error {
	p.steps++
	if p.steps > p.budget {
		return errBudget
	}
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxDepth {
		return malformed("the statement nests more than " + itoa(MaxDepth) + " levels")
	}
	return p.step()
}

func (p *parser) leave() { p.depth-- }

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of statement"
	case tString:
		return "'" + clip(t.text) + "'"
	case tQIdent:
		return "\"" + clip(t.text) + "\""
	}
	return clip(t.text)
}

func clip(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

func (p *parser) unexpected() error {
	t := p.peek()
	if t.kind == tEOF {
		return malformed("unexpected end of statement")
	}
	return malformed("unexpected " + describe(t) + " at position " + itoa(t.pos))
}

func (p *parser) isPunct(s string) bool {
	t := p.peek()
	return t.kind == tPunct && t.text == s
}

func (p *parser) acceptPunct(s string) bool {
	if p.isPunct(s) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectPunct(s string) error {
	if !p.acceptPunct(s) {
		t := p.peek()
		if t.kind == tEOF {
			return malformed("expected '" + s + "' before the end of the statement")
		}
		return malformed("expected '" + s + "' but found " + describe(t) + " at position " + itoa(t.pos))
	}
	return nil
}

func (p *parser) acceptKeyword(kw string) bool {
	if isKeyword(p.peek(), kw) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectKeyword(kw string) error {
	if !p.acceptKeyword(kw) {
		t := p.peek()
		if t.kind == tEOF {
			return malformed("expected " + kw + " before the end of the statement")
		}
		return malformed("expected " + kw + " but found " + describe(t) + " at position " + itoa(t.pos))
	}
	return nil
}

// name reads an identifier: "quoted" or a bare word that is no keyword.
func (p *parser) name() (string, error) {
	t := p.peek()
	switch {
	case t.kind == tQIdent:
		p.next()
		if t.text == "" {
			return "", attr.Validation("Path component cannot be an empty string")
		}
		return t.text, nil
	case t.kind == tIdent && !keywords[strings.ToUpper(t.text)]:
		p.next()
		return t.text, nil
	}
	if t.kind == tIdent {
		return "", malformed("the keyword " + strings.ToUpper(t.text) + " at position " + itoa(t.pos) + " is reserved; quote the name (\"" + t.text + "\") to use it as one")
	}
	return "", p.unexpected()
}

func (p *parser) statement() (*Statement, error) {
	t := p.peek()
	switch {
	case isKeyword(t, "SELECT"):
		return p.selectStmt()
	case isKeyword(t, "INSERT"):
		return p.insertStmt()
	case isKeyword(t, "UPDATE"):
		return p.updateStmt()
	case isKeyword(t, "DELETE"):
		return p.deleteStmt()
	case isKeyword(t, "EXISTS"):
		p.next()
		if err := p.expectPunct("("); err != nil {
			return nil, err
		}
		if !isKeyword(p.peek(), "SELECT") {
			return nil, attr.Validation("EXISTS() must contain a single item read with additional condition")
		}
		st, err := p.selectStmt()
		if err != nil {
			return nil, err
		}
		if err := p.expectPunct(")"); err != nil {
			return nil, err
		}
		st.Kind = Exists
		return st, nil
	case t.kind == tIdent:
		return nil, attr.Validation("Unsupported operation: " + clip(strings.ToUpper(t.text)))
	}
	return nil, p.unexpected()
}

func (p *parser) selectStmt() (*Statement, error) {
	p.next() // SELECT
	st := &Statement{Kind: Select}
	if p.acceptPunct("*") {
		if p.isPunct(",") {
			return nil, attr.Validation("Other attributes should not be present in the projection when '*' is used.")
		}
	} else {
		if isKeyword(p.peek(), "VALUE") || isKeyword(p.peek(), "DISTINCT") {
			return nil, attr.Validation("Select projection doesn't support value or pivot keywords")
		}
		for {
			if err := p.step(); err != nil {
				return nil, err
			}
			if p.isPunct("*") {
				return nil, attr.Validation("Other attributes should not be present in the projection when '*' is used.")
			}
			path, err := p.path()
			if err != nil {
				return nil, err
			}
			if isKeyword(p.peek(), "AS") {
				return nil, attr.Validation("Aliasing is not supported")
			}
			st.Projection = append(st.Projection, path)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	if err := p.expectKeyword("FROM"); err != nil {
		return nil, err
	}
	var err error
	if st.Table, err = p.name(); err != nil {
		return nil, err
	}
	if p.acceptPunct(".") {
		if st.Index, err = p.name(); err != nil {
			return nil, err
		}
		if p.isPunct(".") {
			return nil, attr.Validation("A path may contain at most 2 components in the FROM clause")
		}
	}
	if p.isPunct(",") || isKeyword(p.peek(), "JOIN") {
		return nil, attr.Validation("Only select from a single table or index is supported.")
	}
	if p.acceptKeyword("WHERE") {
		if st.Where, err = p.expr(); err != nil {
			return nil, err
		}
	}
	if p.acceptKeyword("ORDER") {
		if err := p.expectKeyword("BY"); err != nil {
			return nil, err
		}
		for {
			if err := p.step(); err != nil {
				return nil, err
			}
			path, err := p.path()
			if err != nil {
				return nil, err
			}
			o := Order{Path: path}
			if p.acceptKeyword("DESC") {
				o.Desc = true
			} else {
				p.acceptKeyword("ASC")
			}
			st.OrderBy = append(st.OrderBy, o)
			if !p.acceptPunct(",") {
				break
			}
		}
	}
	for _, kw := range []string{"LIMIT", "OFFSET", "GROUP", "HAVING", "UNION"} {
		if isKeyword(p.peek(), kw) {
			return nil, attr.Validation("Unsupported clause: " + kw)
		}
	}
	return st, nil
}

func (p *parser) insertStmt() (*Statement, error) {
	p.next() // INSERT
	if err := p.expectKeyword("INTO"); err != nil {
		return nil, err
	}
	st := &Statement{Kind: Insert}
	var err error
	if st.Table, err = p.name(); err != nil {
		return nil, err
	}
	if isKeyword(p.peek(), "VALUES") || isKeyword(p.peek(), "SELECT") {
		return nil, attr.Validation(`Unsupported operation: Inserting multiple items in a single statement is not supported, use "INSERT INTO tableName VALUE item" instead`)
	}
	if isKeyword(p.peek(), "AT") {
		return nil, attr.Validation("AT is not supported in insert statements.")
	}
	if err := p.expectKeyword("VALUE"); err != nil {
		return nil, err
	}
	if st.Value, err = p.expr(); err != nil {
		return nil, err
	}
	switch st.Value.(type) {
	case MapLit, Param:
	default:
		return nil, attr.Validation("Unsupported format in item expression. Please use struct format {...} to express item values for insert statement.")
	}
	if isKeyword(p.peek(), "RETURNING") {
		return nil, attr.Validation("RETURNING is not supported in INSERT")
	}
	if isKeyword(p.peek(), "FROM") || isKeyword(p.peek(), "WHERE") {
		return nil, attr.Validation("Unsupported FROM ... WHERE ... clause in INSERT statement.")
	}
	return st, nil
}

func (p *parser) updateStmt() (*Statement, error) {
	p.next() // UPDATE
	st := &Statement{Kind: Update}
	var err error
	if st.Table, err = p.name(); err != nil {
		return nil, err
	}
	for {
		if err := p.step(); err != nil {
			return nil, err
		}
		switch {
		case p.acceptKeyword("SET"):
			for {
				if err := p.step(); err != nil {
					return nil, err
				}
				path, err := p.path()
				if err != nil {
					return nil, err
				}
				if err := p.expectPunct("="); err != nil {
					return nil, err
				}
				v, err := p.additive()
				if err != nil {
					return nil, err
				}
				st.Actions = append(st.Actions, Action{Path: path, Value: v})
				if !p.acceptPunct(",") {
					break
				}
			}
			continue
		case p.acceptKeyword("REMOVE"):
			for {
				if err := p.step(); err != nil {
					return nil, err
				}
				path, err := p.path()
				if err != nil {
					return nil, err
				}
				st.Actions = append(st.Actions, Action{Path: path})
				if !p.acceptPunct(",") {
					break
				}
			}
			continue
		}
		break
	}
	if len(st.Actions) == 0 {
		t := p.peek()
		if t.kind == tIdent && (isKeyword(t, "ADD") || isKeyword(t, "DELETE")) {
			return nil, attr.Validation("Only SET and REMOVE are supported in update expressions at this time")
		}
		return nil, malformed("expected SET or REMOVE but found " + describe(t))
	}
	if !p.acceptKeyword("WHERE") {
		if p.peek().kind == tEOF {
			return nil, attr.Validation("Where clause does not contain a mandatory equality on all key attributes")
		}
		return nil, p.unexpected()
	}
	if st.Where, err = p.expr(); err != nil {
		return nil, err
	}
	if st.Returning, err = p.returning(); err != nil {
		return nil, err
	}
	return st, nil
}

func (p *parser) deleteStmt() (*Statement, error) {
	p.next() // DELETE
	if err := p.expectKeyword("FROM"); err != nil {
		return nil, err
	}
	st := &Statement{Kind: Delete}
	var err error
	if st.Table, err = p.name(); err != nil {
		return nil, err
	}
	if p.isPunct(".") {
		return nil, attr.Validation("FROM clause may only contain a single table name in data manipulation statements")
	}
	if !p.acceptKeyword("WHERE") {
		if p.peek().kind == tEOF {
			return nil, attr.Validation("Where clause does not contain a mandatory equality on all key attributes")
		}
		return nil, p.unexpected()
	}
	if st.Where, err = p.expr(); err != nil {
		return nil, err
	}
	if st.Returning, err = p.returning(); err != nil {
		return nil, err
	}
	if st.Returning != "" && st.Returning != "ALL_OLD" {
		return nil, attr.Validation("Invalid returning clause: RETURNING " + returningText[st.Returning] + ". Only RETURNING ALL OLD * is allowed in DELETE statements.")
	}
	return st, nil
}

var returningText = map[string]string{"ALL_OLD": "ALL OLD *", "UPDATED_OLD": "MODIFIED OLD *", "ALL_NEW": "ALL NEW *", "UPDATED_NEW": "MODIFIED NEW *"}

// returning reads an optional RETURNING (ALL|MODIFIED) (OLD|NEW) *.
func (p *parser) returning() (string, error) {
	if !p.acceptKeyword("RETURNING") {
		return "", nil
	}
	var which, when string
	switch {
	case p.acceptKeyword("ALL"):
		which = "ALL_"
	case p.acceptKeyword("MODIFIED"):
		which = "UPDATED_"
	default:
		return "", p.unexpected()
	}
	switch {
	case p.acceptKeyword("OLD"):
		when = "OLD"
	case p.acceptKeyword("NEW"):
		when = "NEW"
	default:
		return "", p.unexpected()
	}
	if !p.acceptPunct("*") {
		return "", attr.Validation("Expected '*' after ( MODIFIED | ALL ) ( NEW | OLD ) in RETURNING clause")
	}
	if p.isPunct(",") {
		return "", attr.Validation("Invalid syntax with multiple returning elements in RETURNING clause")
	}
	return which + when, nil
}

// path reads name ( '.' name | '[' int ']' | '[' 'string' ']' )*.
func (p *parser) path() (Path, error) {
	first, err := p.name()
	if err != nil {
		if p.isPunct("[") {
			return Path{}, attr.Validation("A path cannot start with a list index")
		}
		return Path{}, err
	}
	return p.pathRest(first)
}

func (p *parser) pathRest(first string) (Path, error) {
	path := Path{Name: first}
	for {
		if err := p.step(); err != nil {
			return Path{}, err
		}
		switch {
		case p.acceptPunct("."):
			if p.isPunct("*") {
				return Path{}, attr.Validation("Unpivot path component like a.*.b are not supported")
			}
			n, err := p.name()
			if err != nil {
				return Path{}, err
			}
			path.Elems = append(path.Elems, Elem{Name: n})
		case p.acceptPunct("["):
			t := p.peek()
			if t.kind == tNumber || t.kind == tString {
				p.next()
			}
			switch t.kind {
			case tNumber:
				n, err := strconv.Atoi(t.text)
				if err != nil || n < 0 {
					return Path{}, attr.Validation("List index is not within the allowable range; index: [" + clip(t.text) + "]")
				}
				path.Elems = append(path.Elems, Elem{Index: n, IsIndex: true})
			case tString:
				if t.text == "" {
					return Path{}, attr.Validation("Path component cannot be an empty string")
				}
				path.Elems = append(path.Elems, Elem{Name: t.text})
			default:
				if t.kind == tPunct && t.text == "*" {
					return Path{}, attr.Validation("Wildcard path component like a[*].b are not supported")
				}
				return Path{}, p.unexpected()
			}
			if err := p.expectPunct("]"); err != nil {
				return Path{}, err
			}
		default:
			return path, nil
		}
	}
}

// expr := or.
func (p *parser) expr() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	return p.or()
}

func (p *parser) or() (Expr, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.acceptKeyword("OR") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = Binary{Op: "OR", L: l, R: r}
	}
	return l, nil
}

func (p *parser) and() (Expr, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.acceptKeyword("AND") {
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = Binary{Op: "AND", L: l, R: r}
	}
	return l, nil
}

func (p *parser) not() (Expr, error) {
	// NOT NOT NOT ... is read iteratively: depth does not grow.
	n := 0
	for p.acceptKeyword("NOT") {
		if err := p.step(); err != nil {
			return nil, err
		}
		n++
	}
	x, err := p.predicate()
	if err != nil {
		return nil, err
	}
	for ; n > 0; n-- {
		x = Not{X: x}
	}
	return x, nil
}

func isComparator(t token) bool {
	if t.kind != tPunct {
		return false
	}
	switch t.text {
	case "=", "<>", "!=", "<", "<=", ">", ">=":
		return true
	}
	return false
}

func (p *parser) predicate() (Expr, error) {
	x, err := p.additive()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	switch {
	case isComparator(t):
		p.next()
		op := t.text
		if op == "!=" {
			op = "<>"
		}
		r, err := p.additive()
		if err != nil {
			return nil, err
		}
		if _, ok := r.(MissingLit); ok {
			return nil, attr.Validation("MISSING must be compared using IS operator")
		}
		if _, ok := x.(MissingLit); ok {
			return nil, attr.Validation("MISSING must be compared using IS operator")
		}
		return Binary{Op: op, L: x, R: r}, nil
	case isKeyword(t, "IS"):
		p.next()
		neg := p.acceptKeyword("NOT")
		switch {
		case p.acceptKeyword("MISSING"):
			return Is{X: x, Not: neg, What: "MISSING"}, nil
		case p.acceptKeyword("NULL"):
			return Is{X: x, Not: neg, What: "NULL"}, nil
		}
		u := p.peek()
		if u.kind == tIdent {
			return nil, attr.Validation("Unsupported data type for IS operator: " + clip(strings.ToUpper(u.text)) + ". Supported data types are [MISSING, NULL]")
		}
		return nil, p.unexpected()
	case isKeyword(t, "NOT"):
		// x NOT BETWEEN / x NOT IN
		p.next()
		y, err := p.rangeOrIn(x)
		if err != nil {
			return nil, err
		}
		if y == nil {
			return nil, p.unexpected()
		}
		return Not{X: y}, nil
	}
	y, err := p.rangeOrIn(x)
	if err != nil {
		return nil, err
	}
	if y != nil {
		return y, nil
	}
	if _, ok := x.(MissingLit); ok {
		return nil, attr.Validation("MISSING must be compared using IS operator")
	}
	return x, nil
}

// rangeOrIn reads BETWEEN or IN after x; nil when neither follows.
func (p *parser) rangeOrIn(x Expr) (Expr, error) {
	switch {
	case p.acceptKeyword("BETWEEN"):
		lo, err := p.additive()
		if err != nil {
			return nil, err
		}
		if err := p.expectKeyword("AND"); err != nil {
			return nil, err
		}
		hi, err := p.additive()
		if err != nil {
			return nil, err
		}
		return Between{X: x, Lo: lo, Hi: hi}, nil
	case p.acceptKeyword("IN"):
		var closer string
		switch {
		case p.acceptPunct("("):
			closer = ")"
		case p.acceptPunct("["):
			closer = "]"
		default:
			return nil, attr.Validation("IN operator must have a left hand argument of type Variable Reference and right hand argument of type Seq with at least one member")
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		var list []Expr
		if p.isPunct(closer) {
			return nil, attr.Validation("IN operator must have a left hand argument of type Variable Reference and right hand argument of type Seq with at least one member")
		}
		for {
			e, err := p.additive()
			if err != nil {
				return nil, err
			}
			list = append(list, e)
			if !p.acceptPunct(",") {
				break
			}
		}
		if err := p.expectPunct(closer); err != nil {
			return nil, err
		}
		return In{X: x, List: list}, nil
	}
	return nil, nil
}

func (p *parser) additive() (Expr, error) {
	l, err := p.primary()
	if err != nil {
		return nil, err
	}
	for p.isPunct("+") || p.isPunct("-") {
		op := p.next().text
		r, err := p.primary()
		if err != nil {
			return nil, err
		}
		l = Binary{Op: op, L: l, R: r}
	}
	return l, nil
}

func (p *parser) primary() (Expr, error) {
	if err := p.step(); err != nil {
		return nil, err
	}
	t := p.peek()
	switch t.kind {
	case tString:
		p.next()
		return Lit{V: attr.StrValue(t.text)}, nil
	case tNumber:
		p.next()
		return number(t.text)
	case tParam:
		p.next()
		p.params++
		return Param{N: p.params - 1}, nil
	case tQIdent:
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		path, err := p.pathRest(n)
		if err != nil {
			return nil, err
		}
		return PathExpr{Path: path}, nil
	case tIdent:
		up := strings.ToUpper(t.text)
		switch up {
		case "TRUE", "FALSE":
			p.next()
			return Lit{V: attr.BoolValue(up == "TRUE")}, nil
		case "NULL":
			p.next()
			return Lit{V: attr.NullValue()}, nil
		case "MISSING":
			p.next()
			return MissingLit{}, nil
		case "SELECT":
			return nil, attr.Validation("Unsupported operation: nested SELECT")
		}
		if p.toks[p.i+1].kind == tPunct && p.toks[p.i+1].text == "(" && !keywords[up] {
			return p.call()
		}
		n, err := p.name()
		if err != nil {
			return nil, err
		}
		path, err := p.pathRest(n)
		if err != nil {
			return nil, err
		}
		return PathExpr{Path: path}, nil
	case tPunct:
		switch t.text {
		case "-":
			p.next()
			if u := p.peek(); u.kind == tNumber {
				p.next()
				return number("-" + u.text)
			}
			return nil, p.unexpected()
		case "(":
			p.next()
			x, err := p.expr()
			if err != nil {
				return nil, err
			}
			if err := p.expectPunct(")"); err != nil {
				return nil, err
			}
			return x, nil
		case "[":
			p.next()
			elems, err := p.list("]")
			if err != nil {
				return nil, err
			}
			return ListLit{Elems: elems}, nil
		case "<<":
			p.next()
			elems, err := p.list(">>")
			if err != nil {
				return nil, err
			}
			if len(elems) == 0 {
				return nil, attr.Validation("Empty bags are not supported")
			}
			return SetLit{Elems: elems}, nil
		case "{":
			p.next()
			return p.mapLit()
		}
	}
	if t.kind == tInvalid {
		return nil, attr.Validation("Unsupported token in expression: " + clip(t.text))
	}
	return nil, p.unexpected()
}

func number(s string) (Expr, error) {
	v, err := attr.NumValue(s)
	if err != nil {
		return nil, err
	}
	return Lit{V: v}, nil
}

// list reads value expressions up to closer (already past the opener).
func (p *parser) list(closer string) ([]Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var out []Expr
	if p.acceptPunct(closer) {
		return out, nil
	}
	for {
		e, err := p.or()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		if !p.acceptPunct(",") {
			break
		}
	}
	if err := p.expectPunct(closer); err != nil {
		return nil, err
	}
	return out, nil
}

func (p *parser) mapLit() (Expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	m := MapLit{}
	if p.acceptPunct("}") {
		return m, nil
	}
	for {
		if err := p.step(); err != nil {
			return nil, err
		}
		t := p.peek()
		if t.kind != tString {
			if t.kind == tQIdent || t.kind == tIdent || t.kind == tNumber {
				return nil, attr.Validation("Tuple keys must be of type String. Actual type: " + map[tokKind]string{tQIdent: "identifier", tIdent: "identifier", tNumber: "number"}[t.kind] + " under " + clip(t.text))
			}
			return nil, p.unexpected()
		}
		p.next()
		if err := p.expectPunct(":"); err != nil {
			return nil, err
		}
		v, err := p.or()
		if err != nil {
			return nil, err
		}
		m.Keys = append(m.Keys, t.text)
		m.Vals = append(m.Vals, v)
		if !p.acceptPunct(",") {
			break
		}
	}
	if err := p.expectPunct("}"); err != nil {
		return nil, err
	}
	return m, nil
}

func (p *parser) call() (Expr, error) {
	t := p.next()
	p.next() // (
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	c := Call{Name: strings.ToLower(t.text)}
	if !p.acceptPunct(")") {
		for {
			e, err := p.or()
			if err != nil {
				return nil, err
			}
			c.Args = append(c.Args, e)
			if !p.acceptPunct(",") {
				break
			}
		}
		if err := p.expectPunct(")"); err != nil {
			return nil, err
		}
	}
	return c, nil
}
