// Command extenddb is a DynamoDB-compatible database server.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/extenddb/extenddb/internal/bench"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/server"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	app := &cli.App{
		Name:  "extenddb",
		Usage: "a DynamoDB-compatible database server",
		Commands: []*cli.Command{
			serveCommand(),
			versionCommand(),
			bench.Command(),
		},
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := app.RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "extenddb:", err)
		os.Exit(1)
	}
}

func buildVersion() string {
	v := version
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version",
		Action: func(c *cli.Context) error {
			fmt.Println("extenddb", buildVersion())
			return nil
		},
	}
}

func newLogger(cfg config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the server (embedded SQLite on 127.0.0.1:8000 by default)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "TOML configuration file", EnvVars: []string{"EXTENDDB_CONFIG"}},
			&cli.StringFlag{Name: "listen", Usage: "listen address (server.listen)"},
			&cli.StringFlag{Name: "data-dir", Usage: "directory of the SQLite database (storage.data_dir)"},
			&cli.BoolFlag{Name: "memory", Usage: "keep no data after exit (storage.memory)"},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (log.level)"},
		},
		Action: func(c *cli.Context) error {
			cfg, err := config.LoadDefault(c.String("config"))
			if err != nil {
				return err
			}
			if c.IsSet("listen") {
				cfg.Server.Listen = c.String("listen")
			}
			if c.IsSet("data-dir") {
				cfg.Storage.DataDir = c.String("data-dir")
			}
			if c.IsSet("memory") {
				cfg.Storage.Memory = c.Bool("memory")
			}
			if c.IsSet("log-level") {
				cfg.Log.Level = c.String("log-level")
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			return server.Run(c.Context, cfg, newLogger(cfg.Log), nil)
		},
	}
}
