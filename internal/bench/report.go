package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// WriteTable writes results as a human-readable table, followed by the
// errors of each workload that had any.
func WriteTable(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	hasServer := false
	for _, r := range results {
		if r.Server != nil {
			hasServer = true
		}
	}
	hdr := []string{"workload", "conc", "ops/s", "items/s", "p50", "p99", "p99.9", "max", "errors", "cli-cpu/op"}
	if hasServer {
		hdr = append(hdr, "srv-cpu/op", "srv-cpu/item", "srv-cores", "srv-rss", "srv-peak-rss")
	}
	hasBackend := false
	for _, r := range results {
		hasBackend = hasBackend || r.Backend != nil
	}
	if hasBackend {
		hdr = append(hdr, "db-cpu/op")
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for _, r := range results {
		row := []string{
			r.Workload,
			fmt.Sprint(r.Concurrency),
			fmt.Sprintf("%.0f", r.OpsPerSec),
			fmt.Sprintf("%.0f", r.ItemsPerSec),
			fmtMicros(r.P50Micros),
			fmtMicros(r.P99Micros),
			fmtMicros(r.P999Micros),
			fmtMicros(r.MaxMicros),
			fmt.Sprint(r.Errors),
			fmtCPU(r.ClientCPUMicrosPerOp),
		}
		if hasServer {
			if s := r.Server; s != nil {
				row = append(row, fmtCPU(s.CPUMicrosPerOp), fmtCPU(s.CPUMicrosPerItem),
					fmt.Sprintf("%.2f", s.CPUCores), FormatBytes(s.RSSBytes), FormatBytes(s.PeakRSSBytes))
			} else {
				row = append(row, "-", "-", "-", "-", "-")
			}
		}
		if hasBackend {
			if r.Backend != nil {
				row = append(row, fmtCPU(r.Backend.CPUMicrosPerOp))
			} else {
				row = append(row, "-")
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	for _, r := range results {
		if len(r.ErrorsByCode) == 0 && r.UnprocessedItems == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s errors:\n", r.Workload)
		codes := make([]string, 0, len(r.ErrorsByCode))
		for c := range r.ErrorsByCode {
			codes = append(codes, c)
		}
		// Most frequent first, then by name.
		slices.SortFunc(codes, func(a, b string) int {
			if d := r.ErrorsByCode[b] - r.ErrorsByCode[a]; d != 0 {
				if d > 0 {
					return 1
				}
				return -1
			}
			return strings.Compare(a, b)
		})
		for _, c := range codes {
			fmt.Fprintf(w, "  %-40s %8d  %s\n", c, r.ErrorsByCode[c], r.ErrorSamples[c])
		}
		if r.UnprocessedItems > 0 {
			fmt.Fprintf(w, "  %-40s %8d  (items returned in UnprocessedItems, not retried)\n", "UnprocessedItems", r.UnprocessedItems)
		}
	}
}

// fmtMicros formats a latency given in microseconds.
func fmtMicros(us float64) string {
	switch {
	case us <= 0:
		return "-"
	case us < 1000:
		return fmt.Sprintf("%.0fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	default:
		return fmt.Sprintf("%.2fs", us/1e6)
	}
}

// fmtCPU formats a CPU cost in microseconds.
func fmtCPU(us float64) string {
	if us <= 0 {
		return "-"
	}
	if us < 10 {
		return fmt.Sprintf("%.2fµs", us)
	}
	return fmt.Sprintf("%.1fµs", us)
}

// FormatBytes formats a byte count with a binary unit.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
