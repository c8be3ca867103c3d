// Package admincli is what the extenddb command's operator subcommands
// do besides serving (ADR 0044): the signed DynamoDB API client the CLI
// talks to a server with, `backup verify`, `backup sync`, `backup
// pitr-tables`, `backup plans`, `compare`, `healthcheck`, `config` and
// access keys, with their printing. Package server keeps what assembles
// and runs a server; this package imports it (for OpenBackend), never
// the reverse.
package admincli
