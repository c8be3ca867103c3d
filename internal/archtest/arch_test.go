// Package archtest enforces the dependency direction of ARCHITECTURE.md.
package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const mod = "github.com/extenddb/extenddb/"

// rules: a package (prefix) must not import these prefixes.
var rules = []struct{ pkg, forbidden string }{
	{"internal/engine", "internal/api"},
	{"internal/storage", "internal/engine"},
	{"internal/storage", "internal/api"},
	{"internal/expr", "internal/storage"},
	{"internal/expr", "internal/engine"},
	{"internal/attr", "internal/"},
	{"internal/store", "internal/storage"},
	{"internal/store", "internal/engine"},
	{"internal/format", "internal/storage"},
	{"internal/format", "internal/store"},
	{"internal/format", "internal/engine"},
}

func TestDependencyDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/extenddb/extenddb/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	checked := 0
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(f[0], mod)
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, mod) {
				continue
			}
			imp = strings.TrimPrefix(imp, mod)
			checked++
			if imp == "internal/api" || strings.HasPrefix(imp, "internal/api/") {
				if !strings.HasPrefix(pkg, "internal/api") && !strings.HasPrefix(pkg, "internal/server") && !strings.HasPrefix(pkg, "cmd/") {
					t.Errorf("%s imports %s: nothing but the server wiring imports api", pkg, imp)
				}
			}
			// No backend imports another backend.
			if strings.HasPrefix(pkg, "internal/storage/") && strings.HasPrefix(imp, "internal/storage/") &&
				!strings.HasPrefix(imp, "internal/storage/storagetest") && !strings.HasPrefix(pkg, "internal/storage/storagetest") {
				pb := strings.SplitN(strings.TrimPrefix(pkg, "internal/storage/"), "/", 2)[0]
				ib := strings.SplitN(strings.TrimPrefix(imp, "internal/storage/"), "/", 2)[0]
				if pb != ib {
					t.Errorf("backend %s imports backend %s", pkg, imp)
				}
			}
			for _, r := range rules {
				if (pkg == r.pkg || strings.HasPrefix(pkg, r.pkg+"/")) && strings.HasPrefix(imp, r.forbidden) &&
					!(r.forbidden == "internal/" && strings.HasPrefix(imp, r.pkg)) &&
					!(strings.HasPrefix(imp, r.pkg)) {
					t.Errorf("%s imports %s (forbidden: %s must not import %s)", pkg, imp, r.pkg, r.forbidden)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no internal imports inspected")
	}
}
