package partiql

import (
	"strings"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
)

func mustParse(t *testing.T, s string) *Statement {
	t.Helper()
	st, err := Parse(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return st
}

func parseErr(t *testing.T, s, want string) {
	t.Helper()
	_, err := Parse(s)
	if err == nil {
		t.Fatalf("%q parsed; want error containing %q", s, want)
	}
	ae, ok := err.(*attr.Error)
	if !ok || ae.Kind != attr.KindValidation {
		t.Fatalf("%q: error %T %v, want a validation error", s, err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("%q: error %q, want it to contain %q", s, err, want)
	}
}

func TestSelect(t *testing.T) {
	st := mustParse(t, `select a, "b".c[2]."d e", m['k'] FROM "Music"."ByYear" WhErE Artist = ? AND year BETWEEN 1 AND 2 ORDER BY year DESC, x`)
	if st.Kind != Select || st.Table != "Music" || st.Index != "ByYear" || st.Params != 1 {
		t.Fatalf("%+v", st)
	}
	if len(st.Projection) != 3 || st.Projection[1].Name != "b" || len(st.Projection[1].Elems) != 3 ||
		!st.Projection[1].Elems[1].IsIndex || st.Projection[1].Elems[1].Index != 2 || st.Projection[1].Elems[2].Name != "d e" ||
		st.Projection[2].Elems[0].Name != "k" {
		t.Fatalf("projection %+v", st.Projection)
	}
	if len(st.OrderBy) != 2 || !st.OrderBy[0].Desc || st.OrderBy[1].Desc {
		t.Fatalf("order %+v", st.OrderBy)
	}
	cs := Conjuncts(st.Where)
	if len(cs) != 2 {
		t.Fatalf("conjuncts %+v", cs)
	}
	if b, ok := cs[0].(Binary); !ok || b.Op != "=" {
		t.Fatalf("first %+v", cs[0])
	}
	if _, ok := cs[1].(Between); !ok {
		t.Fatalf("second %+v", cs[1])
	}
	st = mustParse(t, `SELECT * FROM t`)
	if st.Projection != nil || st.Where != nil {
		t.Fatalf("%+v", st)
	}
}

func TestConditions(t *testing.T) {
	st := mustParse(t, `SELECT * FROM t WHERE NOT a IS MISSING OR b IS NOT NULL AND begins_with(c, 'x') AND size(d) > 3 AND e IN ('a', 1, ?) AND f NOT IN [1] AND g <> -1.5e3 AND h != TRUE AND attribute_type(i, 'S') AND contains(j, 'q') AND k NOT BETWEEN 1 AND 2`)
	or, ok := st.Where.(Binary)
	if !ok || or.Op != "OR" {
		t.Fatalf("%+v", st.Where)
	}
	if n, ok := or.L.(Not); !ok {
		t.Fatalf("left %+v", or.L)
	} else if is, ok := n.X.(Is); !ok || is.What != "MISSING" || is.Not {
		t.Fatalf("left %+v", n.X)
	}
	cs := Conjuncts(or.R)
	if len(cs) != 10 {
		t.Fatalf("%d conjuncts: %+v", len(cs), cs)
	}
	if c, ok := cs[1].(Call); !ok || c.Name != "begins_with" || len(c.Args) != 2 {
		t.Fatalf("%+v", cs[1])
	}
	if b := cs[5].(Binary); b.R.(Lit).V.Str != "-1500" {
		t.Fatalf("%+v", b)
	}
	if b := cs[6].(Binary); b.Op != "<>" {
		t.Fatalf("%+v", b)
	}
}

func TestWrites(t *testing.T) {
	st := mustParse(t, `INSERT INTO "Music" VALUE {'Artist': 'A', 'n': 1, 'l': [1, 'x', NULL, true], 'm': {'k': <<'a', 'b'>>}, 'p': ?};`)
	if st.Kind != Insert || st.Params != 1 {
		t.Fatalf("%+v", st)
	}
	v, err := Value(st.Value, []attr.Value{attr.StrValue("param")})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"M":{"Artist":{"S":"A"},"l":{"L":[{"N":"1"},{"S":"x"},{"NULL":true},{"BOOL":true}]},"m":{"M":{"k":{"SS":["a","b"]}}},"n":{"N":"1"},"p":{"S":"param"}}}`
	if got := string(attr.AppendValue(nil, v)); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	st = mustParse(t, `UPDATE t SET a = 1, b = a + 2 SET c = list_append(c, [1]) REMOVE d, e[1] SET f = set_add(f, <<1>>) WHERE pk = 'x' RETURNING MODIFIED NEW *`)
	if st.Kind != Update || len(st.Actions) != 6 || st.Returning != "UPDATED_NEW" || st.Actions[3].Value != nil {
		t.Fatalf("%+v", st)
	}
	st = mustParse(t, `DELETE FROM t WHERE pk = 'x' AND sk = 2 RETURNING ALL OLD *`)
	if st.Kind != Delete || st.Returning != "ALL_OLD" {
		t.Fatalf("%+v", st)
	}
	st = mustParse(t, `EXISTS(SELECT * FROM t WHERE pk = 'x' AND n > 1)`)
	if st.Kind != Exists {
		t.Fatalf("%+v", st)
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{"", "Member must have length greater than or equal to 1"},
		{strings.Repeat(" ", MaxStatementLength+1), "less than or equal to 8192"},
		{"SELECT * FROM t WHERE a = 'x", "unterminated string"},
		{`SELECT * FROM "t`, "unterminated quoted identifier"},
		{"SELECT * FROM t WHERE", "unexpected end of statement"},
		{"SELECT a, * FROM t", "Other attributes should not be present"},
		{"SELECT a AS b FROM t", "Aliasing is not supported"},
		{"SELECT * FROM t.i.j", "at most 2 components"},
		{"SELECT * FROM t WHERE a = MISSING", "MISSING must be compared using IS operator"},
		{"SELECT * FROM t WHERE a IN ()", "IN operator must have"},
		{"SELECT * FROM t WHERE a IS FOO", "Unsupported data type for IS operator"},
		{"SELECT * FROM t SELECT", "Only one operation is allowed in a statement."},
		{"SELECT * FROM t LIMIT 3", "Unsupported clause: LIMIT"},
		{"SELECT * FROM select", "reserved"},
		{"INSERT INTO t VALUES ('a')", "Inserting multiple items"},
		{"INSERT INTO t VALUE 'a'", "Please use struct format"},
		{"INSERT INTO t VALUE {'a': 1} RETURNING ALL OLD *", "RETURNING is not supported in INSERT"},
		{"INSERT INTO t VALUE {a: 1}", "Tuple keys must be of type String"},
		{"UPDATE t SET a = 1", "Where clause does not contain a mandatory equality on all key attributes"},
		{"UPDATE t ADD a 1 WHERE pk = 1", "Only SET and REMOVE are supported"},
		{"UPDATE t SET a = 1 WHERE pk = 1 RETURNING ALL NEW", "Expected '*'"},
		{"DELETE FROM t", "Where clause does not contain a mandatory equality on all key attributes"},
		{"DELETE FROM t WHERE pk = 1 RETURNING ALL NEW *", "Only RETURNING ALL OLD * is allowed in DELETE statements."},
		{"DROP TABLE t", "Unsupported operation: DROP"},
		{"SELECT * FROM t WHERE a = 1e999", "Number overflow"},
		{"SELECT * FROM t WHERE a[*] = 1", "Wildcard path component"},
		{"SELECT * FROM t WHERE a = <<>>", "Empty bags are not supported"},
		{"SELECT * FROM t WHERE a = #", "Unsupported token in expression: #"},
		{"SELECT * FROM t WHERE " + strings.Repeat("(", 70) + "a = 1" + strings.Repeat(")", 70), "nests more than 64 levels"},
	} {
		parseErr(t, c.s, c.want)
	}
}

func TestValueErrors(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{`INSERT INTO t VALUE {'a': 1, 'a': 2}`, "Duplicate keys in tuple. Key: a under item"},
		{`INSERT INTO t VALUE {'a': <<1, 'x'>>}`, "Unexpected data type S in Number Set under key a"},
		{`INSERT INTO t VALUE {'a': <<1, 1>>}`, "contains duplicates"},
		{`INSERT INTO t VALUE {'a': <<[1]>>}`, "Unsupported data type in Bag"},
		{`INSERT INTO t VALUE {'a': b}`, "Unsupported data type"},
		{`INSERT INTO t VALUE {'a': ` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, "Nesting Levels have exceeded supported limits"},
	} {
		st := mustParse(t, c.s)
		_, err := Value(st.Value, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%q: %v, want %q", c.s, err, c.want)
		}
	}
	st := mustParse(t, "SELECT * FROM t WHERE a = ? AND b = ?")
	if err := st.CheckParams([]attr.Value{attr.StrValue("x")}); err == nil || err.Error() != "Number of parameters in request and statement don't match." {
		t.Fatalf("%v", err)
	}
}

// adversarial returns statements of MaxStatementLength built to make a
// careless parser slow.
func adversarial() map[string]string {
	const max = MaxStatementLength
	fill := func(unit string) string { return strings.Repeat(unit, max/len(unit)+1)[:max] }
	pre := "SELECT * FROM t WHERE "
	return map[string]string{
		"parens":      pre + fill("("),
		"NOT":         pre + fill("NOT "),
		"AND chain":   pre + fill("a = 1 AND "),
		"OR chain":    pre + fill("(a = ?) OR "),
		"IN list":     pre + "a IN (" + fill("1, "),
		"paths":       pre + fill("a.b[1].\"c\"."),
		"lists":       "INSERT INTO t VALUE {'a': " + fill("["),
		"maps":        "INSERT INTO t VALUE " + fill("{'a': "),
		"sets":        pre + "a = <<" + fill("'x', "),
		"calls":       pre + fill("size("),
		"strings":     pre + "a = '" + fill("''"),
		"projection":  "SELECT " + fill("a, "),
		"update":      "UPDATE t " + fill("SET a = b + 1 "),
		"remove":      "UPDATE t REMOVE " + fill("a, "),
		"unmatched [": pre + "a IN " + fill("["),
		"minus":       pre + "a = " + fill("- "),
		"comments":    pre + fill("-- x\n"),
	}
}

func TestParseIsLinear(t *testing.T) {
	for name, s := range adversarial() {
		t.Run(name, func(t *testing.T) {
			checkLinear(t, s)
		})
	}
}

// checkLinear parses s and fails when the parser did more steps than a
// fixed multiple of the input allows.
func checkLinear(t *testing.T, s string) {
	t.Helper()
	toks, err := lex(s)
	if err != nil {
		return
	}
	p := &parser{toks: toks, budget: 1 << 30}
	if _, err := p.statement(); err == nil && p.peek().kind != tEOF {
		_ = err
	}
	if limit := 8*len(toks) + 64; p.steps > limit {
		t.Fatalf("%d steps for %d tokens (limit %d)", p.steps, len(toks), limit)
	}
	_, _ = Parse(s)
}

func FuzzParseLinear(f *testing.F) {
	for _, s := range []string{
		`SELECT * FROM "t" WHERE a = ? AND b.c[1] IN (1, 'x') ORDER BY a DESC`,
		`INSERT INTO t VALUE {'a': [1, {'b': <<1, 2>>}], 'c': NULL}`,
		`UPDATE t SET a = list_append(a, [1]) REMOVE b WHERE pk = 1 RETURNING ALL NEW *`,
		`DELETE FROM t WHERE pk = 1 AND NOT x IS MISSING`, `EXISTS(SELECT * FROM t WHERE pk = 1)`,
		"((((", "'", `"`, "<<>>", "{'", "--",
	} {
		f.Add(s)
	}
	for _, s := range adversarial() {
		f.Add(s[:256])
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > MaxStatementLength {
			return
		}
		checkLinear(t, s)
		st, err := Parse(s)
		if err != nil {
			if _, ok := err.(*attr.Error); !ok {
				t.Fatalf("%q: error %T", s, err)
			}
			return
		}
		params := make([]attr.Value, st.Params)
		for i := range params {
			params[i] = attr.StrValue("p")
		}
		if st.Value != nil {
			_, _ = Value(st.Value, params)
		}
	})
}

// BenchmarkAdversarial times the adversarial statements; the bound is
// 10 ms per statement (worst-µs), see docs/benchmarks.md.
func BenchmarkAdversarial(b *testing.B) {
	for name, s := range adversarial() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			var worst time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if st, err := Parse(s); err == nil && st.Value != nil {
					_, _ = Value(st.Value, nil)
				}
				if d := time.Since(start); d > worst {
					worst = d
				}
			}
			b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
		})
	}
}

func TestItemNesting(t *testing.T) {
	deep := attr.StrValue("x")
	for i := 0; i < 30; i++ {
		deep = attr.ListValue([]attr.Value{deep})
	}
	// 30 levels in the parameter, 2 more around it: 32, the limit.
	st := mustParse(t, `INSERT INTO t VALUE {'a': [[?]]}`)
	if _, err := Item(st.Value, []attr.Value{deep}); err != nil {
		t.Fatalf("32 levels: %v", err)
	}
	st = mustParse(t, `INSERT INTO t VALUE {'a': [[[?]]]}`)
	if _, err := Item(st.Value, []attr.Value{deep}); err == nil || err.Error() != "Nesting Levels have exceeded supported limits" {
		t.Fatalf("33 levels: %v", err)
	}
	st = mustParse(t, `INSERT INTO t VALUE ?`)
	if _, err := Item(st.Value, []attr.Value{attr.StrValue("x")}); err == nil || !strings.Contains(err.Error(), "struct format") {
		t.Fatalf("a string as the item: %v", err)
	}
}
