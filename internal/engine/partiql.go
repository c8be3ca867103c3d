package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/expr"
	"github.com/extenddb/extenddb/internal/partiql"
)

// PartiQL (ExecuteStatement, BatchExecuteStatement, ExecuteTransaction):
// a statement is parsed by internal/partiql and lowered onto the engine's
// own operations, written as expressions with generated placeholders:
// SELECT becomes GetItem, Query (one per partition key value) or Scan;
// INSERT, UPDATE and DELETE become PutItem, UpdateItem and DeleteItem with
// conditions; transactions become TransactGetItems or TransactWriteItems.
// Conditions, updates, projections, paging and capacity are therefore the
// same code as the rest of the API.

var errDuplicateItem = newErr(CodeDuplicateItem, "Duplicate primary key exists in table")

const msgIncompleteKey = "Where clause does not contain a mandatory equality on all key attributes"

type ExecuteStatementInput struct {
	Statement                           *string      `json:"Statement"`
	Parameters                          []attr.Value `json:"Parameters"`
	ConsistentRead                      *bool        `json:"ConsistentRead"`
	NextToken                           *string      `json:"NextToken"`
	Limit                               *int64       `json:"Limit"`
	ReturnConsumedCapacity              string       `json:"ReturnConsumedCapacity"`
	ReturnValuesOnConditionCheckFailure string       `json:"ReturnValuesOnConditionCheckFailure"`
}

type ExecuteStatementOutput struct {
	Items            []RawJSON         `json:"Items"`
	NextToken        string            `json:"NextToken,omitempty"`
	LastEvaluatedKey attr.Item         `json:"LastEvaluatedKey,omitempty"`
	ConsumedCapacity *ConsumedCapacity `json:"ConsumedCapacity,omitempty"`
}

// AppendJSON writes the response with the items as they are.
func (o *ExecuteStatementOutput) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"Items":[`...)
	for i, it := range o.Items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, it...)
	}
	dst = append(dst, ']')
	if o.NextToken != "" {
		dst = append(dst, `,"NextToken":`...)
		dst = attr.AppendString(dst, o.NextToken)
	}
	if o.LastEvaluatedKey != nil {
		dst = append(dst, `,"LastEvaluatedKey":`...)
		dst = attr.AppendItem(dst, o.LastEvaluatedKey)
	}
	var err error
	if o.ConsumedCapacity != nil {
		if dst, err = appendMember(dst, false, "ConsumedCapacity", o.ConsumedCapacity); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// lowering writes PartiQL conditions and updates as DynamoDB expressions
// with generated placeholders (#pN for names, :pN for values).
type lowering struct {
	params  []attr.Value
	names   map[string]string
	byName  map[string]string
	values  map[string]attr.Value
	nValues int
}

func newLowering(params []attr.Value) *lowering {
	return &lowering{params: params}
}

func (l *lowering) name(n string) string {
	if ph, ok := l.byName[n]; ok {
		return ph
	}
	if l.names == nil {
		l.names, l.byName = map[string]string{}, map[string]string{}
	}
	ph := "#p" + strconv.Itoa(len(l.names))
	l.names[ph] = n
	l.byName[n] = ph
	return ph
}

func (l *lowering) value(v attr.Value) string {
	if l.values == nil {
		l.values = map[string]attr.Value{}
	}
	ph := ":p" + strconv.Itoa(l.nValues)
	l.nValues++
	l.values[ph] = v
	return ph
}

func (l *lowering) path(p partiql.Path) string {
	var b strings.Builder
	b.WriteString(l.name(p.Name))
	for _, e := range p.Elems {
		if e.IsIndex {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(e.Index))
			b.WriteByte(']')
		} else {
			b.WriteByte('.')
			b.WriteString(l.name(e.Name))
		}
	}
	return b.String()
}

// operand lowers a comparison operand: a path, a value or size(path).
func (l *lowering) operand(x partiql.Expr) (string, error) {
	switch n := x.(type) {
	case partiql.PathExpr:
		return l.path(n.Path), nil
	case partiql.Call:
		if n.Name == "size" {
			return l.call(n)
		}
		if !knownFunction[n.Name] {
			return "", validationf("Unrecognized function: %s", n.Name)
		}
		return "", validationf("Unsupported operation: %s used as an operand", n.Name)
	case partiql.Binary:
		if n.Op == "+" || n.Op == "-" {
			return "", validationf("Unsupported operator in Condition Expression. Operator: %s", n.Op)
		}
		return "", validationf("The arguments to AND/OR must be Expressions")
	}
	if partiql.IsValue(x) {
		v, err := partiql.Value(x, l.params)
		if err != nil {
			return "", err
		}
		return l.value(v), nil
	}
	return "", validationf("Unsupported operation: a condition used as an operand")
}

var knownFunction = map[string]bool{"begins_with": true, "contains": true, "attribute_type": true,
	"attribute_exists": true, "attribute_not_exists": true, "size": true}

func (l *lowering) call(c partiql.Call) (string, error) {
	if !knownFunction[c.Name] {
		return "", validationf("Unrecognized function: %s", c.Name)
	}
	var b strings.Builder
	b.WriteString(c.Name)
	b.WriteByte('(')
	for i, a := range c.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		s, err := l.operand(a)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	b.WriteByte(')')
	return b.String(), nil
}

const msgNotBoolean = "WHERE clause must contain an expression that resolves to a boolean"

// cond lowers a condition.
func (l *lowering) cond(x partiql.Expr) (string, error) {
	switch n := x.(type) {
	case partiql.Binary:
		switch n.Op {
		case "AND", "OR":
			a, err := l.cond(n.L)
			if err != nil {
				return "", err
			}
			b, err := l.cond(n.R)
			if err != nil {
				return "", err
			}
			return "(" + a + " " + n.Op + " " + b + ")", nil
		case "+", "-":
			return "", validationf(msgNotBoolean)
		}
		a, err := l.operand(n.L)
		if err != nil {
			return "", err
		}
		b, err := l.operand(n.R)
		if err != nil {
			return "", err
		}
		return a + " " + n.Op + " " + b, nil
	case partiql.Not:
		a, err := l.cond(n.X)
		if err != nil {
			return "", err
		}
		return "(NOT " + a + ")", nil
	case partiql.Between:
		a, err := l.operand(n.X)
		if err != nil {
			return "", err
		}
		lo, err := l.operand(n.Lo)
		if err != nil {
			return "", err
		}
		hi, err := l.operand(n.Hi)
		if err != nil {
			return "", err
		}
		return a + " BETWEEN " + lo + " AND " + hi, nil
	case partiql.In:
		a, err := l.operand(n.X)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		b.WriteString(a)
		b.WriteString(" IN (")
		for i, e := range n.List {
			if i > 0 {
				b.WriteString(", ")
			}
			s, err := l.operand(e)
			if err != nil {
				return "", err
			}
			b.WriteString(s)
		}
		b.WriteByte(')')
		return b.String(), nil
	case partiql.Is:
		p, ok := n.X.(partiql.PathExpr)
		if !ok {
			return "", validationf("The left hand side argument to IS must be a Variable Reference, Literal, or Path")
		}
		ps := l.path(p.Path)
		if n.What == "MISSING" {
			if n.Not {
				return "attribute_exists(" + ps + ")", nil
			}
			return "attribute_not_exists(" + ps + ")", nil
		}
		// IS [NOT] NULL tests the value's type, as the service's IS does
		// ("the operand is a given data type"): a missing attribute is
		// not NULL (IS NOT NULL is true for it); IS MISSING tests absence.
		s := "attribute_type(" + ps + ", " + l.value(attr.StrValue("NULL")) + ")"
		if n.Not {
			s = "(NOT " + s + ")"
		}
		return s, nil
	case partiql.Call:
		if n.Name == "size" {
			return "", validationf(msgNotBoolean)
		}
		return l.call(n)
	}
	return "", validationf(msgNotBoolean)
}

// conds lowers conjuncts joined by AND; "" when there are none.
func (l *lowering) conds(xs []partiql.Expr) (string, error) {
	parts := make([]string, 0, len(xs))
	for _, x := range xs {
		s, err := l.cond(x)
		if err != nil {
			return "", err
		}
		parts = append(parts, s)
	}
	return checkLowered(strings.Join(parts, " AND "), "WHERE clause")
}

// checkLowered refuses a clause whose translation exceeds the expression
// length limit, naming the clause the statement has (the service would
// otherwise name an expression parameter the request never sent).
func checkLowered(s, what string) (string, error) {
	if len(s) > expr.MaxExpressionLength {
		return "", validationf("The %s is too long: written as a DynamoDB expression it has %d bytes, and an expression may have at most %d", what, len(s), expr.MaxExpressionLength)
	}
	return s, nil
}

// keyEquality returns the value a conjunct pins a top-level attribute to
// (name = value or value = name).
func keyEquality(x partiql.Expr) (string, partiql.Expr, bool) {
	b, ok := x.(partiql.Binary)
	if !ok || b.Op != "=" {
		return "", nil, false
	}
	if p, ok := b.L.(partiql.PathExpr); ok && p.Path.IsTop() && partiql.IsValue(b.R) {
		return p.Path.Name, b.R, true
	}
	if p, ok := b.R.(partiql.PathExpr); ok && p.Path.IsTop() && partiql.IsValue(b.L) {
		return p.Path.Name, b.L, true
	}
	return "", nil, false
}

// fullKey takes from the conjuncts one equality on every key attribute
// and returns the key and the conjuncts left; ok is false when a key
// attribute has none.
func fullKey(conj []partiql.Expr, keys []keyAttr, params []attr.Value) (attr.Item, []partiql.Expr, bool, error) {
	key := attr.Item{}
	rest := make([]partiql.Expr, 0, len(conj))
	for _, c := range conj {
		if n, v, ok := keyEquality(c); ok {
			if _, have := key[n]; !have && isKeyName(keys, n) {
				val, err := partiql.Value(v, params)
				if err != nil {
					return nil, nil, false, err
				}
				key[n] = val
				continue
			}
		}
		rest = append(rest, c)
	}
	return key, rest, len(key) == len(keys), nil
}

func isKeyName(keys []keyAttr, n string) bool {
	for _, k := range keys {
		if k.Name == n {
			return true
		}
	}
	return false
}

func tableKeys(t *table) []keyAttr {
	ks := []keyAttr{t.Hash}
	if t.Range != nil {
		ks = append(ks, *t.Range)
	}
	return ks
}

// statementCache keeps parsed statements by their text, since
// applications send the same parameterized statements again and again. A
// parsed Statement is never changed. It holds at most
// maxCachedStatements statements of maxCachedStatementBytes in all, and
// starts over when full.
type statementCache struct {
	mu    sync.Mutex
	m     map[string]*partiql.Statement
	bytes int
}

const (
	maxCachedStatements     = 4096
	maxCachedStatementBytes = 4 << 20
)

func (c *statementCache) parse(s string) (*partiql.Statement, error) {
	c.mu.Lock()
	st := c.m[s]
	c.mu.Unlock()
	if st != nil {
		return st, nil
	}
	st, err := partiql.Parse(s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedStatements || c.bytes+len(s) > maxCachedStatementBytes {
		c.m, c.bytes = map[string]*partiql.Statement{}, 0
	}
	if _, ok := c.m[s]; !ok {
		c.m[s] = st
		c.bytes += len(s)
	}
	c.mu.Unlock()
	return st, nil
}

// parseStatement parses a statement (or finds it parsed) and checks its
// parameters.
func (e *Engine) parseStatement(s *string, params []attr.Value) (*partiql.Statement, error) {
	if s == nil {
		return nil, validationf("1 validation error detected: Value null at 'statement' failed to satisfy constraint: Member must not be null")
	}
	st, err := e.statements.parse(*s)
	if err != nil {
		return nil, err
	}
	if params != nil && len(params) == 0 {
		return nil, validationf("1 validation error detected: Value '[]' at 'parameters' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	if err := st.CheckParams(params); err != nil {
		return nil, err
	}
	if st.Table != "" && (len(st.Table) < 3 || len(st.Table) > 255 || !validTableChars(st.Table)) {
		return nil, validationf("Table name should be within the length [3, 255] and only contain 'a-z', 'A-Z', '0-9', '-', '_', '.'.")
	}
	return st, nil
}

func validTableChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ExecuteStatement runs one PartiQL statement.
func (e *Engine) ExecuteStatement(ctx context.Context, account string, in *ExecuteStatementInput) (*ExecuteStatementOutput, error) {
	st, err := e.parseStatement(in.Statement, in.Parameters)
	if err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if _, err := checkReturnValuesOnCCF(in.ReturnValuesOnConditionCheckFailure); err != nil {
		return nil, err
	}
	if in.NextToken != nil && (len(*in.NextToken) < 1 || len(*in.NextToken) > 32768) {
		return nil, validationf("1 validation error detected: Value at 'nextToken' failed to satisfy constraint: Member must have length less than or equal to 32768")
	}
	if st.Kind != partiql.Select && (in.NextToken != nil || in.Limit != nil) {
		// Paging parameters mean nothing to a write; DynamoDB ignores them.
		in.NextToken, in.Limit = nil, nil
	}
	switch st.Kind {
	case partiql.Select:
		return e.execSelect(ctx, account, st, in)
	case partiql.Exists:
		return nil, validationf("EXISTS can only be used in ExecuteTransaction write requests.")
	}
	item, err := e.execWrite(ctx, account, st, in.Parameters, in.ReturnConsumedCapacity, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	out := &ExecuteStatementOutput{Items: []RawJSON{}, ConsumedCapacity: item.ConsumedCapacity}
	if item.Attributes != nil && st.Returning != "" {
		out.Items = append(out.Items, attr.EncodeItem(item.Attributes))
	}
	return out, nil
}

// execWrite runs INSERT, UPDATE or DELETE as PutItem, UpdateItem or
// DeleteItem.
func (e *Engine) execWrite(ctx context.Context, account string, st *partiql.Statement, params []attr.Value, rcc, onCCF string) (*ItemOutput, error) {
	t, err := e.loadTable(ctx, account, st.Table)
	if err != nil {
		return nil, err
	}
	switch st.Kind {
	case partiql.Insert:
		in, err := insertInput(t, st, params)
		if err != nil {
			return nil, err
		}
		in.ReturnConsumedCapacity, in.ReturnValuesOnConditionCheckFailure = rcc, onCCF
		out, err := e.PutItem(ctx, account, in)
		var ee *Error
		if errors.As(err, &ee) && ee.Code == CodeConditionalCheckFailed {
			d := *errDuplicateItem
			return nil, &d
		}
		return out, err
	case partiql.Update:
		in, err := updateInput(t, st, params)
		if err != nil {
			return nil, err
		}
		in.ReturnConsumedCapacity, in.ReturnValuesOnConditionCheckFailure = rcc, onCCF
		in.ReturnValues = st.Returning
		return e.UpdateItem(ctx, account, in)
	case partiql.Delete:
		in, err := deleteInput(t, st, params)
		if err != nil {
			return nil, err
		}
		in.ReturnConsumedCapacity, in.ReturnValuesOnConditionCheckFailure = rcc, onCCF
		in.ReturnValues = st.Returning
		return e.DeleteItem(ctx, account, in)
	}
	return nil, validationf("Unsupported operation: %s", st.Kind)
}

func insertInput(t *table, st *partiql.Statement, params []attr.Value) (*PutItemInput, error) {
	item, err := partiql.Item(st.Value, params)
	if err != nil {
		return nil, err
	}
	l := newLowering(params)
	cond := "attribute_not_exists(" + l.name(t.Hash.Name) + ")"
	name := st.Table
	return &PutItemInput{TableName: &name, Item: item, ConditionExpression: &cond, ExpressionAttributeNames: l.names}, nil
}

func updateInput(t *table, st *partiql.Statement, params []attr.Value) (*UpdateItemInput, error) {
	key, rest, ok, err := fullKey(partiql.Conjuncts(st.Where), tableKeys(t), params)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, validationf(msgIncompleteKey)
	}
	l := newLowering(params)
	upd, err := l.update(st.Actions)
	if err != nil {
		return nil, err
	}
	cond := "attribute_exists(" + l.name(t.Hash.Name) + ")"
	if len(rest) > 0 {
		c, err := l.conds(rest)
		if err != nil {
			return nil, err
		}
		cond += " AND " + c
	}
	name := st.Table
	return &UpdateItemInput{TableName: &name, Key: key, UpdateExpression: &upd, ConditionExpression: &cond,
		ExpressionAttributeNames: l.names, ExpressionAttributeValues: l.values}, nil
}

func deleteInput(t *table, st *partiql.Statement, params []attr.Value) (*DeleteItemInput, error) {
	key, rest, ok, err := fullKey(partiql.Conjuncts(st.Where), tableKeys(t), params)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, validationf(msgIncompleteKey)
	}
	in := &DeleteItemInput{TableName: &st.Table, Key: key}
	if len(rest) > 0 {
		// A missing item is deleted successfully (nothing happens); an
		// existing one must meet the rest of the WHERE clause.
		l := newLowering(params)
		c, err := l.conds(rest)
		if err != nil {
			return nil, err
		}
		cond := "attribute_not_exists(" + l.name(t.Hash.Name) + ") OR (" + c + ")"
		in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = &cond, l.names, l.values
	}
	return in, nil
}

// update lowers UPDATE's SET and REMOVE clauses to an UpdateExpression;
// SET x = set_add(x, s) and set_delete become ADD and DELETE.
func (l *lowering) update(actions []partiql.Action) (string, error) {
	var set, remove, add, del []string
	for _, a := range actions {
		target := l.path(a.Path)
		if a.Value == nil {
			remove = append(remove, target)
			continue
		}
		if c, ok := a.Value.(partiql.Call); ok && (c.Name == "set_add" || c.Name == "set_delete") {
			op := strings.ToUpper(strings.TrimPrefix(c.Name, "set_"))
			if len(c.Args) != 2 {
				return "", validationf("SET_%s must have exactly two arguments", op)
			}
			if p, ok := c.Args[0].(partiql.PathExpr); !ok || !p.Path.Equal(a.Path) {
				return "", validationf("The first argument to SET_%s must equal the assignment value", op)
			}
			v, err := partiql.Value(c.Args[1], l.params)
			if err != nil || !v.Type.IsSet() {
				return "", validationf("The second argument to SET_%s must be a value with type SET", op)
			}
			clause := target + " " + l.value(v)
			if op == "ADD" {
				add = append(add, clause)
			} else {
				del = append(del, clause)
			}
			continue
		}
		v, err := l.setValue(a.Value)
		if err != nil {
			return "", err
		}
		set = append(set, target+" = "+v)
	}
	var b strings.Builder
	for _, part := range []struct {
		kw      string
		clauses []string
	}{{"SET", set}, {"REMOVE", remove}, {"ADD", add}, {"DELETE", del}} {
		if len(part.clauses) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(part.kw)
		b.WriteByte(' ')
		b.WriteString(strings.Join(part.clauses, ", "))
	}
	return checkLowered(b.String(), "SET and REMOVE clause")
}

// setValue lowers the right side of SET: a value, a path, + and -,
// list_append and if_not_exists.
func (l *lowering) setValue(x partiql.Expr) (string, error) {
	switch n := x.(type) {
	case partiql.PathExpr:
		return l.path(n.Path), nil
	case partiql.Binary:
		if n.Op != "+" && n.Op != "-" {
			return "", validationf("Unsupported operator in Update Expression. Operator: %s", n.Op)
		}
		a, err := l.setValue(n.L)
		if err != nil {
			return "", err
		}
		b, err := l.setValue(n.R)
		if err != nil {
			return "", err
		}
		return a + " " + n.Op + " " + b, nil
	case partiql.Call:
		if n.Name != "list_append" && n.Name != "if_not_exists" {
			if n.Name == "set_add" || n.Name == "set_delete" {
				return "", validationf("The first argument to SET_%s must equal the assignment value", strings.ToUpper(strings.TrimPrefix(n.Name, "set_")))
			}
			return "", validationf("Unrecognized function: %s", n.Name)
		}
		var b strings.Builder
		b.WriteString(n.Name)
		b.WriteByte('(')
		for i, a := range n.Args {
			if i > 0 {
				b.WriteString(", ")
			}
			s, err := l.setValue(a)
			if err != nil {
				return "", err
			}
			b.WriteString(s)
		}
		b.WriteByte(')')
		return b.String(), nil
	case partiql.Is:
		return "", validationf("IS operator is not supported in update expressions")
	}
	if partiql.IsValue(x) {
		v, err := partiql.Value(x, l.params)
		if err != nil {
			return "", err
		}
		return l.value(v), nil
	}
	return "", validationf("Unsupported operator in Update Expression")
}

// selectPlan is a SELECT lowered onto GetItem, Query or Scan.
type selectPlan struct {
	t          *table
	index      string
	hash       keyAttr
	rng        *keyAttr
	getKey     attr.Item      // GetItem when set
	hashValues []attr.Value   // Query per value when set
	rangeCond  partiql.Expr   // the sort key condition of the Query
	rest       []partiql.Expr // the filter
	desc       bool
}

func (e *Engine) planSelect(ctx context.Context, account string, st *partiql.Statement, params []attr.Value) (*selectPlan, error) {
	t, err := e.loadTable(ctx, account, st.Table)
	if err != nil {
		return nil, err
	}
	p := &selectPlan{t: t, index: st.Index, hash: t.Hash, rng: t.Range}
	if st.Index != "" {
		ix := t.index(st.Index)
		if ix == nil {
			return nil, validationf("The table does not have the specified index: %s", st.Index)
		}
		p.hash, p.rng = ix.Hash, ix.Range
	}
	conj := partiql.Conjuncts(st.Where)
	// The partition key: one equality, IN or OR of equalities of values.
	hashAt := -1
	for i, c := range conj {
		vals, ok, err := partitionValues(c, p.hash, params)
		if err != nil {
			return nil, err
		}
		if ok {
			p.hashValues, hashAt = vals, i
			break
		}
	}
	if hashAt >= 0 {
		for i, c := range conj {
			if i == hashAt {
				continue
			}
			if p.rng != nil && p.rangeCond == nil && isRangeCond(c, p.rng.Name) {
				p.rangeCond = attributeFirst(c)
				continue
			}
			p.rest = append(p.rest, c)
		}
	} else {
		p.rest = conj
	}
	if err := p.order(st); err != nil {
		return nil, err
	}
	// One item by its full primary key: GetItem.
	if st.Index == "" && len(p.hashValues) == 1 && len(p.rest) == 0 {
		if p.rng == nil && p.rangeCond == nil {
			p.getKey = attr.Item{p.hash.Name: p.hashValues[0]}
		} else if p.rng != nil && p.rangeCond != nil {
			if n, v, ok := keyEquality(p.rangeCond); ok && n == p.rng.Name {
				val, err := partiql.Value(v, params)
				if err != nil {
					return nil, err
				}
				p.getKey = attr.Item{p.hash.Name: p.hashValues[0], n: val}
			}
		}
	}
	return p, nil
}

func allValues(xs []partiql.Expr) bool {
	for _, x := range xs {
		if !partiql.IsValue(x) {
			return false
		}
	}
	return true
}

// partitionValues returns the partition key values a conjunct pins the
// key to: name = value, name IN (values), or an OR whose every branch is
// one of these (planned as one Query per value, as the service does). An
// OR with a value of another type than the key's stays a filter, so that
// it matches nothing rather than failing. A value named twice is read once.
func partitionValues(c partiql.Expr, hash keyAttr, params []attr.Value) ([]attr.Value, bool, error) {
	isKey := func(x partiql.Expr) bool {
		px, ok := x.(partiql.PathExpr)
		return ok && px.Path.IsTop() && px.Path.Name == hash.Name
	}
	var exprs []partiql.Expr
	or := false
	stack := []partiql.Expr{c}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch n := x.(type) {
		case partiql.Binary:
			if n.Op == "OR" {
				or = true
				stack = append(stack, n.R, n.L)
				continue
			}
			if name, v, ok := keyEquality(n); ok && name == hash.Name {
				exprs = append(exprs, v)
				continue
			}
		case partiql.In:
			if isKey(n.X) && allValues(n.List) {
				exprs = append(exprs, n.List...)
				continue
			}
		}
		return nil, false, nil
	}
	vals := make([]attr.Value, 0, len(exprs))
	seen := make(map[string]bool, len(exprs))
	for _, x := range exprs {
		v, err := partiql.Value(x, params)
		if err != nil {
			return nil, false, err
		}
		if or && v.Type != hash.Type {
			return nil, false, nil
		}
		if k, ok := attr.KeyBytes(v); ok {
			id := string(rune(v.Type)) + string(k)
			if seen[id] {
				continue
			}
			seen[id] = true
		}
		vals = append(vals, v)
	}
	return vals, true, nil
}

// isRangeCond reports whether c is a condition a Query's sort key
// condition can express: a comparison or BETWEEN of the attribute with
// values, or begins_with(attribute, value).
func isRangeCond(c partiql.Expr, name string) bool {
	isAttr := func(x partiql.Expr) bool {
		p, ok := x.(partiql.PathExpr)
		return ok && p.Path.IsTop() && p.Path.Name == name
	}
	switch n := c.(type) {
	case partiql.Binary:
		switch n.Op {
		case "=", "<", "<=", ">", ">=":
			return isAttr(n.L) && partiql.IsValue(n.R) || isAttr(n.R) && partiql.IsValue(n.L)
		}
	case partiql.Between:
		return isAttr(n.X) && partiql.IsValue(n.Lo) && partiql.IsValue(n.Hi)
	case partiql.Call:
		return n.Name == "begins_with" && len(n.Args) == 2 && isAttr(n.Args[0]) && partiql.IsValue(n.Args[1])
	}
	return false
}

// attributeFirst writes value < attribute as attribute > value: a key
// condition names the key attribute first.
func attributeFirst(c partiql.Expr) partiql.Expr {
	b, ok := c.(partiql.Binary)
	if !ok || !partiql.IsValue(b.L) {
		return c
	}
	flip := map[string]string{"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
	return partiql.Binary{Op: flip[b.Op], L: b.R, R: b.L}
}

// order applies ORDER BY: the partition key orders the IN values, the
// sort key the direction of each Query.
func (p *selectPlan) order(st *partiql.Statement) error {
	if len(st.OrderBy) == 0 {
		return nil
	}
	if st.Where == nil {
		return validationf("Must have WHERE clause in the statement when using ORDER BY clause.")
	}
	if len(p.hashValues) == 0 {
		return validationf("Must have at least one non-optional hash key condition in WHERE clause when using ORDER BY clause.")
	}
	hashDesc := false
	for _, o := range st.OrderBy {
		switch {
		case o.Path.IsTop() && o.Path.Name == p.hash.Name:
			hashDesc = o.Desc
		case o.Path.IsTop() && p.rng != nil && o.Path.Name == p.rng.Name:
			p.desc = o.Desc
		default:
			return validationf("Variable reference %s in ORDER BY clause must be part of the primary key", o.Path.Name)
		}
	}
	if len(p.hashValues) > 1 {
		keys := make([][]byte, len(p.hashValues))
		for i, v := range p.hashValues {
			keys[i], _ = attr.KeyBytes(v)
		}
		idx := make([]int, len(keys))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool {
			c := bytes.Compare(keys[idx[a]], keys[idx[b]])
			if hashDesc {
				return c > 0
			}
			return c < 0
		})
		vals := make([]attr.Value, len(idx))
		for i, j := range idx {
			vals[i] = p.hashValues[j]
		}
		p.hashValues = vals
	}
	return nil
}

// pageToken is the NextToken of a SELECT: which partition key value (of
// an IN) the next page starts at, the key to continue after, and a hash of
// the request it belongs to.
type pageToken struct {
	Hash uint64          `json:"h"`
	I    int             `json:"i"`
	Key  json.RawMessage `json:"k,omitempty"`
}

func requestHash(st string, params []attr.Value) uint64 {
	h := fnv.New64a()
	h.Write([]byte(st))
	for _, p := range params {
		h.Write([]byte{0})
		h.Write(attr.AppendValue(nil, p))
	}
	return h.Sum64()
}

func encodeToken(tok pageToken) string {
	b, _ := json.Marshal(tok)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeToken(s string, want uint64) (pageToken, attr.Item, error) {
	var tok pageToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(b, &tok) != nil || tok.I < 0 {
		return tok, nil, validationf("Invalid NextToken")
	}
	if tok.Hash != want {
		return tok, nil, validationf("NextToken does not match request")
	}
	var key attr.Item
	if len(tok.Key) > 0 {
		if key, err = attr.DecodeItem(tok.Key); err != nil {
			return tok, nil, validationf("Invalid NextToken")
		}
	}
	return tok, key, nil
}

// execSelect runs a SELECT as the GetItem, Scan or Queries planSelect
// chose.
func (e *Engine) execSelect(ctx context.Context, account string, st *partiql.Statement, in *ExecuteStatementInput) (*ExecuteStatementOutput, error) {
	p, err := e.planSelect(ctx, account, st, in.Parameters)
	if err != nil {
		return nil, err
	}
	if in.Limit != nil {
		if _, err := checkLimit(in.Limit); err != nil {
			return nil, err
		}
	}
	rh := requestHash(*in.Statement, in.Parameters)
	var tok pageToken
	var startKey attr.Item
	if in.NextToken != nil {
		if tok, startKey, err = decodeToken(*in.NextToken, rh); err != nil {
			return nil, err
		}
	}
	switch {
	case p.getKey != nil:
		if in.NextToken != nil {
			// A single item has no second page.
			return &ExecuteStatementOutput{Items: []RawJSON{}}, nil
		}
		return e.selectItem(ctx, account, st, in, p)
	case len(p.hashValues) == 0:
		return e.selectScan(ctx, account, st, in, p, rh, startKey)
	}
	return e.selectQueries(ctx, account, st, in, p, rh, tok.I, startKey)
}

// selectItem reads the one item a SELECT names by its full primary key.
func (e *Engine) selectItem(ctx context.Context, account string, st *partiql.Statement, in *ExecuteStatementInput, p *selectPlan) (*ExecuteStatementOutput, error) {
	gin := &GetItemInput{TableName: &st.Table, Key: p.getKey, ConsistentRead: in.ConsistentRead, ReturnConsumedCapacity: in.ReturnConsumedCapacity}
	if st.Projection != nil {
		l := newLowering(nil)
		pe := l.projection(st.Projection)
		gin.ProjectionExpression, gin.ExpressionAttributeNames = &pe, l.names
	}
	g, err := e.GetItem(ctx, account, gin)
	if err != nil {
		return nil, err
	}
	out := &ExecuteStatementOutput{Items: []RawJSON{}, ConsumedCapacity: g.ConsumedCapacity}
	if g.Item != nil {
		out.Items = append(out.Items, g.Item)
	}
	return out, nil
}

// selectScan reads one page of a SELECT without a partition key condition.
func (e *Engine) selectScan(ctx context.Context, account string, st *partiql.Statement, in *ExecuteStatementInput, p *selectPlan, rh uint64, startKey attr.Item) (*ExecuteStatementOutput, error) {
	l := newLowering(in.Parameters)
	sin := &ScanInput{TableName: &st.Table, IndexName: optString(st.Index), ConsistentRead: in.ConsistentRead,
		Limit: in.Limit, ExclusiveStartKey: startKey, ReturnConsumedCapacity: in.ReturnConsumedCapacity}
	if len(p.rest) > 0 {
		f, err := l.conds(p.rest)
		if err != nil {
			return nil, err
		}
		sin.FilterExpression = &f
	}
	if st.Projection != nil {
		pe := l.projection(st.Projection)
		sin.ProjectionExpression = &pe
	}
	sin.ExpressionAttributeNames, sin.ExpressionAttributeValues = l.names, l.values
	q, err := e.Scan(ctx, account, sin)
	if err != nil {
		return nil, err
	}
	out := &ExecuteStatementOutput{Items: []RawJSON{}}
	appendPage(out, q)
	if q.LastEvaluatedKey != nil {
		out.LastEvaluatedKey = q.LastEvaluatedKey
		out.NextToken = encodeToken(pageToken{Hash: rh, Key: attr.AppendItem(nil, q.LastEvaluatedKey)})
	}
	return out, nil
}

// selectQueries reads one page of a SELECT with partition key values: a
// Query per value, from value start (after startKey), until the values
// are done or the page is full. Limit and the 1 MB bound count what every
// Query of the page read.
func (e *Engine) selectQueries(ctx context.Context, account string, st *partiql.Statement, in *ExecuteStatementInput, p *selectPlan, rh uint64, start int, startKey attr.Item) (*ExecuteStatementOutput, error) {
	out := &ExecuteStatementOutput{Items: []RawJSON{}}
	remaining := int64(-1)
	if in.Limit != nil {
		remaining = *in.Limit
	}
	budget := maxPageBytes
	for i := start; i < len(p.hashValues); i++ {
		qin, err := p.queryInput(st, in, i)
		if err != nil {
			return nil, err
		}
		if i == start {
			qin.ExclusiveStartKey = startKey
		}
		if remaining >= 0 {
			lim := remaining
			qin.Limit = &lim
		}
		qin.pageBytes = budget
		q, err := e.Query(ctx, account, qin)
		if err != nil {
			return nil, err
		}
		appendPage(out, q)
		if q.LastEvaluatedKey != nil {
			out.LastEvaluatedKey = q.LastEvaluatedKey
			out.NextToken = encodeToken(pageToken{Hash: rh, I: i, Key: attr.AppendItem(nil, q.LastEvaluatedKey)})
			return out, nil
		}
		budget -= q.scannedBytes
		if remaining >= 0 {
			remaining -= int64(q.ScannedCount)
		}
		if (remaining == 0 || budget <= 0) && i+1 < len(p.hashValues) {
			out.NextToken = encodeToken(pageToken{Hash: rh, I: i + 1})
			return out, nil
		}
	}
	return out, nil
}

// queryInput writes the Query of the i-th partition key value.
func (p *selectPlan) queryInput(st *partiql.Statement, in *ExecuteStatementInput, i int) (*QueryInput, error) {
	l := newLowering(in.Parameters)
	kc := l.name(p.hash.Name) + " = " + l.value(p.hashValues[i])
	if p.rangeCond != nil {
		c, err := l.cond(p.rangeCond)
		if err != nil {
			return nil, err
		}
		kc += " AND " + c
	}
	forward := !p.desc
	qin := &QueryInput{TableName: &st.Table, IndexName: optString(st.Index), KeyConditionExpression: &kc,
		ConsistentRead: in.ConsistentRead, ScanIndexForward: &forward, ReturnConsumedCapacity: in.ReturnConsumedCapacity}
	if len(p.rest) > 0 {
		f, err := l.conds(p.rest)
		if err != nil {
			return nil, err
		}
		qin.FilterExpression = &f
	}
	if st.Projection != nil {
		pe := l.projection(st.Projection)
		qin.ProjectionExpression = &pe
	}
	qin.ExpressionAttributeNames, qin.ExpressionAttributeValues = l.names, l.values
	return qin, nil
}

func appendPage(out *ExecuteStatementOutput, q *QueryOutput) {
	if q.Items != nil {
		out.Items = append(out.Items, *q.Items...)
	}
	if q.ConsumedCapacity != nil {
		if out.ConsumedCapacity == nil {
			c := *q.ConsumedCapacity
			out.ConsumedCapacity = &c
		} else {
			out.ConsumedCapacity.CapacityUnits += q.ConsumedCapacity.CapacityUnits
		}
	}
}

func (l *lowering) projection(paths []partiql.Path) string {
	parts := make([]string, len(paths))
	for i, p := range paths {
		parts[i] = l.path(p)
	}
	return strings.Join(parts, ", ")
}
