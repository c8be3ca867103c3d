#!/usr/bin/env bash
# scripts/moto.sh — install and run moto's S3 server (second S3 implementation
# for internal/blobstore/storetest).
#
#   scripts/moto.sh [start] [PORT]  install moto[server] into a cached venv if
#                                   missing, start moto's server on 127.0.0.1:PORT
#                                   (through scripts/moto-serve.py, which makes
#                                   its conditional writes atomic, as S3's are)
#                                   (default: EXTENDDB_MOTO_PORT or 5055), wait
#                                   until it answers, print the endpoint.
#   scripts/moto.sh stop            stop the server started by "start" (by PID).
#   scripts/moto.sh endpoint        print the endpoint of a running server.
#
# Cache: $EXTENDDB_CACHE (default $HOME/.cache/extenddb): moto-venv/ holds the
# virtualenv, moto/ the PID file, port and log.
# Use: export EXTENDDB_TEST_MOTO_ENDPOINT=$(scripts/moto.sh)
set -euo pipefail

CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
VENV="$CACHE/moto-venv"
RUN="$CACHE/moto"
PIDFILE="$RUN/moto.pid"
PORTFILE="$RUN/moto.port"
LOG="$RUN/moto.log"
MOTO_VERSION="${EXTENDDB_MOTO_VERSION:-5.2.5}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

log() { echo "moto.sh: $*" >&2; }

running() {
	[[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null
}

answers() {
	# Any HTTP answer (moto returns 200 with a bucket list on GET /).
	python_bin=/usr/bin/python3
	[[ -x "$VENV/bin/python" ]] && python_bin="$VENV/bin/python"
	"$python_bin" - "$1" <<'PY' >/dev/null 2>&1
import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1] + "/", timeout=1)
except urllib.error.HTTPError:
    pass
PY
}

install() {
	if [[ -x "$VENV/bin/moto_server" ]]; then
		return
	fi
	log "installing moto[server]==$MOTO_VERSION into $VENV"
	mkdir -p "$CACHE"
	PY="${PYTHON:-python3}"
	"$PY" -m venv "$VENV"
	"$VENV/bin/pip" install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
}

start() {
	local port="${1:-${EXTENDDB_MOTO_PORT:-5055}}"
	mkdir -p "$RUN"
	if running; then
		echo "http://127.0.0.1:$(cat "$PORTFILE")"
		return
	fi
	install
	log "starting moto's server on 127.0.0.1:$port (log $LOG)"
	nohup "$VENV/bin/python" "$HERE/moto-serve.py" 127.0.0.1 "$port" >"$LOG" 2>&1 &
	echo $! >"$PIDFILE"
	echo "$port" >"$PORTFILE"
	local ep="http://127.0.0.1:$port"
	for _ in $(seq 1 150); do
		if ! running; then
			log "moto_server exited; log follows"; cat "$LOG" >&2; rm -f "$PIDFILE"; exit 1
		fi
		if answers "$ep"; then
			echo "$ep"
			return
		fi
		sleep 0.2
	done
	log "moto_server did not answer on $ep within 30s"
	stop
	exit 1
}

stop() {
	if [[ -f "$PIDFILE" ]]; then
		local pid
		pid="$(cat "$PIDFILE")"
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid"
			for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
			kill -0 "$pid" 2>/dev/null && kill -9 "$pid" || true
			log "stopped moto's server (pid $pid)"
		fi
		rm -f "$PIDFILE"
	fi
}

case "${1:-start}" in
start) shift || true; start "${1:-}" ;;
stop) stop ;;
endpoint) running && echo "http://127.0.0.1:$(cat "$PORTFILE")" || { log "not running"; exit 1; } ;;
[0-9]*) start "$1" ;;
*) echo "usage: $0 [start [PORT]|stop|endpoint]" >&2; exit 2 ;;
esac
