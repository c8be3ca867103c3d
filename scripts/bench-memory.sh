#!/usr/bin/env bash
# scripts/bench-memory.sh — `extenddb serve --memory` on its two engines,
# side by side: the native in-memory backend (storage.memory_engine =
# "native", the default) and SQLite in a temporary file ("sqlite", what
# --memory ran before). Both servers run at once on free loopback ports;
# every workload runs on the two in alternation (sqlite, native, sqlite,
# native, ... for N rounds) with `extenddb bench --server-pid`, and the
# medians of server CPU per request (and per item), ops/s and p99 are
# printed. Then, on a fresh server of each engine, the RSS growth per
# 100k items of ~1 KiB loaded with BatchWriteItem.
#
#   scripts/bench-memory.sh [-w LIST] [-r N] [-d D] [--warmup D] [-c N] [--rss-load D] [--dynalite]
#
# --dynalite also runs dynalite in its default in-memory mode (installed
# with npm as scripts/bench-compare.sh does) in the same alternation, and
# prints the native/dynalite ratios.
#
# Environment: EXTENDDB_BIN uses that binary instead of building bin/extenddb;
# EXTENDDB_CACHE as for scripts/bench-compare.sh.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORKLOADS="putitem-1kb,getitem-1kb,updateitem-1kb,query,batchwrite"
ROUNDS=2
DURATION=5s
WARMUP=1s
CONCURRENCY=16
RSS_LOAD=10s
DYNALITE=""
CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
DYNALITE_DIR="$CACHE/dynalite"
DYNALITE_VERSION=4.0.0

log() { echo "bench-memory: $*" >&2; }
die() { log "$*"; exit 1; }

while [[ $# -gt 0 ]]; do
	case "$1" in
	-w | --workloads) WORKLOADS="$2"; shift 2 ;;
	-r | --rounds) ROUNDS="$2"; shift 2 ;;
	-d | --duration) DURATION="$2"; shift 2 ;;
	--warmup) WARMUP="$2"; shift 2 ;;
	-c | --concurrency) CONCURRENCY="$2"; shift 2 ;;
	--rss-load) RSS_LOAD="$2"; shift 2 ;;
	--dynalite) DYNALITE=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
IFS=', ' read -r -a WORKLOAD_LIST <<<"$WORKLOADS"

BIN="${EXTENDDB_BIN:-}"
if [[ -z "$BIN" ]]; then
	log "building bin/extenddb"
	(cd "$ROOT" && go build -o bin/extenddb ./cmd/extenddb)
	BIN="$ROOT/bin/extenddb"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/extenddb-bench-memory.XXXXXX")"
declare -A PID PORT
stop() {
	local p="${PID[$1]:-}"
	[[ -n "$p" ]] || return 0
	kill -TERM "$p" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$p" 2>/dev/null || true
	unset "PID[$1]"
}
cleanup() {
	local s
	for s in "${!PID[@]}"; do stop "$s"; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start ENGINE: one `serve --memory` on that engine (or dynalite).
start() {
	local engine="$1" port
	port="$(free_port)"
	if [[ "$engine" == dynalite ]]; then
		node "$DYNALITE_DIR/node_modules/dynalite/cli.js" --host 127.0.0.1 --port "$port" \
			--createTableMs 0 --deleteTableMs 0 --updateTableMs 0 >"$WORK/$engine.log" 2>&1 &
	else
		EXTENDDB__STORAGE__MEMORY_ENGINE="$engine" "$BIN" serve --memory --listen "127.0.0.1:$port" --log-level warn \
			>"$WORK/$engine.log" 2>&1 &
	fi
	PID[$engine]=$!
	PORT[$engine]=$port
	for _ in $(seq 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
		sleep 0.1
	done
	cat "$WORK/$engine.log" >&2
	die "$engine server did not start"
}

bench() { # bench ENGINE WORKLOAD DURATION OUT [extra...]
	local engine="$1" w="$2" d="$3" out="$4"
	shift 4
	"$BIN" bench -q --endpoint "http://127.0.0.1:${PORT[$engine]}" --server-pid "${PID[$engine]}" \
		-w "$w" -d "$d" --warmup "$WARMUP" -c "$CONCURRENCY" --json "$out" "$@" >/dev/null
}

ENGINES=(sqlite native)
if [[ -n "$DYNALITE" ]]; then
	pkg="$DYNALITE_DIR/node_modules/dynalite/package.json"
	if [[ ! -f "$pkg" || "$(node -p "require('$pkg').version" 2>/dev/null)" != "$DYNALITE_VERSION" ]]; then
		log "installing dynalite@$DYNALITE_VERSION into $DYNALITE_DIR"
		mkdir -p "$DYNALITE_DIR"
		npm install --silent --no-audit --no-fund "dynalite@$DYNALITE_VERSION" --prefix "$DYNALITE_DIR" >&2
	fi
	ENGINES+=(dynalite)
fi

log "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
for e in "${ENGINES[@]}"; do start "$e"; done
for r in $(seq "$ROUNDS"); do
	for w in "${WORKLOAD_LIST[@]}"; do
		for e in "${ENGINES[@]}"; do
			log "round $r: $w on $e"
			bench "$e" "$w" "$DURATION" "$WORK/run-$e-$w-$r.json"
		done
	done
done
for e in "${ENGINES[@]}"; do stop "$e"; done

# RSS per 100k items: a fresh server per engine, RSS before and after a
# BatchWriteItem load whose table is kept.
for e in sqlite native; do
	start "$e"
	sleep 0.5
	before=$(awk '/^VmRSS/ {print $2}' "/proc/${PID[$e]}/status")
	log "rss: loading $e for $RSS_LOAD"
	bench "$e" batchwrite "$RSS_LOAD" "$WORK/rss-$e.json" --keep
	sleep 1
	after=$(awk '/^VmRSS/ {print $2}' "/proc/${PID[$e]}/status")
	# The GC's next target is twice the heap live after the last
	# collection (GOGC=100): half of it is the live heap.
	nextgc=$(curl -sf "http://127.0.0.1:${PORT[$e]}/metrics" | awk '/^go_memstats_next_gc_bytes/ {printf "%d", $2/1024}')
	echo "$before $after ${nextgc:-0}" >"$WORK/rss-$e.kib"
	stop "$e"
done

python3 - "$WORK" "${WORKLOAD_LIST[@]}" <<'EOF'
import glob, json, os, statistics, sys
work, workloads = sys.argv[1], sys.argv[2:]
def runs(e, w):
    out = []
    for f in sorted(glob.glob(f"{work}/run-{e}-{w}-*.json")):
        out += json.load(open(f))["results"]
    return out
def med(xs):
    return statistics.median(xs) if xs else float("nan")
print("| workload | sqlite ops/s | native ops/s | sqlite p99 | native p99 | server CPU/request sqlite | native | native/sqlite | CPU/item sqlite | native |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for w in workloads:
    s, n = runs("sqlite", w), runs("native", w)
    f = lambda rs, k: med([r[k] for r in rs])
    g = lambda rs, k: med([r["server"][k] for r in rs])
    sc, nc = g(s, "cpu_us_per_op"), g(n, "cpu_us_per_op")
    per_item = w == "batchwrite"
    print(f"| {w} | {f(s,'ops_per_s'):.0f} | {f(n,'ops_per_s'):.0f} | {f(s,'p99_us')/1000:.2f} ms | {f(n,'p99_us')/1000:.2f} ms"
          f" | {sc:.1f} µs | {nc:.1f} µs | {nc/sc if sc else float('nan'):.2f}"
          f" | {g(s,'cpu_us_per_item'):.1f} µs | {g(n,'cpu_us_per_item'):.1f} µs |" if per_item else
          f"| {w} | {f(s,'ops_per_s'):.0f} | {f(n,'ops_per_s'):.0f} | {f(s,'p99_us')/1000:.2f} ms | {f(n,'p99_us')/1000:.2f} ms"
          f" | {sc:.1f} µs | {nc:.1f} µs | {nc/sc if sc else float('nan'):.2f} | | |")
if runs("dynalite", workloads[0]):
    print()
    print("| workload | dynalite ops/s | dynalite p99 | server CPU/request dynalite | native/dynalite CPU | native/dynalite p99 | CPU/item dynalite | native/dynalite per item |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for w in workloads:
        d, n = runs("dynalite", w), runs("native", w)
        f = lambda rs, k: med([r[k] for r in rs])
        g = lambda rs, k: med([r["server"][k] for r in rs])
        dc, nc = g(d, "cpu_us_per_op"), g(n, "cpu_us_per_op")
        per = f" {g(d,'cpu_us_per_item'):.1f} µs | {g(n,'cpu_us_per_item')/g(d,'cpu_us_per_item'):.2f} |" if w == "batchwrite" else " | |"
        print(f"| {w} | {f(d,'ops_per_s'):.0f} | {f(d,'p99_us')/1000:.2f} ms | {dc:.1f} µs | {nc/dc:.2f} | {f(n,'p99_us')/f(d,'p99_us'):.2f} |" + per)
print()
for e in ("sqlite", "native"):
    before, after, nextgc = map(int, open(f"{work}/rss-{e}.kib").read().split())
    r = json.load(open(f"{work}/rss-{e}.json"))["results"][0]
    items = r["items"]
    # items written during warm-up are kept too: count them at the measured rate
    items_all = items + r["items_per_s"] * r["warmup_s"]
    grow = (after - before) / 1024
    print(f"RSS {e}: {before/1024:.1f} MiB idle, {after/1024:.1f} MiB after ~{items_all:.0f} items "
          f"-> {grow / items_all * 100000:.1f} MiB per 100k items (Go heap live at the last GC ~{nextgc/2/1024:.1f} MiB"
          f" -> {nextgc/2/1024 / items_all * 100000:.1f} MiB per 100k items)")
EOF
