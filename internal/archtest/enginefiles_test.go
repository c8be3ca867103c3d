package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The files of internal/engine stand on floors (docs/architecture.md,
// "The engine's floors"): a file uses declarations of its own floor and
// the floors below, never of a floor above. "Uses" is file-level: a file
// names a function, type, method, field, variable or constant declared
// in another file of the package.

// engineFloors places each non-test file of internal/engine. A file not
// listed stands on the operations floor (3): a new operation needs no
// entry, a new file that lower floors use does.
var engineFloors = map[string]int{
	// 0 vocabulary: API types, errors, keys, the table and stream model,
	// capacity arithmetic.
	"types.go": 0, "errors.go": 0, "exprparams.go": 0, "legacy.go": 0, "keys.go": 0,
	"table_model.go": 0, "stream_model.go": 0, "capacity.go": 0,
	// 1 core: the Engine, loading table descriptions, version fencing.
	"engine.go": 1, "table_load.go": 1, "table_list.go": 1, "fence.go": 1,
	// 2 services: background work, statistics, change logs, PITR.
	"background.go": 2, "bgmetrics.go": 2, "stats.go": 2, "streams.go": 2, "streams_shards.go": 2, "pitr.go": 2,
	// 3 operations: one public operation (or family) per file, and the
	// write path they share (item.go).
	"item.go": 3, "put_item.go": 3, "get_item.go": 3, "update_item.go": 3, "delete_item.go": 3,
	"batch.go": 3, "query.go": 3, "transact.go": 3, "table.go": 3, "update_table.go": 3,
	"ttl_tags.go": 3, "streams_api.go": 3, "pitr_restore.go": 3, "backup.go": 3,
	"table_keys.go": 3, "update_table_rules.go": 3, "export.go": 3, "import.go": 3,
	// 4 front: PartiQL statements and bulk load, built on the operations.
	"partiql.go": 4, "partiql_multi.go": 4, "load.go": 4,
}

// operationsFloor is the floor of a file engineFloors does not list.
const operationsFloor = 3

// engineFloorExceptions are the uses that run up a floor, with the reason.
var engineFloorExceptions = map[string]string{
	// engine.go is the composition root: the Engine struct holds the
	// services of the floors above and New starts them.
	"engine.go -> background.go":     "composition root",
	"engine.go -> backup.go":         "composition root",
	"engine.go -> bgmetrics.go":      "composition root",
	"engine.go -> export.go":         "composition root",
	"engine.go -> import.go":         "composition root",
	"engine.go -> partiql.go":        "composition root",
	"engine.go -> pitr.go":           "composition root",
	"engine.go -> stats.go":          "composition root",
	"engine.go -> streams_shards.go": "composition root",
	"engine.go -> transact.go":       "composition root",
}

func floorOf(file string) int {
	if f, ok := engineFloors[file]; ok {
		return f
	}
	return operationsFloor
}

// upwardUses lists the edges of a file graph that run up a floor and are
// not excepted.
func upwardUses(g map[string]map[string]bool) []string {
	var out []string
	for from, tos := range g {
		for to := range tos {
			e := from + " -> " + to
			if floorOf(from) < floorOf(to) && engineFloorExceptions[e] == "" {
				out = append(out, fmt.Sprintf("%s: floor %d uses floor %d (internal/archtest engineFloors)", e, floorOf(from), floorOf(to)))
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestEngineFloors(t *testing.T) {
	g := fileGraph(t, "../engine", nil)
	if len(g) < 20 {
		t.Fatalf("only %d engine files found", len(g))
	}
	for _, v := range upwardUses(g) {
		t.Error(v)
	}
	for f := range engineFloors {
		if _, ok := g[f]; !ok {
			t.Errorf("engineFloors lists %s, which internal/engine no longer has", f)
		}
	}
	for e := range engineFloorExceptions {
		from, to, _ := strings.Cut(e, " -> ")
		if !g[from][to] {
			t.Errorf("engineFloorExceptions lists %s, which is no longer used: remove it", e)
		}
	}
}

// TestEngineFloorsCatch proves the check fails on a use that runs up.
func TestEngineFloorsCatch(t *testing.T) {
	g := map[string]map[string]bool{
		"keys.go":    {"put_item.go": true},   // 0 -> 3
		"item.go":    {"keys.go": true},       // 3 -> 0: fine
		"newfile.go": {"partiql.go": true},    // unlisted (3) -> 4
		"engine.go":  {"background.go": true}, // excepted
	}
	got := upwardUses(g)
	if len(got) != 2 || !strings.HasPrefix(got[0], "keys.go -> put_item.go") || !strings.HasPrefix(got[1], "newfile.go -> partiql.go") {
		t.Errorf("upwardUses = %q", got)
	}
}

// fileGraph type-checks the non-test Go files of dir and returns, for
// each file, the other files of the package whose package-level
// declarations (functions, types, methods, fields, variables, constants)
// it uses.
func fileGraph(t *testing.T, dir string, symbols map[string][]string) map[string]map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	// Imported packages are left empty (type-checking them would take
	// minutes): the uses of this package's own declarations, the only
	// ones that matter here, still resolve; errors about imported
	// names are expected and ignored.
	conf := types.Config{Importer: emptyImporter{}, Error: func(error) {}}
	pkg, _ := conf.Check("engine", fset, files, info)
	g := map[string]map[string]bool{}
	for _, f := range files {
		g[filepath.Base(fset.Position(f.Pos()).Filename)] = map[string]bool{}
	}
	add := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return
		}
		// Only package-level objects, methods and fields: locals stay in
		// their file anyway.
		switch o := obj.(type) {
		case *types.Func, *types.TypeName, *types.Const:
		case *types.Var:
			if !o.IsField() && o.Parent() != pkg.Scope() {
				return
			}
		default:
			return
		}
		from := filepath.Base(fset.Position(at).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from != to {
			if _, ok := g[to]; ok {
				g[from][to] = true
				if symbols != nil {
					symbols[from+" -> "+to] = append(symbols[from+" -> "+to], obj.Name())
				}
			}
		}
	}
	for id, obj := range info.Uses {
		add(id.Pos(), obj)
	}
	return g
}

func TestEngineFileGraphDump(t *testing.T) {
	if os.Getenv("ENGINE_FILE_GRAPH") == "" {
		t.Skip("set ENGINE_FILE_GRAPH=1 to print the graph")
	}
	symbols := map[string][]string{}
	g := fileGraph(t, "../engine", symbols)
	var lines []string
	for from, tos := range g {
		for to := range tos {
			e := from + " -> " + to
			s := symbols[e]
			sort.Strings(s)
			lines = append(lines, e+" "+strings.Join(slices.Compact(s), ","))
		}
	}
	sort.Strings(lines)
	t.Log("\n" + strings.Join(lines, "\n"))
}

type emptyImporter struct{}

func (emptyImporter) Import(path string) (*types.Package, error) {
	p := types.NewPackage(path, filepath.Base(path))
	p.MarkComplete()
	return p, nil
}
