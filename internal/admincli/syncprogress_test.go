package admincli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/backup"
)

// TestSyncProgressPlainLines: not a terminal, so plain lines: one at the
// start of a phase and one at its end with the count.
func TestSyncProgressPlainLines(t *testing.T) {
	var buf bytes.Buffer
	p := newSyncProgress(&buf)
	p.Start("listing objects", -1)
	p.Add(12)
	p.Finish()
	p.Start("verifying backups", 3)
	p.Add(1)
	p.Add(2)
	p.Finish()
	out := buf.String()
	for _, want := range []string{"listing objects ...\n", "listing objects: 12, done in", "verifying backups ...\n", "verifying backups: 3/3, done in"} {
		if !strings.Contains(out, want) {
			t.Fatalf("progress %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "\r") || strings.Contains(out, "\x1b") {
		t.Fatalf("terminal codes in plain progress: %q", out)
	}
}

// TestSyncReport: the entries, the summary table (the always-shown rows
// and the others only when they occur) and the unfixed count.
func TestSyncReport(t *testing.T) {
	var buf bytes.Buffer
	n := printSyncReport(&buf, []backup.SyncEntry{
		{Prefix: "a/t/1", ARN: "arn1", Outcome: backup.OutcomeAdopted},
		{Prefix: "a/t/2", Outcome: backup.OutcomeIncomplete, Detail: "no sidecar"},
		{ARN: "arn3", Outcome: backup.OutcomeOtherStore},
	})
	out := buf.String()
	if n != 2 {
		t.Fatalf("unfixed = %d, want 2", n)
	}
	for _, want := range []string{"PREFIX", "a/t/2", "SUMMARY", "already known", "moved", "forgotten", "rows of another store",
		"1 adopted, 0 known, 1 incomplete, 0 missing, 0 pruned, 1 other-store, 0 moved, 0 forgotten\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("report %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "dry run") {
		t.Fatalf("dry-run rows shown without dry-run outcomes: %q", out)
	}
}
