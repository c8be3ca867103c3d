package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
)

// Command returns the `bench` subcommand.
func Command() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "load-test a DynamoDB-compatible endpoint (throughput, latency, server CPU per request)",
		Description: "Runs each workload against its own fresh table (one GSI): create, preload what it reads,\n" +
			"warm up, measure a fixed window with --concurrency closed-loop workers, delete the table.\n" +
			"Retries are off: throttles and failures are counted by error code, not hidden as latency.\n" +
			"With --server-pid (a local server), the server's CPU time per request and its RSS are reported.\n\n" +
			"Workloads:\n" + workloadHelp(),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "endpoint", Value: "http://127.0.0.1:8000", Usage: "endpoint URL", EnvVars: []string{"EXTENDDB_BENCH_ENDPOINT"}},
			&cli.StringFlag{Name: "region", Value: "us-east-1", Usage: "signing region"},
			&cli.StringFlag{Name: "access-key-id", Value: "extenddb-bench", Usage: "access key id", EnvVars: []string{"AWS_ACCESS_KEY_ID"}},
			&cli.StringFlag{Name: "secret-access-key", Value: "extenddb-bench", Usage: "secret access key", EnvVars: []string{"AWS_SECRET_ACCESS_KEY"}},
			&cli.StringSliceFlag{Name: "workload", Aliases: []string{"w"}, Usage: "workload to run, repeatable or comma-separated, \"all\" for every one (default: " + strings.Join(DefaultWorkloads, ",") + ")"},
			&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Value: 16, Usage: "closed-loop workers"},
			&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Value: defaultDuration, Usage: "measured window per workload"},
			&cli.DurationFlag{Name: "warmup", Value: defaultWarmup, Usage: "unmeasured warm-up before each window (0 for none)"},
			&cli.IntFlag{Name: "server-pid", Usage: "PID of the local server process, to report its CPU per request and RSS"},
			&cli.StringFlag{Name: "backend-procs", Usage: "also report the summed CPU per request of the processes whose command line contains this (e.g. \"postgres: postgres DBNAME\": the PostgreSQL backends of one database)"},
			&cli.IntFlag{Name: "item-size", Value: 1024, Usage: "approximate item size in bytes"},
			&cli.IntFlag{Name: "partitions", Value: 4, Usage: "preloaded 100-item partitions per worker"},
			&cli.StringFlag{Name: "table-prefix", Value: "extenddb-bench", Usage: "prefix of the tables created"},
			&cli.DurationFlag{Name: "request-timeout", Value: defaultRequestTimeout, Usage: "per-request timeout"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the tables instead of deleting them"},
			&cli.StringFlag{Name: "json", Usage: "also write the results as JSON to this file"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only the final table"},
			&cli.StringFlag{Name: "stream", Usage: "enable a DynamoDB stream of this view type (KEYS_ONLY, NEW_IMAGE, OLD_IMAGE, NEW_AND_OLD_IMAGES) on the tables"},
			&cli.BoolFlag{Name: "pitr", Usage: "turn point-in-time recovery on for the tables (the server needs a backup store)"},
		},
		Subcommands: []*cli.Command{scaleCommand(), rpoCommand()},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("bench takes no arguments, got %q", c.Args().Slice())
			}
			warmup := c.Duration("warmup")
			if warmup == 0 {
				warmup = -1 // explicit 0: no warm-up (Options treats 0 as the default)
			}
			opt := Options{
				Endpoint:        c.String("endpoint"),
				Region:          c.String("region"),
				AccessKeyID:     c.String("access-key-id"),
				SecretAccessKey: c.String("secret-access-key"),
				Workloads:       c.StringSlice("workload"),
				Concurrency:     c.Int("concurrency"),
				Duration:        c.Duration("duration"),
				Warmup:          warmup,
				ServerPID:       c.Int("server-pid"),
				BackendProcs:    c.String("backend-procs"),
				ItemSize:        c.Int("item-size"),
				Partitions:      c.Int("partitions"),
				TablePrefix:     c.String("table-prefix"),
				RequestTimeout:  c.Duration("request-timeout"),
				Keep:            c.Bool("keep"),
				JSONPath:        c.String("json"),
				Quiet:           c.Bool("quiet"),
				StreamViewType:  c.String("stream"),
				PITR:            c.Bool("pitr"),
			}
			if opt.Concurrency <= 0 {
				return fmt.Errorf("--concurrency must be at least 1")
			}
			if opt.Duration <= 0 {
				return fmt.Errorf("--duration must be positive")
			}
			_, err := Run(c.Context, opt, c.App.Writer)
			return err
		},
	}
}

func workloadHelp() string {
	var b strings.Builder
	for _, name := range AllWorkloads {
		fmt.Fprintf(&b, "   %-16s %s\n", name, workloads[name].description)
	}
	return b.String()
}

// scaleCommand returns `bench scale`.
func scaleCommand() *cli.Command {
	return &cli.Command{
		Name:  "scale",
		Usage: "measure request costs as a table grows and as a server holds many tables (starts its own servers)",
		Description: "Starts `extenddb serve` (this binary, or --bin) on SQLite in a data directory of its own or on a new\n" +
			"PostgreSQL database (created beside --dsn, dropped after), grows one table of ~1 KiB items through --sizes\n" +
			"with BatchWriteItem and measures at each size: server CPU per request and p99 of getitem, putitem\n" +
			"(replacing an item), updateitem (random keys over the whole table), query (Limit 25), one scan page\n" +
			"(Limit 100 from a random key) and DescribeTable; start to /ready; the first DescribeTable after it;\n" +
			"CreateBackup to AVAILABLE and RestoreTableFromBackup to ACTIVE (items/s); disk bytes per item. Then, on a\n" +
			"second server, --tables small tables: start to /ready, ListTables paged through all of them (Limit 100),\n" +
			"DescribeTable of one. Writes scale-BACKEND.json and scale-BACKEND.md to --out, and prints the markdown\n" +
			"with each target's pass or fail. With --loose F every check is enforced with the ratio limit F and the\n" +
			"absolute limits times F (the CI run); without it the strict targets are printed, never enforced.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "backend", Value: "sqlite", Usage: "sqlite or postgres"},
			&cli.StringFlag{Name: "dsn", Usage: "postgres: DSN of a user who may CREATE DATABASE", EnvVars: []string{"EXTENDDB_BENCH_POSTGRES_DSN"}},
			&cli.StringFlag{Name: "sizes", Value: "10000,1000000,10000000", Usage: "table sizes in items, ascending, multiples of 100 (empty for none)"},
			&cli.IntFlag{Name: "tables", Value: 10000, Usage: "small tables of the many-tables case (0 to leave it out)"},
			&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Value: 16, Usage: "closed-loop workers of each measured window"},
			&cli.IntFlag{Name: "build-workers", Value: 32, Usage: "BatchWriteItem workers growing the table"},
			&cli.DurationFlag{Name: "duration", Aliases: []string{"d"}, Value: defaultDuration, Usage: "measured window per workload and size"},
			&cli.DurationFlag{Name: "warmup", Value: defaultWarmup, Usage: "warm-up before each window"},
			&cli.IntFlag{Name: "item-size", Value: 1024, Usage: "approximate item size in bytes"},
			&cli.StringFlag{Name: "bin", Usage: "extenddb binary to serve with (default: this one)"},
			&cli.StringFlag{Name: "work-dir", Usage: "where data directories, backup stores and server logs go (default: a temporary directory, removed after)"},
			&cli.StringFlag{Name: "out", Value: ".", Usage: "directory of scale-BACKEND.json and scale-BACKEND.md"},
			&cli.Float64Flag{Name: "loose", Usage: "enforce every check with this ratio limit and the absolute limits times it (e.g. 2 in CI)"},
			&cli.BoolFlag{Name: "import", Usage: "build each size with ImportTable (DYNAMODB_JSON files in a filesystem bucket) instead of BatchWriteItem"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only the report"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("bench scale takes no arguments, got %q", c.Args().Slice())
			}
			var sizes []int
			for _, f := range strings.Split(c.String("sizes"), ",") {
				if f = strings.TrimSpace(f); f == "" {
					continue
				}
				n, err := parseCount(f)
				if err != nil {
					return fmt.Errorf("--sizes: %w", err)
				}
				sizes = append(sizes, n)
			}
			o := ScaleOptions{
				Backend: c.String("backend"), DSN: c.String("dsn"), Bin: c.String("bin"), Sizes: sizes,
				Tables: c.Int("tables"), Concurrency: c.Int("concurrency"), BuildWorkers: c.Int("build-workers"),
				Duration: c.Duration("duration"), Warmup: c.Duration("warmup"), ItemSize: c.Int("item-size"),
				WorkDir: c.String("work-dir"), Loose: c.Float64("loose"), Quiet: c.Bool("quiet"), Import: c.Bool("import"),
			}
			rep, err := RunScale(c.Context, o, c.App.Writer)
			if err != nil {
				return err
			}
			out := c.String("out")
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			base := filepath.Join(out, "scale-"+rep.Backend)
			if err := WriteScaleJSON(base+".json", rep); err != nil {
				return err
			}
			f, err := os.Create(base + ".md")
			if err != nil {
				return err
			}
			WriteScaleMarkdown(f, rep)
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer)
			WriteScaleMarkdown(c.App.Writer, rep)
			fmt.Fprintf(c.App.Writer, "\nwrote %s.json and %s.md\n", base, base)
			if failed := rep.Failed(); len(failed) > 0 {
				return fmt.Errorf("%d checks missed their limit (first: %s: %s > %s)", len(failed), failed[0].Name,
					fmtCheck(failed[0].Value, failed[0].Unit), fmtCheck(failed[0].Limit, failed[0].Unit))
			}
			return nil
		},
	}
}

// rpoCommand returns `bench rpo`.
func rpoCommand() *cli.Command {
	return &cli.Command{
		Name:  "rpo",
		Usage: "measure the recovery point of point-in-time recovery: kill the server, lose its database, restore from the store (starts its own servers)",
		Description: "Each run starts `extenddb serve` (this binary, or --bin) on SQLite in a fresh data directory with a fresh\n" +
			"filesystem store, creates a table, turns point-in-time recovery on and waits for its first base, then writes\n" +
			"with --writers closed-loop PutItem writers of unique keys, recording when each write was acknowledged. After\n" +
			"a random time in [--kill-min, --kill-max] it SIGKILLs the server and deletes its data directory, adopts the\n" +
			"store from a fresh catalog (backup sync --adopt-store --force), starts a new server, restores the table by its\n" +
			"ARN to its latest restorable time and scans it. Per run: acknowledged writes missing, the lost window (the\n" +
			"kill minus the oldest missing write's acknowledgement), the restored instant's distance from the kill, and\n" +
			"restored items never written. Then p50, p99 and max over the runs. With --check a missing acknowledged\n" +
			"write older than ship interval + --slack at the kill, a missing write acknowledged before the restored\n" +
			"instant, a restored item never written or a failed restore fails the command.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "runs", Aliases: []string{"n"}, Value: 20, Usage: "kill-and-restore runs"},
			&cli.DurationFlag{Name: "ship-interval", Value: time.Second, Usage: "backup.pitr.ship_interval of the servers"},
			&cli.IntFlag{Name: "writers", Value: 4, Usage: "concurrent PutItem writers"},
			&cli.DurationFlag{Name: "kill-min", Value: 3 * time.Second, Usage: "shortest load before the kill"},
			&cli.DurationFlag{Name: "kill-max", Value: 8 * time.Second, Usage: "longest load before the kill"},
			&cli.BoolFlag{Name: "check", Usage: "fail on a durability violation"},
			&cli.DurationFlag{Name: "slack", Value: 2 * time.Second, Usage: "with --check: acknowledged writes older than ship interval + slack at the kill must be restored"},
			&cli.IntFlag{Name: "port", Usage: "listen on 127.0.0.1:PORT and PORT+1 (default: free ports)"},
			&cli.StringFlag{Name: "bin", Usage: "extenddb binary to serve with (default: this one)"},
			&cli.StringFlag{Name: "work-dir", Usage: "where each run's data directories, store and server logs go, removed after a run unless it failed (default: a temporary directory)"},
			&cli.StringFlag{Name: "json", Usage: "also write the runs as JSON to this file"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print only the runs and the summary"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("bench rpo takes no arguments, got %q", c.Args().Slice())
			}
			if c.Duration("kill-max") < c.Duration("kill-min") {
				return fmt.Errorf("--kill-max must be at least --kill-min")
			}
			rep, err := RunRPO(c.Context, RPOOptions{
				Bin: c.String("bin"), Runs: c.Int("runs"), ShipInterval: c.Duration("ship-interval"), Writers: c.Int("writers"),
				KillMin: c.Duration("kill-min"), KillMax: c.Duration("kill-max"), Slack: c.Duration("slack"), Check: c.Bool("check"),
				Port: c.Int("port"), WorkDir: c.String("work-dir"), Quiet: c.Bool("quiet"),
			}, c.App.Writer)
			if p := c.String("json"); p != "" && rep != nil {
				if jerr := WriteRPOJSON(p, rep); jerr != nil && err == nil {
					err = jerr
				}
			}
			return err
		},
	}
}

// parseCount reads 10000, 10k or 1M.
func parseCount(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		mult, s = 1000, s[:len(s)-1]
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult, s = 1000000, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive count (10000, 10k, 1M)", s)
	}
	return n * mult, nil
}
