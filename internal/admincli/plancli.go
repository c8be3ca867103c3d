package admincli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/extenddb/extenddb/internal/config"
)

// PrintPlans prints `extenddb backup plans`: each configured plan with its
// schedule, its last finished run and result and its last success (from
// the server's /metrics, which every server reads from the shared
// catalog), its next slot, and the backups it keeps (ListBackups of the
// AWS_BACKUP type, by the plan's name prefix).
func PrintPlans(ctx context.Context, cfg config.Config, endpoint string, now time.Time, w io.Writer) error {
	plans, err := cfg.BackupPlans()
	if err != nil {
		return err
	}
	if len(plans) == 0 {
		fmt.Fprintln(w, "no backup plans are configured ([[backup.plans]])")
		return nil
	}
	gauges, err := planGauges(ctx, strings.TrimRight(endpoint, "/")+"/metrics")
	if err != nil {
		return err
	}
	kept := map[string][]map[string]any{}
	cl := NewClient(endpoint, cfg)
	in := map[string]any{"BackupType": "AWS_BACKUP"}
	for {
		var out struct {
			BackupSummaries        []map[string]any
			LastEvaluatedBackupArn string
		}
		if err := cl.Call(ctx, "ListBackups", in, &out); err != nil {
			return err
		}
		for _, b := range out.BackupSummaries {
			name, _ := b["BackupName"].(string)
			for _, p := range plans {
				if strings.HasPrefix(name, p.Name+"-") {
					kept[p.Name] = append(kept[p.Name], b)
				}
			}
		}
		if out.LastEvaluatedBackupArn == "" {
			break
		}
		in["ExclusiveStartBackupArn"] = out.LastEvaluatedBackupArn
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tSCHEDULE\tRETENTION\tLAST RUN\tRESULT\tLAST SUCCESS\tNEXT RUN\tKEPT")
	for _, p := range plans {
		sched := p.Cron
		if p.TimeZone != "" {
			sched += " " + p.TimeZone
		}
		if p.Every > 0 {
			sched = "every " + p.Every.String()
		}
		g := gauges[p.Name]
		result := "-"
		if v, ok := g["extenddb_backup_plan_last_run_succeeded"]; ok {
			result = map[bool]string{true: "succeeded", false: "FAILED"}[v == 1]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", p.Name, sched, p.Retention(), stamp(g, "extenddb_backup_plan_last_run_timestamp_seconds"), result,
			stamp(g, "extenddb_backup_plan_last_success_timestamp_seconds"), p.Next(now).Format(time.RFC3339), len(kept[p.Name]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range plans {
		if len(kept[p.Name]) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s keeps:\n", p.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, b := range kept[p.Name] {
			fmt.Fprintf(tw, "  %v\t%v\t%s\t%v\n", b["TableName"], b["BackupStatus"], epoch(b["BackupCreationDateTime"]), b["BackupArn"])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func stamp(g map[string]float64, name string) string {
	v, ok := g[name]
	if !ok || v == 0 {
		return "-"
	}
	return time.Unix(int64(v), 0).UTC().Format(time.RFC3339)
}

// epoch formats a DynamoDB epoch-seconds number.
func epoch(v any) string {
	f, ok := v.(float64)
	if !ok {
		return "-"
	}
	return time.UnixMilli(int64(f * 1000)).UTC().Format(time.RFC3339)
}

var planSeries = regexp.MustCompile(`^(extenddb_backup_plan_[a-z_]+)\{plan="((?:[^"\\]|\\.)*)"\} (\S+)$`)

// planGauges reads the plan series of a /metrics page: plan -> series ->
// value.
func planGauges(ctx context.Context, url string) (map[string]map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := planSeries.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			continue
		}
		plan, _ := strconv.Unquote(`"` + m[2] + `"`)
		if out[plan] == nil {
			out[plan] = map[string]float64{}
		}
		out[plan][m[1]] = v
	}
	return out, sc.Err()
}
