package bench

import (
	"fmt"
	"strings"

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
