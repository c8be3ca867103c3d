// Package bench is extenddb's load tool, shipped as `extenddb bench`: it
// drives a DynamoDB-compatible endpoint (extenddb, or anything else that
// speaks the protocol) with a fixed set of workloads in a closed loop and
// reports throughput, latency percentiles, errors by code and, given the
// server's PID, the server's CPU time per request and its memory.
//
// Each workload runs against its own fresh table (with one GSI): create,
// preload the items the workload reads, warm up, measure, delete. Requests
// go through aws-sdk-go-v2 with retries off, so every throttle or failure
// is visible in the error counts rather than hidden as latency.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Defaults of Options.
const (
	defaultDuration       = 10 * time.Second
	defaultWarmup         = 2 * time.Second
	defaultRequestTimeout = 30 * time.Second
)

// Options configures a run. Zero values take the defaults noted.
type Options struct {
	Endpoint        string        // default http://127.0.0.1:8000
	Region          string        // default us-east-1
	AccessKeyID     string        // default "extenddb-bench"
	SecretAccessKey string        // default "extenddb-bench"
	Workloads       []string      // default DefaultWorkloads; see AllWorkloads
	Concurrency     int           // closed-loop workers; default 16
	Duration        time.Duration // measured window; default 10s
	Warmup          time.Duration // unmeasured warm-up before it; default 2s, negative for none
	ServerPID       int           // server process to sample in /proc; 0 for none
	// BackendProcs, when set, also samples every process whose command
	// line contains it (e.g. "postgres: postgres mydb", the PostgreSQL
	// backends serving one database) and reports their summed CPU.
	BackendProcs   string
	ItemSize       int           // approximate item size in bytes; default 1024
	TablePrefix    string        // default "extenddb-bench"; a workload name and random suffix follow
	Partitions     int           // preloaded 100-item partitions per worker; default 4
	PreloadWorkers int           // concurrent preload writers; default min(Concurrency, 8)
	RequestTimeout time.Duration // per-request HTTP timeout; default 30s
	Keep           bool          // keep the tables instead of deleting them
	JSONPath       string        // also write the results as JSON to this file
	Quiet          bool          // no progress lines, only the final table
	// StreamViewType enables a DynamoDB stream of that view type on the
	// tables created ("" for none).
	StreamViewType string
	// PITR turns point-in-time recovery on for the tables created (the
	// server needs a backup store), before the preload and the window.
	PITR bool
}

func (o *Options) setDefaults() error {
	if o.Endpoint == "" {
		o.Endpoint = "http://127.0.0.1:8000"
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.AccessKeyID == "" {
		o.AccessKeyID = "extenddb-bench"
	}
	if o.SecretAccessKey == "" {
		o.SecretAccessKey = "extenddb-bench"
	}
	var wls []string
	for _, w := range o.Workloads {
		for _, name := range strings.Split(w, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if name == "all" {
				wls = append(wls, AllWorkloads...)
				continue
			}
			if _, ok := workloads[name]; !ok {
				return fmt.Errorf("unknown workload %q (known: %s)", name, strings.Join(AllWorkloads, ", "))
			}
			wls = append(wls, name)
		}
	}
	if len(wls) == 0 {
		wls = slices.Clone(DefaultWorkloads)
	}
	o.Workloads = wls
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.Concurrency < 0 || o.Concurrency > 10000 {
		return fmt.Errorf("concurrency %d out of range 1..10000", o.Concurrency)
	}
	if o.Duration == 0 {
		o.Duration = defaultDuration
	}
	if o.Duration < 0 {
		return fmt.Errorf("duration %v must be positive", o.Duration)
	}
	if o.Warmup == 0 {
		o.Warmup = defaultWarmup
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	if o.ItemSize == 0 {
		o.ItemSize = 1024
	}
	if o.ItemSize < 64 || o.ItemSize > 350*1024 {
		return fmt.Errorf("item size %d out of range 64..358400", o.ItemSize)
	}
	if o.TablePrefix == "" {
		o.TablePrefix = "extenddb-bench"
	}
	if o.Partitions <= 0 {
		o.Partitions = 4
	}
	if o.PreloadWorkers <= 0 {
		o.PreloadWorkers = min(o.Concurrency, 8)
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = defaultRequestTimeout
	}
	if o.ServerPID < 0 {
		return fmt.Errorf("server pid %d invalid", o.ServerPID)
	}
	return nil
}

// Result is the outcome of one workload.
type Result struct {
	Workload    string  `json:"workload"`
	Endpoint    string  `json:"endpoint"`
	Table       string  `json:"table"`
	Concurrency int     `json:"concurrency"`
	ItemSize    int     `json:"item_size"`
	WarmupSec   float64 `json:"warmup_s"`
	DurationSec float64 `json:"duration_s"` // the measured window, as it really lasted

	Ops         int64   `json:"ops"` // successful requests completed in the window
	Items       int64   `json:"items"`
	OpsPerSec   float64 `json:"ops_per_s"`
	ItemsPerSec float64 `json:"items_per_s"`

	// Latency of successful requests, microseconds.
	P50Micros  float64 `json:"p50_us"`
	P90Micros  float64 `json:"p90_us"`
	P99Micros  float64 `json:"p99_us"`
	P999Micros float64 `json:"p999_us"`
	MaxMicros  float64 `json:"max_us"`
	MeanMicros float64 `json:"mean_us"`

	Errors           int64             `json:"errors"`
	ErrorsByCode     map[string]int64  `json:"errors_by_code,omitempty"`
	ErrorSamples     map[string]string `json:"error_samples,omitempty"` // one message per code
	UnprocessedItems int64             `json:"unprocessed_items,omitempty"`

	// CPU time of this process (the load generator) per successful request.
	ClientCPUMicrosPerOp float64 `json:"client_cpu_us_per_op"`

	Server  *ServerStats  `json:"server,omitempty"`
	Backend *BackendStats `json:"backend,omitempty"`
	Preload *PreloadStats `json:"preload,omitempty"`
}

// BackendStats is the summed CPU of the processes matched by
// Options.BackendProcs over the measured window (processes that exit
// during the window drop out of the sum).
type BackendStats struct {
	Match          string  `json:"match"`
	Procs          int     `json:"procs"` // matched at the end of the window
	CPUSec         float64 `json:"cpu_s"`
	CPUMicrosPerOp float64 `json:"cpu_us_per_op"`
}

// ServerStats is what /proc says about the server over the measured window.
type ServerStats struct {
	PID               int     `json:"pid"`
	CPUSec            float64 `json:"cpu_s"`             // utime+stime spent in the window
	CPUMicrosPerOp    float64 `json:"cpu_us_per_op"`     // per successful request
	CPUMicrosPerItem  float64 `json:"cpu_us_per_item"`   // per item written/read
	CPUCores          float64 `json:"cpu_cores"`         // average cores busy
	RSSBytes          int64   `json:"rss_bytes"`         // VmRSS at the end
	PeakRSSBytes      int64   `json:"peak_rss_bytes"`    // VmHWM at the end (process lifetime)
	CPUResolutionMsec float64 `json:"cpu_resolution_ms"` // one clock tick
}

// PreloadStats describes the preload phase.
type PreloadStats struct {
	Items   int     `json:"items"`
	Seconds float64 `json:"seconds"`
	Method  string  `json:"method"` // BatchWriteItem or PutItem
}

// Run runs every workload of opt in turn, writes progress and a final table
// to out, writes JSON to opt.JSONPath if set, and returns the results. On an
// error it returns the results of the workloads that completed.
func Run(ctx context.Context, opt Options, out io.Writer) ([]Result, error) {
	if err := opt.setDefaults(); err != nil {
		return nil, err
	}
	if opt.ServerPID != 0 {
		if _, err := ReadProc(opt.ServerPID); err != nil {
			return nil, err
		}
	}
	r := &runner{opt: opt, out: out}
	var results []Result
	var runErr error
	for _, name := range opt.Workloads {
		res, err := r.runWorkload(ctx, workloads[name])
		if err != nil {
			runErr = fmt.Errorf("%s: %w", name, err)
			break
		}
		results = append(results, res)
	}
	if len(results) > 0 {
		fmt.Fprintln(out)
		WriteTable(out, results)
	}
	if opt.JSONPath != "" && len(results) > 0 {
		if err := writeJSON(opt.JSONPath, opt, results); err != nil && runErr == nil {
			runErr = err
		}
	}
	return results, runErr
}

// JSONReport is the document written by Options.JSONPath.
type JSONReport struct {
	Version   int       `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	Endpoint  string    `json:"endpoint"`
	Results   []Result  `json:"results"`
}

func writeJSON(path string, opt Options, results []Result) error {
	b, err := json.MarshalIndent(JSONReport{Version: 1, Timestamp: time.Now().UTC(), Endpoint: opt.Endpoint, Results: results}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

type runner struct {
	opt Options
	out io.Writer
}

func (r *runner) logf(format string, args ...any) {
	if !r.opt.Quiet {
		fmt.Fprintf(r.out, "bench: "+format+"\n", args...)
	}
}

// newClient returns a DynamoDB client with its own HTTP transport and
// retries off.
func (r *runner) newClient(conns int) *dynamodb.Client {
	hc := awshttp.NewBuildableClient().
		WithTimeout(r.opt.RequestTimeout).
		WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConns = conns * 2
			t.MaxIdleConnsPerHost = conns * 2
		})
	ak, sk := r.opt.AccessKeyID, r.opt.SecretAccessKey
	cfg := aws.Config{
		Region:     r.opt.Region,
		HTTPClient: ownBodyClient{hc},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk, Source: "extenddb-bench"}, nil
		}),
		Retryer:          func() aws.Retryer { return aws.NopRetryer{} },
		RetryMaxAttempts: 1,
	}
	return dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(r.opt.Endpoint)
	})
}

// ownBodyClient hands the transport a request body of its own, read into
// memory, instead of the SDK's. The SDK closes its request body as soon as
// the response headers arrive; net/http's write loop may at that moment
// still be checking the body for bytes beyond Content-Length (the headers
// and body were already sent, so the server could answer), and the SDK's
// closed body answers that check with io.EOF (smithy-go's safe closer
// returns it from WriteTo). The transport takes it for a failed request
// write and closes the connection: the next request reconnects, and a
// response still being read (Query's 25 KiB) fails with "use of closed
// network connection" — a client artifact that was counted as a server
// error ("http:200 ... deserialization failed"). A body of its own is
// never closed under the transport, and a *bytes.Reader lets the transport
// send headers and body in one write.
type ownBodyClient struct{ c aws.HTTPClient }

func (o ownBodyClient) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return o.c.Do(req)
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	r := *req
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r.ContentLength = int64(len(b))
	return o.c.Do(&r)
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Phases of a workload, read by the workers with one atomic load per request.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// workerStats is one worker's tally; merged after the workers have stopped.
type workerStats struct {
	hist        *Histogram
	ops         int64
	items       int64
	unprocessed int64
	errs        map[string]int64
	samples     map[string]string
}

// runWorkload runs one workload: a table created and preloaded, a
// warm-up, the measured window of every worker, the tallies merged and
// the table dropped. It reads top to bottom as that sequence; its steps
// share the window's clocks and CPU samples.
func (r *runner) runWorkload(ctx context.Context, wl workload) (res Result, err error) {
	opt := r.opt
	table := fmt.Sprintf("%s-%s-%s", opt.TablePrefix, wl.name, randomSuffix())
	admin := r.newClient(opt.PreloadWorkers)
	res = Result{Workload: wl.name, Endpoint: opt.Endpoint, Table: table, Concurrency: opt.Concurrency, ItemSize: opt.ItemSize}

	r.logf("%s: creating table %s", wl.name, table)
	if err := createTable(ctx, admin, table, opt.StreamViewType); err != nil {
		return res, err
	}
	if opt.PITR {
		if err := enablePITR(ctx, admin, table); err != nil {
			return res, err
		}
	}
	defer func() {
		if opt.Keep {
			r.logf("%s: keeping table %s", wl.name, table)
			return
		}
		// Clean up even when ctx was canceled.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if _, derr := admin.DeleteTable(cctx, &dynamodb.DeleteTableInput{TableName: aws.String(table)}); derr != nil {
			r.logf("%s: deleting table %s: %v", wl.name, table, derr)
			if err == nil {
				err = fmt.Errorf("deleting table %s: %w", table, derr)
			}
		}
	}()

	ks := keyspace{parts: opt.Partitions}
	plen := payloadLen(opt.ItemSize)
	if wl.preload {
		ps, err := r.preload(ctx, admin, table, ks, plen)
		if err != nil {
			return res, fmt.Errorf("preload: %w", err)
		}
		res.Preload = ps
		r.logf("%s: preloaded %d items in %.2fs with %s", wl.name, ps.Items, ps.Seconds, ps.Method)
	}

	workers := make([]*worker, opt.Concurrency)
	for i := range workers {
		seed := mrand.Uint64()
		rng := mrand.New(mrand.NewPCG(seed, uint64(i)))
		workers[i] = &worker{
			id: i, client: r.newClient(1), table: aws.String(table), rng: rng, ks: ks,
			payload: randomPayload(rng, plen),
		}
	}
	if err := r.measureWindow(ctx, wl, workers, &res); err != nil {
		return res, err
	}
	r.logf("%s: %.0f ops/s, p99 %s, %d errors", wl.name, res.OpsPerSec, fmtMicros(res.P99Micros), res.Errors)
	return res, nil
}

// measureWindow runs wl's op on every worker in a closed loop: the
// warm-up, then the measured window, whose tallies, latencies and CPU
// samples (the server's with opt.ServerPID, the backend processes' with
// opt.BackendProcs) it writes into res.
func (r *runner) measureWindow(ctx context.Context, wl workload, workers []*worker, res *Result) error {
	opt := r.opt
	stats := make([]*workerStats, len(workers))
	for i := range stats {
		stats[i] = &workerStats{hist: NewHistogram(), errs: map[string]int64{}, samples: map[string]string{}}
	}

	var phase atomic.Int32
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func(w *worker, st *workerStats) {
			defer wg.Done()
			runWorker(wctx, wl, w, st, &phase)
		}(workers[i], stats[i])
	}

	r.logf("%s: %d workers, warm-up %v, measuring %v", wl.name, len(workers), opt.Warmup, opt.Duration)
	sleepCtx(ctx, opt.Warmup)

	var be0 time.Duration
	if opt.BackendProcs != "" {
		be0, _ = SumProcCPU(opt.BackendProcs)
	}
	var srv0 ProcSample
	var err error
	if opt.ServerPID != 0 {
		if srv0, err = ReadProc(opt.ServerPID); err != nil {
			phase.Store(phaseStop)
			wg.Wait()
			return err
		}
	}
	cli0 := selfCPU()
	t0 := time.Now()
	phase.Store(phaseMeasure)
	sleepCtx(ctx, opt.Duration)
	phase.Store(phaseStop)
	t1 := time.Now()
	cli1 := selfCPU()
	var srv1 ProcSample
	var srvErr error
	if opt.ServerPID != 0 {
		srv1, srvErr = ReadProc(opt.ServerPID)
	}
	var be1 time.Duration
	var beProcs int
	if opt.BackendProcs != "" {
		be1, beProcs = SumProcCPU(opt.BackendProcs)
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	total := mergeStats(stats)
	window := t1.Sub(t0)
	res.fill(total, window, opt.Warmup)
	if cli1 > cli0 && total.ops > 0 {
		res.ClientCPUMicrosPerOp = micros(cli1-cli0) / float64(total.ops)
	}
	if opt.ServerPID != 0 {
		if srvErr != nil {
			return srvErr
		}
		res.Server = serverStats(opt.ServerPID, srv0, srv1, window, total.ops, total.items)
	}
	if opt.BackendProcs != "" {
		bs := &BackendStats{Match: opt.BackendProcs, Procs: beProcs, CPUSec: max(be1-be0, 0).Seconds()}
		if total.ops > 0 {
			bs.CPUMicrosPerOp = bs.CPUSec * 1e6 / float64(total.ops)
		}
		res.Backend = bs
	}
	return nil
}

// mergeStats sums the workers' statistics; an error code's sample is the
// first worker's that has one.
func mergeStats(stats []*workerStats) *workerStats {
	total := &workerStats{hist: NewHistogram(), errs: map[string]int64{}, samples: map[string]string{}}
	for _, st := range stats {
		total.hist.Merge(st.hist)
		total.ops += st.ops
		total.items += st.items
		total.unprocessed += st.unprocessed
		for c, n := range st.errs {
			total.errs[c] += n
			if _, ok := total.samples[c]; !ok {
				total.samples[c] = st.samples[c]
			}
		}
	}
	return total
}

func (res *Result) fill(t *workerStats, window, warmup time.Duration) {
	res.WarmupSec = warmup.Seconds()
	res.DurationSec = window.Seconds()
	res.Ops = t.ops
	res.Items = t.items
	res.UnprocessedItems = t.unprocessed
	if window > 0 {
		res.OpsPerSec = float64(t.ops) / window.Seconds()
		res.ItemsPerSec = float64(t.items) / window.Seconds()
	}
	h := t.hist
	res.P50Micros = micros(h.QuantileDuration(0.50))
	res.P90Micros = micros(h.QuantileDuration(0.90))
	res.P99Micros = micros(h.QuantileDuration(0.99))
	res.P999Micros = micros(h.QuantileDuration(0.999))
	res.MaxMicros = micros(time.Duration(h.Max()))
	res.MeanMicros = h.Mean() / 1e3
	for _, n := range t.errs {
		res.Errors += n
	}
	if len(t.errs) > 0 {
		res.ErrorsByCode = t.errs
		res.ErrorSamples = t.samples
	}
}

func serverStats(pid int, s0, s1 ProcSample, window time.Duration, ops, items int64) *ServerStats {
	cpu := s1.CPU - s0.CPU
	ss := &ServerStats{
		PID:               pid,
		CPUSec:            cpu.Seconds(),
		RSSBytes:          s1.RSSBytes,
		PeakRSSBytes:      s1.HWMBytes,
		CPUResolutionMsec: float64(time.Second/clockTicks) / 1e6,
	}
	if window > 0 {
		ss.CPUCores = cpu.Seconds() / window.Seconds()
	}
	if ops > 0 {
		ss.CPUMicrosPerOp = micros(cpu) / float64(ops)
	}
	if items > 0 {
		ss.CPUMicrosPerItem = micros(cpu) / float64(items)
	}
	return ss
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runWorker is the closed loop of one worker. It touches only its own
// worker and workerStats, plus one atomic load of the phase per request.
func runWorker(ctx context.Context, wl workload, w *worker, st *workerStats, phase *atomic.Int32) {
	for ctx.Err() == nil {
		if phase.Load() == phaseStop {
			return
		}
		start := time.Now()
		n, code, err := wl.op(ctx, w)
		elapsed := time.Since(start)
		if err != nil {
			code = ErrorCode(err)
		}
		if phase.Load() != phaseMeasure {
			if err != nil && isNetworkCode(code) {
				sleepCtx(ctx, 10*time.Millisecond)
			}
			continue
		}
		if wl.name == WorkloadBatchWrite && err == nil {
			st.unprocessed += int64(batchSize - n)
		}
		if code != "" {
			st.errs[code]++
			if _, ok := st.samples[code]; !ok {
				if err != nil {
					st.samples[code] = truncate(err.Error(), 300)
				} else {
					st.samples[code] = fmt.Sprintf("%s returned %d items", wl.name, n)
				}
			}
			if isNetworkCode(code) {
				sleepCtx(ctx, 10*time.Millisecond)
			}
			continue
		}
		st.hist.RecordDuration(elapsed)
		st.ops++
		st.items += int64(n)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// enablePITR turns point-in-time recovery on for table.
func enablePITR(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{
		TableName: aws.String(table),
		PointInTimeRecoverySpecification: &types.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("UpdateContinuousBackups %s: %w", table, err)
	}
	return nil
}

func createTable(ctx context.Context, c *dynamodb.Client, table, streamView string) error {
	s := types.ScalarAttributeTypeS
	var spec *types.StreamSpecification
	if streamView != "" {
		spec = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewType(streamView)}
	}
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		StreamSpecification: spec,
		TableName:           aws.String(table),
		BillingMode:         types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: s},
			{AttributeName: aws.String(attrSK), AttributeType: s},
			{AttributeName: aws.String(attrGPK), AttributeType: s},
			{AttributeName: aws.String(attrGSK), AttributeType: s},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(gsiName),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrGPK), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrGSK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	})
	if err != nil {
		return fmt.Errorf("CreateTable %s: %w", table, err)
	}
	// Wait until the table and its index are ACTIVE.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err == nil && out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			ready := true
			for _, g := range out.Table.GlobalSecondaryIndexes {
				if g.IndexStatus != types.IndexStatusActive {
					ready = false
				}
			}
			if ready {
				return nil
			}
		}
		if err != nil && ErrorCode(err) != "ResourceNotFoundException" {
			return fmt.Errorf("DescribeTable %s: %w", table, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("table %s not ACTIVE after 2 minutes", table)
		}
		sleepCtx(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// isRetryableSetupCode reports errors that the preload retries with back-off
// (the hot loop never retries).
func isRetryableSetupCode(code string) bool {
	switch code {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
		"InternalServerError", "ServiceUnavailable", "LimitExceededException":
		return true
	}
	return false
}

func isUnknownOperation(err error) bool {
	c := ErrorCode(err)
	return c == "UnknownOperationException" || c == "UnknownOperation"
}

// preload writes every worker's partitions: BatchWriteItem from several
// goroutines, or PutItem if the server answers BatchWriteItem with
// UnknownOperation.
func (r *runner) preload(ctx context.Context, c *dynamodb.Client, table string, ks keyspace, plen int) (*PreloadStats, error) {
	start := time.Now()
	nWorkers := r.opt.Concurrency
	total := nWorkers * ks.parts * itemsPerPartition
	rng := mrand.New(mrand.NewPCG(1, 2))
	payload := string(randomPayload(rng, plen))
	item := func(k int) map[string]types.AttributeValue {
		w := k / (ks.parts * itemsPerPartition)
		rest := k % (ks.parts * itemsPerPartition)
		return ks.preloadItem(w, rest/itemsPerPartition, rest%itemsPerPartition, payload)
	}
	nBatches := (total + batchSize - 1) / batchSize
	batch := func(b int) []types.WriteRequest {
		lo, hi := b*batchSize, min((b+1)*batchSize, total)
		reqs := make([]types.WriteRequest, 0, hi-lo)
		for k := lo; k < hi; k++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item(k)}})
		}
		return reqs
	}

	method := "BatchWriteItem"
	// The first batch alone tells whether BatchWriteItem is supported.
	err := writeBatch(ctx, c, table, batch(0))
	next := 1
	if err != nil {
		if !isUnknownOperation(err) {
			return nil, err
		}
		method = "PutItem"
		next = 0
		r.logf("BatchWriteItem not supported (%s); preloading with PutItem", ErrorCode(err))
	}
	var counter atomic.Int64
	counter.Store(int64(next))
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var once sync.Once
	var firstErr error
	for range r.opt.PreloadWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pctx.Err() == nil {
				b := int(counter.Add(1) - 1)
				if b >= nBatches {
					return
				}
				var err error
				if method == "PutItem" {
					for _, wr := range batch(b) {
						if err = putWithRetry(pctx, c, table, wr.PutRequest.Item); err != nil {
							break
						}
					}
				} else {
					err = writeBatch(pctx, c, table, batch(b))
				}
				if err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return &PreloadStats{Items: total, Seconds: time.Since(start).Seconds(), Method: method}, nil
}

// writeBatch writes one batch, resubmitting unprocessed items and retrying
// throttles with back-off.
func writeBatch(ctx context.Context, c *dynamodb.Client, table string, reqs []types.WriteRequest) error {
	backoff := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		out, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
		if err != nil {
			if !isRetryableSetupCode(ErrorCode(err)) || attempt >= 20 {
				return fmt.Errorf("BatchWriteItem: %w", err)
			}
		} else {
			reqs = out.UnprocessedItems[table]
			if len(reqs) == 0 {
				return nil
			}
			if attempt >= 50 {
				return fmt.Errorf("BatchWriteItem: %d items still unprocessed after %d attempts", len(reqs), attempt+1)
			}
		}
		sleepCtx(ctx, backoff)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		backoff = min(backoff*2, time.Second)
	}
}

func putWithRetry(ctx context.Context, c *dynamodb.Client, table string, item map[string]types.AttributeValue) error {
	backoff := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
		if err == nil {
			return nil
		}
		if !isRetryableSetupCode(ErrorCode(err)) || attempt >= 20 {
			return fmt.Errorf("PutItem: %w", err)
		}
		sleepCtx(ctx, backoff)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		backoff = min(backoff*2, time.Second)
	}
}
