package engine

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestMain reports which backends the engine's tests exercised: SQLite
// and memory (core_memory_test.go) always; PostgreSQL (the multi-server
// tests) when EXTENDDB_TEST_BACKENDS names it.
func TestMain(m *testing.M) {
	code := m.Run()
	pg := "postgres NOT exercised (EXTENDDB_TEST_BACKENDS does not name postgres)"
	for _, b := range strings.Split(os.Getenv("EXTENDDB_TEST_BACKENDS"), ",") {
		if strings.TrimSpace(b) == "postgres" {
			pg = "postgres (multi-server tests)"
		}
	}
	fmt.Printf("engine backends exercised: sqlite, memory (core operations), %s\n", pg)
	os.Exit(code)
}
