package expr

import (
	"strings"
	"testing"
)

func TestConditionEval(t *testing.T) {
	names := map[string]string{"#d": "with.dot", "#name": "Name", "#m": "m", "#k": "k", "#missing": "nope"}
	tests := []struct {
		expr string
		want bool
	}{
		// Equality across every type.
		{"s = :s", true},
		{"s = :s2", false},
		{"s <> :s2", true},
		{"s <> :s", false},
		{"n = :n10", true},
		{"n2 = :n10", true}, // numbers are normalized
		{"n = :s", false},   // different types are never equal
		{"n <> :s", true},
		{"b = :b", true},
		{"t = :t", true},
		{"t = :f", false},
		{"nul = :null", true},
		{"ss = :ss", true},
		{"ss = :ssx", false},
		{"ns = :ns", true},
		{"l[2] = :m", true},
		{"m.k = :s", false},
		{"m.#k = :s", false},
		{"#m.k <> :s", true},
		{"s = s", true}, // a path compared with itself is allowed only via distinct paths; see errors
		// Missing attributes.
		{"nope = :s", false},
		{"nope <> :s", true},
		{"nope < :n5", false},
		{"nope >= :n5", false},
		{"m.nope.deeper = :s", false},
		{"l[9] = :s", false},
		{"s[0] = :s", false},
		{"s.x = :s", false},
		// Ordering.
		{"n > :n5", true},
		{"n >= :n10", true},
		{"n < :n10", false},
		{"n <= :n10", true},
		{"n < :n15", true},
		{":n5 < n", true},
		{"n > :nbig", false},
		{"n > :ntiny", true},
		{"s < :s2", true},
		{"s > :pre", true},
		{"b > :bpre", true},
		{"b < :bpre", false},
		{"n < :s", false},  // cross-type ordering is false
		{"t < nul", false}, // BOOL has no order (paths: no static check)
		{strings.Repeat("NOT ", 299) + "nope = :s", true}, // 300 operators: the limit
		{"ss < bs", false}, // sets have no order
		// Functions whose operands are values, not paths.
		{"size(:s) = :n1", false},
		{"size(:l) < :n5", true},
		{"size(:ss) = s", false},
		{"attribute_type(:s, :tS)", true},
		{"attribute_type(:m, :tS)", false},
		{"begins_with(:s, :pre)", true},
		{"begins_with(:pre, s)", false},
		{"contains(:l, :s)", false},
		{"contains(:ss, s)", false},
		// BETWEEN.
		{"n BETWEEN :n5 AND :n15", true},
		{"n between :n10 and :n10", true},
		{"n BETWEEN :n1 AND :n5", false},
		{"s BETWEEN :pre AND :s2", true},
		{"s BETWEEN :n1 AND :n5", false},
		{"nope BETWEEN :n1 AND :n5", false},
		// IN.
		{"n IN (:n1, :n10)", true},
		{"n in (:n1, :n5)", false},
		{"s IN (:s)", true},
		{"ss IN (:ssx, :ss)", true},
		{"nope IN (:s)", false},
		// Functions.
		{"attribute_exists(s)", true},
		{"attribute_exists(nope)", false},
		{"attribute_exists(m.nest.deep)", true},
		{"attribute_exists(l[1])", true},
		{"attribute_exists(l[3])", false},
		{"attribute_not_exists(nope)", true},
		{"attribute_not_exists(s)", false},
		{"attribute_exists(#d)", true},
		{"attribute_exists(#missing)", false},
		{"attribute_type(s, :tS)", true},
		{"attribute_type(n, :tN)", true},
		{"attribute_type(n, :tS)", false},
		{"attribute_type(m, :tM)", true},
		{"attribute_type(nope, :tS)", false},
		{"begins_with(s, :pre)", true},
		{"begins_with(s, :s)", true},
		{"begins_with(s, :s2)", false},
		{"begins_with(s, :empty)", true},
		{"begins_with(b, :bpre)", true},
		{"begins_with(b, :pre)", false},
		{"begins_with(nope, :pre)", false},
		{"begins_with(n, :pre)", false},
		{"contains(s, :pre)", true},
		{"contains(s, :s2)", false},
		{"contains(ss, :ssx)", false}, // a set is not a member of a set
		{"contains(l, :m)", true},
		{"contains(l, :n1)", true},
		{"contains(l, :n5)", false},
		{"contains(ns, :n1)", true},
		{"contains(ns, :n5)", false},
		{"contains(nope, :s)", false},
		{"contains(n, :n1)", false},
		{"contains(b, :bpre)", true},
		{"contains(s, s)", true},
		{"size(s) = :n5", false},
		{"size(utf) = :n5", false},
		{"size(utf) > :n5", true}, // 6 bytes
		{"size(ss) < :n5", true},
		{"size(l) BETWEEN :n1 AND :n5", true},
		{"size(m) = :n5", false},
		{"size(b) < :n5", true},
		{"size(n) = :n1", false},    // N has no size
		{"size(nope) <> :n1", true}, // missing size is missing
		{"size(nope) = :n1", false},
		{"size(blank) < :n1", true},
		// Reserved words through placeholders.
		{"#name = :s", false},
		{"#name <> :s", true},
		// Boolean structure and precedence.
		{"s = :s AND n = :n10", true},
		{"s = :s AND n = :n5", false},
		{"s = :s2 OR n = :n10", true},
		{"NOT s = :s", false},
		{"NOT s = :s2", true},
		{"not not s = :s", true},
		{"s = :s2 AND n = :n5 OR s = :s", true},    // AND binds tighter than OR
		{"s = :s OR s = :s2 AND n = :n5", true},    // a OR (b AND c)
		{"(s = :s OR s = :s2) AND n = :n5", false}, // parentheses
		{"NOT s = :s2 AND n = :n5", false},         // NOT binds tighter than AND
		{"NOT (s = :s2 AND n = :n5)", true},
		{"(s) = :s", true},
		{"(size(s)) > :n1", true},
		{"(attribute_exists(s))", true},
		{"(s = :s) and (n = :n10)", true},
		{"s=:s\tAND\nn=:n10", true},
		{"a1 = :s OR attribute_not_exists(a1)", true},
		{"m.nest.deep = m.nest.deep", true},
		{"l[0] = :s OR l[1] = :n1", true},
		{"m.arr[0] > :n5", true},
		{"u_ = :s OR attribute_not_exists(u_1)", true},
	}
	item := mustItem(t, testItem)
	for _, tc := range tests {
		env := testEnv(t, names)
		c, err := ParseCondition(KindCondition, tc.expr, env)
		if err != nil {
			if tc.expr == "s = s" || tc.expr == "m.nest.deep = m.nest.deep" || tc.expr == "contains(s, s)" {
				continue // distinct-operand rule, tested in TestConditionErrors
			}
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if got := c.Eval(item); got != tc.want {
			t.Errorf("%q = %v, want %v", tc.expr, got, tc.want)
		}
	}
}

func TestConditionEvalNilItem(t *testing.T) {
	env := testEnv(t, nil)
	c, err := ParseCondition(KindCondition, "attribute_not_exists(pk)", env)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Eval(nil) {
		t.Error("attribute_not_exists on an absent item should hold")
	}
	var nilCond *Condition
	if !nilCond.Eval(nil) {
		t.Error("a nil condition holds")
	}
}

func TestConditionErrors(t *testing.T) {
	const p = "Invalid ConditionExpression: "
	tests := []struct {
		expr  string
		names map[string]string
		want  string
	}{
		{"", nil, p + "The expression can not be empty;"},
		{"  \t\n", nil, p + "The expression can not be empty;"},
		{"foo", nil, p + `Syntax error; token: "<EOF>", near: "foo"`},
		{"a =", nil, p + `Syntax error; token: "<EOF>", near: "="`},
		{"a = ", nil, p + `Syntax error; token: "<EOF>", near: "= "`},
		{"a == :s", nil, p + `Syntax error; token: "=", near: "== :s"`},
		{":s a", nil, p + `Syntax error; token: "a", near: ":s a"`},
		{"a = :s b", nil, p + `Syntax error; token: "b", near: ":s b"`},
		// A name starts with a letter: "_" is a token of its own.
		{"_u = :s", nil, p + `Syntax error; token: "_", near: "_u"`},
		{"a = :s AND _u = :s", nil, p + `Syntax error; token: "_", near: "AND _u"`},
		{"a-b", nil, p + `Syntax error; token: "-", near: "a-b"`},
		{"a ! :s", nil, p + `Syntax error; token: "!", near: "a ! :s"`},
		{"a = :s AND", nil, p + `Syntax error; token: "<EOF>", near: "AND"`},
		{"(a = :s", nil, p + `Syntax error; token: "<EOF>", near: ":s"`},
		{"a = :s)", nil, p + `Syntax error; token: ")", near: ":s)"`},
		{"a[x] = :s", nil, p + `Syntax error; token: "x", near: "[x]"`},
		{"a.1 = :s", nil, p + `Syntax error; token: "1", near: ".1 ="`},
		{"a BETWEEN :n1 :n5", nil, p + `Syntax error; token: ":n5", near: ":n1 :n5"`},
		{"a IN :s", nil, p + `Syntax error; token: ":s", near: "IN :s"`},
		{"a + :n1 = :n5", nil, p + `Syntax error; token: "+", near: "a + :n1"`},
		{"# = :s", nil, p + `Syntax error; token: "#", near: "# ="`},
		{"a = é", nil, p + `Syntax error; token: "é", near: "= é"`},
		{strings.Repeat("a", 4097), nil, p + "Expression size has exceeded the maximum allowed size; expression size: 4097"},
		{"name = :s", nil, p + "Attribute name is a reserved keyword; reserved keyword: name"},
		{"a.Size = :s", nil, p + "Attribute name is a reserved keyword; reserved keyword: Size"},
		{"a = :undefined", nil, p + "An expression attribute value used in expression is not defined; attribute value: :undefined"},
		{"#x = :s", nil, p + "An expression attribute name used in the document path is not defined; attribute name: #x"},
		{"foo(a)", nil, p + "Invalid function name; function: foo"},
		{"Attribute_Exists(a)", nil, p + "Invalid function name; function: Attribute_Exists"},
		{"if_not_exists(a, :s) = :s", nil, p + "The function is not allowed in a condition expression; function: if_not_exists"},
		{"attribute_exists(a, b)", nil, p + "Incorrect number of operands for operator or function; operator or function: attribute_exists, number of operands: 2"},
		{"begins_with(a)", nil, p + "Incorrect number of operands for operator or function; operator or function: begins_with, number of operands: 1"},
		{"attribute_exists(:s)", nil, p + "Operator or function requires a document path; operator or function: attribute_exists"},
		{"attribute_not_exists(:s)", nil, p + "Operator or function requires a document path; operator or function: attribute_not_exists"},
		{"begins_with(a, :n1)", nil, p + "Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"begins_with(a, :ss)", nil, p + "Incorrect operand type for operator or function; operator or function: begins_with, operand type: SS"},
		{"attribute_type(a, :n1)", nil, p + "Incorrect operand type for operator or function; operator or function: attribute_type, operand type: N"},
		{"attribute_type(a, :tX)", nil, p + "Invalid attribute type name found; type: X, valid types: { B,NULL,SS,BOOL,L,BS,N,NS,S,M }"},
		{"size(a)", nil, p + "The function is not allowed to be used this way in an expression; function: size"},
		{"size(a) AND a = :s", nil, p + "The function is not allowed to be used this way in an expression; function: size"},
		{"NOT size(a)", nil, p + "The function is not allowed to be used this way in an expression; function: size"},
		{"attribute_exists(a) = :t", nil, p + "The function is not allowed to be used this way in an expression; function: attribute_exists"},
		{"contains(attribute_exists(a), :s)", nil, p + "The function is not allowed to be used this way in an expression; function: attribute_exists"},
		{"size(:n1) = :n1", nil, p + "Incorrect operand type for operator or function; operator or function: size, operand type: N"},
		{"size(size(a)) = :n1", nil, p + "Incorrect operand type for operator or function; operator or function: size, operand type: N"},
		{"size(:t) = :n1", nil, p + "Incorrect operand type for operator or function; operator or function: size, operand type: BOOL"},
		// Ordering operators take only S, N and B constants.
		{"a < :l", nil, p + "Incorrect operand type for operator or function; operator or function: <, operand type: L"},
		{"a >= :t", nil, p + "Incorrect operand type for operator or function; operator or function: >=, operand type: BOOL"},
		{":ss > a", nil, p + "Incorrect operand type for operator or function; operator or function: >, operand type: SS"},
		{"a <= :null", nil, p + "Incorrect operand type for operator or function; operator or function: <=, operand type: NULL"},
		{"a BETWEEN :m AND :m", nil, p + "Incorrect operand type for operator or function; operator or function: BETWEEN, operand type: M"},
		// The operator limit: the parse stops at the 301st.
		{"a < b" + strings.Repeat(" OR a < b", 150), nil, p + "The expression contains too many operators; operator count: 301"},
		{strings.Repeat("NOT ", 301) + "a = :s", nil, p + "The expression contains too many operators; operator count: 301"},
		{"a = a", nil, p + "The first operand must be distinct from the remaining operands for this operator or function; operator: =, first operand: [a]"},
		{"a.b[1] < a.b[1]", nil, p + "The first operand must be distinct from the remaining operands for this operator or function; operator: <, first operand: [a, b, [1]]"},
		{"contains(a, a)", nil, p + "The first operand must be distinct from the remaining operands for this operator or function; operator: contains, first operand: [a]"},
		{"a BETWEEN :n5 AND :n1", nil, p + "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {N:5}, upper bound operand: AttributeValue: {N:1}"},
		{"a BETWEEN :s2 AND :s", nil, p + "The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {S:abd}, upper bound operand: AttributeValue: {S:abc}"},
		{"a BETWEEN :n1 AND :s", nil, p + "The BETWEEN operator requires same data type for lower and upper bounds; lower bound operand: AttributeValue: {N:1}, upper bound operand: AttributeValue: {S:abc}"},
		{"((a = :s))", nil, p + "The expression has redundant parentheses;"},
		{"a = :s AND ((b = :s OR c = :s))", nil, p + "The expression has redundant parentheses;"},
		{"((a)) = :s", nil, p + "The expression has redundant parentheses;"},
		{"a IN (" + strings.TrimSuffix(strings.Repeat(":s, ", 101), ", ") + ")", nil, p + "The IN operator is provided with too many operands; number of operands: 101"},
		{"a" + strings.Repeat(".b", 32) + " = :s", nil, p + "The document path has too many nesting levels; nesting levels: 33"},
		// Error priority: syntax first, then parentheses, functions, reserved words, placeholders.
		{"name = :undefined AND", nil, p + `Syntax error; token: "<EOF>", near: "AND"`},
		{"name = :undefined", nil, p + "Attribute name is a reserved keyword; reserved keyword: name"},
		{"((name = :s))", nil, p + "The expression has redundant parentheses;"},
		{"foo(name)", nil, p + "Invalid function name; function: foo"},
		{"#x = :undefined", nil, p + "An expression attribute name used in the document path is not defined; attribute name: #x"},
	}
	for _, tc := range tests {
		env := testEnv(t, tc.names)
		_, err := ParseCondition(KindCondition, tc.expr, env)
		if got := errText(err); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.expr, got, tc.want)
		}
	}
}

func TestFilterPrefix(t *testing.T) {
	_, err := ParseCondition(KindFilter, "a =", testEnv(t, nil))
	if got, want := errText(err), `Invalid FilterExpression: Syntax error; token: "<EOF>", near: "="`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
}

func BenchmarkConditionParseEval(b *testing.B) {
	item := mustItem(b, testItem)
	values := decodeValues(b, testValues)
	names := map[string]string{"#name": "Name"}
	const s = "attribute_exists(s) AND #name <> :s AND (n BETWEEN :n5 AND :n15 OR begins_with(s, :pre)) AND size(l) > :n1"
	b.ReportAllocs()
	for b.Loop() {
		env, err := NewEnv(names, values)
		if err != nil {
			b.Fatal(err)
		}
		c, err := ParseCondition(KindCondition, s, env)
		if err != nil {
			b.Fatal(err)
		}
		if !c.Eval(item) {
			b.Fatal("want true")
		}
	}
}

func BenchmarkConditionEval(b *testing.B) {
	item := mustItem(b, testItem)
	env, _ := NewEnv(map[string]string{"#name": "Name"}, decodeValues(b, testValues))
	c, err := ParseCondition(KindCondition, "attribute_exists(s) AND #name <> :s AND (n BETWEEN :n5 AND :n15 OR begins_with(s, :pre)) AND size(l) > :n1", env)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !c.Eval(item) {
			b.Fatal("want true")
		}
	}
}
