package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/extenddb/extenddb/internal/server"
)

// backupCommand is `extenddb backup`: a thin client of the wire API
// (signed with the configuration's first access key, if any), plus an
// offline verify of a backup in the store.
func backupCommand() *cli.Command {
	common := []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "TOML configuration file (region, access key, backup store)", EnvVars: []string{"EXTENDDB_CONFIG"}},
		&cli.StringFlag{Name: "endpoint", Value: "http://127.0.0.1:8000", Usage: "the server's DynamoDB endpoint", EnvVars: []string{"EXTENDDB_ENDPOINT"}},
	}
	client := func(c *cli.Context) (*server.Client, error) {
		cfg, err := server.LoadConfig(c.String("config"))
		if err != nil {
			return nil, err
		}
		return server.NewClient(c.String("endpoint"), cfg), nil
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
					return waitBackup(c.Context, cl, arn)
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
					return waitRestore(c.Context, cl, target)
				},
			},
			{
				Name: "sync", Usage: "rebuild the catalog's backup rows from the store (with a SQLite catalog, while the server is stopped); --move-store, --forget-store and --forget-backup are subcommands of their own", ArgsUsage: " ",
				Flags: append(storageFlags(),
					&cli.BoolFlag{Name: "adopt-store", Usage: "take over a store that belongs to another catalog"},
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
					return server.SyncBackups(c.Context, cfg, server.SyncOptions{AdoptStore: c.Bool("adopt-store"),
						DryRun: c.Bool("dry-run"), PruneMissing: c.Bool("prune-missing"), MoveStore: c.String("move-store"),
						ForgetStore: c.String("forget-store"), ForgetBackups: c.StringSlice("forget-backup")}, os.Stdout, os.Stderr)
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
					return server.VerifyBackup(c.Context, cfg, c.Args().First(), os.Stdout)
				},
			},
		},
	}
}

func printCall(c *cli.Context, client func(*cli.Context) (*server.Client, error), op string, in any) error {
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

// waitBackup polls until the backup is AVAILABLE, printing a line per
// second, then a summary.
func waitBackup(ctx context.Context, cl *server.Client, arn string) error {
	start := time.Now()
	last := time.Time{}
	for {
		var out struct {
			BackupDescription struct {
				BackupDetails      map[string]any
				SourceTableDetails map[string]any
			}
		}
		if err := cl.Call(ctx, "DescribeBackup", map[string]any{"BackupArn": arn}, &out); err != nil {
			return err
		}
		d := out.BackupDescription
		status := d.BackupDetails["BackupStatus"]
		if status == "AVAILABLE" {
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "BACKUP\tTABLE\tITEMS\tBYTES\tELAPSED")
			fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%s\n", arn, d.SourceTableDetails["TableName"], d.SourceTableDetails["ItemCount"],
				d.BackupDetails["BackupSizeBytes"], time.Since(start).Round(time.Millisecond))
			return tw.Flush()
		}
		if time.Since(last) >= time.Second {
			fmt.Printf("%s %v elapsed %s\n", time.Now().UTC().Format(time.TimeOnly), status, time.Since(start).Round(time.Second))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitRestore polls until the target table is ACTIVE (or gone: the
// restore failed and the server log says why).
func waitRestore(ctx context.Context, cl *server.Client, table string) error {
	start := time.Now()
	last := time.Time{}
	for {
		var out struct{ Table map[string]any }
		if err := cl.Call(ctx, "DescribeTable", map[string]any{"TableName": table}, &out); err != nil {
			return fmt.Errorf("restore of %s failed (the target is gone; the server log says why): %w", table, err)
		}
		if out.Table["TableStatus"] == "ACTIVE" {
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TABLE\tSTATUS\tELAPSED")
			fmt.Fprintf(tw, "%s\tACTIVE\t%s\n", table, time.Since(start).Round(time.Millisecond))
			return tw.Flush()
		}
		if time.Since(last) >= time.Second {
			fmt.Printf("%s %s %v elapsed %s\n", time.Now().UTC().Format(time.TimeOnly), table, out.Table["TableStatus"], time.Since(start).Round(time.Second))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
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
			same, err := server.CompareTables(c.Context, server.NewClient(c.String("endpoint"), cfgA), ta, server.NewClient(epB, cfgB), tb, os.Stdout)
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
