package expr

import (
	"strings"
	"testing"
	"time"
)

// Parsing must be linear in the expression: no input may make the parser
// redo work (an earlier backtracking parser took time doubling with every
// two unmatched parentheses). The parser counts its work in steps; these
// tests bound the steps per token, which does not depend on the machine.

// stepBudget is the most parse steps allowed for an expression of n tokens.
func stepBudget(n int) int { return 6*n + 16 }

// parseAll parses s as every expression kind and returns, per kind, the
// steps taken and the number of tokens.
func parseAll(t testing.TB, s string) (steps, tokens map[string]int) {
	steps, tokens = map[string]int{}, map[string]int{}
	var last *parser
	newParserHook = func(p *parser) { last = p }
	defer func() { newParserHook = nil }()
	record := func(name string) {
		if last != nil {
			steps[name], tokens[name] = last.steps, len(last.toks)
		}
		last = nil
	}
	env := func() *Env {
		env, err := NewEnv(fuzzNames, decodeValues(t, testValues))
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	_, _ = ParseCondition(KindCondition, s, env())
	record("condition")
	_, _ = ParseKeyCondition(s, env())
	record("keycondition")
	_, _ = ParseUpdate(s, env())
	record("update")
	_, _ = ParseProjection(s, env())
	record("projection")
	return steps, tokens
}

func checkLinear(t testing.TB, s string) {
	steps, tokens := parseAll(t, s)
	for kind, n := range steps {
		if n > stepBudget(tokens[kind]) {
			t.Fatalf("%s parse of %d bytes took %d steps for %d tokens (budget %d): %.80q",
				kind, len(s), n, tokens[kind], stepBudget(tokens[kind]), s)
		}
	}
}

// adversarialShapes are expressions of close to 4 KB built to make a
// parser do the most work: deep and unmatched parentheses, long operator
// chains, many functions and names.
func adversarialShapes() map[string]string {
	const max = MaxExpressionLength
	fill := func(unit string) string { return strings.Repeat(unit, max/len(unit)) }
	nest := func(open, mid, close string) string {
		n := (max - len(mid)) / (len(open) + len(close))
		return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
	}
	shapes := map[string]string{
		"unmatched (":            fill("("),
		"unmatched ( then a":     fill("(")[:max-8] + "a = :s",
		"nested condition":       nest("(", "a = :s", ")"),
		"nested operand":         nest("(", "a", ")")[:max-10] + ") = :s",
		"nested left operand":    nest("(", "a", ")")[:max-6] + " = :s",
		"nested NOT":             fill("NOT ") + "a",
		"nested NOT (":           fill("NOT (") + "a = :s",
		"AND chain":              "a = :s" + fill(" AND a = :s")[:max-12],
		"OR of parens":           "(a = :s)" + fill(" OR (a = :s)")[:max-16],
		"nested size":            nest("size(", "a", ")") + " > :n1",
		"functions":              fill("attribute_exists(a) AND ")[:max-30] + "attribute_exists(a)",
		"IN lists":               "a IN (" + fill(":s, ")[:max-20] + ":s)",
		"paths":                  fill("a.b[1].#n.") + "c = :s",
		"names":                  fill("#n = #a AND ")[:max-12] + "#n = :s",
		"set parens":             "SET a = " + nest("(", ":n1 + :n5", ")")[:max-20],
		"set unmatched":          "SET a = " + fill("(")[:max-10],
		"update chain":           "SET " + fill("a = :s, ")[:max-12] + "a = :s",
		"projection":             fill("a, ")[:max-3] + "a",
		"between chain":          fill("a BETWEEN :n1 AND :n5 AND ")[:max-30] + "a = :s",
		"parens and comparators": fill("((a) = (:s)) AND ")[:max-20] + "a = :s",
	}
	for name, s := range shapes {
		if len(s) > max {
			shapes[name] = s[:max]
		}
	}
	return shapes
}

func TestParseIsLinear(t *testing.T) {
	for name, s := range adversarialShapes() {
		t.Run(name, func(t *testing.T) {
			if len(s) > MaxExpressionLength {
				t.Fatalf("shape is %d bytes", len(s))
			}
			checkLinear(t, s)
		})
	}
	// The reported denial of service: a few dozen unmatched "(" in a
	// condition doubled the time every two parentheses.
	for n := 20; n <= 100; n += 20 {
		checkLinear(t, strings.Repeat("(", n))
		checkLinear(t, strings.Repeat("(", n)+"a = :s")
		checkLinear(t, strings.Repeat("(", n)+"a")
	}
}

// FuzzParseLinear fails when any input makes a parser exceed the step
// budget. `make test` runs it briefly, `make test-all` longer.
func FuzzParseLinear(f *testing.F) {
	addSeeds(f)
	for _, s := range adversarialShapes() {
		f.Add(s[:256])
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > MaxExpressionLength {
			return
		}
		checkLinear(t, s)
	})
}

// BenchmarkAdversarial times each adversarial shape: parse (and evaluate
// when it parses) as every expression kind. The acceptance bound is 10 ms
// per expression; see docs/benchmarks.md.
func BenchmarkAdversarial(b *testing.B) {
	item := fuzzItem(b)
	for name, s := range adversarialShapes() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			var worst time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				env, _ := NewEnv(fuzzNames, decodeValues(b, testValues))
				if c, err := ParseCondition(KindFilter, s, env); err == nil {
					c.Eval(item)
				}
				env, _ = NewEnv(fuzzNames, decodeValues(b, testValues))
				_, _ = ParseKeyCondition(s, env)
				env, _ = NewEnv(fuzzNames, decodeValues(b, testValues))
				_, _ = ParseUpdate(s, env)
				env, _ = NewEnv(fuzzNames, decodeValues(b, testValues))
				_, _ = ParseProjection(s, env)
				if d := time.Since(start); d > worst {
					worst = d
				}
			}
			b.ReportMetric(float64(worst.Microseconds()), "worst-µs")
		})
	}
}
