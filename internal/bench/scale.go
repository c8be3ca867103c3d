package bench

// The scale benchmark (`extenddb bench scale`): what a request costs as a
// table grows and as a server holds many tables. It starts its own
// `extenddb serve` (SQLite in a data directory of its own, or a fresh
// PostgreSQL database), grows one table through the sizes asked for and
// measures, at each size, the single-item and page requests over keys
// spread across the whole table, DescribeTable, the server's start to
// /ready, a backup and a restore through the API, and the disk the data
// takes; then, on a second server, many small tables: start to /ready,
// ListTables paged through all of them, DescribeTable of one.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"
)

// Scale workloads, measured at every table size.
const (
	ScaleGetItem    = "getitem"
	ScalePutItem    = "putitem"
	ScaleUpdateItem = "updateitem"
	ScaleQuery      = "query"
	ScaleScanPage   = "scan-page"
	ScaleDescribe   = "describetable"
)

// ScaleWorkloads lists the per-request figures in report order.
var ScaleWorkloads = []string{ScaleGetItem, ScalePutItem, ScaleUpdateItem, ScaleQuery, ScaleScanPage, ScaleDescribe}

// Targets of the scale benchmark.
const (
	scaleRatioTarget   = 1.25            // a per-request figure at the largest size ÷ the same at the smallest
	scaleReadyTarget   = 2 * time.Second // start to /ready with the many-tables catalog
	scaleListTarget    = time.Second     // ListTables paged through every table
	scaleDiskTarget    = 1.6 * 1024      // SQLite bytes per 1 KiB item
	scaleScanPageLimit = 100
)

// ScaleOptions configures a scale run.
type ScaleOptions struct {
	Backend      string        // sqlite or postgres
	DSN          string        // postgres: a DSN whose user may CREATE DATABASE; the run's databases are created beside it
	Bin          string        // the extenddb binary to serve with; default this executable
	Sizes        []int         // table sizes in items, ascending, multiples of 100
	Tables       int           // small tables of the many-tables case; 0 to leave it out
	Concurrency  int           // closed-loop workers of the measured windows
	BuildWorkers int           // BatchWriteItem workers growing the table
	Duration     time.Duration // measured window per workload
	Warmup       time.Duration // warm-up before each window
	ItemSize     int           // approximate item size in bytes
	WorkDir      string        // data directory, backup store and logs; default a new temporary directory, removed after
	Loose        float64       // >0: the checks use ratio limit Loose and absolute limits ×Loose, and a miss fails the run
	Import       bool          // build each size with ImportTable from a filesystem bucket instead of BatchWriteItem
	Quiet        bool
}

// ScaleReport is the JSON document a scale run writes.
type ScaleReport struct {
	Version     int          `json:"version"`
	Backend     string       `json:"backend"`
	Started     time.Time    `json:"started"`
	Finished    time.Time    `json:"finished"`
	CPUs        int          `json:"cpus"`
	LoadAvg     []string     `json:"loadavg"` // at the start and at the end
	Concurrency int          `json:"concurrency"`
	DurationSec float64      `json:"duration_s"`
	ItemSize    int          `json:"item_size"`
	Sizes       []ScaleSize  `json:"sizes"`
	Tables      *ScaleTables `json:"tables,omitempty"`
	Checks      []ScaleCheck `json:"checks"`
}

// ScaleSize is every figure measured at one table size.
type ScaleSize struct {
	Items             int               `json:"items"`
	BuildItemsPerSec  float64           `json:"build_items_per_s"` // growing the table to Items (from the previous size)
	BuildCPUPerItemUS float64           `json:"build_server_cpu_us_per_item"`
	BuildMethod       string            `json:"build_method"`
	ReadySec          float64           `json:"ready_s"`              // process start to /ready answering 200
	FirstDescribeSec  float64           `json:"first_describe_s"`     // the first DescribeTable after that start
	StatsSec          float64           `json:"stats_s"`              // from that start until DescribeTable's ItemCount is Items
	StatsCPUSec       float64           `json:"stats_server_cpu_s"`   // server CPU over StatsSec
	DiskBytes         int64             `json:"disk_bytes"`           // SQLite: the data directory (database, WAL); PostgreSQL: pg_total_relation_size of every table
	BackupSec         float64           `json:"backup_s"`             // CreateBackup to AVAILABLE
	BackupItemsPerSec float64           `json:"backup_items_per_s"`   // Items ÷ BackupSec
	BackupCPUSec      float64           `json:"backup_server_cpu_s"`  // server CPU from CreateBackup to AVAILABLE
	RestoreSec        float64           `json:"restore_s"`            // RestoreTableFromBackup to ACTIVE
	RestoreItemsPerS  float64           `json:"restore_items_per_s"`  // Items ÷ RestoreSec
	RestoreCPUSec     float64           `json:"restore_server_cpu_s"` // server CPU over the restore
	Workloads         map[string]Result `json:"workloads"`
}

// DiskPerItem is DiskBytes ÷ Items.
func (s ScaleSize) DiskPerItem() float64 { return float64(s.DiskBytes) / float64(max(s.Items, 1)) }

// ScaleTables is the many-tables case.
type ScaleTables struct {
	Tables          int       `json:"tables"`
	CreateSec       float64   `json:"create_s"` // CreateTable and one PutItem of every table
	ReadySec        float64   `json:"ready_s"`
	ListTablesSec   float64   `json:"list_tables_s"` // median of the runs: ListTables (Limit 100) paged through every table
	ListTablesRuns  []float64 `json:"list_tables_runs_s"`
	ListTablesPages int       `json:"list_tables_pages"`
	ListTablesCPU   float64   `json:"list_tables_server_cpu_s"` // median run's server CPU
	Describe        *Result   `json:"describe"`
}

// ScaleCheck is one target beside its measured figure.
type ScaleCheck struct {
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Limit    float64 `json:"limit"`
	Unit     string  `json:"unit"`
	Pass     bool    `json:"pass"`
	Enforced bool    `json:"enforced"` // a miss fails the run (Loose)
}

// scaleItem is item i of the scale table: partition i/100, sort key i%100,
// so every partition holds 100 items and a Query of Limit 25 is full.
func scaleKey(i int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: scalePK(i / itemsPerPartition)},
		attrSK: &types.AttributeValueMemberS{Value: skOf(i % itemsPerPartition)},
	}
}

func scalePK(p int) string { return fmt.Sprintf("k%09d", p) }

func scaleItem(i int, payload string) map[string]types.AttributeValue {
	it := scaleKey(i)
	it[attrPayload] = &types.AttributeValueMemberS{Value: payload}
	it[attrVer] = &types.AttributeValueMemberN{Value: "0"}
	return it
}

// scalePayloadLen makes a scale item about size bytes by DynamoDB's rules.
func scalePayloadLen(size int) int {
	overhead := len(attrPK) + len("k000000000") + len(attrSK) + len("000") + len(attrPayload) + len(attrVer) + 2
	return max(size-overhead, 1)
}

// The scale workloads pick keys uniformly over the whole table (w.n items).
var scaleOps = map[string]func(ctx context.Context, w *worker) (int, string, error){
	ScaleGetItem: func(ctx context.Context, w *worker) (int, string, error) {
		out, err := w.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: w.table, Key: scaleKey(w.rng.IntN(w.n))})
		if err != nil {
			return 0, "", err
		}
		if out.Item == nil {
			return 0, codeItemNotFound, nil
		}
		return 1, "", nil
	},
	// PutItem replaces an existing item, so the table keeps its size.
	ScalePutItem: func(ctx context.Context, w *worker) (int, string, error) {
		_, err := w.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: w.table, Item: scaleItem(w.rng.IntN(w.n), w.nextPayload())})
		return 1, "", err
	},
	ScaleUpdateItem: func(ctx context.Context, w *worker) (int, string, error) {
		_, err := w.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: w.table, Key: scaleKey(w.rng.IntN(w.n)),
			UpdateExpression: updateExpr, ExpressionAttributeNames: updateNames,
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":p":   &types.AttributeValueMemberS{Value: w.nextPayload()},
				":one": &types.AttributeValueMemberN{Value: "1"},
			},
		})
		return 1, "", err
	},
	ScaleQuery: func(ctx context.Context, w *worker) (int, string, error) {
		return w.query(ctx, nil, queryNames, scalePK(w.rng.IntN(w.n/itemsPerPartition)))
	},
	// One Scan page of Limit 100 resuming after a random item: a page at
	// a random position of the table.
	ScaleScanPage: func(ctx context.Context, w *worker) (int, string, error) {
		out, err := w.client.Scan(ctx, &dynamodb.ScanInput{
			TableName: w.table, Limit: aws.Int32(scaleScanPageLimit), ExclusiveStartKey: scaleKey(w.rng.IntN(w.n)),
		})
		if err != nil {
			return 0, "", err
		}
		return len(out.Items), "", nil
	},
	ScaleDescribe: func(ctx context.Context, w *worker) (int, string, error) {
		_, err := w.client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: w.table})
		return 1, "", err
	},
}

// scaleServer is one `extenddb serve` process the run starts and stops.
type scaleServer struct {
	bin, log string
	args     []string
	env      []string
	endpoint string
	cmd      *exec.Cmd
	done     chan error
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the server and returns the time from the process start to
// its first 200 on /ready (polled every 5 ms).
func (s *scaleServer) start(ctx context.Context) (time.Duration, error) {
	f, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Env = append(os.Environ(), s.env...)
	s.cmd.Stdout, s.cmd.Stderr = f, f
	t0 := time.Now()
	if err := s.cmd.Start(); err != nil {
		return 0, err
	}
	s.done = make(chan error, 1)
	go func() { s.done <- s.cmd.Wait() }()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case err := <-s.done:
			s.cmd = nil
			return 0, fmt.Errorf("server exited before /ready (%v); its log: %s", err, s.log)
		default:
		}
		if resp, err := hc.Get(s.endpoint + "/ready"); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(t0), nil
			}
		}
		if time.Since(t0) > 5*time.Minute {
			s.stop()
			return 0, fmt.Errorf("server not ready after 5 minutes; its log: %s", s.log)
		}
		if ctx.Err() != nil {
			s.stop()
			return 0, ctx.Err()
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *scaleServer) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM and waits for the exit (SIGKILL after 2 minutes).
func (s *scaleServer) stop() error {
	if s.cmd == nil {
		return nil
	}
	defer func() { s.cmd = nil }()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(2 * time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("server %d did not stop within 2 minutes of SIGTERM (killed)", s.cmd.Process.Pid)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *scaleServer) kill() error {
	if s.cmd == nil {
		return nil
	}
	defer func() { s.cmd = nil }()
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	<-s.done
	return nil
}

// scaleEnv is one server's home: its data (a SQLite directory or a
// PostgreSQL database) and its backup store.
type scaleEnv struct {
	srv    *scaleServer
	dataDB string // postgres: the database's name
	dsn    string // postgres: the database's DSN
	dir    string // sqlite: the data directory
	bucket string // the directory of the bucket "scale" (s3.filesystem_root)
}

// RunScale runs the scale benchmark, writes its progress and final report
// to out and returns the report.
func RunScale(ctx context.Context, o ScaleOptions, out io.Writer) (*ScaleReport, error) {
	if o.Backend == "" {
		o.Backend = "sqlite"
	}
	if o.Backend != "sqlite" && o.Backend != "postgres" {
		return nil, fmt.Errorf("backend %q: sqlite or postgres", o.Backend)
	}
	if o.Backend == "postgres" && o.DSN == "" {
		return nil, errors.New("postgres needs a DSN (--dsn or EXTENDDB_BENCH_POSTGRES_DSN)")
	}
	if len(o.Sizes) == 0 && o.Tables <= 0 {
		return nil, errors.New("nothing to do: no sizes and no tables")
	}
	if !slices.IsSorted(o.Sizes) {
		return nil, fmt.Errorf("sizes %v must be ascending", o.Sizes)
	}
	for _, n := range o.Sizes {
		if n < itemsPerPartition || n%itemsPerPartition != 0 {
			return nil, fmt.Errorf("size %d: a positive multiple of %d", n, itemsPerPartition)
		}
	}
	if o.Bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Bin = exe
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.BuildWorkers <= 0 {
		o.BuildWorkers = 32
	}
	if o.Duration <= 0 {
		o.Duration = defaultDuration
	}
	if o.Warmup == 0 {
		o.Warmup = defaultWarmup
	}
	if o.ItemSize <= 0 {
		o.ItemSize = 1024
	}
	if o.WorkDir == "" {
		d, err := os.MkdirTemp("", "extenddb-bench-scale-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		o.WorkDir = d
	}
	rep := &ScaleReport{Version: 1, Backend: o.Backend, Started: time.Now().UTC(), CPUs: runtime.NumCPU(),
		Concurrency: o.Concurrency, DurationSec: o.Duration.Seconds(), ItemSize: o.ItemSize, LoadAvg: []string{loadAvg()}}
	sr := &scaleRunner{o: o, out: out}
	if len(o.Sizes) > 0 {
		if err := sr.runSizes(ctx, rep); err != nil {
			return rep, err
		}
	}
	if o.Tables > 0 {
		if err := sr.runTables(ctx, rep); err != nil {
			return rep, err
		}
	}
	rep.Finished = time.Now().UTC()
	rep.LoadAvg = append(rep.LoadAvg, loadAvg())
	rep.Checks = scaleChecks(rep, o.Loose)
	return rep, nil
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

type scaleRunner struct {
	o   ScaleOptions
	out io.Writer
}

func (sr *scaleRunner) logf(format string, args ...any) {
	if !sr.o.Quiet {
		fmt.Fprintf(sr.out, "bench scale: "+format+"\n", args...)
	}
}

// newEnv prepares a server of the run's backend named name: a data
// directory, or a new PostgreSQL database migrated with `extenddb migrate`.
func (sr *scaleRunner) newEnv(ctx context.Context, name string) (*scaleEnv, error) {
	o := sr.o
	home := filepath.Join(o.WorkDir, name)
	for _, d := range []string{"store", "spool", "data", "buckets/scale"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	e := &scaleEnv{bucket: filepath.Join(home, "buckets", "scale"), srv: &scaleServer{
		bin: o.Bin, log: filepath.Join(home, "server.log"), endpoint: fmt.Sprintf("http://127.0.0.1:%d", port),
		env: []string{
			"EXTENDDB__BACKUP__STORE__KIND=filesystem",
			"EXTENDDB__BACKUP__STORE__ROOT=" + filepath.Join(home, "store"),
			"EXTENDDB__BACKUP__SPOOL_DIR=" + filepath.Join(home, "spool"),
			"EXTENDDB__LOG__LEVEL=warn",
			"EXTENDDB__S3__FILESYSTEM_ROOT=" + filepath.Join(home, "buckets"),
		},
	}}
	args := []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port)}
	if o.Backend == "sqlite" {
		e.dir = filepath.Join(home, "data")
		args = append(args, "--data-dir", e.dir)
	} else {
		e.dataDB = fmt.Sprintf("extenddb_scale_%s_%s", name, randomSuffix())
		if e.dsn, err = createDatabase(ctx, o.DSN, e.dataDB); err != nil {
			return nil, err
		}
		mig := exec.CommandContext(ctx, o.Bin, "migrate", "--backend", "postgres", "--dsn", e.dsn)
		if b, err := mig.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("extenddb migrate: %v: %s", err, b)
		}
		args = append(args, "--backend", "postgres", "--dsn", e.dsn)
	}
	e.srv.args = args
	return e, nil
}

// close stops the server and drops its PostgreSQL database.
func (sr *scaleRunner) closeEnv(e *scaleEnv) {
	if err := e.srv.stop(); err != nil {
		sr.logf("%v", err)
	}
	if e.dataDB != "" {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dropDatabase(ctx, sr.o.DSN, e.dataDB); err != nil {
			sr.logf("dropping database %s: %v", e.dataDB, err)
		}
	}
}

func createDatabase(ctx context.Context, adminDSN, name string) (string, error) {
	c, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("CREATE DATABASE %s: %w", name, err)
	}
	u, err := url.Parse(adminDSN)
	if err != nil {
		return "", fmt.Errorf("postgres DSN: %w (a postgres:// URL is needed)", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

func dropDatabase(ctx context.Context, adminDSN, name string) error {
	c, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// diskBytes is what the server's data takes: the SQLite data directory's
// files (database, WAL, shared memory), or the total relation size
// (tables, indexes, TOAST) of every table of the PostgreSQL database.
func (e *scaleEnv) diskBytes(ctx context.Context) (int64, error) {
	if e.dir != "" {
		var n int64
		err := filepath.WalkDir(e.dir, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			fi, err := d.Info()
			if err == nil {
				n += fi.Size()
			}
			return err
		})
		return n, err
	}
	c, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var n int64
	err = c.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'p', 'm') AND n.nspname NOT IN ('pg_catalog', 'information_schema')`).Scan(&n)
	return n, err
}

// runner returns a load runner against e's server.
func (sr *scaleRunner) runner(e *scaleEnv, conc int) *runner {
	opt := Options{Endpoint: e.srv.endpoint, Concurrency: conc, Duration: sr.o.Duration, Warmup: sr.o.Warmup,
		ServerPID: e.srv.pid(), ItemSize: sr.o.ItemSize, Quiet: true}
	if e.dataDB != "" {
		opt.BackendProcs = "postgres: " + pgUser(sr.o.DSN) + " " + e.dataDB + " "
	}
	_ = opt.setDefaults()
	return &runner{opt: opt, out: sr.out}
}

func pgUser(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil && u.User.Username() != "" {
		return u.User.Username()
	}
	return "postgres"
}

func (sr *scaleRunner) runSizes(ctx context.Context, rep *ScaleReport) error {
	e, err := sr.newEnv(ctx, "sizes")
	if err != nil {
		return err
	}
	defer sr.closeEnv(e)
	if _, err := e.srv.start(ctx); err != nil {
		return err
	}
	table := "scale"
	admin := sr.runner(e, 1).newClient(sr.o.BuildWorkers)
	if !sr.o.Import {
		if err := createScaleTable(ctx, admin, table); err != nil {
			return err
		}
	}
	have := 0
	for _, n := range sr.o.Sizes {
		sz := ScaleSize{Items: n, Workloads: map[string]Result{}, BuildMethod: "BatchWriteItem"}
		var rate, cpu float64
		if sr.o.Import {
			sz.BuildMethod = "ImportTable"
			sr.logf("%d items: writing items %d-%d to the bucket, then ImportTable of all %d", n, have, n, n)
			next := fmt.Sprintf("scale-%d", n)
			rate, cpu, err = sr.importTable(ctx, e, admin, table, next, have, n)
			table = next
		} else {
			sr.logf("%d items: growing the table from %d with %d BatchWriteItem workers", n, have, sr.o.BuildWorkers)
			rate, cpu, err = sr.grow(ctx, e, admin, table, have, n)
		}
		if err != nil {
			return err
		}
		have = n
		sz.BuildItemsPerSec, sz.BuildCPUPerItemUS = rate, cpu
		sr.logf("%d items: built at %.0f items/s, server CPU %.1f µs per item", n, rate, cpu)

		if err := e.srv.stop(); err != nil {
			return err
		}
		started := time.Now()
		d, err := e.srv.start(ctx)
		if err != nil {
			return err
		}
		sz.ReadySec = d.Seconds()
		admin = sr.runner(e, 1).newClient(sr.o.BuildWorkers)
		t0 := time.Now()
		if _, err := admin.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
			return fmt.Errorf("DescribeTable: %w", err)
		}
		sz.FirstDescribeSec = time.Since(t0).Seconds()
		// A table loaded in bulk (ImportTable) has no statistics until the
		// server has counted it, reading the whole table (ADR 0053); the
		// windows start once DescribeTable counts every item, so that
		// the count is measured on its own, not spread over the windows.
		if err := sr.waitCounted(ctx, e, admin, table, n, started, &sz); err != nil {
			return err
		}
		if sz.DiskBytes, err = e.diskBytes(ctx); err != nil {
			return fmt.Errorf("disk size: %w", err)
		}
		sr.logf("%d items: start to /ready %.3fs, first DescribeTable %.3fs, statistics counted %.1fs after the start (%.1fs of server CPU), disk %s (%.0f B per item)",
			n, sz.ReadySec, sz.FirstDescribeSec, sz.StatsSec, sz.StatsCPUSec, FormatBytes(sz.DiskBytes), sz.DiskPerItem())

		for _, name := range ScaleWorkloads {
			res, err := sr.measure(ctx, e, table, n, name)
			if err != nil {
				return fmt.Errorf("%d items, %s: %w", n, name, err)
			}
			sz.Workloads[name] = res
			cpu := 0.0
			if res.Server != nil {
				cpu = res.Server.CPUMicrosPerOp
			}
			sr.logf("%d items, %s: %.0f ops/s, p99 %s, server CPU %s per request, %d errors",
				n, name, res.OpsPerSec, fmtMicros(res.P99Micros), fmtCPU(cpu), res.Errors)
		}
		if err := sr.backupRestore(ctx, e, admin, table, &sz); err != nil {
			return fmt.Errorf("%d items: %w", n, err)
		}
		sr.logf("%d items: backup %.2fs (%.0f items/s), restore %.2fs (%.0f items/s)",
			n, sz.BackupSec, sz.BackupItemsPerSec, sz.RestoreSec, sz.RestoreItemsPerS)
		rep.Sizes = append(rep.Sizes, sz)
	}
	return nil
}

func createScaleTable(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: scaleAttributes(),
		KeySchema:            scaleKeySchema(),
	})
	if err != nil {
		return fmt.Errorf("CreateTable %s: %w", table, err)
	}
	return waitTableActive(ctx, c, table, 2*time.Minute)
}

func waitTableActive(ctx context.Context, c *dynamodb.Client, table string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		out, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err == nil && out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		if err != nil && ErrorCode(err) != "ResourceNotFoundException" {
			return fmt.Errorf("DescribeTable %s: %w", table, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("table %s not ACTIVE after %v", table, limit)
		}
		sleepCtx(ctx, 50*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// grow writes items [from, to) with BatchWriteItem of 25 from
// BuildWorkers goroutines and returns items/s and the server's CPU per
// item over the load.
func (sr *scaleRunner) grow(ctx context.Context, e *scaleEnv, c *dynamodb.Client, table string, from, to int) (float64, float64, error) {
	plen := scalePayloadLen(sr.o.ItemSize)
	nBatches := (to - from + batchSize - 1) / batchSize
	var next, done int64
	p0, err := ReadProc(e.srv.pid())
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, sr.o.BuildWorkers)
	for g := range sr.o.BuildWorkers {
		go func() {
			rng := mrand.New(mrand.NewPCG(mrand.Uint64(), uint64(g)))
			payload := randomPayload(rng, plen)
			for gctx.Err() == nil {
				b := int(atomicAdd(&next))
				if b >= nBatches {
					errc <- nil
					return
				}
				lo := from + b*batchSize
				hi := min(lo+batchSize, to)
				reqs := make([]types.WriteRequest, 0, hi-lo)
				for i := lo; i < hi; i++ {
					copy(payload, strconv.Itoa(i))
					reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: scaleItem(i, string(payload))}})
				}
				if err := writeBatch(gctx, c, table, reqs); err != nil {
					errc <- err
					cancel()
					return
				}
				if d := atomic.AddInt64(&done, 1); !sr.o.Quiet && d%4000 == 0 {
					sr.logf("  %d of %d items written, %.0f items/s", from+int(d)*batchSize, to, float64(d*batchSize)/time.Since(t0).Seconds())
				}
			}
			errc <- gctx.Err()
		}()
	}
	var first error
	for range sr.o.BuildWorkers {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return 0, 0, first
	}
	el := time.Since(t0)
	p1, err := ReadProc(e.srv.pid())
	if err != nil {
		return 0, 0, err
	}
	n := float64(to - from)
	return n / el.Seconds(), micros(p1.CPU-p0.CPU) / n, nil
}

// measure runs one scale workload on the table of n items.
func (sr *scaleRunner) measure(ctx context.Context, e *scaleEnv, table string, n int, name string) (Result, error) {
	r := sr.runner(e, sr.o.Concurrency)
	wl := workload{name: name, itemsPerOp: 1, op: scaleOps[name]}
	res := Result{Workload: name, Endpoint: r.opt.Endpoint, Table: table, Concurrency: r.opt.Concurrency, ItemSize: sr.o.ItemSize}
	plen := scalePayloadLen(sr.o.ItemSize)
	workers := make([]*worker, r.opt.Concurrency)
	for i := range workers {
		rng := mrand.New(mrand.NewPCG(mrand.Uint64(), uint64(i)))
		workers[i] = &worker{id: i, client: r.newClient(1), table: aws.String(table), rng: rng, n: n, payload: randomPayload(rng, plen)}
	}
	err := r.measureWindow(ctx, wl, workers, &res)
	return res, err
}

// backupRestore takes a backup of the table through the API (CreateBackup,
// DescribeBackup until AVAILABLE), restores it into a new table
// (RestoreTableFromBackup, DescribeTable until ACTIVE), then deletes both.
func (sr *scaleRunner) backupRestore(ctx context.Context, e *scaleEnv, c *dynamodb.Client, table string, sz *ScaleSize) error {
	p0, err := ReadProc(e.srv.pid())
	if err != nil {
		return err
	}
	t0 := time.Now()
	b, err := c.CreateBackup(ctx, &dynamodb.CreateBackupInput{TableName: aws.String(table), BackupName: aws.String(fmt.Sprintf("scale-%d", sz.Items))})
	if err != nil {
		return fmt.Errorf("CreateBackup: %w", err)
	}
	arn := b.BackupDetails.BackupArn
	for {
		d, err := c.DescribeBackup(ctx, &dynamodb.DescribeBackupInput{BackupArn: arn})
		if err != nil {
			return fmt.Errorf("DescribeBackup: %w", err)
		}
		st := d.BackupDescription.BackupDetails.BackupStatus
		if st == types.BackupStatusAvailable {
			break
		}
		if st == types.BackupStatusDeleted {
			return fmt.Errorf("backup %s ended %s", *arn, st)
		}
		if sleepCtx(ctx, 20*time.Millisecond); ctx.Err() != nil {
			return ctx.Err()
		}
	}
	sz.BackupSec = time.Since(t0).Seconds()
	p1, err := ReadProc(e.srv.pid())
	if err != nil {
		return err
	}
	sz.BackupCPUSec = (p1.CPU - p0.CPU).Seconds()
	sz.BackupItemsPerSec = float64(sz.Items) / sz.BackupSec

	target := table + "-restored"
	t1 := time.Now()
	if _, err := c.RestoreTableFromBackup(ctx, &dynamodb.RestoreTableFromBackupInput{BackupArn: arn, TargetTableName: aws.String(target)}); err != nil {
		return fmt.Errorf("RestoreTableFromBackup: %w", err)
	}
	for {
		d, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(target)})
		if err != nil {
			return fmt.Errorf("DescribeTable %s: %w", target, err)
		}
		if d.Table.TableStatus == types.TableStatusActive {
			break
		}
		if sleepCtx(ctx, 20*time.Millisecond); ctx.Err() != nil {
			return ctx.Err()
		}
	}
	sz.RestoreSec = time.Since(t1).Seconds()
	p2, err := ReadProc(e.srv.pid())
	if err != nil {
		return err
	}
	sz.RestoreCPUSec = (p2.CPU - p1.CPU).Seconds()
	sz.RestoreItemsPerS = float64(sz.Items) / sz.RestoreSec
	if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(target)}); err != nil {
		return fmt.Errorf("DeleteTable %s: %w", target, err)
	}
	if _, err := c.DeleteBackup(ctx, &dynamodb.DeleteBackupInput{BackupArn: arn}); err != nil {
		return fmt.Errorf("DeleteBackup: %w", err)
	}
	// The next size's build should not race the restored table's removal.
	for {
		_, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(target)})
		if ErrorCode(err) == "ResourceNotFoundException" {
			return nil
		}
		if sleepCtx(ctx, 50*time.Millisecond); ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// runTables is the many-tables case on a server of its own.
func (sr *scaleRunner) runTables(ctx context.Context, rep *ScaleReport) error {
	e, err := sr.newEnv(ctx, "tables")
	if err != nil {
		return err
	}
	defer sr.closeEnv(e)
	if _, err := e.srv.start(ctx); err != nil {
		return err
	}
	n := sr.o.Tables
	st := &ScaleTables{Tables: n}
	c := sr.runner(e, 1).newClient(sr.o.BuildWorkers)
	name := func(i int) string { return fmt.Sprintf("t%05d", i) }
	sr.logf("%d tables: creating them with one item each", n)
	t0 := time.Now()
	var next int64
	errc := make(chan error, sr.o.Concurrency)
	for range sr.o.Concurrency {
		go func() {
			for ctx.Err() == nil {
				i := int(atomicAdd(&next))
				if i >= n {
					errc <- nil
					return
				}
				if err := createSmallTable(ctx, c, name(i)); err != nil {
					errc <- err
					return
				}
			}
			errc <- ctx.Err()
		}()
	}
	var first error
	for range sr.o.Concurrency {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	st.CreateSec = time.Since(t0).Seconds()
	sr.logf("%d tables: created in %.1fs", n, st.CreateSec)
	if err := e.srv.stop(); err != nil {
		return err
	}
	d, err := e.srv.start(ctx)
	if err != nil {
		return err
	}
	st.ReadySec = d.Seconds()
	c = sr.runner(e, 1).newClient(4)
	type run struct{ sec, cpu float64 }
	var runs []run
	for range 3 {
		p0, err := ReadProc(e.srv.pid())
		if err != nil {
			return err
		}
		t0 := time.Now()
		var start *string
		count, pages := 0, 0
		for {
			out, err := c.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(100), ExclusiveStartTableName: start})
			if err != nil {
				return fmt.Errorf("ListTables: %w", err)
			}
			pages++
			count += len(out.TableNames)
			if out.LastEvaluatedTableName == nil {
				break
			}
			start = out.LastEvaluatedTableName
		}
		el := time.Since(t0).Seconds()
		p1, err := ReadProc(e.srv.pid())
		if err != nil {
			return err
		}
		if count != n {
			return fmt.Errorf("ListTables paged through %d tables, want %d", count, n)
		}
		st.ListTablesPages = pages
		st.ListTablesRuns = append(st.ListTablesRuns, el)
		runs = append(runs, run{el, (p1.CPU - p0.CPU).Seconds()})
	}
	slices.SortFunc(runs, func(a, b run) int {
		if a.sec < b.sec {
			return -1
		}
		if a.sec > b.sec {
			return 1
		}
		return 0
	})
	st.ListTablesSec, st.ListTablesCPU = runs[len(runs)/2].sec, runs[len(runs)/2].cpu
	res, err := sr.measure(ctx, e, name(n/2), 1, ScaleDescribe)
	if err != nil {
		return fmt.Errorf("DescribeTable: %w", err)
	}
	st.Describe = &res
	sr.logf("%d tables: start to /ready %.3fs, ListTables %.3fs (%d pages), DescribeTable p99 %s, server CPU %s per request",
		n, st.ReadySec, st.ListTablesSec, st.ListTablesPages, fmtMicros(res.P99Micros), fmtCPU(res.Server.CPUMicrosPerOp))
	rep.Tables = st
	return nil
}

func createSmallTable(ctx context.Context, c *dynamodb.Client, table string) error {
	_, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		return fmt.Errorf("CreateTable %s: %w", table, err)
	}
	if err := waitTableActive(ctx, c, table, time.Minute); err != nil {
		return err
	}
	item := map[string]types.AttributeValue{
		attrPK:      &types.AttributeValueMemberS{Value: "item"},
		attrPayload: &types.AttributeValueMemberS{Value: strings.Repeat("x", 100)},
	}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		return fmt.Errorf("PutItem %s: %w", table, err)
	}
	return nil
}

// scaleChecks compares the report with the targets. With loose > 0 the
// ratio limit is loose and the absolute limits are multiplied by it, and
// every check is enforced.
func scaleChecks(rep *ScaleReport, loose float64) []ScaleCheck {
	var cs []ScaleCheck
	ratio, abs := scaleRatioTarget, 1.0
	if loose > 0 {
		ratio, abs = loose, loose
	}
	add := func(name string, v, limit float64, unit string) {
		cs = append(cs, ScaleCheck{Name: name, Value: v, Limit: limit, Unit: unit, Pass: v <= limit, Enforced: loose > 0})
	}
	if len(rep.Sizes) >= 2 {
		lo, hi := rep.Sizes[0], rep.Sizes[len(rep.Sizes)-1]
		for _, w := range ScaleWorkloads {
			a, b := lo.Workloads[w], hi.Workloads[w]
			if a.Server != nil && b.Server != nil && a.Server.CPUMicrosPerOp > 0 {
				add(fmt.Sprintf("%s server CPU/request, %s ÷ %s items", w, countLabel(hi.Items), countLabel(lo.Items)),
					b.Server.CPUMicrosPerOp/a.Server.CPUMicrosPerOp, ratio, "×")
			}
			// p99 moves with the neighbours on a shared machine: it is
			// compared with the strict target, never enforced.
			if a.P99Micros > 0 && loose <= 0 {
				add(fmt.Sprintf("%s p99, %s ÷ %s items", w, countLabel(hi.Items), countLabel(lo.Items)), b.P99Micros/a.P99Micros, ratio, "×")
			}
		}
	}
	if n := len(rep.Sizes); n > 0 && rep.Backend == "sqlite" {
		s := rep.Sizes[n-1]
		add(fmt.Sprintf("SQLite disk bytes per item at %s items", countLabel(s.Items)), s.DiskPerItem(), scaleDiskTarget*abs, "B")
	}
	if t := rep.Tables; t != nil {
		add(fmt.Sprintf("start to /ready with %s tables", countLabel(t.Tables)), t.ReadySec, scaleReadyTarget.Seconds()*abs, "s")
		add(fmt.Sprintf("ListTables through %s tables", countLabel(t.Tables)), t.ListTablesSec, scaleListTarget.Seconds()*abs, "s")
	}
	return cs
}

// countLabel writes 10000 as 10k and 1000000 as 1M.
func countLabel(n int) string {
	switch {
	case n >= 1e6 && n%1e6 == 0:
		return fmt.Sprintf("%dM", n/1e6)
	case n >= 1e6 && n%1e5 == 0:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3 && n%1e3 == 0:
		return fmt.Sprintf("%dk", n/1e3)
	}
	return strconv.Itoa(n)
}

// WriteScaleMarkdown writes the report as markdown tables: one column per
// size, then the many-tables case, then the checks with pass or fail.
func WriteScaleMarkdown(w io.Writer, rep *ScaleReport) {
	fmt.Fprintf(w, "Backend %s, %s to %s UTC, %d CPUs, load average %s; %d workers, %gs windows, %d-byte items.\n\n",
		rep.Backend, rep.Started.Format("2006-01-02 15:04"), rep.Finished.Format("15:04"), rep.CPUs,
		strings.Join(rep.LoadAvg, " → "), rep.Concurrency, rep.DurationSec, rep.ItemSize)
	if len(rep.Sizes) > 0 {
		hdr := "| figure |"
		sep := "|---|"
		for _, s := range rep.Sizes {
			hdr += " " + countLabel(s.Items) + " |"
			sep += "---:|"
		}
		fmt.Fprintln(w, hdr)
		fmt.Fprintln(w, sep)
		row := func(name string, f func(s ScaleSize) string) {
			line := "| " + name + " |"
			for _, s := range rep.Sizes {
				line += " " + f(s) + " |"
			}
			fmt.Fprintln(w, line)
		}
		for _, wl := range ScaleWorkloads {
			row(wl+" server CPU/req", func(s ScaleSize) string {
				if r := s.Workloads[wl]; r.Server != nil {
					return fmtCPU(r.Server.CPUMicrosPerOp)
				}
				return "-"
			})
			row(wl+" p99", func(s ScaleSize) string { return fmtMicros(s.Workloads[wl].P99Micros) })
		}
		if rep.Backend == "postgres" {
			for _, wl := range ScaleWorkloads {
				row(wl+" database CPU/req", func(s ScaleSize) string {
					if r := s.Workloads[wl]; r.Backend != nil {
						return fmtCPU(r.Backend.CPUMicrosPerOp)
					}
					return "-"
				})
			}
		}
		row("errors (all workloads)", func(s ScaleSize) string {
			var n int64
			for _, r := range s.Workloads {
				n += r.Errors
			}
			return strconv.FormatInt(n, 10)
		})
		row("first DescribeTable after start", func(s ScaleSize) string { return fmtMicros(s.FirstDescribeSec * 1e6) })
		row("statistics counted after start (server CPU)", func(s ScaleSize) string {
			return fmt.Sprintf("%.1f s (%.1f s)", s.StatsSec, s.StatsCPUSec)
		})
		row("start to /ready", func(s ScaleSize) string { return fmtMicros(s.ReadySec * 1e6) })
		row("build items/s", func(s ScaleSize) string { return fmt.Sprintf("%.0f (%s)", s.BuildItemsPerSec, s.BuildMethod) })
		row("build server CPU/item", func(s ScaleSize) string { return fmtCPU(s.BuildCPUPerItemUS) })
		row("backup items/s", func(s ScaleSize) string { return fmt.Sprintf("%.0f", s.BackupItemsPerSec) })
		row("restore items/s", func(s ScaleSize) string { return fmt.Sprintf("%.0f", s.RestoreItemsPerS) })
		row("disk", func(s ScaleSize) string { return FormatBytes(s.DiskBytes) })
		row("disk bytes/item", func(s ScaleSize) string { return fmt.Sprintf("%.0f", s.DiskPerItem()) })
		fmt.Fprintln(w)
	}
	if t := rep.Tables; t != nil {
		fmt.Fprintf(w, "| %s small tables | |\n|---|---:|\n", countLabel(t.Tables))
		fmt.Fprintf(w, "| create (CreateTable + one PutItem each) | %.1f s |\n", t.CreateSec)
		fmt.Fprintf(w, "| start to /ready | %s |\n", fmtMicros(t.ReadySec*1e6))
		runs := make([]string, len(t.ListTablesRuns))
		for i, r := range t.ListTablesRuns {
			runs[i] = fmtMicros(r * 1e6)
		}
		fmt.Fprintf(w, "| ListTables, %d pages of 100, median of %d runs right after the start (%s) | %s (server CPU %s) |\n",
			t.ListTablesPages, len(t.ListTablesRuns), strings.Join(runs, ", "), fmtMicros(t.ListTablesSec*1e6), fmtMicros(t.ListTablesCPU*1e6))
		if d := t.Describe; d != nil && d.Server != nil {
			fmt.Fprintf(w, "| DescribeTable of one: server CPU/req, p99 | %s, %s |\n", fmtCPU(d.Server.CPUMicrosPerOp), fmtMicros(d.P99Micros))
		}
		fmt.Fprintln(w)
	}
	if len(rep.Checks) > 0 {
		fmt.Fprintln(w, "| target | measured | limit | |")
		fmt.Fprintln(w, "|---|---:|---:|---|")
		for _, c := range rep.Checks {
			verdict := "pass"
			if !c.Pass {
				verdict = "FAIL"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", c.Name, fmtCheck(c.Value, c.Unit), fmtCheck(c.Limit, c.Unit), verdict)
		}
	}
}

func fmtCheck(v float64, unit string) string {
	switch unit {
	case "×":
		return fmt.Sprintf("%.2f×", v)
	case "s":
		return fmt.Sprintf("%.3f s", v)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

// WriteScaleJSON writes the report as indented JSON.
func WriteScaleJSON(path string, rep *ScaleReport) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Failed reports the enforced checks that missed.
func (rep *ScaleReport) Failed() []ScaleCheck {
	var f []ScaleCheck
	for _, c := range rep.Checks {
		if c.Enforced && !c.Pass {
			f = append(f, c)
		}
	}
	return f
}

// atomicAdd increments *p and returns its previous value: the next index
// to claim.
func atomicAdd(p *int64) int64 { return atomic.AddInt64(p, 1) - 1 }

// importTable builds a table of items [0, to) with ImportTable: the items
// [from, to) are added to the bucket as DYNAMODB_JSON files (uncompressed,
// 100,000 items each; [0, from) are there from the previous sizes), the
// previous size's table is deleted, and all of them are imported into
// the table next. It returns items/s and the server's CPU per item from
// ImportTable to COMPLETED; writing the files is not counted.
func (sr *scaleRunner) importTable(ctx context.Context, e *scaleEnv, c *dynamodb.Client, prev, next string, from, to int) (float64, float64, error) {
	if err := writeImportFiles(e.bucket, from, to, scalePayloadLen(sr.o.ItemSize)); err != nil {
		return 0, 0, err
	}
	if from > 0 {
		if _, err := c.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(prev)}); err != nil {
			return 0, 0, fmt.Errorf("DeleteTable %s: %w", prev, err)
		}
		if err := waitTableGone(ctx, c, prev); err != nil {
			return 0, 0, err
		}
	}
	p0, err := ReadProc(e.srv.pid())
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	out, err := c.ImportTable(ctx, &dynamodb.ImportTableInput{
		S3BucketSource:       &types.S3BucketSource{S3Bucket: aws.String("scale"), S3KeyPrefix: aws.String("data/")},
		InputFormat:          types.InputFormatDynamodbJson,
		InputCompressionType: types.InputCompressionTypeNone,
		TableCreationParameters: &types.TableCreationParameters{
			TableName:            aws.String(next),
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: scaleAttributes(),
			KeySchema:            scaleKeySchema(),
		},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("ImportTable: %w", err)
	}
	arn := out.ImportTableDescription.ImportArn
	for {
		d, err := c.DescribeImport(ctx, &dynamodb.DescribeImportInput{ImportArn: arn})
		if err != nil {
			return 0, 0, fmt.Errorf("DescribeImport: %w", err)
		}
		st := d.ImportTableDescription.ImportStatus
		if st == types.ImportStatusCompleted {
			if got := d.ImportTableDescription.ImportedItemCount; got != int64(to) {
				return 0, 0, fmt.Errorf("ImportTable imported %d items, want %d", got, to)
			}
			break
		}
		if st != types.ImportStatusInProgress {
			return 0, 0, fmt.Errorf("ImportTable ended %s: %s", st, aws.ToString(d.ImportTableDescription.FailureMessage))
		}
		if sleepCtx(ctx, 50*time.Millisecond); ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
	}
	if err := waitTableActive(ctx, c, next, time.Minute); err != nil {
		return 0, 0, err
	}
	el := time.Since(t0)
	p1, err := ReadProc(e.srv.pid())
	if err != nil {
		return 0, 0, err
	}
	return float64(to) / el.Seconds(), micros(p1.CPU-p0.CPU) / float64(to), nil
}

// writeImportFiles writes items [from, to) as DYNAMODB_JSON lines to
// files of 100,000 items under dir/data/.
func writeImportFiles(dir string, from, to, plen int) error {
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return err
	}
	rng := mrand.New(mrand.NewPCG(uint64(from), uint64(to)))
	payload := randomPayload(rng, plen)
	const perFile = 100000
	for lo := from; lo < to; lo += perFile {
		hi := min(lo+perFile, to)
		f, err := os.OpenFile(filepath.Join(dir, "data", fmt.Sprintf("items-%010d.json", lo)), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 1<<20)
		for i := lo; i < hi; i++ {
			copy(payload, strconv.Itoa(i))
			fmt.Fprintf(w, `{"Item":{"%s":{"S":"%s"},"%s":{"S":"%s"},"%s":{"S":"%s"},"%s":{"N":"0"}}}`+"\n",
				attrPK, scalePK(i/itemsPerPartition), attrSK, skOf(i%itemsPerPartition), attrPayload, payload, attrVer)
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

func waitTableGone(ctx context.Context, c *dynamodb.Client, table string) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		_, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if ErrorCode(err) == "ResourceNotFoundException" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("table %s still there 5 minutes after DeleteTable", table)
		}
		if sleepCtx(ctx, 50*time.Millisecond); ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// scaleAttributes and scaleKeySchema describe every scale table's key:
// a string partition key and a string sort key.
func scaleAttributes() []types.AttributeDefinition {
	s := types.ScalarAttributeTypeS
	return []types.AttributeDefinition{
		{AttributeName: aws.String(attrPK), AttributeType: s},
		{AttributeName: aws.String(attrSK), AttributeType: s},
	}
}

func scaleKeySchema() []types.KeySchemaElement {
	return []types.KeySchemaElement{
		{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
		{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
	}
}

// statsTimeout bounds the wait for a table's statistics after a start.
const statsTimeout = 60 * time.Minute

// waitCounted polls DescribeTable until its ItemCount is n; StatsSec is
// measured from start (the server process's start), StatsCPUSec is the
// server's CPU from the first DescribeTable on.
func (sr *scaleRunner) waitCounted(ctx context.Context, e *scaleEnv, c *dynamodb.Client, table string, n int, start time.Time, sz *ScaleSize) error {
	p0, err := ReadProc(e.srv.pid())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(statsTimeout)
	for {
		d, err := c.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("DescribeTable: %w", err)
		}
		if d.Table.ItemCount != nil && *d.Table.ItemCount == int64(n) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("DescribeTable's ItemCount not %d after %v", n, statsTimeout)
		}
		if sleepCtx(ctx, 200*time.Millisecond); ctx.Err() != nil {
			return ctx.Err()
		}
	}
	sz.StatsSec = time.Since(start).Seconds()
	p1, err := ReadProc(e.srv.pid())
	if err != nil {
		return err
	}
	sz.StatsCPUSec = (p1.CPU - p0.CPU).Seconds()
	return nil
}
