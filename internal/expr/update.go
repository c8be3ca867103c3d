package expr

import (
	"bytes"
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
)

// ActionKind is the clause an update action belongs to.
type ActionKind uint8

// The update clauses.
const (
	ActionSet ActionKind = iota + 1
	ActionRemove
	ActionAdd
	ActionDelete
)

// String returns the clause keyword.
func (k ActionKind) String() string {
	switch k {
	case ActionSet:
		return "SET"
	case ActionRemove:
		return "REMOVE"
	case ActionAdd:
		return "ADD"
	case ActionDelete:
		return "DELETE"
	}
	return "?"
}

type action struct {
	kind ActionKind
	path Path
	val  *operand // SET: value expression; ADD/DELETE: the value
}

// Update is a parsed UpdateExpression.
type Update struct {
	actions []action
}

// ParseUpdate parses and validates an update expression.
func ParseUpdate(s string, env *Env) (*Update, error) {
	const kind = KindUpdate
	if err := prelude(kind, s); err != nil {
		return nil, err
	}
	p := newParser(kind, s, env)
	p.update = true
	u := &Update{}
	seen := map[ActionKind]bool{}
	for {
		t := p.peek()
		var ak ActionKind
		switch {
		case isKeyword(t, "SET"):
			ak = ActionSet
		case isKeyword(t, "REMOVE"):
			ak = ActionRemove
		case isKeyword(t, "ADD"):
			ak = ActionAdd
		case isKeyword(t, "DELETE"):
			ak = ActionDelete
		default:
			return nil, p.wrapSyntax(p.syntax())
		}
		p.next()
		if seen[ak] {
			p.fail(catSection, "The \""+ak.String()+"\" section can only be used once in an update expression;")
		}
		seen[ak] = true
		for {
			a, err := p.parseAction(ak)
			if err != nil {
				return nil, p.wrapSyntax(err)
			}
			u.actions = append(u.actions, a)
			if p.peekKind() != tComma {
				break
			}
			p.next()
		}
		if p.peekKind() == tEOF {
			break
		}
	}
	paths := u.UpdatedPaths()
	if msg := checkPathOverlaps(paths); msg != "" {
		p.fail(catOverlap, msg)
	}
	if err := p.updateSemanticError(); err != nil {
		return nil, err
	}
	return u, nil
}

// updateSemanticError orders errors as the service does for update
// expressions: reserved words first.
func (p *parser) updateSemanticError() error {
	order := []int{catReserved, catUnknownFunction, catSection, catUndefined, catOverlap, catOperandCount, catDistinct, catFunction, catParens, catMisusedFunction}
	for _, c := range order {
		if m := p.errs[c]; m != "" {
			return attr.Validation("Invalid " + p.kind.String() + ": " + m)
		}
	}
	return nil
}

func (p *parser) parseAction(ak ActionKind) (action, *syntaxError) {
	path, err := p.parsePath()
	if err != nil {
		return action{}, err
	}
	a := action{kind: ak, path: path}
	switch ak {
	case ActionSet:
		if err := p.expect(tEq); err != nil {
			return action{}, err
		}
		v, err := p.parseSetValue()
		if err != nil {
			return action{}, err
		}
		a.val = v
	case ActionAdd, ActionDelete:
		t := p.peek()
		if t.kind != tValue {
			return action{}, p.syntax()
		}
		v, err := p.parseOperand()
		if err != nil {
			return action{}, err
		}
		if v.defined {
			typ := v.val.Type
			// The service names the set of types the operator allows.
			typeSet := ", typeSet: ALLOWED_FOR_" + ak.String() + "_OPERAND"
			if w, bad := updateTypeWords[typ]; bad && !(ak == ActionAdd && typ == attr.N) {
				p.fail(catFunction, "Incorrect operand type for operator or function; operator: "+ak.String()+", operand type: "+w+typeSet)
			} else if ak == ActionDelete && typ == attr.N {
				p.fail(catFunction, "Incorrect operand type for operator or function; operator: DELETE, operand type: NUMBER"+typeSet)
			}
		}
		a.val = v
	}
	return a, nil
}

// parseSetValue parses operand [+|- operand], optionally parenthesized:
// "(a + b)" and "(a) + b" are both set values. One pass, no backtracking:
// a parenthesized set value followed by + or - becomes the left operand.
func (p *parser) parseSetValue() (*operand, *syntaxError) {
	p.steps++
	var x *operand
	if p.peekKind() == tLParen {
		p.next()
		v, err := p.parseSetValue()
		if err != nil {
			return nil, err
		}
		if err := p.expect(tRParen); err != nil {
			return nil, err
		}
		if t := p.peekKind(); t != tPlus && t != tMinus {
			return v, nil
		}
		if v.kind == opFunc && (v.fn == "+" || v.fn == "-") {
			return nil, p.syntax() // (a + b) + c: one operator only
		}
		x = v
	} else {
		var err *syntaxError
		if x, err = p.parseOperand(); err != nil {
			return nil, err
		}
	}
	t := p.peek()
	if t.kind != tPlus && t.kind != tMinus {
		return x, nil
	}
	if err := p.countOperator(); err != nil {
		return nil, err
	}
	p.next()
	y, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	for _, o := range []*operand{x, y} {
		if typ, ok := o.staticType(); ok && typ != attr.N {
			p.fail(catFunction, operandTypeMsg(t.text, typ))
			break
		}
	}
	return &operand{kind: opFunc, fn: t.text, args: []*operand{x, y}, defined: true}, nil
}

// UpdatedPaths returns the paths the actions touch, in expression order.
func (u *Update) UpdatedPaths() []Path {
	out := make([]Path, len(u.actions))
	for i, a := range u.actions {
		out[i] = a.path
	}
	return out
}

// Actions returns each action's clause and path, in expression order.
func (u *Update) Actions() []struct {
	Kind ActionKind
	Path Path
} {
	out := make([]struct {
		Kind ActionKind
		Path Path
	}, len(u.actions))
	for i, a := range u.actions {
		out[i].Kind, out[i].Path = a.kind, a.path
	}
	return out
}

// Apply runs the update on old (nil for an absent item) and returns the new
// item. old is never modified. Every operand reads the item as it was
// before the update. Errors are *attr.Error validations with the service's
// runtime messages.
func (u *Update) Apply(old attr.Item) (attr.Item, error) {
	type pending struct {
		a   action
		val attr.Value
	}
	// Evaluate every value against the old item first.
	sets := make([]pending, 0, len(u.actions))
	for _, a := range u.actions {
		if a.kind != ActionSet {
			continue
		}
		v, err := evalUpdateOperand(a.val, old)
		if err != nil {
			return nil, err
		}
		sets = append(sets, pending{a, v})
	}
	root := attr.Value{Type: attr.M, Map: map[string]attr.Value(old)}
	if root.Map == nil {
		root.Map = map[string]attr.Value{}
	}
	// Several SETs past the end of one list append in ascending index
	// order, whatever their order in the expression.
	sort.SliceStable(sets, func(i, j int) bool { return comparePaths(sets[i].a.path, sets[j].a.path) < 0 })
	var err error
	for _, s := range sets {
		// A value set below the top level must keep the item within the
		// nesting limit (the wire enforces it on values as sent, at the
		// top level).
		if len(s.a.path) > 1 && (s.val.Type == attr.M || s.val.Type == attr.L) &&
			len(s.a.path)-1+attr.Nesting(s.val) > attr.MaxDepth {
			return nil, errNesting
		}
		root, err = setAt(root, s.a.path, s.val)
		if err != nil {
			return nil, err
		}
	}
	for _, a := range u.actions {
		switch a.kind {
		case ActionAdd:
			cur, exists := a.path.Resolve(old)
			nv, err := addValue(cur, exists, a.val.val)
			if err != nil {
				return nil, err
			}
			if root, err = setAt(root, a.path, nv); err != nil {
				return nil, err
			}
		case ActionDelete:
			cur, exists := a.path.Resolve(old)
			if !exists {
				if _, err := parentFor(root, a.path); err != nil {
					return nil, err
				}
				continue
			}
			nv, empty, err := deleteValue(cur, a.val.val)
			if err != nil {
				return nil, err
			}
			if empty {
				root, err = removeAt(root, a.path)
			} else {
				root, err = setAt(root, a.path, nv)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	// REMOVE last, list indexes from the highest down so that every index
	// refers to the list as it was.
	var removes []Path
	for _, a := range u.actions {
		if a.kind == ActionRemove {
			removes = append(removes, a.path)
		}
	}
	sort.SliceStable(removes, func(i, j int) bool { return comparePaths(removes[i], removes[j]) > 0 })
	for _, path := range removes {
		if root, err = removeAt(root, path); err != nil {
			return nil, err
		}
	}
	return attr.Item(root.Map), nil
}

// comparePaths is a total order on paths in which paths through the same
// list compare by index, numerically (names compare as strings, a name
// before an index).
func comparePaths(a, b Path) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		x, y := a[i], b[i]
		switch {
		case x.IsIndex && y.IsIndex:
			if x.Index != y.Index {
				return cmp.Compare(x.Index, y.Index)
			}
		case x.IsIndex != y.IsIndex:
			if x.IsIndex {
				return 1
			}
			return -1
		case x.Name != y.Name:
			return strings.Compare(x.Name, y.Name)
		}
	}
	return cmp.Compare(len(a), len(b))
}

func evalUpdateOperand(o *operand, item attr.Item) (attr.Value, error) {
	switch o.kind {
	case opValue:
		return o.val, nil
	case opPath:
		v, ok := o.path.Resolve(item)
		if !ok {
			return attr.Value{}, errMissingAttr
		}
		return v, nil
	}
	switch o.fn {
	case "if_not_exists":
		if v, ok := o.args[0].path.Resolve(item); ok {
			return v, nil
		}
		return evalUpdateOperand(o.args[1], item)
	case "list_append":
		a, b, err := evalUpdatePair(o, item)
		if err != nil {
			return attr.Value{}, err
		}
		if a.Type != attr.L || b.Type != attr.L {
			return attr.Value{}, errOperandType
		}
		l := make([]attr.Value, 0, len(a.List)+len(b.List))
		l = append(append(l, a.List...), b.List...)
		return attr.Value{Type: attr.L, List: l}, nil
	case "+", "-":
		a, b, err := evalUpdatePair(o, item)
		if err != nil {
			return attr.Value{}, err
		}
		if a.Type != attr.N || b.Type != attr.N {
			return attr.Value{}, errOperandType
		}
		n, err := attr.AddNumbers(a.Str, b.Str, o.fn == "-")
		if err != nil {
			return attr.Value{}, err
		}
		return attr.Value{Type: attr.N, Str: n}, nil
	}
	return attr.Value{}, errOperandType
}

// addValue computes ADD: numbers add (a missing attribute counts as 0),
// sets union.
func addValue(cur attr.Value, exists bool, v attr.Value) (attr.Value, error) {
	if !exists {
		return v, nil
	}
	if cur.Type != v.Type {
		return attr.Value{}, errOperandType
	}
	switch v.Type {
	case attr.N:
		n, err := attr.AddNumbers(cur.Str, v.Str, false)
		if err != nil {
			return attr.Value{}, err
		}
		return attr.Value{Type: attr.N, Str: n}, nil
	case attr.SS, attr.NS:
		seen := make(map[string]struct{}, len(cur.Strs)+len(v.Strs))
		out := attr.Value{Type: v.Type, Strs: make([]string, 0, len(cur.Strs)+len(v.Strs))}
		for _, s := range append(append([]string(nil), cur.Strs...), v.Strs...) {
			// Members are canonical, so equal numbers have equal text.
			if _, dup := seen[s]; dup {
				continue
			}
			seen[s] = struct{}{}
			out.Strs = append(out.Strs, s)
		}
		attr.SortSet(&out)
		return out, nil
	case attr.BS:
		out := attr.Value{Type: attr.BS, Bins: make([][]byte, 0, len(cur.Bins)+len(v.Bins))}
		out.Bins = append(out.Bins, cur.Bins...)
		for _, b := range v.Bins {
			if !slices.ContainsFunc(cur.Bins, func(x []byte) bool { return bytes.Equal(x, b) }) {
				out.Bins = append(out.Bins, b)
			}
		}
		attr.SortSet(&out)
		return out, nil
	}
	return attr.Value{}, errOperandType
}

// deleteValue computes DELETE: set difference; empty reports that nothing
// is left.
func deleteValue(cur, v attr.Value) (attr.Value, bool, error) {
	if cur.Type != v.Type || !v.Type.IsSet() {
		return attr.Value{}, false, errOperandType
	}
	out := attr.Value{Type: cur.Type}
	switch cur.Type {
	case attr.SS, attr.NS:
		for _, s := range cur.Strs {
			if !slices.ContainsFunc(v.Strs, func(d string) bool {
				return s == d || (cur.Type == attr.NS && attr.CompareNumbers(s, d) == 0)
			}) {
				out.Strs = append(out.Strs, s)
			}
		}
		return out, len(out.Strs) == 0, nil
	default:
		for _, b := range cur.Bins {
			if !slices.ContainsFunc(v.Bins, func(d []byte) bool { return bytes.Equal(b, d) }) {
				out.Bins = append(out.Bins, b)
			}
		}
		return out, len(out.Bins) == 0, nil
	}
}

// parentFor checks that the container of path's last step exists in root
// with the right type.
func parentFor(root attr.Value, path Path) (attr.Value, error) {
	cur := root
	for i, e := range path[:len(path)-1] {
		var ok bool
		if i == 0 || !e.IsIndex {
			if cur.Type != attr.M {
				return attr.Value{}, errInvalidPath
			}
			cur, ok = cur.Map[e.Name]
		} else {
			if cur.Type != attr.L || e.Index >= len(cur.List) {
				return attr.Value{}, errInvalidPath
			}
			cur, ok = cur.List[e.Index], true
		}
		if !ok {
			return attr.Value{}, errInvalidPath
		}
	}
	last := path[len(path)-1]
	if last.IsIndex && cur.Type != attr.L || !last.IsIndex && cur.Type != attr.M {
		return attr.Value{}, errInvalidPath
	}
	return cur, nil
}

// setAt returns a copy of container c with path set to v, copying only the
// containers along the path. An index beyond the end of a list appends.
func setAt(c attr.Value, path Path, v attr.Value) (attr.Value, error) {
	e := path[0]
	if e.IsIndex {
		if c.Type != attr.L {
			return attr.Value{}, errInvalidPath
		}
		l := make([]attr.Value, len(c.List), len(c.List)+1)
		copy(l, c.List)
		if e.Index >= len(l) {
			if len(path) > 1 {
				return attr.Value{}, errInvalidPath
			}
			l = append(l, v)
			return attr.Value{Type: attr.L, List: l}, nil
		}
		if len(path) == 1 {
			l[e.Index] = v
		} else {
			nv, err := setAt(l[e.Index], path[1:], v)
			if err != nil {
				return attr.Value{}, err
			}
			l[e.Index] = nv
		}
		return attr.Value{Type: attr.L, List: l}, nil
	}
	if c.Type != attr.M {
		return attr.Value{}, errInvalidPath
	}
	m := make(map[string]attr.Value, len(c.Map)+1)
	for k, x := range c.Map {
		m[k] = x
	}
	if len(path) == 1 {
		m[e.Name] = v
	} else {
		child, ok := c.Map[e.Name]
		if !ok {
			return attr.Value{}, errInvalidPath
		}
		nv, err := setAt(child, path[1:], v)
		if err != nil {
			return attr.Value{}, err
		}
		m[e.Name] = nv
	}
	return attr.Value{Type: attr.M, Map: m}, nil
}

// removeAt returns a copy of container c without path. A missing last step
// is not an error; a missing or mistyped parent is.
func removeAt(c attr.Value, path Path) (attr.Value, error) {
	e := path[0]
	if e.IsIndex {
		if c.Type != attr.L {
			return attr.Value{}, errInvalidPath
		}
		if e.Index >= len(c.List) {
			if len(path) > 1 {
				return attr.Value{}, errInvalidPath
			}
			return c, nil
		}
		l := make([]attr.Value, 0, len(c.List))
		if len(path) == 1 {
			l = append(append(l, c.List[:e.Index]...), c.List[e.Index+1:]...)
		} else {
			nv, err := removeAt(c.List[e.Index], path[1:])
			if err != nil {
				return attr.Value{}, err
			}
			l = append(l, c.List...)
			l[e.Index] = nv
		}
		return attr.Value{Type: attr.L, List: l}, nil
	}
	if c.Type != attr.M {
		return attr.Value{}, errInvalidPath
	}
	child, ok := c.Map[e.Name]
	if !ok {
		if len(path) > 1 {
			return attr.Value{}, errInvalidPath
		}
		return c, nil
	}
	m := make(map[string]attr.Value, len(c.Map))
	for k, x := range c.Map {
		m[k] = x
	}
	if len(path) == 1 {
		delete(m, e.Name)
	} else {
		nv, err := removeAt(child, path[1:])
		if err != nil {
			return attr.Value{}, err
		}
		m[e.Name] = nv
	}
	return attr.Value{Type: attr.M, Map: m}, nil
}

// evalUpdatePair evaluates a binary operand's two arguments.
func evalUpdatePair(o *operand, item attr.Item) (attr.Value, attr.Value, error) {
	a, err := evalUpdateOperand(o.args[0], item)
	if err != nil {
		return attr.Value{}, attr.Value{}, err
	}
	b, err := evalUpdateOperand(o.args[1], item)
	if err != nil {
		return attr.Value{}, attr.Value{}, err
	}
	return a, b, nil
}
