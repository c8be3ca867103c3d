#!/usr/bin/env bash
# scripts/mongodb.sh — a private MongoDB-wire server for the storage tests:
# FerretDB (Apache-2.0) with its SQLite or PostgreSQL handler.
#
#   scripts/mongodb.sh [start]   build FerretDB once (cached), start it on a
#                                private data directory and a free port on
#                                127.0.0.1 (default EXTENDDB_MONGO_PORT or
#                                27017, the next free one when taken), wait
#                                until it answers, print the URI.
#   scripts/mongodb.sh stop      stop the server started by "start" (by PID)
#                                and remove its data directory.
#   scripts/mongodb.sh uri       print the URI of the running server.
#   scripts/mongodb.sh build     only build (or find) the cached binary.
#
# EXTENDDB_MONGO_HANDLER (sqlite or postgresql) picks the handler; the
# default is postgresql when EXTENDDB_MONGO_POSTGRES_URL is set, sqlite
# otherwise. A binary of both handlers serves either; for postgresql alone,
# when none is cached, the build leaves FerretDB's SQLite handler out (its
# build tag ferretdb_no_sqlite), which skips compiling FerretDB's own
# modernc.org/sqlite and libc: the CI's cold build is that one.
#
# FerretDB keeps its data in SQLite files under a private directory, or,
# when EXTENDDB_MONGO_POSTGRES_URL names a PostgreSQL database, in that
# database (FerretDB's PostgreSQL handler). The PostgreSQL handler costs
# FerretDB about a third of the CPU per operation of the SQLite one (the
# storage suite's snapshot scenario: 13 s against 42 s on an idle 2-core
# machine), so make test-all hands it a database of the PostgreSQL server
# it starts anyway. The database must exist; it is not dropped at stop.
#
# FerretDB is embedded in a tiny main in its own Go module outside the
# repository, so its dependencies stay out of extenddb's go.mod. `go install
# .../cmd/ferretdb` builds but panics at start (missing version.txt); the
# embeddable package github.com/FerretDB/FerretDB/ferretdb does not.
# The module, its build and the binary live in $EXTENDDB_CACHE/ferretdb
# (default $HOME/.cache/extenddb/ferretdb): a cold build (modules already
# downloaded) takes 80 s and 146 s of CPU on the idle 2-core VM with both
# handlers, 59 s and 111 s of CPU for the PostgreSQL handler alone (about
# 1 GB of Go module and build cache); a warm start 0.1 s.
# The run state (pid, port, data directory) lives in $EXTENDDB_MONGO_STATE
# (default $EXTENDDB_CACHE/ferretdb/run).
#
# FerretDB is a standalone server: no replica set, no multi-document
# transactions, no snapshot reads (see docs/adr and docs/testing.md).
#
# Use: export EXTENDDB_TEST_MONGODB_URI=$(scripts/mongodb.sh start)
set -euo pipefail

FV="${FERRETDB_VERSION:-v1.24.2}"
CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
HOME_DIR="$CACHE/ferretdb"
SRC="$HOME_DIR/src-$FV"
FULL="$HOME_DIR/ferretdb-$FV"
HANDLER="${EXTENDDB_MONGO_HANDLER:-}"
if [[ -z "$HANDLER" ]]; then
	HANDLER=sqlite
	[[ -n "${EXTENDDB_MONGO_POSTGRES_URL:-}" ]] && HANDLER=postgresql
fi
case "$HANDLER" in
sqlite | postgresql) ;;
*) echo "mongodb.sh: EXTENDDB_MONGO_HANDLER=$HANDLER: want sqlite or postgresql" >&2; exit 2 ;;
esac
# The binary to run: the one with both handlers when it is cached or the
# SQLite handler is wanted, else the PostgreSQL-only one.
BIN="$FULL"
TAGS=""
if [[ "$HANDLER" == postgresql && ! -x "$FULL" ]]; then
	BIN="$HOME_DIR/ferretdb-$FV-postgresql"
	TAGS="ferretdb_no_sqlite"
fi
STATE="${EXTENDDB_MONGO_STATE:-$HOME_DIR/run}"

log() { echo "mongodb.sh: $*" >&2; }
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

build() {
	if [[ -x "$BIN" ]]; then
		return
	fi
	command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }
	log "building FerretDB $FV into $BIN${TAGS:+ (tags $TAGS)}"
	mkdir -p "$SRC"
	printf 'module extenddb-ferretdb\n\ngo 1.24\n' >"$SRC/go.mod"
	rm -f "$SRC/go.sum"
	cat >"$SRC/main.go" <<'GO'
// Command ferretdb runs FerretDB's embeddable package with the SQLite (or
// PostgreSQL) handler on one TCP address; built by extenddb's scripts/mongodb.sh.
package main

import (
	"context"
	"flag"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:27017", "TCP address")
	handler := flag.String("handler", "sqlite", "sqlite or postgresql")
	sqliteURL := flag.String("sqlite-url", "file:/tmp/ferretdb/", "SQLite directory URI (trailing /)")
	pgURL := flag.String("postgresql-url", "", "PostgreSQL URL for the postgresql handler")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f, err := ferretdb.New(&ferretdb.Config{Listener: ferretdb.ListenerConfig{TCP: *listen}, Logger: logger,
		Handler: *handler, SQLiteURL: *sqliteURL, PostgreSQLURL: *pgURL})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	_ = f.Run(ctx)
}
GO
	local tmp="$BIN.tmp.$$"
	if ! (cd "$SRC" && GOFLAGS=-buildvcs=false go get "github.com/FerretDB/FerretDB@$FV" >&2 &&
		GOFLAGS=-buildvcs=false go mod tidy >&2 &&
		GOFLAGS=-buildvcs=false go build -trimpath -tags "$TAGS" -o "$tmp" . >&2); then
		rm -f "$tmp"
		log "FerretDB build failed"
		exit 1
	fi
	mv -f "$tmp" "$BIN"
}

uri() { echo "mongodb://127.0.0.1:$(cat "$STATE/port")/"; }

running() {
	[[ -f "$STATE/pid" && -f "$STATE/port" ]] || return 1
	kill -0 "$(cat "$STATE/pid")" 2>/dev/null || return 1
	port_busy "$(cat "$STATE/port")"
}

start() {
	mkdir -p "$STATE"
	if running; then
		uri
		return
	fi
	build
	local port="${EXTENDDB_MONGO_PORT:-27017}" tries=0
	while port_busy "$port"; do
		tries=$((tries + 1))
		if [[ $tries -gt 100 ]]; then log "no free port found"; exit 1; fi
		port=$((port + 1))
	done
	local data
	[[ -f "$STATE/data-dir" ]] && rm -rf "$(cat "$STATE/data-dir")"
	data=$(mktemp -d "${TMPDIR:-/tmp}/extenddb-ferretdb.XXXXXX")
	echo "$data" >"$STATE/data-dir"
	echo "$port" >"$STATE/port"
	local handler=$HANDLER
	nohup "$BIN" -listen "127.0.0.1:$port" -handler "$handler" -sqlite-url "file:$data/" \
		-postgresql-url "${EXTENDDB_MONGO_POSTGRES_URL:-}" >"$STATE/ferretdb.log" 2>&1 </dev/null &
	local pid=$!
	echo "$pid" >"$STATE/pid"
	for _ in $(seq 1 300); do
		port_busy "$port" && break
		if ! kill -0 "$pid" 2>/dev/null; then
			log "FerretDB exited at start; log follows"
			cat "$STATE/ferretdb.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	if ! port_busy "$port"; then
		log "FerretDB did not answer on 127.0.0.1:$port within 30 s"
		stop >/dev/null
		exit 1
	fi
	log "FerretDB $FV ($handler) up on 127.0.0.1:$port, pid $pid, data $data"
	uri
}

stop() {
	if [[ -f "$STATE/pid" ]]; then
		local pid
		pid=$(cat "$STATE/pid")
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 1 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
		fi
		rm -f "$STATE/pid"
		log "FerretDB stopped (pid $pid)"
	fi
	if [[ -f "$STATE/data-dir" ]]; then
		rm -rf "$(cat "$STATE/data-dir")"
		rm -f "$STATE/data-dir"
	fi
	rm -f "$STATE/port"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
uri) running && uri || { log "not running"; exit 1; } ;;
build) build ;;
*) echo "usage: $0 start|stop|uri|build" >&2; exit 2 ;;
esac
