package expr

import (
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

var fuzzNames = map[string]string{"#a": "a", "#n": "Name", "#m": "m", "#l": "l"}

var fuzzSeeds = []string{
	"a = :s", "a <> :n1 AND b < :n5 OR NOT c >= :s", "(a = :s) AND ((b = :s))", "a BETWEEN :n1 AND :n5",
	"a IN (:s, :n1, :l)", "attribute_exists(#m.k[0])", "attribute_type(a, :tS)", "begins_with(a, :pre)",
	"contains(l, :m)", "size(a) > :n1", "size(a)", "foo(a, b", "((a))", "a.b.c[1][2].#n = :s", "a[", "a]",
	"SET a = :s", "SET a = a + :n1, b = list_append(if_not_exists(b, :l), :l2) REMOVE c[0], c[2] ADD d :n1 DELETE e :ss",
	"SET #l[5] = :s", "REMOVE #m.k", "ADD a :ss", "DELETE a :ssx", "SET a = (b - :n1)", "SET a = :s SET b = :s",
	"a, b.c, #l[1]", "a, a.b", "pk = :s AND begins_with(sk, :pre)", "pk = :s AND sk BETWEEN :n1 AND :n10",
	"#", ":", "é", "\x00", "NOT NOT NOT", "a = :s AND", "(((((((((", ")))))", "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g = :s",
	"SET m.x = :n1, l[99999999999999999999] = :s",
}

func addSeeds(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
}

func fuzzItem(t testing.TB) attr.Item {
	return mustItem(t, `{"a":{"N":"1"},"b":{"L":[{"S":"x"}]},"c":{"L":[{"N":"1"},{"N":"2"},{"N":"3"}]},"e":{"SS":["x","q"]},
		"Name":{"S":"n"},"m":{"M":{"k":{"L":[{"S":"v"}]},"x":{"N":"2"}}},"l":{"L":[{"N":"0"}]}}`)
}

func fuzzEnv(t *testing.T) *Env {
	env, err := NewEnv(fuzzNames, decodeValues(t, testValues))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

func FuzzParseCondition(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		item := fuzzItem(t)
		for _, k := range []Kind{KindCondition, KindFilter} {
			c, err := ParseCondition(k, s, fuzzEnv(t))
			if err != nil {
				if _, ok := err.(*attr.Error); !ok {
					t.Fatalf("%q: error %T", s, err)
				}
				continue
			}
			c.Eval(item)
			c.Eval(nil)
		}
	})
}

func FuzzParseKeyCondition(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		kc, err := ParseKeyCondition(s, fuzzEnv(t))
		if err != nil {
			if _, ok := err.(*attr.Error); !ok {
				t.Fatalf("%q: error %T", s, err)
			}
			return
		}
		if len(kc.Terms) < 1 || len(kc.Terms) > 2 {
			t.Fatalf("%q: %d terms", s, len(kc.Terms))
		}
		for _, term := range kc.Terms {
			if term.Name == "" || (term.Op == BETWEEN) != (len(term.Values) == 2) {
				t.Fatalf("%q: bad term %+v", s, term)
			}
		}
		kc.Eval(fuzzItem(t))
	})
}

func FuzzParseUpdate(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseUpdate(s, fuzzEnv(t))
		if err != nil {
			if _, ok := err.(*attr.Error); !ok {
				t.Fatalf("%q: error %T", s, err)
			}
			return
		}
		old := fuzzItem(t)
		before := string(attr.EncodeItem(old))
		for _, in := range []attr.Item{old, nil, {}} {
			if _, err := u.Apply(in); err != nil {
				if _, ok := err.(*attr.Error); !ok {
					t.Fatalf("%q: apply error %T", s, err)
				}
			}
		}
		if string(attr.EncodeItem(old)) != before {
			t.Fatalf("%q: Apply modified its input", s)
		}
		_ = u.UpdatedPaths()
	})
}

func FuzzParseProjection(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProjection(s, fuzzEnv(t))
		if err != nil {
			if _, ok := err.(*attr.Error); !ok {
				t.Fatalf("%q: error %T", s, err)
			}
			return
		}
		p.Apply(fuzzItem(t))
		_ = p.TopLevelNames()
	})
}
