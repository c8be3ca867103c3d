// Command extenddb is a DynamoDB-compatible database server.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/extenddb/extenddb/internal/admincli"
	"github.com/extenddb/extenddb/internal/bench"
	"github.com/extenddb/extenddb/internal/buildinfo"
	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/server"
)

// Stamped at build time by `make build`:
// -ldflags "-X main.version=... -X main.commit=... -X main.date=...".
// Unstamped builds (go install, go build) fall back to what the Go
// toolchain recorded (internal/buildinfo).
var version, commit, date string

func main() {
	build := buildinfo.New(version, commit, date)
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, "extenddb", build.String()) }
	app := &cli.App{
		Name:    "extenddb",
		Usage:   "a DynamoDB-compatible database server",
		Version: build.String(),
		Commands: []*cli.Command{
			serveCommand(build),
			initCommand(),
			migrateCommand(),
			recountCommand(),
			statusCommand(),
			healthcheckCommand(),
			backupCommand(),
			compareCommand(),
			versionCommand(build),
			bench.Command(),
		},
		// Only reached when the first argument is not a command.
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return fmt.Errorf("unknown command %q; the commands are: %s (see extenddb help)",
					c.Args().First(), strings.Join(commandNames(c.App), ", "))
			}
			return cli.ShowAppHelp(c)
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

func commandNames(app *cli.App) []string {
	var names []string
	for _, c := range app.VisibleCommands() {
		names = append(names, c.Name)
	}
	return names
}

func versionCommand(build buildinfo.Info) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, commit, build date and Go version",
		Action: func(c *cli.Context) error {
			fmt.Println("extenddb", build.String())
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

// storageFlags select the backend, shared by the commands that open it;
// each storage driver adds its own (server.StorageFlags).
func storageFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Usage: "TOML configuration file", EnvVars: []string{"EXTENDDB_CONFIG"}},
		&cli.StringFlag{Name: "backend", Usage: "storage backend: " + server.BackendNames() + " (storage.backend)"},
		&cli.StringFlag{Name: "data-dir", Usage: "directory of the embedded database (storage.data_dir)"},
	}
	for _, f := range server.StorageFlags() {
		flags = append(flags, &cli.StringFlag{Name: f.Name, Usage: f.Usage})
	}
	return flags
}

// applyStorageFlags applies the storage flags that are set.
func applyStorageFlags(c *cli.Context, cfg *config.Config) error {
	if c.IsSet("backend") {
		cfg.Storage.Backend = c.String("backend")
	}
	if c.IsSet("data-dir") {
		cfg.Storage.DataDir = c.String("data-dir")
	}
	for _, f := range server.StorageFlags() {
		if c.IsSet(f.Name) {
			if err := cfg.Set(f.Key, c.String(f.Name)); err != nil {
				return fmt.Errorf("--%s: %w", f.Name, err)
			}
		}
	}
	return nil
}

// loadConfig loads the configuration and applies the storage flags.
func loadConfig(c *cli.Context) (config.Config, error) {
	cfg, err := server.LoadConfig(c.String("config"))
	if err != nil {
		return cfg, err
	}
	if err := applyStorageFlags(c, &cfg); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

func migrateCommand() *cli.Command {
	return &cli.Command{
		Name:  "migrate",
		Usage: "apply pending schema migrations to the configured database",
		Flags: storageFlags(),
		Action: func(c *cli.Context) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			applied, err := server.Migrate(c.Context, cfg)
			for _, m := range applied {
				fmt.Println("applied", m)
			}
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Printf("%s schema is up to date\n", cfg.Storage.Backend)
			} else {
				fmt.Printf("%s schema migrated: %d migration(s) applied\n", cfg.Storage.Backend, len(applied))
			}
			return nil
		},
	}
}

func recountCommand() *cli.Command {
	return &cli.Command{
		Name: "recount-stats",
		Usage: "repair: recount the table statistics (ItemCount, TableSizeBytes, index figures) that the backend keeps " +
			"with every write, with a full read of each table; writes may go on (with SQLite, stop the server first: " +
			"it holds the database)",
		ArgsUsage: "[TABLE...]",
		Flags: append(storageFlags(),
			&cli.StringFlag{Name: "account", Value: "000000000000", Usage: "the tables' account"}),
		Action: func(c *cli.Context) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			return server.RecountStats(c.Context, cfg, c.String("account"), c.Args().Slice(), func(r server.RecountResult) {
				if !r.Counted {
					fmt.Printf("%s: changed during the recount, run it again\n", r.Table)
					return
				}
				fmt.Printf("%s: %d items, %d bytes\n", r.Table, r.ItemCount, r.SizeBytes)
			})
		},
	}
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the configured database's applied and pending migrations",
		Flags: storageFlags(),
		Action: func(c *cli.Context) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			st, err := server.Status(c.Context, cfg)
			if err != nil {
				return err
			}
			fmt.Printf("backend: %s\n", st.Backend)
			if st.Missing != "" {
				// Only the embedded SQLite database is created by serve; the
				// server backends refuse to serve an unmigrated schema.
				by := "`extenddb init` or `migrate`"
				if st.Backend == "sqlite" {
					by = "`extenddb serve`, `init` or `migrate`"
				}
				fmt.Printf("database: none at %s (created by %s)\n", st.Missing, by)
			}
			fmt.Printf("applied: %v\npending: %v\n", st.Applied, st.Pending)
			return nil
		},
	}
}

func initCommand() *cli.Command {
	flags := append(storageFlags(),
		&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "extenddb.toml", Usage: "configuration file to write"},
		&cli.StringFlag{Name: "listen", Usage: "listen address (server.listen)"},
		&cli.BoolFlag{Name: "force", Usage: "overwrite an existing configuration file"},
		&cli.BoolFlag{Name: "generate-key", Usage: "create a first access key; requests must then be signed with it"},
		&cli.StringFlag{Name: "account", Value: "000000000000", Usage: "account of the generated key"},
	)
	return &cli.Command{
		Name:  "init",
		Usage: "write a configuration file and create the database schema",
		Flags: flags,
		Action: func(c *cli.Context) error {
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			if c.IsSet("listen") {
				cfg.Server.Listen = c.String("listen")
			}
			if c.Bool("generate-key") {
				k, err := admincli.NewAccessKey(c.String("account"))
				if err != nil {
					return err
				}
				cfg.Auth.Keys = append(cfg.Auth.Keys, k)
				fmt.Printf("access key id:     %s\nsecret access key: %s\naccount:           %s\n", k.AccessKeyID, k.SecretAccessKey, k.Account)
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			if _, err := os.Stat(c.String("output")); err == nil && !c.Bool("force") {
				return fmt.Errorf("%s exists; use --force to overwrite it", c.String("output"))
			}
			applied, err := server.Migrate(c.Context, cfg)
			for _, m := range applied {
				fmt.Println("applied", m)
			}
			if err != nil {
				return err
			}
			if err := admincli.WriteConfig(c.String("output"), cfg, c.Bool("force")); err != nil {
				return err
			}
			fmt.Printf("wrote %s (backend %s); start the server with: extenddb serve --config %s\n", c.String("output"), cfg.Storage.Backend, c.String("output"))
			return nil
		},
	}
}

func healthcheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "healthcheck",
		Usage: "exit 0 when the server at --endpoint is ready (for container health checks)",
		Flags: []cli.Flag{&cli.StringFlag{Name: "endpoint", Value: "http://127.0.0.1:8000"}},
		Action: func(c *cli.Context) error {
			return admincli.Healthcheck(c.Context, c.String("endpoint"))
		},
	}
}

func serveCommand(build buildinfo.Info) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the server (embedded SQLite on 127.0.0.1:8000 by default)",
		Flags: append(storageFlags(),
			&cli.StringFlag{Name: "listen", Usage: "listen address (server.listen)"},
			&cli.BoolFlag{Name: "memory", Usage: "keep no data after exit (storage.memory)"},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (log.level); debug logs every request"},
			&cli.StringSliceFlag{Name: "cors-allowed-origin", Usage: "allow browser requests from this origin, or * (server.cors_allowed_origins; repeatable)"},
		),
		Action: func(c *cli.Context) error {
			cfg, err := server.LoadConfig(c.String("config"))
			if err != nil {
				return err
			}
			if err := applyStorageFlags(c, &cfg); err != nil {
				return err
			}
			if c.IsSet("listen") {
				cfg.Server.Listen = c.String("listen")
			}
			if c.IsSet("memory") {
				cfg.Storage.Memory = c.Bool("memory")
			}
			if c.IsSet("log-level") {
				cfg.Log.Level = c.String("log-level")
			}
			if c.IsSet("cors-allowed-origin") {
				cfg.Server.CORSAllowedOrigins = c.StringSlice("cors-allowed-origin")
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			return server.Serve(c.Context, cfg, server.Options{Logger: newLogger(cfg.Log), Build: build})
		},
	}
}
