package bench

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestWriteTable(t *testing.T) {
	results := []Result{
		{Workload: "putitem-1kb", Concurrency: 16, OpsPerSec: 3760.2, ItemsPerSec: 3760.2,
			P50Micros: 3694.6, P99Micros: 12484.6, P999Micros: 19988.5, MaxMicros: 1_500_000, ClientCPUMicrosPerOp: 207.9,
			Server: &ServerStats{CPUMicrosPerOp: 232.25, CPUMicrosPerItem: 232.25, CPUCores: 0.873, RSSBytes: 113483776, PeakRSSBytes: 113483776}},
		{Workload: "batchwrite", Concurrency: 16, OpsPerSec: 337, ItemsPerSec: 8425, P50Micros: 450, P99Micros: 850, P999Micros: 999,
			MaxMicros: 1000, Errors: 5, ErrorsByCode: map[string]int64{"ThrottlingException": 2, "net:connection-reset": 3},
			ErrorSamples: map[string]string{"ThrottlingException": "slow down"}, UnprocessedItems: 7},
	}
	var b bytes.Buffer
	WriteTable(&b, results)
	out := b.String()
	lines := strings.Split(out, "\n")
	for _, want := range []string{"workload", "srv-cpu/op", "putitem-1kb", "3760", "3.69ms", "12.48ms", "1.50s", "232.2µs",
		"0.87", "108.2MiB", "450µs", "batchwrite errors:", "slow down", "UnprocessedItems"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// Header and rows are aligned to the same width; the row without server
	// stats shows dashes.
	if n := utf8.RuneCountInString; n(lines[0]) != n(lines[1]) || n(lines[1]) != n(lines[2]) {
		t.Errorf("misaligned table:\n%s", out)
	}
	if !strings.Contains(lines[2], " -  ") && !strings.HasSuffix(strings.TrimRight(lines[2], " "), "-") {
		t.Errorf("no dashes for missing server stats: %q", lines[2])
	}
	// Most frequent error first.
	if strings.Index(out, "net:connection-reset") > strings.Index(out, "ThrottlingException") {
		t.Errorf("errors not sorted by count:\n%s", out)
	}

	b.Reset()
	WriteTable(&b, results[1:])
	if strings.Contains(b.String(), "srv-cpu") {
		t.Errorf("server columns without server stats:\n%s", b.String())
	}
}

func TestFormatters(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtMicros(0), "-"}, {fmtMicros(12.4), "12µs"}, {fmtMicros(1234), "1.23ms"}, {fmtMicros(2.5e6), "2.50s"},
		{fmtCPU(3.14159), "3.14µs"}, {fmtCPU(123.45), "123.5µs"}, {fmtCPU(0), "-"},
		{FormatBytes(512), "512B"}, {FormatBytes(1536), "1.5KiB"}, {FormatBytes(3 << 30), "3.0GiB"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
