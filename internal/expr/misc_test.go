package expr

import (
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

func TestReservedWords(t *testing.T) {
	if len(reservedWordList) != 573 {
		t.Errorf("%d reserved words, want 573", len(reservedWordList))
	}
	for _, w := range []string{"name", "NAME", "Size", "comment", "year", "zone", "abort", "flattern", "innter"} {
		if !IsReserved(w) {
			t.Errorf("%s should be reserved", w)
		}
	}
	for _, w := range []string{"a", "names2", "pk", "sk", "foo", "attribute_exists", "averylongnamethatisnotreserved"} {
		if IsReserved(w) {
			t.Errorf("%s should not be reserved", w)
		}
	}
}

func TestKindString(t *testing.T) {
	want := map[Kind]string{KindCondition: "ConditionExpression", KindFilter: "FilterExpression", KindKeyCondition: "KeyConditionExpression", KindUpdate: "UpdateExpression", KindProjection: "ProjectionExpression"}
	for k, w := range want {
		if k.String() != w {
			t.Errorf("%d: %s", k, k.String())
		}
	}
}

func TestNewEnv(t *testing.T) {
	v := map[string]attr.Value{":a": attr.StrValue("x")}
	tests := []struct {
		names  map[string]string
		values map[string]attr.Value
		want   string
	}{
		{nil, nil, ""},
		{map[string]string{"#a": "a", "#_1": "b"}, v, ""},
		{map[string]string{}, v, "ExpressionAttributeNames must not be empty"},
		{map[string]string{}, map[string]attr.Value{}, "ExpressionAttributeNames must not be empty"},
		{nil, map[string]attr.Value{}, "ExpressionAttributeValues must not be empty"},
		{map[string]string{"a": "a"}, nil, `ExpressionAttributeNames contains invalid key: Syntax error; key: "a"`},
		{map[string]string{"#": "a"}, nil, `ExpressionAttributeNames contains invalid key: Syntax error; key: "#"`},
		{map[string]string{"#a-b": "a"}, nil, `ExpressionAttributeNames contains invalid key: Syntax error; key: "#a-b"`},
		{map[string]string{"#a": "a"}, map[string]attr.Value{"a": attr.StrValue("x")}, `ExpressionAttributeValues contains invalid key: Syntax error; key: "a"`},
		{nil, map[string]attr.Value{":a b": attr.StrValue("x")}, `ExpressionAttributeValues contains invalid key: Syntax error; key: ":a b"`},
		{map[string]string{"x": "a"}, map[string]attr.Value{}, `ExpressionAttributeNames contains invalid key: Syntax error; key: "x"`},
	}
	for i, tc := range tests {
		_, err := NewEnv(tc.names, tc.values)
		if got := errText(err); got != tc.want {
			t.Errorf("%d: got %q want %q", i, got, tc.want)
		}
	}
}

func TestCheckUnused(t *testing.T) {
	vals := map[string]attr.Value{":a": attr.StrValue("x"), ":b": attr.StrValue("y"), ":c": attr.StrValue("z")}
	names := map[string]string{"#a": "a", "#b": "b", "#c": "c"}
	env, err := NewEnv(names, vals)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCondition(KindCondition, "#a = :a", env); err != nil {
		t.Fatal(err)
	}
	if got, want := errText(env.CheckUnused()), "Value provided in ExpressionAttributeNames unused in expressions: keys: {#b, #c}"; got != want {
		t.Errorf("got %s want %s", got, want)
	}
	if _, err := ParseProjection("#b, #c", env); err != nil {
		t.Fatal(err)
	}
	if got, want := errText(env.CheckUnused()), "Value provided in ExpressionAttributeValues unused in expressions: keys: {:b, :c}"; got != want {
		t.Errorf("got %s want %s", got, want)
	}
	if _, err := ParseUpdate("SET x = :b ADD y :c", env); err == nil {
		// :b and :c are strings: ADD rejects :c, but the placeholders still count as used.
		t.Fatal("want ADD type error")
	}
	if err := env.CheckUnused(); err != nil {
		t.Error(err)
	}
	var nilEnv *Env
	if err := nilEnv.CheckUnused(); err != nil {
		t.Error(err)
	}
	// Parsing with a nil Env: every placeholder is undefined.
	if _, err := ParseCondition(KindCondition, "a = :v", nil); errText(err) != "Invalid ConditionExpression: An expression attribute value used in expression is not defined; attribute value: :v" {
		t.Error(err)
	}
}

func TestPathStrings(t *testing.T) {
	p := Path{{Name: "a"}, {Name: "b"}, {Index: 0, IsIndex: true}, {Name: "c"}, {Index: 12, IsIndex: true}}
	if p.String() != "a.b[0].c[12]" {
		t.Error(p.String())
	}
	if p.MessageString() != "[a, b, [0], c, [12]]" {
		t.Error(p.MessageString())
	}
	if !p.Equal(append(Path(nil), p...)) || p.Equal(p[:2]) {
		t.Error("Equal")
	}
}

func TestProjection(t *testing.T) {
	item := mustItem(t, `{
		"a": {"S":"x"},
		"b": {"N":"1"},
		"m": {"M":{"k":{"S":"v"},"j":{"N":"2"},"n":{"M":{"x":{"N":"1"},"y":{"N":"2"}}}}},
		"l": {"L":[{"N":"0"},{"M":{"p":{"S":"q"},"r":{"S":"s"}}},{"N":"2"},{"N":"3"}]},
		"Name": {"S":"n"}
	}`)
	names := map[string]string{"#n": "Name", "#m": "m"}
	tests := []struct {
		expr string
		want string
		top  string
	}{
		{"a", `{"a":{"S":"x"}}`, "a"},
		{"a, b", `{"a":{"S":"x"},"b":{"N":"1"}}`, "a b"},
		{"nope", `{}`, "nope"},
		{"#n", `{"Name":{"S":"n"}}`, "Name"},
		{"m.k", `{"m":{"M":{"k":{"S":"v"}}}}`, "m"},
		{"#m.k, #m.n.y", `{"m":{"M":{"k":{"S":"v"},"n":{"M":{"y":{"N":"2"}}}}}}`, "m"},
		{"m.nope", `{}`, "m"},
		{"m[0]", `{}`, "m"},
		{"a.b", `{}`, "a"},
		{"l[2]", `{"l":{"L":[{"N":"2"}]}}`, "l"},
		{"l[3], l[0]", `{"l":{"L":[{"N":"0"},{"N":"3"}]}}`, "l"},
		{"l[1].r, l[3], l[9]", `{"l":{"L":[{"M":{"r":{"S":"s"}}},{"N":"3"}]}}`, "l"},
		{"l[1].nope", `{}`, "l"},
		{"l.x", `{}`, "l"},
		{"b, a, b2", `{"a":{"S":"x"},"b":{"N":"1"}}`, "b a b2"},
	}
	for _, tc := range tests {
		pr, err := ParseProjection(tc.expr, testEnv(t, names))
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		got := pr.Apply(item)
		if g, w := string(attr.EncodeItem(got)), string(attr.EncodeItem(mustItem(t, tc.want))); g != w {
			t.Errorf("%q:\n got %s\nwant %s", tc.expr, g, w)
		}
		if g := strings.Join(pr.TopLevelNames(), " "); g != tc.top {
			t.Errorf("%q: top %s want %s", tc.expr, g, tc.top)
		}
	}
	if ProjectPaths(nil, []Path{{{Name: "a"}}}) != nil {
		t.Error("projecting nil")
	}
}

func TestProjectionErrors(t *testing.T) {
	const p = "Invalid ProjectionExpression: "
	tests := []struct{ expr, want string }{
		{"", p + "The expression can not be empty;"},
		{"a,", p + `Syntax error; token: "<EOF>", near: ","`},
		{"a b", p + `Syntax error; token: "b", near: "a b"`},
		{"a = b", p + `Syntax error; token: "=", near: "a = b"`},
		{":a", p + `Syntax error; token: ":a", near: ":a"`},
		{"(a)", p + `Syntax error; token: "(", near: "(a"`},
		{"name", p + "Attribute name is a reserved keyword; reserved keyword: name"},
		{"a, AND", p + "Attribute name is a reserved keyword; reserved keyword: AND"},
		{"#x", p + "An expression attribute name used in the document path is not defined; attribute name: #x"},
		{"a, a.b", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a, b]"},
		{"a.b, a", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a, b], path two: [a]"},
		{"a, a", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]"},
		{"a[0], a.b", p + "Two document paths conflict with each other; must remove or rewrite one of these paths; path one: [a, [0]], path two: [a, b]"},
	}
	for _, tc := range tests {
		_, err := ParseProjection(tc.expr, testEnv(t, nil))
		if got := errText(err); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.expr, got, tc.want)
		}
	}
}

func TestKeyCondition(t *testing.T) {
	names := map[string]string{"#pk": "pk", "#name": "Name"}
	tests := []struct {
		expr  string
		terms string
	}{
		{"pk = :s", "pk EQ [{S:abc}]"},
		{"#pk = :s", "pk EQ [{S:abc}]"},
		{":s = pk", "pk EQ [{S:abc}]"},
		{"pk = :s AND sk > :n1", "pk EQ [{S:abc}]; sk GT [{N:1}]"},
		{"pk = :s and sk < :n1", "pk EQ [{S:abc}]; sk LT [{N:1}]"},
		{"pk = :s AND sk <= :n1", "pk EQ [{S:abc}]; sk LE [{N:1}]"},
		{"pk = :s AND sk >= :n1", "pk EQ [{S:abc}]; sk GE [{N:1}]"},
		{"pk = :s AND :n1 < sk", "pk EQ [{S:abc}]; sk GT [{N:1}]"},
		{"pk = :s AND :n1 >= sk", "pk EQ [{S:abc}]; sk LE [{N:1}]"},
		{"sk BETWEEN :n1 AND :n5 AND pk = :s", "sk BETWEEN [{N:1} {N:5}]; pk EQ [{S:abc}]"},
		{"pk = :s AND begins_with(sk, :pre)", "pk EQ [{S:abc}]; sk BEGINS_WITH [{S:ab}]"},
		{"(pk = :s) AND (begins_with(#name, :pre))", "pk EQ [{S:abc}]; Name BEGINS_WITH [{S:ab}]"},
	}
	for _, tc := range tests {
		kc, err := ParseKeyCondition(tc.expr, testEnv(t, names))
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		var parts []string
		for _, term := range kc.Terms {
			var vs []string
			for _, v := range term.Values {
				vs = append(vs, formatAV(v))
			}
			parts = append(parts, term.Name+" "+term.Op.String()+" ["+strings.Join(vs, " ")+"]")
		}
		if g := strings.Join(parts, "; "); g != tc.terms {
			t.Errorf("%q: got %s want %s", tc.expr, g, tc.terms)
		}
	}
	kc, err := ParseKeyCondition("pk = :s AND sk BETWEEN :n1 AND :n10", testEnv(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !kc.Eval(mustItem(t, `{"pk":{"S":"abc"},"sk":{"N":"5"}}`)) || kc.Eval(mustItem(t, `{"pk":{"S":"abc"},"sk":{"N":"11"}}`)) {
		t.Error("Eval")
	}
}

func TestKeyConditionErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "Invalid KeyConditionExpression: The expression can not be empty;"},
		{"pk = ", `Invalid KeyConditionExpression: Syntax error; token: "<EOF>", near: "= "`},
		{"pk = :undefined", "Invalid KeyConditionExpression: An expression attribute value used in expression is not defined; attribute value: :undefined"},
		{"pk = :s OR sk = :s", "Invalid operator used in KeyConditionExpression: OR"},
		{"a > b and size(b) > c or a > c", "Invalid operator used in KeyConditionExpression: OR"},
		{"NOT pk = :s", "Invalid operator used in KeyConditionExpression: NOT"},
		{"pk IN (:s, :s2)", "Invalid operator used in KeyConditionExpression: IN"},
		{"pk <> :s", "Invalid operator used in KeyConditionExpression: <>"},
		{"attribute_exists(pk)", "Invalid operator used in KeyConditionExpression: attribute_exists"},
		{"attribute_not_exists(pk)", "Invalid operator used in KeyConditionExpression: attribute_not_exists"},
		{"contains(a.d, b)", "Invalid operator used in KeyConditionExpression: contains"},
		{"attribute_type(a, :tS)", "Invalid operator used in KeyConditionExpression: attribute_type"},
		{":s BETWEEN size(b) AND size(a) AND b > :s2", "Invalid condition in KeyConditionExpression: BETWEEN operator must have the key attribute as its first operand"},
		{"begins_with(:s, b) AND a > :s2", "Invalid condition in KeyConditionExpression: begins_with operator must have the key attribute as its first operand"},
		{"size(b) > a AND a.b > b AND b > c", "KeyConditionExpressions cannot contain nested operations"},
		{"a > size(b.d)", "KeyConditionExpressions cannot contain nested operations"},
		{"a BETWEEN size(b) AND size(a)", "KeyConditionExpressions cannot contain nested operations"},
		{"b > a.b", "Invalid condition in KeyConditionExpression: Multiple attribute names used in one condition"},
		{"b BETWEEN c[1] AND d", "Invalid condition in KeyConditionExpression: Multiple attribute names used in one condition"},
		{"a BETWEEN b AND size(a)", "Invalid condition in KeyConditionExpression: Multiple attribute names used in one condition"},
		{"begins_with(a, b)", "Invalid condition in KeyConditionExpression: Multiple attribute names used in one condition"},
		{"b.d > a AND c.d > e.f", "KeyConditionExpressions cannot have conditions on nested attributes"},
		{"a.d > :s", "KeyConditionExpressions cannot have conditions on nested attributes"},
		{"b[0] > :s", "KeyConditionExpressions cannot have conditions on nested attributes"},
		{":s > :s2 AND a < :s", "Invalid condition in KeyConditionExpression: No key attribute specified"},
		{"b > :s AND b < :s AND c = :s AND d = :s", "KeyConditionExpressions must only contain one condition per key"},
		{"(a > :s AND b > :s) AND (b > :s AND c > :s)", "KeyConditionExpressions must only contain one condition per key"},
		{":s = a AND b = :s AND :s = c", "Conditions can be of length 1 or 2 only"},
		{"a BETWEEN :s2 AND :s", "Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {S:abd}, upper bound operand: AttributeValue: {S:abc}"},
		{"a BETWEEN :n1 AND :s", "Invalid KeyConditionExpression: The BETWEEN operator requires same data type for lower and upper bounds; lower bound operand: AttributeValue: {N:1}, upper bound operand: AttributeValue: {S:abc}"},
		{"begins_with(a, :n1)", "Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N"},
		{"name = :s", "Invalid KeyConditionExpression: Attribute name is a reserved keyword; reserved keyword: name"},
	}
	for _, tc := range tests {
		_, err := ParseKeyCondition(tc.expr, testEnv(t, nil))
		if got := errText(err); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.expr, got, tc.want)
		}
	}
}

func TestFormatAV(t *testing.T) {
	vals := decodeValues(t, testValues)
	tests := map[string]string{
		":s": "{S:abc}", ":n1": "{N:1}", ":b": "{B:AQID}", ":t": "{BOOL:true}", ":null": "{NULL:true}",
		":ss": "{SS:[x, y]}", ":bs": "{BS:[AQ==]}",
	}
	for k, w := range tests {
		if g := formatAV(vals[k]); g != w {
			t.Errorf("%s: %s want %s", k, g, w)
		}
	}
}

func TestConditionTopLevelNames(t *testing.T) {
	env, err := NewEnv(map[string]string{"#s": "sk"}, map[string]attr.Value{":a": attr.MustNum("1"), ":b": attr.StrValue("x")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseCondition(KindFilter, "#s > :a AND (begins_with(m.x, :b) OR NOT size(l[0]) BETWEEN :a AND :a)", env)
	if err != nil {
		t.Fatal(err)
	}
	got := c.TopLevelNames()
	if len(got) != 3 || got[0] != "sk" || got[1] != "m" || got[2] != "l" {
		t.Fatalf("TopLevelNames = %v", got)
	}
}

func TestEnvLimits(t *testing.T) {
	long := "#" + strings.Repeat("a", MaxPlaceholderLength)
	ok := "#" + strings.Repeat("a", MaxPlaceholderLength-1)
	tests := []struct {
		names  map[string]string
		values map[string]attr.Value
		want   string
	}{
		{map[string]string{ok: "a"}, nil, ""},
		{map[string]string{long: "a"}, nil, "ExpressionAttributeNames contains invalid key: The key is too long; key length: 256, maximum: 255"},
		{nil, map[string]attr.Value{":" + long[1:]: {Type: attr.S, Str: "x"}}, "ExpressionAttributeValues contains invalid key: The key is too long; key length: 256, maximum: 255"},
		{map[string]string{"#a": ""}, nil, "ExpressionAttributeNames contains invalid value: Empty attribute name for key #a"},
		{map[string]string{"#a": strings.Repeat("x", 65535)}, nil, ""},
		{map[string]string{"#a": strings.Repeat("x", 65536)}, nil, "1 validation error detected: Attribute name is too large, must be less than 65536 bytes"},
	}
	for _, tc := range tests {
		_, err := NewEnv(tc.names, tc.values)
		if got := errText(err); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
