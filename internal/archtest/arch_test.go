// Package archtest enforces the dependency direction of docs/architecture.md
// as an allow-list: every package of the module names the packages of the
// module it may import. A new package, or a new import between packages,
// fails this test until the list (and the architecture document) says it
// is intended.
package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const mod = "github.com/extenddb/extenddb/"

// allowed maps each package to the module packages its non-test code may
// import. Keep it in step with the dependency picture in
// docs/architecture.md.
var allowed = map[string][]string{
	"cmd/benchfloor": {},
	"cmd/extenddb":   {"internal/admincli", "internal/bench", "internal/buildinfo", "internal/config", "internal/server"},
	// The operator subcommands' client and printing, above the server
	// (OpenBackend); internal/api only for its tests' server.
	"internal/admincli": {"internal/api", "internal/backup", "internal/config", "internal/engine", "internal/server", "internal/blobstore"},
	"internal/server":   {"internal/api", "internal/attr", "internal/backup", "internal/backup/plan", "internal/buildinfo", "internal/config", "internal/console", "internal/engine", "internal/format", "internal/backend", "internal/backend/cassandra", "internal/backend/memory", "internal/backend/mongodb", "internal/backend/postgres", "internal/backend/sqlite", "internal/blobstore", "migrations"},
	"internal/api":      {"internal/attr", "internal/engine"},
	// The web console: embedded static files, a client of the API like any
	// SDK, so it imports nothing of ours.
	"internal/console":   {},
	"internal/engine":    {"internal/attr", "internal/expr", "internal/partiql", "internal/backend"},
	"internal/expr":      {"internal/attr"},
	"internal/partiql":   {"internal/attr"},
	"internal/attr":      {},
	"internal/bench":     {},
	"internal/buildinfo": {},
	"internal/config":    {"internal/backup/plan", "internal/blobstore"},
	"internal/archtest":  {},
	// The contract and its conformance suite; backends import only them
	// (and their migrations, and config for its Duration key type), never
	// another backend or the engine.
	"internal/backend":             {},
	"internal/backend/backendtest": {"internal/attr", "internal/backend"},
	"internal/backend/sqlite":      {"internal/backend", "internal/backend/itemcache", "internal/backend/sqlutil", "migrations"},
	"internal/backend/postgres":    {"internal/backend", "internal/backend/itemcache", "internal/backend/sqlutil", "migrations"},
	// What the two SQL backends share below the contract (page planning,
	// cursor seeks, row buffers).
	"internal/backend/sqlutil":   {"internal/backend"},
	"internal/backend/memory":    {"internal/backend"},
	"internal/backend/cassandra": {"internal/config", "internal/backend", "internal/backend/snapepoch", "internal/backend/txledger"},
	// The per-item compare-and-set transaction ledger (ADR 0019), shared
	// by the backends without multi-item atomicity.
	"internal/backend/txledger":            {"internal/backend"},
	"internal/backend/txledger/ledgertest": {"internal/backend", "internal/backend/txledger"},
	"internal/backend/mongodb":             {"internal/config", "internal/backend", "internal/backend/snapepoch", "internal/backend/txledger"},
	"internal/backend/snapepoch":           {},
	"internal/backend/itemcache":           {},
	"migrations":                           {},
	// Backups: format knows items, store knows nothing of ours, and the
	// jobs join storage (snapshots, catalog), store and format — never the
	// engine or the wire.
	"internal/format": {"internal/attr"},
	// AWS-format exports: the layout of ExportTableToPointInTime, written
	// to any store.
	"internal/format/awsexport":          {"internal/attr", "internal/format", "internal/blobstore"},
	"internal/blobstore":                 {},
	"internal/blobstore/memstore":        {"internal/blobstore"},
	"internal/blobstore/faultstore":      {"internal/blobstore"},
	"internal/blobstore/storetest":       {"internal/blobstore"},
	"internal/blobstore/internal/s3test": {"internal/blobstore"},
	"internal/backup":                    {"internal/attr", "internal/backup/plan", "internal/format", "internal/format/awsexport", "internal/backend", "internal/blobstore"},
	// Backup plans' pure rules (schedules, names, retention).
	"internal/backup/plan": {},
	"tests/sdk":            {},
	"tests/abuse":          {},

	// The wire suite's in-memory S3 server (test-only command).
	"internal/blobstore/internal/s3test/fakes3": {},
}

// testSupport are packages any test may import besides its package's own
// allow-list: conformance suites, test stores, and the backends as the
// real storage under engine and api tests (PostgreSQL for the engine's
// multi-server tests: several servers on one database).
var testSupport = []string{
	"internal/backend", "internal/backend/backendtest", "internal/backend/sqlite", "internal/backend/postgres", "internal/blobstore/storetest",
	"internal/backend/txledger/ledgertest", "internal/backend/memory",
	"internal/blobstore/memstore", "internal/blobstore/faultstore", "internal/blobstore/internal/s3test",
	"internal/config", "internal/server",
}

// violations checks an import graph (package -> imports, module-relative)
// against the allow-list; tests names the graph of test imports.
func violations(graph, tests map[string][]string) []string {
	var out []string
	for pkg, imps := range graph {
		allow, known := allowed[pkg]
		if !known {
			out = append(out, pkg+": not in the allow-list (internal/archtest): add it with what it may import")
			continue
		}
		for _, imp := range imps {
			if imp != pkg && !contains(allow, imp) {
				out = append(out, pkg+" imports "+imp+": not allowed")
			}
		}
	}
	for pkg, imps := range tests {
		for _, imp := range imps {
			if imp != pkg && !contains(allowed[pkg], imp) && !contains(testSupport, imp) {
				out = append(out, pkg+" (tests) imports "+imp+": not allowed")
			}
		}
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func importGraph(t *testing.T, format string) map[string][]string {
	out, err := exec.Command("go", "list", "-f", format, mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(f[0], mod)
		g[pkg] = g[pkg][:0:0]
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, mod) {
				g[pkg] = append(g[pkg], strings.TrimPrefix(imp, mod))
			}
		}
	}
	return g
}

func TestDependencyDirection(t *testing.T) {
	graph := importGraph(t, `{{.ImportPath}} {{join .Imports " "}}`)
	tests := importGraph(t, `{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}`)
	if len(graph) < 10 {
		t.Fatalf("only %d packages listed", len(graph))
	}
	for _, v := range violations(graph, tests) {
		t.Error(v)
	}
}

// TestAllowListCatches proves the check fails on imports outside the list.
func TestAllowListCatches(t *testing.T) {
	cases := []struct {
		graph, tests map[string][]string
		want         string
	}{
		{map[string][]string{"internal/engine": {"internal/api"}}, nil, "internal/engine imports internal/api"},
		{map[string][]string{"internal/backup": {"internal/engine"}}, nil, "internal/backup imports internal/engine"},
		{map[string][]string{"internal/backend/sqlite": {"internal/backend/postgres"}}, nil, "internal/backend/sqlite imports internal/backend/postgres"},
		{map[string][]string{"internal/format": {"internal/blobstore"}}, nil, "internal/format imports internal/blobstore"},
		{map[string][]string{"internal/newpkg": nil}, nil, "internal/newpkg: not in the allow-list"},
		{nil, map[string][]string{"internal/expr": {"internal/engine"}}, "internal/expr (tests) imports internal/engine"},
	}
	for _, c := range cases {
		got := violations(c.graph, c.tests)
		if len(got) != 1 || !strings.HasPrefix(got[0], c.want) {
			t.Errorf("graph %v tests %v: violations %q, want one starting %q", c.graph, c.tests, got, c.want)
		}
	}
	if got := violations(map[string][]string{"internal/engine": {"internal/expr", "internal/backend"}}, nil); len(got) != 0 {
		t.Errorf("allowed imports reported: %q", got)
	}
}
