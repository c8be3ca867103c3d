package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseCount(t *testing.T) {
	for in, want := range map[string]int{"10000": 10000, "10k": 10000, "1M": 1000000, "10M": 10000000, "100K": 100000} {
		if got, err := parseCount(in); err != nil || got != want {
			t.Errorf("parseCount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "k", "-5", "0", "1.5M", "ten"} {
		if _, err := parseCount(in); err == nil {
			t.Errorf("parseCount(%q) accepted", in)
		}
	}
}

func TestCountLabel(t *testing.T) {
	for n, want := range map[int]string{10000: "10k", 1000000: "1M", 10000000: "10M", 2500000: "2.5M", 150: "150"} {
		if got := countLabel(n); got != want {
			t.Errorf("countLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

func scaleFixture() *ScaleReport {
	size := func(items int, cpu, p99 float64, disk int64) ScaleSize {
		s := ScaleSize{Items: items, DiskBytes: disk, Workloads: map[string]Result{}}
		for _, w := range ScaleWorkloads {
			s.Workloads[w] = Result{Workload: w, P99Micros: p99, Server: &ServerStats{CPUMicrosPerOp: cpu}}
		}
		return s
	}
	return &ScaleReport{
		Backend: "sqlite", CPUs: 2, Concurrency: 16, DurationSec: 10, ItemSize: 1024,
		Sizes:  []ScaleSize{size(10000, 100, 10000, 15_000_000), size(1000000, 130, 11000, 1_500_000_000)},
		Tables: &ScaleTables{Tables: 10000, ReadySec: 2.5, ListTablesSec: 0.2, ListTablesRuns: []float64{0.2}, ListTablesPages: 100},
	}
}

func TestScaleChecksStrict(t *testing.T) {
	rep := scaleFixture()
	cs := scaleChecks(rep, 0)
	byName := map[string]ScaleCheck{}
	for _, c := range cs {
		byName[c.Name] = c
		if c.Enforced {
			t.Errorf("%s enforced without --loose", c.Name)
		}
	}
	// CPU 130/100 = 1.3 > 1.25; p99 1.1 passes.
	if c := byName["getitem server CPU/request, 1M ÷ 10k items"]; c.Pass || c.Value != 1.3 {
		t.Errorf("CPU ratio check: %+v", c)
	}
	if c := byName["getitem p99, 1M ÷ 10k items"]; !c.Pass {
		t.Errorf("p99 ratio check: %+v", c)
	}
	if c := byName["SQLite disk bytes per item at 1M items"]; !c.Pass || c.Value != 1500 {
		t.Errorf("disk check: %+v", c)
	}
	if c := byName["start to /ready with 10k tables"]; c.Pass {
		t.Errorf("ready check: %+v", c)
	}
	if c := byName["ListTables through 10k tables"]; !c.Pass {
		t.Errorf("list check: %+v", c)
	}
	if len(rep.Failed()) != 0 {
		t.Errorf("strict checks failed the run: %v", rep.Failed())
	}
}

func TestScaleChecksLoose(t *testing.T) {
	rep := scaleFixture()
	rep.Checks = scaleChecks(rep, 2)
	for _, c := range rep.Checks {
		if !c.Enforced {
			t.Errorf("%s not enforced with --loose", c.Name)
		}
		if strings.Contains(c.Name, "p99") {
			t.Errorf("p99 checked with --loose: %s", c.Name)
		}
	}
	if f := rep.Failed(); len(f) != 0 {
		t.Errorf("loose checks failed: %v", f)
	}
	rep.Sizes[1].Workloads[ScaleQuery].Server.CPUMicrosPerOp = 250 // 2.5x
	rep.Checks = scaleChecks(rep, 2)
	if f := rep.Failed(); len(f) != 1 || !strings.HasPrefix(f[0].Name, "query server CPU") {
		t.Errorf("a 2.5x CPU ratio: failed %v", f)
	}
}

// Every markdown row has the header's column count (the docs' checker
// rejects anything else).
func TestWriteScaleMarkdown(t *testing.T) {
	rep := scaleFixture()
	rep.Checks = scaleChecks(rep, 0)
	var b bytes.Buffer
	WriteScaleMarkdown(&b, rep)
	cols := -1
	for _, line := range strings.Split(b.String(), "\n") {
		if !strings.HasPrefix(line, "|") {
			cols = -1
			continue
		}
		n := strings.Count(line, "|")
		if cols < 0 {
			cols = n
		} else if n != cols {
			t.Errorf("row %q has %d bars, the table %d", line, n, cols)
		}
	}
	for _, want := range []string{"| getitem server CPU/req | 100.0µs | 130.0µs |", "| 10k small tables | |", "FAIL", "pass"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, b.String())
		}
	}
}
