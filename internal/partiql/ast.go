// Package partiql parses DynamoDB's subset of PartiQL: SELECT, INSERT,
// UPDATE, DELETE and EXISTS (the condition check of a transaction). It
// lexes and parses in one pass, in time linear in the statement (a step
// budget proportional to the input is enforced, and nesting is bounded),
// and binds literals and ? parameters to attribute values. It does no I/O;
// the engine lowers a Statement onto its own operations.
package partiql

import "github.com/extenddb/extenddb/internal/attr"

// MaxStatementLength is the longest statement DynamoDB accepts, in bytes.
const MaxStatementLength = 8192

// MaxDepth bounds the nesting of parentheses, function arguments and
// collection literals. Items nest at most 32 levels on DynamoDB, so a
// deeper statement could not be stored anyway.
const MaxDepth = 64

// Kind is the kind of a statement.
type Kind int

// The statement kinds.
const (
	Select Kind = iota + 1
	Insert
	Update
	Delete
	Exists // EXISTS(SELECT ...): a condition check inside a transaction
)

// String names the kind as a keyword.
func (k Kind) String() string {
	switch k {
	case Select:
		return "SELECT"
	case Insert:
		return "INSERT"
	case Update:
		return "UPDATE"
	case Delete:
		return "DELETE"
	case Exists:
		return "EXISTS"
	}
	return "?"
}

// IsRead reports whether the statement only reads.
func (k Kind) IsRead() bool { return k == Select }

// Statement is a parsed statement.
type Statement struct {
	Kind  Kind
	Table string
	// Index is the index of SELECT ... FROM "table"."index".
	Index string
	// Projection lists the selected paths; nil means *.
	Projection []Path
	Where      Expr // nil when absent
	OrderBy    []Order
	// Value is INSERT's item: a map literal or a parameter.
	Value Expr
	// Actions are UPDATE's SET and REMOVE clauses, in order.
	Actions []Action
	// Returning is UPDATE's or DELETE's RETURNING clause as DynamoDB's
	// ReturnValues names it: ALL_OLD, UPDATED_OLD, ALL_NEW, UPDATED_NEW;
	// "" when absent.
	Returning string
	// Params is the number of ? placeholders.
	Params int
	// Steps is the work the parser did (for the linearity tests).
	Steps int
}

// Order is one ORDER BY term.
type Order struct {
	Path Path
	Desc bool
}

// Action is one SET (Value set) or REMOVE (Value nil) of an UPDATE.
type Action struct {
	Path  Path
	Value Expr
}

// Elem is one step of a path after its first name: a map key or a list
// index.
type Elem struct {
	Name    string
	Index   int
	IsIndex bool
}

// Path is an attribute reference: a top-level name and nested steps.
type Path struct {
	Name  string
	Elems []Elem
}

// IsTop reports whether the path is a bare top-level attribute name.
func (p Path) IsTop() bool { return len(p.Elems) == 0 }

// Equal reports whether two paths are the same.
func (p Path) Equal(q Path) bool {
	if p.Name != q.Name || len(p.Elems) != len(q.Elems) {
		return false
	}
	for i := range p.Elems {
		if p.Elems[i] != q.Elems[i] {
			return false
		}
	}
	return true
}

// Expr is a node of a WHERE condition or a value.
type Expr interface{ node() }

// PathExpr references an attribute.
type PathExpr struct{ Path Path }

// Lit is a scalar literal (string, number, boolean or NULL).
type Lit struct{ V attr.Value }

// MissingLit is the MISSING literal (valid only after IS).
type MissingLit struct{}

// Param is the N-th (from 0) ? placeholder.
type Param struct{ N int }

// ListLit is [a, b, ...].
type ListLit struct{ Elems []Expr }

// MapLit is {'k': v, ...}.
type MapLit struct {
	Keys []string
	Vals []Expr
}

// SetLit is <<a, b, ...>>.
type SetLit struct{ Elems []Expr }

// Binary is AND, OR, a comparison (=, <>, <, <=, >, >=) or + and -.
type Binary struct {
	Op   string
	L, R Expr
}

// Not negates a condition.
type Not struct{ X Expr }

// Between is X BETWEEN Lo AND Hi.
type Between struct{ X, Lo, Hi Expr }

// In is X IN (List...).
type In struct {
	X    Expr
	List []Expr
}

// Is is X IS [NOT] MISSING|NULL.
type Is struct {
	X    Expr
	Not  bool
	What string // "MISSING" or "NULL"
}

// Call is a function call; Name is lower case.
type Call struct {
	Name string
	Args []Expr
}

func (PathExpr) node()   {}
func (Lit) node()        {}
func (MissingLit) node() {}
func (Param) node()      {}
func (ListLit) node()    {}
func (MapLit) node()     {}
func (SetLit) node()     {}
func (Binary) node()     {}
func (Not) node()        {}
func (Between) node()    {}
func (In) node()         {}
func (Is) node()         {}
func (Call) node()       {}

// IsValue reports whether e is a value (a literal, a parameter or a
// collection literal) rather than a reference or an operation.
func IsValue(e Expr) bool {
	switch e.(type) {
	case Lit, Param, ListLit, MapLit, SetLit:
		return true
	}
	return false
}

// Conjuncts splits a condition at its top-level ANDs.
func Conjuncts(e Expr) []Expr {
	if e == nil {
		return nil
	}
	var out []Expr
	stack := []Expr{e}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if b, ok := x.(Binary); ok && b.Op == "AND" {
			stack = append(stack, b.R, b.L)
			continue
		}
		out = append(out, x)
	}
	return out
}
