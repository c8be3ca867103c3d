package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// bin is the extenddb binary built once for these tests, stamped like
// `make build` stamps it.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "extenddb-cmd-test")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "extenddb")
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X main.version=v9.8.7-test -X main.commit=0123456789abcdef0123 -X main.date=2026-11-30T10:00:00Z", ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("building extenddb: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func run(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "EXTENDDB_CONFIG=")
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

const wantVersion = "extenddb v9.8.7-test (commit 0123456789ab, 2026-11-30T10:00:00Z, go"

func TestVersionFlagAndCommand(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		out, code := run(t, t.TempDir(), args...)
		if code != 0 || !strings.HasPrefix(out, wantVersion) || strings.Count(out, "\n") != 1 {
			t.Errorf("extenddb %v: exit %d, output %q; want one line starting %q", args, code, out, wantVersion)
		}
	}
}

// TestStatusChangesNothing: status in an empty directory reports every
// migration pending and leaves the directory empty; on a migrated
// database it leaves the files as they were.
func TestStatusChangesNothing(t *testing.T) {
	dir := t.TempDir()
	out, code := run(t, dir, "status")
	if code != 0 || !strings.Contains(out, "pending: [0001_init") || !strings.Contains(out, "database: none at") {
		t.Fatalf("status: exit %d, %q", code, out)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("status created %v in an empty directory", ents)
	}
	if out, code := run(t, dir, "migrate"); code != 0 {
		t.Fatalf("migrate: %d %s", code, out)
	}
	before := listing(t, filepath.Join(dir, "extenddb-data"))
	out, code = run(t, dir, "status")
	if code != 0 || !strings.Contains(out, "applied: [0001_init") || !strings.Contains(out, "pending: []") {
		t.Fatalf("status after migrate: exit %d, %q", code, out)
	}
	if after := listing(t, filepath.Join(dir, "extenddb-data")); after != before {
		t.Fatalf("status changed the data directory:\nbefore %s\nafter  %s", before, after)
	}
}

func listing(t *testing.T, dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		fi, _ := e.Info()
		b.WriteString(e.Name() + ":" + fi.ModTime().String() + ":" + strconv.FormatInt(fi.Size(), 10) + " ")
	}
	return b.String()
}

// TestUnknownCommand names the command and lists the real ones.
func TestUnknownCommand(t *testing.T) {
	out, code := run(t, t.TempDir(), "frobnicate")
	if code == 0 || !strings.Contains(out, `unknown command "frobnicate"`) || !strings.Contains(out, "serve") {
		t.Fatalf("exit %d, %q", code, out)
	}
	if strings.Contains(out, "No help topic") {
		t.Fatalf("still the urfave message: %q", out)
	}
}
