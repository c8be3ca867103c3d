package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage: docs/architecture.md's package table
// has a row for every package of the module, so the map a newcomer reads
// cannot silently fall behind the code.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	graph := importGraph(t, `{{.ImportPath}}`)
	for _, pkg := range missingFromTable(string(b), graph) {
		t.Errorf("docs/architecture.md: package %s has no row in the package table (section \"Packages\"): add `| `%s` | what it owns | what it must not know |`", pkg, pkg)
	}
}

// missingFromTable lists the packages of graph that no table row of doc
// names in backticks (a row may name several, e.g. "`a`, `b`").
func missingFromTable(doc string, graph map[string][]string) []string {
	named := map[string]bool{}
	for _, line := range strings.Split(doc, "\n") {
		if !isRow(line) {
			continue
		}
		first := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|", 2)[0]
		for _, m := range backticked.FindAllStringSubmatch(first, -1) {
			named[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	var out []string
	for pkg := range graph {
		if !named[pkg] {
			out = append(out, pkg)
		}
	}
	sort.Strings(out)
	return out
}

var backticked = regexp.MustCompile("`([^`]+)`")

// Citations of design documents: "ADR 0019", "adr/0019-transaction-ledger.md",
// "docs/backup.md".
var (
	citeADR     = regexp.MustCompile(`\bADRs? (\d{4})\b`)
	citeADRFile = regexp.MustCompile(`\badr/(\d{4}-[a-z0-9-]+\.md)`)
	citeDoc     = regexp.MustCompile(`\bdocs/([a-z0-9_-]+\.md)\b`)
)

// TestCitationsExist: every ADR or docs/ page that code, scripts, tests or
// docs cite exists, so a reference never points at nothing.
func TestCitationsExist(t *testing.T) {
	adrs, docs := designDocs(t)
	if len(adrs) < 10 || len(docs) < 5 {
		t.Fatalf("found %d ADRs and %d docs: is the walk broken?", len(adrs), len(docs))
	}
	files := 0
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".venv", "node_modules", "testdata", "bin", "__pycache__", "screenshots":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".py", ".js", ".sql", ".toml":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel := strings.TrimPrefix(path, "../../")
		for _, p := range badCitations(string(b), adrs, docs) {
			t.Errorf("%s:%d: cites %s, which does not exist", rel, p.line, p.msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read only %d files: is the walk broken?", files)
	}
}

// designDocs returns the ADR numbers and file names, and the docs/ pages.
func designDocs(t *testing.T) (adrs map[string]bool, docs map[string]bool) {
	adrs, docs = map[string]bool{}, map[string]bool{}
	ents, err := os.ReadDir("../../docs/adr")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n := e.Name(); len(n) > 5 && n[4] == '-' {
			adrs[n[:4]], adrs[n] = true, true
		}
	}
	ents, err = os.ReadDir("../../docs")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			docs[e.Name()] = true
		}
	}
	return adrs, docs
}

func badCitations(text string, adrs, docs map[string]bool) []tableProblem {
	var out []tableProblem
	for i, line := range strings.Split(text, "\n") {
		// Every citation holds one of these: the regular expressions run
		// only on the few lines that may cite (under the race detector
		// they cost 40 s over the repository otherwise).
		if !strings.Contains(line, "ADR") && !strings.Contains(line, "adr/") && !strings.Contains(line, "docs/") {
			continue
		}
		for _, m := range citeADR.FindAllStringSubmatch(line, -1) {
			if !adrs[m[1]] {
				out = append(out, tableProblem{i + 1, "ADR " + m[1]})
			}
		}
		for _, m := range citeADRFile.FindAllStringSubmatch(line, -1) {
			if !adrs[m[1]] {
				out = append(out, tableProblem{i + 1, "adr/" + m[1]})
			}
		}
		for _, m := range citeDoc.FindAllStringSubmatch(line, -1) {
			if !docs[m[1]] {
				out = append(out, tableProblem{i + 1, "docs/" + m[1]})
			}
		}
	}
	return out
}

// TestDocCheckersCatch proves both checks find what they are for.
func TestDocCheckersCatch(t *testing.T) {
	adrs := map[string]bool{"0019": true, "0019-transaction-ledger.md": true}
	docs := map[string]bool{"backup.md": true}
	ok := "see ADR 0019, adr/0019-transaction-ledger.md and docs/backup.md"
	if p := badCitations(ok, adrs, docs); len(p) != 0 {
		t.Errorf("good citations reported: %v", p)
	}
	bad := "x\nADR 0099 and adr/" + "0019-other.md\ndocs/" + "nowhere.md"
	p := badCitations(bad, adrs, docs)
	if len(p) != 3 || p[0].line != 2 || p[2].msg != "docs/"+"nowhere.md" {
		t.Errorf("bad citations: %v", p)
	}
	doc := "| package | owns |\n|---|---|\n| `internal/a`, `internal/b/` | x |\n| y | `internal/c` in prose |\n"
	got := missingFromTable(doc, map[string][]string{"internal/a": nil, "internal/b": nil, "internal/c": nil})
	if len(got) != 1 || got[0] != "internal/c" {
		t.Errorf("missing packages: %v, want [internal/c]", got)
	}
}
