package bench

// The recovery point benchmark (`extenddb bench rpo`): how many
// acknowledged writes point-in-time recovery loses when the server and
// its whole database are lost. Each run starts `extenddb serve` on
// SQLite in a fresh data directory with a fresh filesystem store, turns
// point-in-time recovery on for a table, writes to it with PutItem of
// unique keys from a few writers (each recording when every write was
// acknowledged), SIGKILLs the server after a random time and deletes its
// database, then adopts the store from a fresh catalog
// (`extenddb backup sync --adopt-store --force`), starts a new server,
// restores the table by its ARN to its latest restorable time, scans the
// restored table and compares it with what was acknowledged.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RPOOptions configures a recovery point run.
type RPOOptions struct {
	Bin          string        // the extenddb binary to serve with; default this executable
	Runs         int           // kill-and-restore runs (default 20)
	ShipInterval time.Duration // backup.pitr.ship_interval of the servers (default 1 s)
	Writers      int           // concurrent PutItem writers (default 4)
	KillMin      time.Duration // the server is killed a random time in [KillMin, KillMax] after the load starts
	KillMax      time.Duration
	Slack        time.Duration // with Check: an acknowledged write older than ShipInterval+Slack at the kill must be restored
	Check        bool          // a durability violation is an error
	Port         int           // first of the two loopback ports the servers listen on; 0 for free ports
	WorkDir      string        // data directories, stores and logs; default a new temporary directory, removed after unless a run failed
	Quiet        bool
}

// RPORun is one kill-and-restore run.
type RPORun struct {
	Run             int       `json:"run"`
	KillAfterSec    float64   `json:"kill_after_s"`                 // from the load's start to the SIGKILL
	Attempted       int       `json:"attempted"`                    // PutItem requests sent
	Acked           int       `json:"acked"`                        // of them, answered 200 before the kill
	Restored        int       `json:"restored"`                     // items in the restored table
	Missing         int       `json:"missing"`                      // acknowledged writes not in the restored table
	LostWindowMS    float64   `json:"lost_window_ms"`               // the kill minus the oldest missing write's acknowledgement (0: none missing)
	RestorePointLag float64   `json:"restore_point_lag_ms"`         // the kill minus the restored instant (LatestRestorableDateTime)
	InFlightKept    int       `json:"in_flight_restored"`           // writes sent but not acknowledged that were restored (allowed)
	AfterPointKept  int       `json:"after_point_restored"`         // writes acknowledged after the restored instant that were restored (decided before it)
	MaxLatencyMS    float64   `json:"max_latency_ms"`               // the slowest acknowledged PutItem of the run
	Phantoms        int       `json:"phantoms"`                     // restored items never written (must be 0)
	MissingBefore   int       `json:"missing_before_restore_point"` // acknowledged before the restored instant yet missing (must be 0)
	RestoreSec      float64   `json:"restore_s"`                    // sync, start, RestoreTableToPointInTime to ACTIVE
	Killed          time.Time `json:"killed"`
	Violations      []string  `json:"violations,omitempty"`
}

// RPOReport is the JSON document of a recovery point run.
type RPOReport struct {
	Version        int       `json:"version"`
	Started        time.Time `json:"started"`
	CPUs           int       `json:"cpus"`
	ShipIntervalMS float64   `json:"ship_interval_ms"`
	Writers        int       `json:"writers"`
	Runs           []RPORun  `json:"runs"`
}

// RunRPO runs the recovery point benchmark and prints each run and a
// summary to out. With o.Check, a durability violation is an error.
func RunRPO(ctx context.Context, o RPOOptions, out io.Writer) (rep *RPOReport, err error) {
	if o.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Bin = exe
	}
	if o.Runs <= 0 {
		o.Runs = 20
	}
	if o.ShipInterval <= 0 {
		o.ShipInterval = time.Second
	}
	if o.Writers <= 0 {
		o.Writers = 4
	}
	if o.KillMin <= 0 {
		o.KillMin = 3 * time.Second
	}
	if o.KillMax < o.KillMin {
		o.KillMax = max(o.KillMin, 8*time.Second)
	}
	if o.Slack <= 0 {
		o.Slack = 2 * time.Second
	}
	var failed []string
	if o.WorkDir == "" {
		d, derr := os.MkdirTemp("", "extenddb-bench-rpo-")
		if derr != nil {
			return nil, derr
		}
		// Removed unless a run failed (its directory is kept).
		defer func() {
			if err == nil && len(failed) == 0 {
				os.RemoveAll(d)
			} else {
				fmt.Fprintf(out, "bench rpo: the failed runs' servers' logs and stores are kept in %s\n", d)
			}
		}()
		o.WorkDir = d
	}
	rep = &RPOReport{Version: 1, Started: time.Now().UTC(), CPUs: runtime.NumCPU(), ShipIntervalMS: float64(o.ShipInterval.Milliseconds()), Writers: o.Writers}
	logf := func(format string, args ...any) {
		if !o.Quiet {
			fmt.Fprintf(out, "bench rpo: "+format+"\n", args...)
		}
	}
	logf("%d runs, ship interval %v, %d writers, kill after %v-%v", o.Runs, o.ShipInterval, o.Writers, o.KillMin, o.KillMax)
	for i := 1; i <= o.Runs; i++ {
		r, err := rpoRun(ctx, o, i, logf)
		if err != nil {
			return rep, fmt.Errorf("run %d: %w", i, err)
		}
		rep.Runs = append(rep.Runs, r)
		fmt.Fprintln(out, r.line())
		for _, v := range r.Violations {
			failed = append(failed, fmt.Sprintf("run %d: %s", i, v))
		}
	}
	WriteRPOSummary(out, rep)
	if o.Check && len(failed) > 0 {
		return rep, fmt.Errorf("durability violated:\n  %s", strings.Join(failed, "\n  "))
	}
	return rep, nil
}

func (r RPORun) line() string {
	s := fmt.Sprintf("run %2d: killed after %4.1fs  acked %6d  missing %4d  lost window %6.0f ms  restore point %6.0f ms before the kill  acked after it and restored %d  in-flight restored %d  phantoms %d  slowest put %.0f ms  restore %4.1fs",
		r.Run, r.KillAfterSec, r.Acked, r.Missing, r.LostWindowMS, r.RestorePointLag, r.AfterPointKept, r.InFlightKept, r.Phantoms, r.MaxLatencyMS, r.RestoreSec)
	for _, v := range r.Violations {
		s += "\n        VIOLATION: " + v
	}
	return s
}

// WriteRPOSummary prints p50, p99 and max of the missing writes, the lost
// window and the restore point's lag over the runs.
func WriteRPOSummary(w io.Writer, rep *RPOReport) {
	if len(rep.Runs) == 0 {
		return
	}
	var miss, win, lag []float64
	for _, r := range rep.Runs {
		miss = append(miss, float64(r.Missing))
		win = append(win, r.LostWindowMS)
		lag = append(lag, r.RestorePointLag)
	}
	fmt.Fprintf(w, "ship interval %v, %d runs, %d writers, %d CPUs:\n", time.Duration(rep.ShipIntervalMS)*time.Millisecond, len(rep.Runs), rep.Writers, rep.CPUs)
	fmt.Fprintf(w, "  %-34s %8s %8s %8s\n", "", "p50", "p99", "max")
	row := func(name string, v []float64) {
		fmt.Fprintf(w, "  %-34s %8.0f %8.0f %8.0f\n", name, rpoPercentile(v, 50), rpoPercentile(v, 99), slices.Max(v))
	}
	row("missing acknowledged writes", miss)
	row("lost window (ms)", win)
	row("restore point before kill (ms)", lag)
}

// rpoPercentile is the nearest-rank percentile p of v.
func rpoPercentile(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// WriteRPOJSON writes the report to path.
func WriteRPOJSON(path string, rep *RPOReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

const rpoTable = "rpo-bench"

// rpoServer prepares a server of run home on a data directory of its own
// and the run's store.
func rpoServer(o RPOOptions, home, name string, port int) (*scaleServer, string, error) {
	if port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, "", err
		}
		port = p
	}
	data := filepath.Join(home, name)
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, "", err
	}
	s := &scaleServer{bin: o.Bin, log: filepath.Join(home, name+".log"), endpoint: fmt.Sprintf("http://127.0.0.1:%d", port),
		env:  rpoEnv(o, home),
		args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--data-dir", data}}
	return s, data, nil
}

func rpoEnv(o RPOOptions, home string) []string {
	return []string{
		"EXTENDDB__BACKUP__STORE__KIND=filesystem",
		"EXTENDDB__BACKUP__STORE__ROOT=" + filepath.Join(home, "store"),
		"EXTENDDB__BACKUP__SPOOL_DIR=" + filepath.Join(home, "spool"),
		"EXTENDDB__BACKUP__PITR__SHIP_INTERVAL=" + o.ShipInterval.String(),
		"EXTENDDB__LOG__LEVEL=warn",
	}
}

// rpoWriter is one writer's record: its keys are w<id>-<n> for n below
// sent; sentAt[n] is when write n was sent, acked[n] when it was
// acknowledged (zero: not).
type rpoWriter struct {
	sent   int
	sentAt []time.Time
	acked  []time.Time
}

func rpoKey(w, n int) string { return fmt.Sprintf("w%d-%09d", w, n) }

// rpoRun is one kill-and-restore run in WorkDir/run-NN, removed after
// unless the run failed or violated durability (its servers' logs and
// its store stay for a look).
func rpoRun(ctx context.Context, o RPOOptions, run int, logf func(string, ...any)) (r RPORun, err error) {
	r.Run = run
	home := filepath.Join(o.WorkDir, fmt.Sprintf("run-%02d", run))
	for _, d := range []string{"store", "spool"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			return r, err
		}
	}
	defer func() {
		if err == nil && len(r.Violations) == 0 {
			os.RemoveAll(home)
		}
	}()
	srv, data, err := rpoServer(o, home, "data-1", o.Port)
	if err != nil {
		return r, err
	}
	if _, err := srv.start(ctx); err != nil {
		return r, err
	}
	defer func() { _ = srv.kill() }()
	c := rpoClient(srv.endpoint, o.Writers+2)
	arn, err := rpoSetup(ctx, c)
	if err != nil {
		return r, err
	}
	writers, err := rpoLoad(ctx, o, c, srv, &r)
	if err != nil {
		return r, err
	}
	if err := os.RemoveAll(data); err != nil {
		return r, err
	}
	return r, rpoRecover(ctx, o, home, arn, writers, &r, logf)
}

func rpoClient(endpoint string, conns int) *dynamodb.Client {
	opt := Options{Endpoint: endpoint, Quiet: true, RequestTimeout: 10 * time.Second}
	_ = opt.setDefaults()
	return (&runner{opt: opt}).newClient(conns)
}

// rpoSetup creates the table, turns point-in-time recovery on, waits
// until the history's first base is in the store (the server finds a
// newly enabled table within 5 s) and returns the table's ARN.
func rpoSetup(ctx context.Context, c *dynamodb.Client) (string, error) {
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(rpoTable), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash}},
	}); err != nil {
		return "", fmt.Errorf("CreateTable: %w", err)
	}
	if err := waitTableActive(ctx, c, rpoTable, time.Minute); err != nil {
		return "", err
	}
	if err := enablePITR(ctx, c, rpoTable); err != nil {
		return "", err
	}
	desc, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(rpoTable)})
	if err != nil {
		return "", err
	}
	return aws.ToString(desc.Table.TableArn), waitRestorable(ctx, c, rpoTable, 30*time.Second)
}

// rpoLoad runs closed-loop PutItem of unique keys from o.Writers writers
// and SIGKILLs the server after a random time in [KillMin, KillMax].
func rpoLoad(ctx context.Context, o RPOOptions, c *dynamodb.Client, srv *scaleServer, r *RPORun) ([]*rpoWriter, error) {
	killAfter := o.KillMin + time.Duration(mrand.Int64N(int64(o.KillMax-o.KillMin)+1))
	writers := make([]*rpoWriter, o.Writers)
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	payload := strings.Repeat("x", 200)
	start := time.Now()
	for w := range writers {
		wr := &rpoWriter{}
		writers[w] = wr
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lctx.Err() == nil {
				n := wr.sent
				wr.sent++
				wr.acked = append(wr.acked, time.Time{})
				wr.sentAt = append(wr.sentAt, time.Now())
				_, err := c.PutItem(lctx, &dynamodb.PutItemInput{TableName: aws.String(rpoTable), Item: map[string]types.AttributeValue{
					attrPK:      &types.AttributeValueMemberS{Value: rpoKey(w, n)},
					attrPayload: &types.AttributeValueMemberS{Value: payload},
				}})
				if err == nil {
					wr.acked[n] = time.Now()
					continue
				}
				// Errors come only with the kill; the loop ends with it.
				if lctx.Err() != nil {
					return
				}
				sleepCtx(lctx, 10*time.Millisecond)
			}
		}()
	}
	sleepCtx(ctx, killAfter)
	r.Killed = time.Now()
	err := srv.kill()
	r.KillAfterSec = r.Killed.Sub(start).Seconds()
	stop()
	wg.Wait()
	for _, wr := range writers {
		r.Attempted += wr.sent
		for _, t := range wr.acked {
			if !t.IsZero() {
				r.Acked++
			}
		}
	}
	return writers, err
}

// rpoRecover adopts the store from a new catalog, starts a server on it,
// restores the table by its ARN to its latest restorable time, scans it
// and compares it with the writes. A failed restore is a violation.
func rpoRecover(ctx context.Context, o RPOOptions, home, arn string, writers []*rpoWriter, r *RPORun, logf func(string, ...any)) error {
	t0 := time.Now()
	port := 0
	if o.Port != 0 {
		port = o.Port + 1
	}
	srv, data, err := rpoServer(o, home, "data-2", port)
	if err != nil {
		return err
	}
	adopt := exec.CommandContext(ctx, o.Bin, "backup", "sync", "--adopt-store", "--force", "--data-dir", data)
	adopt.Env = append(os.Environ(), rpoEnv(o, home)...)
	if b, err := adopt.CombinedOutput(); err != nil {
		return fmt.Errorf("backup sync --adopt-store: %v: %s", err, b)
	}
	if _, err := srv.start(ctx); err != nil {
		return err
	}
	defer func() {
		if err := srv.stop(); err != nil {
			logf("%v", err)
		}
	}()
	c := rpoClient(srv.endpoint, 2)
	target := rpoTable + "-restored"
	res, err := c.RestoreTableToPointInTime(ctx, &dynamodb.RestoreTableToPointInTimeInput{
		SourceTableArn: aws.String(arn), TargetTableName: aws.String(target), UseLatestRestorableTime: aws.Bool(true)})
	if err != nil {
		r.Violations = append(r.Violations, fmt.Sprintf("RestoreTableToPointInTime: %v", err))
		return nil
	}
	var point time.Time
	if rs := res.TableDescription.RestoreSummary; rs != nil && rs.RestoreDateTime != nil {
		point = *rs.RestoreDateTime
	}
	if err := waitTableActive(ctx, c, target, 2*time.Minute); err != nil {
		r.Violations = append(r.Violations, fmt.Sprintf("restore: %v (server log %s)", err, srv.log))
		return nil
	}
	r.RestoreSec = time.Since(t0).Seconds()
	r.RestorePointLag = float64(r.Killed.Sub(point).Microseconds()) / 1000
	restored, err := scanKeys(ctx, c, target)
	if err != nil {
		return err
	}
	r.Restored = len(restored)
	r.compare(writers, restored, point, o.ShipInterval+o.Slack)
	return nil
}

// compare fills the missing writes, the lost window and the violations:
// an acknowledged write older than bound at the kill, or acknowledged
// before the restored instant, that is missing; a restored item never
// written.
func (r *RPORun) compare(writers []*rpoWriter, restored map[string]bool, point time.Time, bound time.Duration) {
	var oldest time.Time
	tooOld := 0
	for w, wr := range writers {
		for n, t := range wr.acked {
			k := rpoKey(w, n)
			if !t.IsZero() && n < len(wr.sentAt) {
				r.MaxLatencyMS = max(r.MaxLatencyMS, float64(t.Sub(wr.sentAt[n]).Microseconds())/1000)
			}
			if restored[k] {
				delete(restored, k)
				if t.IsZero() {
					r.InFlightKept++
				} else if !point.IsZero() && t.After(point) {
					r.AfterPointKept++
				}
				continue
			}
			if t.IsZero() {
				continue
			}
			r.Missing++
			if oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
			if r.Killed.Sub(t) > bound {
				tooOld++
			}
			if !point.IsZero() && t.Before(point) {
				r.MissingBefore++
			}
		}
	}
	r.Phantoms = len(restored)
	if !oldest.IsZero() {
		r.LostWindowMS = max(float64(r.Killed.Sub(oldest).Microseconds())/1000, 0)
	}
	if tooOld > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%d acknowledged writes older than %v at the kill are missing (the oldest %.0f ms)", tooOld, bound, r.LostWindowMS))
	}
	if r.MissingBefore > 0 {
		r.Violations = append(r.Violations, fmt.Sprintf("%d writes acknowledged before the restored instant %s are missing", r.MissingBefore, point.UTC().Format(time.RFC3339Nano)))
	}
	if r.Phantoms > 0 {
		keys := make([]string, 0, len(restored))
		for k := range restored {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		r.Violations = append(r.Violations, fmt.Sprintf("%d restored items were never written (e.g. %s)", r.Phantoms, keys[0]))
	}
}

// waitRestorable waits until DescribeContinuousBackups answers a
// LatestRestorableDateTime: the history's first base is in the store.
func waitRestorable(ctx context.Context, c *dynamodb.Client, table string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		out, err := c.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("DescribeContinuousBackups: %w", err)
		}
		if d := out.ContinuousBackupsDescription; d != nil && d.PointInTimeRecoveryDescription != nil &&
			d.PointInTimeRecoveryDescription.LatestRestorableDateTime != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("table %s not restorable %v after point-in-time recovery was turned on", table, limit)
		}
		sleepCtx(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// scanKeys reads every partition key of table (consistent Scan).
func scanKeys(ctx context.Context, c *dynamodb.Client, table string) (map[string]bool, error) {
	keys := map[string]bool{}
	var start map[string]types.AttributeValue
	for {
		out, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			ExclusiveStartKey: start, ProjectionExpression: aws.String(attrPK)})
		if err != nil {
			return nil, fmt.Errorf("scanning %s: %w", table, err)
		}
		for _, it := range out.Items {
			if v, ok := it[attrPK].(*types.AttributeValueMemberS); ok {
				keys[v.Value] = true
			} else {
				return nil, errors.New("restored item without a string key")
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return keys, nil
		}
		start = out.LastEvaluatedKey
	}
}
