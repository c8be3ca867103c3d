package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/extenddb/extenddb/internal/admincli"
	"github.com/extenddb/extenddb/internal/server"
)

// backupCommand is `extenddb backup`: a thin client of the wire API
// (signed with the configuration's first access key, if any), plus an
// offline verify of a backup in the store.
//
// Long: a declaration: every subcommand's flags and usage, each action a
// call.
func backupCommand() *cli.Command {
	common := []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "TOML configuration file (region, access key, backup store)", EnvVars: []string{"EXTENDDB_CONFIG"}},
		&cli.StringFlag{Name: "endpoint", Value: "http://127.0.0.1:8000", Usage: "the server's DynamoDB endpoint", EnvVars: []string{"EXTENDDB_ENDPOINT"}},
	}
	client := func(c *cli.Context) (*admincli.Client, error) {
		cfg, err := server.LoadConfig(c.String("config"))
		if err != nil {
			return nil, err
		}
		return admincli.NewClient(c.String("endpoint"), cfg), nil
	}
	wait := &cli.BoolFlag{Name: "wait", Usage: "wait until the job ends, printing progress"}
	return &cli.Command{
		Name:  "backup",
		Usage: "take, list, describe, delete, restore and verify backups (docs/backup.md)",
		Subcommands: []*cli.Command{
			{
				Name: "create", Usage: "back up a table", ArgsUsage: " ",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "table", Required: true}, &cli.StringFlag{Name: "name", Required: true}, wait}, common...),
				Action: func(c *cli.Context) error {
					cl, err := client(c)
					if err != nil {
						return err
					}
					var out struct{ BackupDetails map[string]any }
					if err := cl.Call(c.Context, "CreateBackup", map[string]any{"TableName": c.String("table"), "BackupName": c.String("name")}, &out); err != nil {
						return err
					}
					arn, _ := out.BackupDetails["BackupArn"].(string)
					fmt.Printf("%s %v\n", arn, out.BackupDetails["BackupStatus"])
					if !c.Bool("wait") {
						return nil
					}
					return waitBackup(c.Context, cl, c.String("endpoint"), arn, c.String("table"))
				},
			},
			{
				Name: "list", Usage: "list backups", ArgsUsage: " ",
				Flags: append([]cli.Flag{&cli.StringFlag{Name: "table"}}, common...),
				Action: func(c *cli.Context) error {
					cl, err := client(c)
					if err != nil {
						return err
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
					fmt.Fprintln(tw, "TABLE\tNAME\tSTATUS\tBYTES\tCREATED\tARN")
					in := map[string]any{}
					if t := c.String("table"); t != "" {
						in["TableName"] = t
					}
					for {
						var out struct {
							BackupSummaries        []map[string]any
							LastEvaluatedBackupArn string
						}
						if err := cl.Call(c.Context, "ListBackups", in, &out); err != nil {
							return err
						}
						for _, b := range out.BackupSummaries {
							fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%s\t%v\n", b["TableName"], b["BackupName"], b["BackupStatus"],
								orDash(b["BackupSizeBytes"]), epoch(b["BackupCreationDateTime"]), b["BackupArn"])
						}
						if out.LastEvaluatedBackupArn == "" {
							break
						}
						in["ExclusiveStartBackupArn"] = out.LastEvaluatedBackupArn
					}
					return tw.Flush()
				},
			},
			{
				Name: "plans", Usage: "list the configured backup plans with their retention, last run, result, last success, next run and the backups they keep", ArgsUsage: " ",
				Flags: common,
				Action: func(c *cli.Context) error {
					cfg, err := server.LoadConfig(c.String("config"))
					if err != nil {
						return err
					}
					return admincli.PrintPlans(c.Context, cfg, c.String("endpoint"), time.Now(), os.Stdout)
				},
			},
			{
				Name: "describe", Usage: "describe a backup", ArgsUsage: "ARN", Flags: common,
				Action: func(c *cli.Context) error {
					return printCall(c, client, "DescribeBackup", map[string]any{"BackupArn": c.Args().First()})
				},
			},
			{
				Name: "delete", Usage: "delete a backup", ArgsUsage: "ARN", Flags: common,
				Action: func(c *cli.Context) error {
					cl, err := client(c)
					if err != nil {
						return err
					}
					if err := cl.Call(c.Context, "DeleteBackup", map[string]any{"BackupArn": c.Args().First()}, nil); err != nil {
						return err
					}
					fmt.Println(c.Args().First(), "DELETED")
					return nil
				},
			},
			{
				Name: "restore", Usage: "restore a backup into a new table", ArgsUsage: "ARN",
				Flags: append([]cli.Flag{&cli.StringFlag{Name: "target", Required: true, Usage: "name of the new table"}, wait}, common...),
				Action: func(c *cli.Context) error {
					cl, err := client(c)
					if err != nil {
						return err
					}
					target := c.String("target")
					if err := cl.Call(c.Context, "RestoreTableFromBackup", map[string]any{"BackupArn": c.Args().First(), "TargetTableName": target}, nil); err != nil {
						return err
					}
					fmt.Println(target, "CREATING")
					if !c.Bool("wait") {
						return nil
					}
					return waitRestore(c.Context, cl, c.String("endpoint"), c.Args().First(), target)
				},
			},
			{
				Name: "restore-pitr", Usage: "restore a table with point-in-time recovery, as it was at an instant, into a new table " +
					"(the source may be a table of the server's catalog, or known only from its store by its ARN)",
				ArgsUsage: "SOURCE-TABLE-OR-ARN",
				Flags: append([]cli.Flag{&cli.StringFlag{Name: "target", Required: true, Usage: "name of the new table"},
					&cli.StringFlag{Name: "at", Usage: "the instant, RFC 3339 (e.g. 2026-12-04T12:00:00.250Z); default: the latest restorable time"},
					wait}, common...),
				Action: func(c *cli.Context) error {
					src := c.Args().First()
					if src == "" || c.NArg() != 1 {
						return fmt.Errorf("restore-pitr: give the source table's name or ARN")
					}
					in := map[string]any{"TargetTableName": c.String("target")}
					if strings.HasPrefix(src, "arn:") {
						in["SourceTableArn"] = src
					} else {
						in["SourceTableName"] = src
					}
					if at := c.String("at"); at != "" {
						t, err := time.Parse(time.RFC3339Nano, at)
						if err != nil {
							return fmt.Errorf("restore-pitr: --at: %w", err)
						}
						in["RestoreDateTime"] = float64(t.UnixMilli()) / 1000
					} else {
						in["UseLatestRestorableTime"] = true
					}
					cl, err := client(c)
					if err != nil {
						return err
					}
					var out struct {
						TableDescription struct {
							RestoreSummary struct{ RestoreDateTime float64 }
						}
					}
					if err := cl.Call(c.Context, "RestoreTableToPointInTime", in, &out); err != nil {
						return err
					}
					ms := int64(math.Round(out.TableDescription.RestoreSummary.RestoreDateTime * 1000))
					fmt.Println(c.String("target"), "CREATING", time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z"))
					if !c.Bool("wait") {
						return nil
					}
					// The job's progress is labelled with pitr-<instant ms>.
					return waitRestore(c.Context, cl, c.String("endpoint"), "pitr/pitr-"+strconv.FormatInt(ms, 10), c.String("target"))
				},
			},
			{
				Name: "sync", Usage: "rebuild the catalog's backup rows from the store (with a SQLite catalog, while the server is stopped); --move-store, --forget-store and --forget-backup are subcommands of their own", ArgsUsage: " ",
				Flags: append(storageFlags(),
					&cli.BoolFlag{Name: "adopt-store", Usage: "take over a store that belongs to another catalog (refused while that catalog's heartbeat in the store is live)"},
					&cli.BoolFlag{Name: "force", Usage: "with --adopt-store: take the store over even though its owner's heartbeat is live (its servers then refuse to write backups there)"},
					&cli.BoolFlag{Name: "dry-run", Usage: "report what a sync would do and change nothing"},
					&cli.BoolFlag{Name: "prune-missing", Usage: "mark rows whose backup vanished from the store DELETING"},
					&cli.StringFlag{Name: "move-store", Usage: "after a store was copied to the configured one: verify every backup of store `OLD` (id st-..., directory or s3://bucket/prefix) here, file by file, then re-point its rows (all or nothing)"},
					&cli.StringFlag{Name: "forget-store", Usage: "remove the catalog rows of store `ROOT` (id st-..., directory or s3://bucket/prefix); no object is touched"},
					&cli.StringSliceFlag{Name: "forget-backup", Usage: "remove the catalog row of backup `ARN` (repeatable); no object is touched"}),
				Action: func(c *cli.Context) error {
					cfg, err := loadConfig(c)
					if err != nil {
						return err
					}
					return admincli.SyncBackups(c.Context, cfg, admincli.SyncOptions{AdoptStore: c.Bool("adopt-store"), Force: c.Bool("force"),
						DryRun: c.Bool("dry-run"), PruneMissing: c.Bool("prune-missing"), MoveStore: c.String("move-store"),
						ForgetStore: c.String("forget-store"), ForgetBackups: c.StringSlice("forget-backup")}, os.Stdout, os.Stderr)
				},
			},
			{
				Name: "pitr-tables", Usage: "list every point-in-time recovery history in the configured store with its restorable window " +
					"(restore one with restore-pitr and its TABLE ARN, even on a server whose catalog does not hold the table); reads the store only",
				ArgsUsage: " ", Flags: common[:1],
				Action: func(c *cli.Context) error {
					cfg, err := server.LoadConfig(c.String("config"))
					if err != nil {
						return err
					}
					return admincli.ListPITRTables(c.Context, cfg, os.Stdout)
				},
			},
			{
				Name: "verify", Usage: "check a backup in the configured store offline (hashes, sizes, item counts, every format rule)", ArgsUsage: "ARN",
				Flags: common[:1],
				Action: func(c *cli.Context) error {
					cfg, err := server.LoadConfig(c.String("config"))
					if err != nil {
						return err
					}
					return admincli.VerifyBackup(c.Context, cfg, c.Args().First(), os.Stdout)
				},
			},
		},
	}
}

func printCall(c *cli.Context, client func(*cli.Context) (*admincli.Client, error), op string, in any) error {
	cl, err := client(c)
	if err != nil {
		return err
	}
	var out any
	if err := cl.Call(c.Context, op, in, &out); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Println(string(b))
	return nil
}

func orDash(v any) any {
	if v == nil {
		return "-"
	}
	return v
}

func epoch(v any) string {
	f, ok := v.(float64)
	if !ok {
		return "-"
	}
	return time.UnixMilli(int64(f * 1000)).UTC().Format(time.RFC3339)
}

// waitBackup polls until the backup is AVAILABLE, showing its progress
// (a bar on a terminal, a line per second otherwise; items and bytes when
// the endpoint's server runs the job, against the source table's
// approximate ItemCount), then a summary.
func waitBackup(ctx context.Context, cl *admincli.Client, endpoint, arn, table string) error {
	start := time.Now()
	// The total is the table's approximate ItemCount (0 until the server
	// has counted it once: asked again every 2 s meanwhile).
	var total int64
	var asked time.Time
	itemCount := func() {
		asked = time.Now()
		var desc struct{ Table map[string]any }
		if err := cl.Call(ctx, "DescribeTable", map[string]any{"TableName": table}, &desc); err == nil {
			if f, ok := desc.Table["ItemCount"].(float64); ok {
				total = int64(f)
			}
		}
	}
	itemCount()
	id := arn[strings.LastIndexByte(arn, '/')+1:]
	view := newProgressView(os.Stdout, "backup", total)
	for {
		if total == 0 && time.Since(asked) > 2*time.Second {
			if itemCount(); total > 0 {
				view.total = total
			}
		}
		var out struct {
			BackupDescription struct {
				BackupDetails      map[string]any
				SourceTableDetails map[string]any
			}
		}
		if err := cl.Call(ctx, "DescribeBackup", map[string]any{"BackupArn": arn}, &out); err != nil {
			view.finish()
			return err
		}
		d := out.BackupDescription
		status, _ := d.BackupDetails["BackupStatus"].(string)
		if status == "AVAILABLE" {
			view.finish()
			elapsed := time.Since(start)
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "BACKUP\tTABLE\tITEMS\tBYTES\tELAPSED\tITEMS/S")
			fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%s\n", arn, d.SourceTableDetails["TableName"], integer(d.SourceTableDetails["ItemCount"]),
				integer(d.BackupDetails["BackupSizeBytes"]), elapsed.Round(time.Millisecond), perSecond(d.SourceTableDetails["ItemCount"], elapsed))
			return tw.Flush()
		}
		view.update(status, scrapeJob(ctx, endpoint, "backup", table, id))
		select {
		case <-ctx.Done():
			view.finish()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// integer prints a JSON number as an integer ("-" when absent).
func integer(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return "-"
}

func perSecond(n any, d time.Duration) string {
	f, ok := n.(float64)
	if !ok || d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", f/d.Seconds())
}

// waitRestore polls until the target table is ACTIVE (or gone: the
// restore failed and the server log says why), showing the progress of
// the load against the backup's item count, then a summary.
func waitRestore(ctx context.Context, cl *admincli.Client, endpoint, arn, table string) error {
	start := time.Now()
	id := arn[strings.LastIndexByte(arn, '/')+1:]
	view := newProgressView(os.Stdout, "restore", 0)
	var last jobStat
	for {
		var out struct{ Table map[string]any }
		if err := cl.Call(ctx, "DescribeTable", map[string]any{"TableName": table}, &out); err != nil {
			view.finish()
			return fmt.Errorf("restore of %s failed (the target is gone; the server log says why): %w", table, err)
		}
		status, _ := out.Table["TableStatus"].(string)
		if status == "ACTIVE" {
			view.finish()
			elapsed := time.Since(start)
			items := "-"
			if last.totalItems > 0 {
				items = strconv.FormatInt(last.totalItems, 10)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TABLE\tSTATUS\tITEMS\tELAPSED\tITEMS/S")
			fmt.Fprintf(tw, "%s\tACTIVE\t%s\t%s\t%s\n", table, items, elapsed.Round(time.Millisecond), perSecond(float64(last.totalItems), elapsed))
			return tw.Flush()
		}
		if st := scrapeJob(ctx, endpoint, "restore", table, id); st.found {
			last = st
		}
		view.update(status, last)
		select {
		case <-ctx.Done():
			view.finish()
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// compareCommand is `extenddb table-compare`: are two tables (on one or
// two servers) identical in items, key schema, indexes and billing?
func compareCommand() *cli.Command {
	return &cli.Command{
		Name:      "table-compare",
		Usage:     "compare two tables, possibly on two servers (items, key schema, indexes, billing); exit 1 when they differ",
		ArgsUsage: "TABLE [TABLE-B]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "TOML configuration file (region, access key)", EnvVars: []string{"EXTENDDB_CONFIG"}},
			&cli.StringFlag{Name: "endpoint", Value: "http://127.0.0.1:8000", Usage: "the first table's server"},
			&cli.StringFlag{Name: "endpoint-b", Usage: "the second table's server (default: --endpoint)"},
			&cli.StringFlag{Name: "config-b", Usage: "configuration for the second server (default: --config)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() < 1 || c.NArg() > 2 {
				return fmt.Errorf("table-compare takes one or two table names")
			}
			cfgA, err := server.LoadConfig(c.String("config"))
			if err != nil {
				return err
			}
			cfgB := cfgA
			if c.IsSet("config-b") {
				if cfgB, err = server.LoadConfig(c.String("config-b")); err != nil {
					return err
				}
			}
			epB := c.String("endpoint-b")
			if epB == "" {
				epB = c.String("endpoint")
			}
			ta, tb := c.Args().Get(0), c.Args().Get(1)
			if tb == "" {
				tb = ta
			}
			same, err := admincli.CompareTables(c.Context, admincli.NewClient(c.String("endpoint"), cfgA), ta, admincli.NewClient(epB, cfgB), tb, os.Stdout)
			if err != nil {
				return err
			}
			if !same {
				return cli.Exit("", 1)
			}
			return nil
		},
	}
}
