# scripts/bench-lib.sh — shell shared by the scripts that measure a job on
# a served `extenddb serve` (sourced, not run). The sourcing script sets
# BIN (the extenddb binary), BACKEND (sqlite|postgres), DSN, CONCURRENCY
# and a log/die pair, then calls bench_serve; after it:
#
#   PID, EP, WORK        the server's process, its endpoint, the run's
#                        directory (store/, data/, spool/, server.log),
#                        deleted with the server on exit
#   cpu, hwm, rss        the server's CPU ticks, peak RSS and RSS in KiB
#                        (/proc; `echo 5 >/proc/$PID/clear_refs` resets the
#                        peak), TICK the ticks per second
#   pgcpu                the CPU ticks of the PostgreSQL backends serving
#                        the --dsn database (0 on SQLite)
#   now                  the wall clock in seconds
#   load DURATION [ARGS] a batchwrite window of `extenddb bench` (BatchWriteItem
#                        of 25 items of ~1 KiB): prints its table, items,
#                        seconds and server CPU µs per item
#   call OP JSON         one DynamoDB call through the wire (no signature)
#   field PATH           a dotted field of the JSON on stdin

# bench_serve [PORT [DIR]] starts the server on PORT (a free port when
# empty) with a filesystem backup store in WORK (DIR, a directory the
# caller made, or else a new one) and waits for /health. Extra EXTENDDB__
# settings come from the caller's environment.
bench_serve() {
	WORK="${2:-$(mktemp -d -t extenddb-bench-XXXXXX)}"
	mkdir -p -m 0700 "$WORK/store" "$WORK/data" "$WORK/spool"
	local port="${1:-}"
	[[ -z "$port" ]] && port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
	EP="http://127.0.0.1:$port"
	local args=(--data-dir "$WORK/data")
	[[ "$BACKEND" == postgres ]] && args=(--backend postgres --dsn "$DSN")
	EXTENDDB__BACKUP__STORE__KIND=filesystem EXTENDDB__BACKUP__STORE__ROOT="$WORK/store" \
		EXTENDDB__BACKUP__SPOOL_DIR="$WORK/spool" EXTENDDB__LOG__LEVEL="${EXTENDDB__LOG__LEVEL:-warn}" \
		"$BIN" serve --listen "127.0.0.1:$port" "${args[@]}" >"$WORK/server.log" 2>&1 &
	PID=$!
	trap bench_cleanup EXIT
	for _ in $(seq 100); do
		curl -fs "$EP/health" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fs "$EP/health" >/dev/null || die "server did not start: $(cat "$WORK/server.log")"
	PGDB=""
	[[ "$BACKEND" == postgres ]] && PGDB="$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlparse(sys.argv[1]).path.lstrip("/"))' "$DSN")"
	TICK="$(getconf CLK_TCK)"
	export AWS_ACCESS_KEY_ID=extenddb-bench AWS_SECRET_ACCESS_KEY=extenddb-bench
}

bench_cleanup() {
	kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	rm -rf "$WORK"
}

cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$PID/status"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$PID/status"; }
now() { date +%s.%N; }

# pgcpu: the backends' process titles name the database; the shared
# background processes (WAL writer, checkpointer) are not counted.
pgcpu() {
	[[ -z "$PGDB" ]] && { echo 0; return; }
	local sum=0 p
	for p in /proc/[0-9]*; do
		[[ "$(cat "$p/comm" 2>/dev/null)" == postgres ]] || continue
		tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q " $PGDB " || continue
		sum=$((sum + $(awk '{print $14 + $15}' "$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$sum"
}

load() {
	"$BIN" bench --endpoint "$EP" -w batchwrite -c "$CONCURRENCY" -d "$1" --warmup 0 "${@:2}" -q \
		--table-prefix "bb" --server-pid "$PID" --json "$WORK/load.json" >/dev/null
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(r["table"], r["items"], r["duration_s"], (r.get("server") or {}).get("cpu_us_per_item", 0))' "$WORK/load.json"
}

call() {
	local out
	out=$(curl -sS "$EP/" -H "X-Amz-Target: DynamoDB_20120810.$1" -H 'Content-Type: application/x-amz-json-1.0' -d "$2" -w '\n%{http_code}')
	[[ "${out##*$'\n'}" == 200 ]] || die "$1: HTTP ${out##*$'\n'}: ${out%$'\n'*}"
	printf '%s\n' "${out%$'\n'*}"
}

field() {
	python3 -c 'import json,sys; d=json.load(sys.stdin)
for k in sys.argv[1].split("."): d=d.get(k, {}) if isinstance(d, dict) else {}
print(d if d != {} else "")' "$1"
}
