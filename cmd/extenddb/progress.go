package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// jobStat is a running job's progress as the server's /metrics shows it
// (extenddb_backup_job_* gauges, docs/operations.md).
type jobStat struct {
	found                  bool
	phase                  string
	items, bytes           int64
	totalItems, totalBytes int64
}

// jobSeries is the query that selects the job series parseJobStat reads.
var jobSeries = func() string {
	q := url.Values{}
	for _, n := range []string{"extenddb_backup_job_items", "extenddb_backup_job_bytes", "extenddb_backup_job_total_items", "extenddb_backup_job_total_bytes"} {
		q.Add("name[]", n)
	}
	return q.Encode()
}()

// scrapeJob reads the progress of the job of kind on table (job: the
// backup id) from endpoint/metrics; found is false when this server does
// not run it (not started yet, finished, or run by another server).
func scrapeJob(ctx context.Context, endpoint, kind, table, job string) jobStat {
	var st jobStat
	// Only the job's series (promhttp's name[] filter): a progress bar
	// polls several times a second, and the whole exposition is larger by
	// far.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(endpoint, "/")+"/metrics?"+jobSeries, nil)
	if err != nil {
		return st
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st
	}
	return parseJobStat(resp.Body, kind, table, job)
}

func parseJobStat(r io.Reader, kind, table, job string) jobStat {
	var st jobStat
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "extenddb_backup_job_") {
			continue
		}
		name, labels, value, ok := parseSample(line)
		if !ok || labels["kind"] != kind || labels["table"] != table || labels["job"] != job {
			continue
		}
		st.found = true
		st.phase = labels["phase"]
		switch name {
		case "extenddb_backup_job_items":
			st.items = value
		case "extenddb_backup_job_bytes":
			st.bytes = value
		case "extenddb_backup_job_total_items":
			st.totalItems = value
		case "extenddb_backup_job_total_bytes":
			st.totalBytes = value
		}
	}
	return st
}

// parseSample parses one Prometheus text sample: name{k="v",...} value.
func parseSample(line string) (name string, labels map[string]string, value int64, ok bool) {
	i := strings.IndexByte(line, '{')
	if i < 0 {
		return "", nil, 0, false
	}
	name, rest := line[:i], line[i+1:]
	labels = map[string]string{}
	for {
		rest = strings.TrimLeft(rest, ",")
		if strings.HasPrefix(rest, "}") {
			rest = rest[1:]
			break
		}
		eq := strings.Index(rest, `="`)
		if eq < 0 {
			return "", nil, 0, false
		}
		key := rest[:eq]
		rest = rest[eq+2:]
		var b strings.Builder
		j := 0
		for ; j < len(rest) && rest[j] != '"'; j++ {
			if rest[j] == '\\' && j+1 < len(rest) {
				j++
				if rest[j] == 'n' {
					b.WriteByte('\n')
					continue
				}
			}
			b.WriteByte(rest[j])
		}
		if j >= len(rest) {
			return "", nil, 0, false
		}
		labels[key] = b.String()
		rest = rest[j+1:]
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
	if err != nil {
		return "", nil, 0, false
	}
	return name, labels, int64(f), true
}

// progressView shows a job's progress: a bar (items, bytes, rate, ETA) on
// a terminal, a plain line per second otherwise.
type progressView struct {
	w        io.Writer
	kind     string
	bar      *progressbar.ProgressBar
	total    int64
	start    time.Time
	lastLine time.Time
}

func newProgressView(w *os.File, kind string, total int64) *progressView {
	v := &progressView{w: w, kind: kind, total: total, start: time.Now()}
	if term.IsTerminal(int(w.Fd())) {
		max := total
		if max <= 0 {
			max = -1 // unknown: a spinner with the count
		}
		v.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription(kind),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("items"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	return v
}

// update shows status (the job's row status) and st (its progress, when
// this server runs it).
func (v *progressView) update(status string, st jobStat) {
	total := v.total
	if st.totalItems > 0 {
		total = st.totalItems
	}
	phase := status
	if st.found && st.phase != "" {
		phase = st.phase
	}
	if v.bar != nil {
		if total > 0 && v.bar.GetMax64() != total {
			v.bar.ChangeMax64(total)
		}
		v.bar.Describe(fmt.Sprintf("%s %-8s %9s", v.kind, phase, formatBytes(st.bytes)))
		_ = v.bar.Set64(st.items)
		return
	}
	if time.Since(v.lastLine) < time.Second {
		return
	}
	v.lastLine = time.Now()
	elapsed := time.Since(v.start)
	line := fmt.Sprintf("%s %s %s", time.Now().UTC().Format(time.TimeOnly), v.kind, phase)
	if st.found {
		rate := float64(st.items) / elapsed.Seconds()
		if total > 0 {
			line += fmt.Sprintf(" %d/%d items", st.items, total)
		} else {
			line += fmt.Sprintf(" %d items", st.items)
		}
		line += fmt.Sprintf(" %s %.0f items/s", formatBytes(st.bytes), rate)
		if total > 0 && rate > 0 && st.items < total {
			line += fmt.Sprintf(" ETA %s", time.Duration(float64(total-st.items)/rate*float64(time.Second)).Round(time.Second))
		}
	}
	line += fmt.Sprintf(" elapsed %s", elapsed.Round(time.Second))
	fmt.Fprintln(v.w, line)
}

// finish removes the bar (the caller prints the summary).
func (v *progressView) finish() {
	if v.bar != nil {
		_ = v.bar.Finish()
		fmt.Fprintln(v.w)
	}
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
