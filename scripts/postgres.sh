#!/usr/bin/env bash
# scripts/postgres.sh — a private PostgreSQL cluster for the storage tests.
#
#   scripts/postgres.sh [start] [PORT]  install PostgreSQL from Debian if it is
#                                       missing, create a private cluster (once),
#                                       start it on 127.0.0.1:PORT (default
#                                       EXTENDDB_PG_PORT or 55432; the next free
#                                       port when that one is taken by something
#                                       else), wait until it answers, print the DSN.
#   scripts/postgres.sh stop            stop the cluster started by "start" (pg_ctl).
#   scripts/postgres.sh dsn             print the DSN of the running cluster.
#
# The cluster lives in $EXTENDDB_CACHE/pg (default $HOME/.cache/extenddb/pg)
# when the server's user can reach that directory, else in a private
# directory under /var/tmp whose location is remembered in the cache. It runs
# with fsync=off: test data only, and shared_buffers of
# EXTENDDB_PG_SHARED_BUFFERS (default 2GB, about PostgreSQL's own advice of a
# quarter of the machine's memory; the compiled-in 128MB makes a snapshot of a
# 1 GiB table read most heap pages from the kernel: docs/benchmarks.md). Run
# as root, initdb and the server run as the
# `postgres` user (initdb refuses root); run as another user, as that user.
# A PostgreSQL already installed or running elsewhere (e.g. Debian's own
# cluster on 5432) is left alone.
#
# Use: export EXTENDDB_TEST_POSTGRES_DSN=$(scripts/postgres.sh start)
set -euo pipefail

CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
STATE="$CACHE/pg"          # always owned by the caller: port, cluster location
PORTFILE="$STATE/port"
DIRFILE="$STATE/cluster-dir"

log() { echo "postgres.sh: $*" >&2; }

as_server() {
	# Runs a command as the user that owns the cluster.
	if [[ $(id -u) -eq 0 ]]; then
		if command -v runuser >/dev/null 2>&1; then
			runuser -u postgres -- "$@"
		else
			su postgres -s /bin/sh -c "$(printf '%q ' "$@")"
		fi
	else
		"$@"
	fi
}

find_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5,5 -n -r); do
		if [[ -x "$d/initdb" && -x "$d/pg_ctl" && -x "$d/postgres" ]]; then
			echo "$d"
			return 0
		fi
	done
	if command -v pg_config >/dev/null 2>&1; then
		d=$(pg_config --bindir)
		if [[ -x "$d/initdb" ]]; then echo "$d"; return 0; fi
	fi
	if command -v initdb >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
		return 0
	fi
	return 1
}

install() {
	if BIN=$(find_bin); then
		return
	fi
	if [[ $(id -u) -ne 0 ]]; then
		log "PostgreSQL is not installed and this is not root: install it (apt-get install postgresql)"
		exit 1
	fi
	log "installing PostgreSQL from Debian (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
	BIN=$(find_bin) || { log "PostgreSQL binaries not found after install"; exit 1; }
}

# cluster_dir prints (and remembers) the directory that holds the cluster.
cluster_dir() {
	if [[ -f "$DIRFILE" ]]; then
		cat "$DIRFILE"
		return
	fi
	local d="$STATE/cluster"
	mkdir -p "$d"
	if [[ $(id -u) -eq 0 ]]; then
		chown postgres:postgres "$d"
		if ! as_server test -w "$d" 2>/dev/null; then
			# e.g. /root is not traversable by postgres
			rmdir "$d" 2>/dev/null || true
			d=$(mktemp -d /var/tmp/extenddb-pg.XXXXXX)
			chown postgres:postgres "$d"
		fi
	fi
	echo "$d" >"$DIRFILE"
	echo "$d"
}

running() {
	[[ -f "$DIRFILE" ]] || return 1
	local d
	d=$(cat "$DIRFILE")
	[[ -f "$d/data/postmaster.pid" ]] || return 1
	BIN=${BIN:-$(find_bin)} || return 1
	as_server "$BIN/pg_ctl" -D "$d/data" status >/dev/null 2>&1
}

port_busy() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

dsn() {
	echo "postgres://postgres@127.0.0.1:$(cat "$PORTFILE")/postgres?sslmode=disable"
}

start() {
	mkdir -p "$STATE"
	if running; then
		dsn
		return
	fi
	install
	local d port
	d=$(cluster_dir)
	if [[ ! -f "$d/data/PG_VERSION" ]]; then
		log "creating cluster in $d/data"
		rm -rf "$d/data"
		mkdir -p "$d"
		[[ $(id -u) -eq 0 ]] && chown postgres:postgres "$d"
		as_server "$BIN/initdb" -D "$d/data" -U postgres -A trust --no-sync -E UTF8 --locale=C >"$STATE/initdb.log" 2>&1 ||
			{ cat "$STATE/initdb.log" >&2; exit 1; }
	fi
	port="${1:-${EXTENDDB_PG_PORT:-55432}}"
	local tries=0
	while port_busy "$port"; do
		tries=$((tries + 1))
		if [[ $tries -gt 100 ]]; then log "no free port found"; exit 1; fi
		port=$((port + 1))
	done
	echo "$port" >"$PORTFILE"
	log "starting PostgreSQL ($BIN) on 127.0.0.1:$port (log $d/log)"
	# -w waits until the server accepts connections.
	if ! as_server "$BIN/pg_ctl" -D "$d/data" -l "$d/log" -w -t 60 \
		-o "-p $port -k $d -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=${EXTENDDB_PG_SHARED_BUFFERS:-2GB}" \
		start >&2; then
		log "pg_ctl start failed; log follows"
		tail -n 50 "$d/log" >&2 || true
		exit 1
	fi
	for _ in $(seq 1 100); do
		if "$BIN/pg_isready" -q -h 127.0.0.1 -p "$port" -U postgres 2>/dev/null; then
			dsn
			return
		fi
		sleep 0.1
	done
	log "PostgreSQL did not answer on 127.0.0.1:$port"
	exit 1
}

stop() {
	if running; then
		local d
		d=$(cat "$DIRFILE")
		as_server "$BIN/pg_ctl" -D "$d/data" -m fast -w stop >&2
		log "stopped PostgreSQL ($d/data)"
	fi
}

case "${1:-start}" in
start) shift || true; start "${1:-}" ;;
stop) stop ;;
dsn) running && dsn || { log "not running"; exit 1; } ;;
[0-9]*) start "$1" ;;
*) echo "usage: $0 [start [PORT]|stop|dsn]" >&2; exit 2 ;;
esac
