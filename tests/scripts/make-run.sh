#!/usr/bin/env bash
# Script test: `make run` builds bin/extenddb and execs it, so stopping it
# leaves no process behind.
#   1. SIGTERM to make's PID (a supervisor stopping it): make and the
#      server exit, nothing keeps listening.
#   2. SIGINT to the process group (Ctrl-C in a terminal): the server shuts
#      down cleanly and make exits 0 without "Error".
# The server runs in memory on a free loopback port, never on 8000.
set -euo pipefail
cd "$(dirname "$0")/../.."

port=""
fail() {
  echo "make-run: FAIL: $*" >&2
  [ -f "$log" ] && sed 's/^/  | /' "$log" >&2
  # Stop what this test started (by PID), so a failure leaves nothing behind.
  [ -n "$port" ] && for p in $(procs_on "$port"); do kill "$p" 2>/dev/null || true; done
  exit 1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# procs_on PORT: PIDs of processes whose command line names the port.
procs_on() { pgrep -f -- "--listen 127.0.0.1:$1" || true; }

wait_health() {
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}

wait_gone() { # PID
  for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  return 1
}

log=$(mktemp -t extenddb-make-run.XXXXXX)
trap 'rm -f "$log"' EXIT
make -s build >/dev/null

# 1. SIGTERM to make.
port=$(free_port)
setsid make -s run ARGS="--memory --listen 127.0.0.1:$port" >"$log" 2>&1 &
mk=$!
wait_health "$port" || fail "server did not answer /health on $port"
server=$(procs_on "$port" | grep -v "^$mk\$" | head -1)
[ -n "$server" ] || fail "no server process found"
[ "$(ps -o comm= -p "$server")" = "extenddb" ] || fail "make's child is $(ps -o comm= -p "$server"), not the extenddb binary (go run?)"
kill -TERM "$mk"
wait "$mk" 2>/dev/null || true
wait_gone "$server" || fail "server $server still running after SIGTERM to make"
[ -z "$(procs_on "$port")" ] || fail "processes left behind: $(procs_on "$port")"
curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && fail "port $port still answers"
grep -q 'msg="extenddb stopped"' "$log" || fail "server did not log a clean stop"
echo "make-run: SIGTERM to make: server stopped, nothing left on port $port"

# 2. SIGINT to the group, like Ctrl-C.
port=$(free_port)
setsid bash -c "make -s run ARGS='--memory --listen 127.0.0.1:$port'; echo \"make exit \$?\"" >"$log" 2>&1 &
grp=$!
wait_health "$port" || fail "server did not answer /health on $port"
kill -INT -- "-$grp"
wait "$grp" 2>/dev/null || true
[ -z "$(procs_on "$port")" ] || fail "processes left behind after Ctrl-C: $(procs_on "$port")"
grep -q '^make exit 0$' "$log" || fail "make did not exit 0 after Ctrl-C"
grep -q 'Error' "$log" && fail "make reported an error after Ctrl-C"
echo "make-run: Ctrl-C: server stopped cleanly, make exited 0"
echo "make-run: 2 passed"
