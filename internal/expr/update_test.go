package expr

import (
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

func TestUpdateApply(t *testing.T) {
	names := map[string]string{"#name": "Name", "#d": "with.dot"}
	tests := []struct {
		expr    string
		old     string
		want    string
		wantErr string
	}{
		// SET.
		{"SET a = :s", ``, `{"a":{"S":"abc"}}`, ""},
		{"SET a = :s", `{"a":{"N":"1"}}`, `{"a":{"S":"abc"}}`, ""},
		{"SET a = :s, b = :n1", `{"c":{"N":"1"}}`, `{"a":{"S":"abc"},"b":{"N":"1"},"c":{"N":"1"}}`, ""},
		{"set #name = :s, #d = :n1", `{}`, `{"Name":{"S":"abc"},"with.dot":{"N":"1"}}`, ""},
		{"SET a = b", `{"b":{"N":"7"}}`, `{"a":{"N":"7"},"b":{"N":"7"}}`, ""},
		{"SET a = b, b = a", `{"a":{"N":"1"},"b":{"N":"2"}}`, `{"a":{"N":"2"},"b":{"N":"1"}}`, ""}, // operands read the old item
		{"SET a = b", `{}`, ``, "The provided expression refers to an attribute that does not exist in the item"},
		{"SET a = a + :n1", `{"a":{"N":"41"}}`, `{"a":{"N":"42"}}`, ""},
		{"SET a = a - :n5", `{"a":{"N":"1"}}`, `{"a":{"N":"-4"}}`, ""},
		{"SET a = :n1 + :n5", ``, `{"a":{"N":"6"}}`, ""},
		{"SET a = a + :ntiny", `{"a":{"N":"1"}}`, `{"a":{"N":"1.0000000000000000000000000000000000001"}}`, ""},
		{"SET a = a + :nbig", `{"a":{"N":"1"}}`, `{"a":{"N":"12345678901234567890123456789012345679"}}`, ""},
		{"SET a = a + :n1", `{}`, ``, "The provided expression refers to an attribute that does not exist in the item"},
		{"SET a = a + :n1", `{"a":{"S":"x"}}`, ``, "An operand in the update expression has an incorrect data type"},
		{"SET a = if_not_exists(a, :n1) + :n1", `{}`, `{"a":{"N":"2"}}`, ""},
		{"SET a = if_not_exists(a, :n1) + :n1", `{"a":{"N":"9"}}`, `{"a":{"N":"10"}}`, ""},
		{"SET a = if_not_exists(b, :s)", `{"b":{"N":"3"}}`, `{"a":{"N":"3"},"b":{"N":"3"}}`, ""},
		{"SET a = if_not_exists(a.b, :s)", `{"a":{"M":{}}}`, `{"a":{"S":"abc"}}`, ""},
		{"SET a = list_append(a, :l2)", `{"a":{"L":[{"N":"0"}]}}`, `{"a":{"L":[{"N":"0"},{"S":"z"}]}}`, ""},
		{"SET a = list_append(:l2, a)", `{"a":{"L":[{"N":"0"}]}}`, `{"a":{"L":[{"S":"z"},{"N":"0"}]}}`, ""},
		{"SET a = list_append(if_not_exists(a, :l), :l2)", `{}`, `{"a":{"L":[{"S":"x"},{"N":"1"},{"S":"z"}]}}`, ""},
		{"SET a = list_append(a, :l2)", `{}`, ``, "The provided expression refers to an attribute that does not exist in the item"},
		{"SET a = list_append(a, :l2)", `{"a":{"S":"x"}}`, ``, "An operand in the update expression has an incorrect data type"},
		{"SET a = (:n1 + :n5)", ``, `{"a":{"N":"6"}}`, ""},
		{"SET a = (b)", `{"b":{"N":"1"}}`, `{"a":{"N":"1"},"b":{"N":"1"}}`, ""},
		// Nested SET.
		{"SET m.k = :s", `{"m":{"M":{}}}`, `{"m":{"M":{"k":{"S":"abc"}}}}`, ""},
		{"SET m.x.y = :s", `{"m":{"M":{"x":{"M":{"z":{"N":"1"}}}}}}`, `{"m":{"M":{"x":{"M":{"y":{"S":"abc"},"z":{"N":"1"}}}}}}`, ""},
		{"SET m.k = :s", `{}`, ``, "The document path provided in the update expression is invalid for update"},
		{"SET m.k.j = :s", `{"m":{"M":{}}}`, ``, "The document path provided in the update expression is invalid for update"},
		{"SET m.k = :s", `{"m":{"S":"x"}}`, ``, "The document path provided in the update expression is invalid for update"},
		{"SET l[0] = :s", `{"l":{"L":[{"N":"1"},{"N":"2"}]}}`, `{"l":{"L":[{"S":"abc"},{"N":"2"}]}}`, ""},
		{"SET l[1] = :s", `{"l":{"L":[{"N":"1"},{"N":"2"}]}}`, `{"l":{"L":[{"N":"1"},{"S":"abc"}]}}`, ""},
		{"SET l[5] = :s", `{"l":{"L":[{"N":"1"}]}}`, `{"l":{"L":[{"N":"1"},{"S":"abc"}]}}`, ""},
		{"SET l[5] = :s, l[7] = :n1", `{"l":{"L":[]}}`, `{"l":{"L":[{"S":"abc"},{"N":"1"}]}}`, ""},
		{"SET l[0].k = :s", `{"l":{"L":[{"M":{}}]}}`, `{"l":{"L":[{"M":{"k":{"S":"abc"}}}]}}`, ""},
		{"SET l[0] = :s", `{"l":{"M":{}}}`, ``, "The document path provided in the update expression is invalid for update"},
		{"SET l[3].k = :s", `{"l":{"L":[]}}`, ``, "The document path provided in the update expression is invalid for update"},
		{"SET m.l[0] = m.l[1], m.l[1] = m.l[0]", `{"m":{"M":{"l":{"L":[{"N":"1"},{"N":"2"}]}}}}`, `{"m":{"M":{"l":{"L":[{"N":"2"},{"N":"1"}]}}}}`, ""},
		// REMOVE.
		{"REMOVE a", `{"a":{"N":"1"},"b":{"N":"2"}}`, `{"b":{"N":"2"}}`, ""},
		{"REMOVE a, b", `{"a":{"N":"1"},"b":{"N":"2"}}`, `{}`, ""},
		{"REMOVE a", `{}`, `{}`, ""},
		{"REMOVE m.k", `{"m":{"M":{"k":{"N":"1"},"j":{"N":"2"}}}}`, `{"m":{"M":{"j":{"N":"2"}}}}`, ""},
		{"REMOVE m.nope", `{"m":{"M":{}}}`, `{"m":{"M":{}}}`, ""},
		{"REMOVE m.k", `{}`, ``, "The document path provided in the update expression is invalid for update"},
		{"REMOVE l[1]", `{"l":{"L":[{"N":"0"},{"N":"1"},{"N":"2"}]}}`, `{"l":{"L":[{"N":"0"},{"N":"2"}]}}`, ""},
		{"REMOVE l[0], l[2]", `{"l":{"L":[{"N":"0"},{"N":"1"},{"N":"2"},{"N":"3"}]}}`, `{"l":{"L":[{"N":"1"},{"N":"3"}]}}`, ""},
		{"REMOVE l[2], l[0]", `{"l":{"L":[{"N":"0"},{"N":"1"},{"N":"2"},{"N":"3"}]}}`, `{"l":{"L":[{"N":"1"},{"N":"3"}]}}`, ""},
		{"REMOVE l[9]", `{"l":{"L":[{"N":"0"}]}}`, `{"l":{"L":[{"N":"0"}]}}`, ""},
		{"REMOVE l[0].k", `{"l":{"L":[{"M":{"k":{"N":"1"}}}]}}`, `{"l":{"L":[{"M":{}}]}}`, ""},
		{"SET l[1] = :s REMOVE l[0]", `{"l":{"L":[{"N":"0"},{"N":"1"}]}}`, `{"l":{"L":[{"S":"abc"}]}}`, ""},
		// ADD.
		{"ADD a :n5", `{}`, `{"a":{"N":"5"}}`, ""},
		{"ADD a :n5", ``, `{"a":{"N":"5"}}`, ""},
		{"ADD a :n5", `{"a":{"N":"-5"}}`, `{"a":{"N":"0"}}`, ""},
		{"ADD a :ntiny", `{"a":{"N":"1E+2"}}`, ``, "Attempting to store more than 38 significant digits in a Number"},
		{"ADD a :n1", `{"a":{"N":"-1.5E-3"}}`, `{"a":{"N":"0.9985"}}`, ""},
		{"ADD a :ss", `{}`, `{"a":{"SS":["x","y"]}}`, ""},
		{"ADD a :ss", `{"a":{"SS":["w","x"]}}`, `{"a":{"SS":["w","x","y"]}}`, ""},
		{"ADD a :ns", `{"a":{"NS":["2","3"]}}`, `{"a":{"NS":["1","2","3"]}}`, ""},
		{"ADD a :bs", `{"a":{"BS":["Ag=="]}}`, `{"a":{"BS":["AQ==","Ag=="]}}`, ""},
		{"ADD a :ss", `{"a":{"NS":["1"]}}`, ``, "An operand in the update expression has an incorrect data type"},
		{"ADD a :n1", `{"a":{"S":"x"}}`, ``, "An operand in the update expression has an incorrect data type"},
		{"ADD a :ss", `{"a":{"N":"1"}}`, ``, "An operand in the update expression has an incorrect data type"},
		{"ADD m.c :n1", `{"m":{"M":{"c":{"N":"1"}}}}`, `{"m":{"M":{"c":{"N":"2"}}}}`, ""},
		{"ADD m.c :n1", `{"m":{"M":{}}}`, `{"m":{"M":{"c":{"N":"1"}}}}`, ""},
		{"ADD m.c :n1", `{}`, ``, "The document path provided in the update expression is invalid for update"},
		// DELETE.
		{"DELETE a :ssx", `{"a":{"SS":["x","y"]}}`, `{"a":{"SS":["y"]}}`, ""},
		{"DELETE a :ss", `{"a":{"SS":["x","y"]}}`, `{}`, ""},
		{"DELETE a :ss", `{"a":{"SS":["z"]}}`, `{"a":{"SS":["z"]}}`, ""},
		{"DELETE a :ns3", `{"a":{"NS":["3","4"]}}`, `{"a":{"NS":["4"]}}`, ""},
		{"DELETE a :bs", `{"a":{"BS":["AQ=="]}}`, `{}`, ""},
		{"DELETE a :ss", `{}`, `{}`, ""},
		{"DELETE a :ss", `{"a":{"NS":["1"]}}`, ``, "An operand in the update expression has an incorrect data type"},
		{"DELETE a :ss", `{"a":{"S":"x"}}`, ``, "An operand in the update expression has an incorrect data type"},
		{"DELETE m.s :ssx", `{"m":{"M":{"s":{"SS":["x"]}}}}`, `{"m":{"M":{}}}`, ""},
		// All clauses together, any order, any case.
		{"add c :n1 set a = :s remove b delete d :ssx", `{"b":{"N":"1"},"c":{"N":"1"},"d":{"SS":["x","y"]}}`,
			`{"a":{"S":"abc"},"c":{"N":"2"},"d":{"SS":["y"]}}`, ""},
	}
	for _, tc := range tests {
		env := testEnv(t, names)
		u, err := ParseUpdate(tc.expr, env)
		if err != nil {
			t.Errorf("%q: parse: %v", tc.expr, err)
			continue
		}
		old := mustItem(t, tc.old)
		var before []byte
		if old != nil {
			before = attr.EncodeItem(old)
		}
		got, err := u.Apply(old)
		if old != nil && string(attr.EncodeItem(old)) != string(before) {
			t.Errorf("%q: Apply modified the old item", tc.expr)
		}
		if tc.wantErr != "" {
			if errText(err) != tc.wantErr {
				t.Errorf("%q: err %v, want %s", tc.expr, err, tc.wantErr)
			}
			var ae *attr.Error
			if err != nil && !asAttrErr(err, &ae) {
				t.Errorf("%q: error is not *attr.Error", tc.expr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		want := mustItem(t, tc.want)
		if g, w := string(attr.EncodeItem(got)), string(attr.EncodeItem(want)); g != w {
			t.Errorf("%q:\n got %s\nwant %s", tc.expr, g, w)
		}
	}
}

func asAttrErr(err error, target **attr.Error) bool {
	e, ok := err.(*attr.Error)
	if ok {
		*target = e
	}
	return ok && e.Kind == attr.KindValidation
}

func TestUpdateErrors(t *testing.T) {
	const p = "Invalid UpdateExpression: "
	tests := []struct {
		expr string
		want string
	}{
		{"", p + "The expression can not be empty;"},
		{"a = :s", p + `Syntax error; token: "a", near: "a ="`},
		{"SET", p + `Syntax error; token: "<EOF>", near: "SET"`},
		{"SET a", p + `Syntax error; token: "<EOF>", near: "a"`},
		{"SET a = ", p + `Syntax error; token: "<EOF>", near: "= "`},
		{"SET a = :s,", p + `Syntax error; token: "<EOF>", near: ","`},
		{"SET a = :s b = :s", p + `Syntax error; token: "b", near: ":s b ="`},
		{"SET a = :n1 + :n1 + :n1", p + `Syntax error; token: "+", near: ":n1 + :n1"`},
		{"SET a = VALUE 1", p + `Syntax error; token: "1", near: "VALUE 1"`},
		{"REMOVE a = :s", p + `Syntax error; token: "=", near: "a = :s"`},
		{"SET a = list_append(a, list_append(:s, b))", p + "Incorrect operand type for operator or function; operator or function: list_append, operand type: S"},
		{"SET a = list_append(a, c)", ""},
		{"SET a = :n1 + list_append(a, :l)", p + "Incorrect operand type for operator or function; operator or function: +, operand type: L"},
		{"SET a = list_append(if_not_exists(a, :l), list_append(:l, b))", ""},
		{"SET _123 = :s", p + `Syntax error; token: "_", near: "SET _123"`},
		{"ADD hits : incr", p + `Syntax error; token: ":", near: "hits : incr"`},
		{"SET  REMOVE a", p + `Syntax error; token: "REMOVE", near: "SET  REMOVE a"`},
		{"ADD a", p + `Syntax error; token: "<EOF>", near: "a"`},
		{"ADD a b", p + `Syntax error; token: "b", near: "a b"`},
		{"DELETE a :ss, ", p + `Syntax error; token: "<EOF>", near: ", "`},
		{"SET a = :s SET b = :s", p + `The "SET" section can only be used once in an update expression;`},
		{"REMOVE a REMOVE b", p + `The "REMOVE" section can only be used once in an update expression;`},
		{"ADD a :n1 ADD b :n1", p + `The "ADD" section can only be used once in an update expression;`},
		{"DELETE a :ss delete b :ss", p + `The "DELETE" section can only be used once in an update expression;`},
		{"SET a = :undefined", p + "An expression attribute value used in expression is not defined; attribute value: :undefined"},
		{"SET #x = :s", p + "An expression attribute name used in the document path is not defined; attribute name: #x"},
		{"SET name = :s", p + "Attribute name is a reserved keyword; reserved keyword: name"},
		{"REMOVE a.Comment", p + "Attribute name is a reserved keyword; reserved keyword: Comment"},
		{"SET a = :s, a = :n1", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a]"},
		{"SET a = :s REMOVE a.b", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a], path two: [a, b]"},
		{"SET a.b[1].c = :s ADD a.b :n1", p + "Two document paths overlap with each other; must remove or rewrite one of these paths; path one: [a, b, [1], c], path two: [a, b]"},
		{"SET a[0] = :s REMOVE a.b", p + "Two document paths conflict with each other; must remove or rewrite one of these paths; path one: [a, [0]], path two: [a, b]"},
		{"ADD a :s", p + "Incorrect operand type for operator or function; operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"ADD a :l", p + "Incorrect operand type for operator or function; operator: ADD, operand type: LIST, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"ADD a :m", p + "Incorrect operand type for operator or function; operator: ADD, operand type: MAP, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"ADD a :t", p + "Incorrect operand type for operator or function; operator: ADD, operand type: BOOLEAN, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"ADD a :null", p + "Incorrect operand type for operator or function; operator: ADD, operand type: NULL, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"ADD a :b", p + "Incorrect operand type for operator or function; operator: ADD, operand type: BINARY, typeSet: ALLOWED_FOR_ADD_OPERAND"},
		{"DELETE a :n1", p + "Incorrect operand type for operator or function; operator: DELETE, operand type: NUMBER, typeSet: ALLOWED_FOR_DELETE_OPERAND"},
		{"DELETE a :s", p + "Incorrect operand type for operator or function; operator: DELETE, operand type: STRING, typeSet: ALLOWED_FOR_DELETE_OPERAND"},
		{"SET a = :s + :n1", p + "Incorrect operand type for operator or function; operator or function: +, operand type: S"},
		{"SET a = :n1 - :ss", p + "Incorrect operand type for operator or function; operator or function: -, operand type: SS"},
		{"SET a = list_append(:s, a)", p + "Incorrect operand type for operator or function; operator or function: list_append, operand type: S"},
		{"SET a = list_append(a)", p + "Incorrect number of operands for operator or function; operator or function: list_append, number of operands: 1"},
		{"SET a = if_not_exists(:s, a)", p + "Operator or function requires a document path; operator or function: if_not_exists"},
		{"SET a = foo(a)", p + "Invalid function name; function: foo"},
		{"SET a = size(b)", p + "The function is not allowed in an update expression; function: size"},
		{"SET a = attribute_exists(b)", p + "The function is not allowed in an update expression; function: attribute_exists"},
		{strings.Repeat(" ", 4097), p + "Expression size has exceeded the maximum allowed size; expression size: 4097"},
		// Priority: reserved words before undefined placeholders and overlaps.
		{"SET name = :undefined, name = :s", p + "Attribute name is a reserved keyword; reserved keyword: name"},
		{"SET a = :undefined, a = :s", p + "An expression attribute value used in expression is not defined; attribute value: :undefined"},
	}
	for _, tc := range tests {
		_, err := ParseUpdate(tc.expr, testEnv(t, nil))
		if got := errText(err); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.expr, got, tc.want)
		}
	}
}

func TestUpdatedPaths(t *testing.T) {
	u, err := ParseUpdate("SET a.b = :s, #n[2] = :n1 REMOVE c ADD d :n1 DELETE e :ss", testEnv(t, map[string]string{"#n": "list"}))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range u.UpdatedPaths() {
		got = append(got, p.String())
	}
	if g, w := strings.Join(got, " "), "a.b list[2] c d e"; g != w {
		t.Errorf("got %s want %s", g, w)
	}
	acts := u.Actions()
	if len(acts) != 5 || acts[0].Kind != ActionSet || acts[2].Kind != ActionRemove || acts[3].Kind != ActionAdd || acts[4].Kind != ActionDelete {
		t.Errorf("actions %+v", acts)
	}
}
