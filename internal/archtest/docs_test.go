package archtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/server"
)

// TestMarkdownTables: every table in README.md and docs/ parses as a
// GitHub-flavoured markdown table: a header, a delimiter row, and the same
// number of cells on every row (a row with a cell too many or too few
// renders wrongly or swallows the rows after it).
func TestMarkdownTables(t *testing.T) {
	files := []string{"../../README.md"}
	err := filepath.WalkDir("../../docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range checkTables(string(b)) {
			t.Errorf("%s:%d: %s", strings.TrimPrefix(f, "../../"), p.line, p.msg)
		}
		tables += countTables(string(b))
	}
	if tables < 5 {
		t.Fatalf("found only %d tables in %d files; is the walk broken?", tables, len(files))
	}
}

type tableProblem struct {
	line int
	msg  string
}

// cells counts the cells of a table row: unescaped pipes split cells (also
// inside code spans, as in GFM); a leading and a trailing pipe are
// optional.
func cells(row string) int {
	row = strings.TrimSpace(row)
	n, pipes := 1, 0
	for i := 0; i < len(row); i++ {
		switch row[i] {
		case '\\':
			i++
		case '|':
			pipes++
		}
	}
	n += pipes
	if strings.HasPrefix(row, "|") {
		n--
	}
	if strings.HasSuffix(row, "|") && !strings.HasSuffix(row, `\|`) && len(row) > 1 {
		n--
	}
	return n
}

func isDelimiter(row string) bool {
	row = strings.TrimSpace(row)
	if !strings.Contains(row, "-") {
		return false
	}
	for _, c := range row {
		if !strings.ContainsRune("|-: ", c) {
			return false
		}
	}
	return true
}

func isRow(line string) bool { return strings.HasPrefix(strings.TrimSpace(line), "|") }

func checkTables(doc string) []tableProblem {
	var out []tableProblem
	lines := strings.Split(doc, "\n")
	fenced := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !isRow(l) {
			continue
		}
		// A table starts here: header, delimiter, rows.
		if i+1 >= len(lines) || !isDelimiter(lines[i+1]) {
			out = append(out, tableProblem{i + 1, "a table row outside a table (no delimiter row after the header?)"})
			for i+1 < len(lines) && isRow(lines[i+1]) {
				i++
			}
			continue
		}
		want := cells(l)
		if got := cells(lines[i+1]); got != want {
			out = append(out, tableProblem{i + 2, "delimiter row has " + itoa(got) + " cells, header " + itoa(want)})
		}
		j := i + 2
		for ; j < len(lines) && isRow(lines[j]); j++ {
			if got := cells(lines[j]); got != want {
				out = append(out, tableProblem{j + 1, "row has " + itoa(got) + " cells, header " + itoa(want) + ": " + lines[j]})
			}
		}
		i = j - 1
	}
	return out
}

func countTables(doc string) int {
	n := 0
	lines := strings.Split(doc, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if isRow(lines[i]) && isDelimiter(lines[i+1]) {
			n++
		}
	}
	return n
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestTableChecker: the checker itself finds the breakage it is for.
func TestTableChecker(t *testing.T) {
	good := "| a | b |\n|---|---|\n| `x \\| y` | 2 |\n| 3 | 4 |\n\n```\n| not | a | table\n```\n"
	if p := checkTables(good); len(p) != 0 {
		t.Fatalf("good table: %v", p)
	}
	bad := "| flag | key |\n|---|---|\n| `--a` | `x` |\n| `--log-level` | `auth.keys` | — | none |\n"
	if p := checkTables(bad); len(p) != 1 || p[0].line != 4 {
		t.Fatalf("bad table: %v", p)
	}
}

// TestDriverDocs: every storage driver's keys and flags are documented in
// docs/configuration.md (the drivers contribute them; this keeps the page
// true when a driver adds one).
func TestDriverDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, d := range server.Drivers() {
		if !strings.Contains(doc, "`"+d.Name+"`") {
			t.Errorf("docs/configuration.md does not name the backend %q", d.Name)
		}
		for _, k := range d.Keys {
			key := "storage." + d.Name + "." + k.Key
			if !strings.Contains(doc, "`"+key+"`") {
				t.Errorf("docs/configuration.md does not document %s", key)
			}
		}
		for _, f := range d.Flags {
			if !strings.Contains(doc, "`--"+f.Name+" ") {
				t.Errorf("docs/configuration.md does not document --%s", f.Name)
			}
		}
	}
}
