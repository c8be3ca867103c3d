#!/usr/bin/env bash
# scripts/bench-compare.sh — compare extenddb with dynalite and with the
# floor under `extenddb bench`.
#
# Servers (--servers, any of): floor (cmd/benchfloor: a net/http server that
# answers fixed responses and does no work — what the HTTP layer alone
# costs), floor-postgres (the floor making one PostgreSQL round trip per
# request through a pool sized like extenddb's, `benchfloor --postgres` on
# EXTENDDB_BENCH_POSTGRES_DSN: what one round trip costs a Go process; its
# database's backend CPU is reported as "db cpu/req"), dynalite (in memory), dynalite-path (on LevelDB, --path),
# extenddb-memory (`serve --memory`), extenddb (`serve` on SQLite in a data
# directory), extenddb-postgres (`serve` on the PostgreSQL database of
# EXTENDDB_BENCH_POSTGRES_DSN, migrated first; the summed CPU of that
# database's backend processes is reported beside it as "db cpu/req"), and
# extenddb-before / extenddb-postgres-before (the same with the binary
# EXTENDDB_BIN_BEFORE, on EXTENDDB_BENCH_POSTGRES_DSN_BEFORE: an A/B run of
# two builds, alternated like the rest), extenddb-cassandra (`serve
# --backend cassandra` on EXTENDDB_BENCH_CASSANDRA_HOSTS, keyspace
# EXTENDDB_BENCH_CASSANDRA_KEYSPACE, migrated first). Installs dynalite (npm, cached outside the repository), builds
# bin/extenddb and the floor, starts the servers on free loopback ports,
# then runs every workload on the servers in alternation (one after the
# other, for N rounds) with `extenddb bench --server-pid`, and prints per
# workload and server: ops/s, p99, server CPU per request, CPU above the
# floor, CPU per item, and the CPU ratios to dynalite in memory and on
# LevelDB; then each server's peak RSS; then the GSI lag of the servers that
# report one (extenddb_gsi_outbox_oldest_seconds on /metrics, Cassandra),
# sampled every 100 ms during the --lag-workloads runs (the scrapes' cost
# is in those runs' CPU). Servers are stopped by PID on exit.
#
#   scripts/bench-compare.sh [options]
#     -w, --workloads LIST   comma list (default: every workload but transact,
#                            which dynalite lacks)
#     -r, --rounds N         alternation rounds (default 2)
#     -d, --duration D       measured window per run (default 10s)
#         --warmup D         warm-up per run (default 2s)
#     -c, --concurrency N    closed-loop workers (default 16)
#         --servers LIST     servers to run (default: floor,dynalite,dynalite-path,
#                            extenddb-memory,extenddb)
#         --partitions N     preloaded 100-item partitions per worker (default:
#                            extenddb bench's)
#         --lag-workloads L  workloads during which the GSI lag is sampled
#                            (default updateitem-1kb: its items carry GSI keys)
#         --out DIR          keep the per-run JSON and server logs in DIR
#
# Environment:
#   EXTENDDB_CACHE   cache root (default $HOME/.cache/extenddb); dynalite goes
#                    to $EXTENDDB_CACHE/dynalite (npm install --prefix)
#   EXTENDDB_BIN     use this extenddb binary instead of building bin/extenddb
#   EXTENDDB_BIN_BEFORE                 binary of the *-before servers
#   EXTENDDB_BENCH_POSTGRES_DSN         postgres://USER@HOST:PORT/DB?... of
#                                       extenddb-postgres (a database of its own)
#   EXTENDDB_BENCH_POSTGRES_DSN_BEFORE  the same for extenddb-postgres-before
#                                       (another database)
#   EXTENDDB_BENCH_POSTGRES_DSN_FLOOR   the database of floor-postgres (default
#                                       EXTENDDB_BENCH_POSTGRES_DSN; a database
#                                       of its own keeps extenddb-postgres alone
#                                       on its database, as ADR 0037's read
#                                       cache needs)
#   EXTENDDB_BENCH_CASSANDRA_HOSTS      contact points of extenddb-cassandra
#   EXTENDDB_BENCH_CASSANDRA_KEYSPACE   its keyspace (default extenddb_bench)
#
# Figures are medians over the rounds. CPU per request comes from the
# server's /proc/PID/stat over each measured window; it is the robust figure
# on a shared machine, where the load generator competes with the server for
# cores and ops/s and p99 move with the neighbours.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
DYNALITE_DIR="$CACHE/dynalite"
DYNALITE_VERSION=4.0.0

WORKLOADS="putitem-1kb,getitem-1kb,updateitem-1kb,query,batchwrite,gsi-query,mixed"
ROUNDS=2
DURATION=10s
WARMUP=2s
CONCURRENCY=16
SERVERS="floor,dynalite,dynalite-path,extenddb-memory,extenddb"
OUT=""
PARTITIONS=""
LAG_WORKLOADS="updateitem-1kb"

log() { echo "bench-compare: $*" >&2; }
die() { log "$*"; exit 1; }

while [[ $# -gt 0 ]]; do
	case "$1" in
	-w | --workloads) WORKLOADS="$2"; shift 2 ;;
	-r | --rounds) ROUNDS="$2"; shift 2 ;;
	-d | --duration) DURATION="$2"; shift 2 ;;
	--warmup) WARMUP="$2"; shift 2 ;;
	-c | --concurrency) CONCURRENCY="$2"; shift 2 ;;
	--servers) SERVERS="$2"; shift 2 ;;
	--out) OUT="$2"; shift 2 ;;
	--partitions) PARTITIONS="$2"; shift 2 ;;
	--lag-workloads) LAG_WORKLOADS="$2"; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "--rounds must be a positive integer"
IFS=', ' read -r -a SERVER_LIST <<<"$SERVERS"
IFS=', ' read -r -a WORKLOAD_LIST <<<"$WORKLOADS"
for s in "${SERVER_LIST[@]}"; do
	case "$s" in floor | dynalite | dynalite-path | extenddb | extenddb-memory) ;;
	extenddb-postgres | floor-postgres) [[ -n "${EXTENDDB_BENCH_POSTGRES_DSN:-}" ]] || die "$s needs EXTENDDB_BENCH_POSTGRES_DSN" ;;
	extenddb-before) [[ -n "${EXTENDDB_BIN_BEFORE:-}" ]] || die "$s needs EXTENDDB_BIN_BEFORE" ;;
	extenddb-cassandra) [[ -n "${EXTENDDB_BENCH_CASSANDRA_HOSTS:-}" ]] || die "$s needs EXTENDDB_BENCH_CASSANDRA_HOSTS" ;;
	extenddb-postgres-before)
		[[ -n "${EXTENDDB_BIN_BEFORE:-}" && -n "${EXTENDDB_BENCH_POSTGRES_DSN_BEFORE:-}" ]] ||
			die "$s needs EXTENDDB_BIN_BEFORE and EXTENDDB_BENCH_POSTGRES_DSN_BEFORE"
		;;
	*) die "unknown server $s" ;;
	esac
done
command -v node >/dev/null || die "node is required (dynalite runs on it)"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/extenddb-bench-compare.XXXXXX")"
if [[ -n "$OUT" ]]; then
	mkdir -p "$OUT"
	RESULTS="$(cd "$OUT" && pwd)"
else
	RESULTS="$WORK/results"
	mkdir -p "$RESULTS"
fi

declare -A PID PORT PROCS
LAGPID=""
cleanup() {
	local s p
	[[ -z "$LAGPID" ]] || kill "$LAGPID" 2>/dev/null || true
	for s in "${!PID[@]}"; do
		p="${PID[$s]}"
		if kill -0 "$p" 2>/dev/null; then
			kill -TERM "$p" 2>/dev/null || true
			for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
			kill -KILL "$p" 2>/dev/null || true
		fi
	done
	wait 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- dynalite --------------------------------------------------------------
install_dynalite() {
	local pkg="$DYNALITE_DIR/node_modules/dynalite/package.json" have=""
	if [[ -f "$pkg" ]]; then
		have="$(node -p "require('$pkg').version" 2>/dev/null || true)"
	fi
	if [[ "$have" != "$DYNALITE_VERSION" ]]; then
		log "installing dynalite@$DYNALITE_VERSION into $DYNALITE_DIR"
		mkdir -p "$DYNALITE_DIR"
		npm install --silent --no-audit --no-fund "dynalite@$DYNALITE_VERSION" --prefix "$DYNALITE_DIR" >&2
	fi
}

# --- extenddb --------------------------------------------------------------
BIN="${EXTENDDB_BIN:-}"
if [[ -z "$BIN" ]]; then
	log "building bin/extenddb"
	(cd "$ROOT" && go build -o bin/extenddb ./cmd/extenddb)
	BIN="$ROOT/bin/extenddb"
fi
[[ -x "$BIN" ]] || die "$BIN is not executable"

free_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

wait_port() { # name port pid
	local i
	for i in $(seq 300); do
		kill -0 "$3" 2>/dev/null || { tail -20 "$WORK/$1.log" >&2; die "$1 exited during start-up"; }
		if (exec 3<>"/dev/tcp/127.0.0.1/$2") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	die "$1 did not listen on 127.0.0.1:$2 within 30s"
}

# backend_procs DSN: the process title prefix of the database's backends,
# "postgres: USER DB ".
backend_procs() {
	local rest="${1#*://}" user db
	user="${rest%%@*}"
	user="${user%%:*}"
	db="${rest#*/}"
	db="${db%%\?*}"
	echo "postgres: $user $db "
}

start_server() {
	local s="$1" port
	port="$(free_port)"
	case "$s" in
	extenddb)
		mkdir -p "$WORK/extenddb-data"
		"$BIN" serve --listen "127.0.0.1:$port" --data-dir "$WORK/extenddb-data" >"$WORK/$s.log" 2>&1 &
		;;
	extenddb-memory)
		"$BIN" serve --listen "127.0.0.1:$port" --memory >"$WORK/$s.log" 2>&1 &
		;;
	extenddb-cassandra)
		local ks="${EXTENDDB_BENCH_CASSANDRA_KEYSPACE:-extenddb_bench}"
		"$BIN" migrate --backend cassandra --cassandra-hosts "$EXTENDDB_BENCH_CASSANDRA_HOSTS" --cassandra-keyspace "$ks" >"$WORK/$s.migrate.log" 2>&1 ||
			{ cat "$WORK/$s.migrate.log" >&2; die "$s: migrate failed"; }
		"$BIN" serve --listen "127.0.0.1:$port" --backend cassandra --cassandra-hosts "$EXTENDDB_BENCH_CASSANDRA_HOSTS" --cassandra-keyspace "$ks" >"$WORK/$s.log" 2>&1 &
		;;
	extenddb-before)
		mkdir -p "$WORK/extenddb-before-data"
		"$EXTENDDB_BIN_BEFORE" serve --listen "127.0.0.1:$port" --data-dir "$WORK/extenddb-before-data" >"$WORK/$s.log" 2>&1 &
		;;
	extenddb-postgres | extenddb-postgres-before)
		local bin="$BIN" dsn="${EXTENDDB_BENCH_POSTGRES_DSN:-}"
		if [[ "$s" == *-before ]]; then
			bin="$EXTENDDB_BIN_BEFORE" dsn="$EXTENDDB_BENCH_POSTGRES_DSN_BEFORE"
		fi
		"$bin" migrate --backend postgres --dsn "$dsn" >"$WORK/$s.migrate.log" 2>&1 ||
			{ cat "$WORK/$s.migrate.log" >&2; die "$s: migrate failed"; }
		PROCS[$s]="$(backend_procs "$dsn")"
		"$bin" serve --listen "127.0.0.1:$port" --backend postgres --dsn "$dsn" >"$WORK/$s.log" 2>&1 &
		;;
	dynalite)
		node "$DYNALITE_DIR/node_modules/dynalite/cli.js" --host 127.0.0.1 --port "$port" \
			--createTableMs 0 --deleteTableMs 0 --updateTableMs 0 >"$WORK/$s.log" 2>&1 &
		;;
	dynalite-path)
		mkdir -p "$WORK/dynalite-data"
		node "$DYNALITE_DIR/node_modules/dynalite/cli.js" --host 127.0.0.1 --port "$port" --path "$WORK/dynalite-data" \
			--createTableMs 0 --deleteTableMs 0 --updateTableMs 0 >"$WORK/$s.log" 2>&1 &
		;;
	floor | floor-postgres)
		[[ -x "$WORK/benchfloor" ]] || (cd "$ROOT" && go build -o "$WORK/benchfloor" ./cmd/benchfloor)
		if [[ "$s" == floor ]]; then
			"$WORK/benchfloor" -listen "127.0.0.1:$port" >"$WORK/$s.log" 2>&1 &
		else
			local fdsn="${EXTENDDB_BENCH_POSTGRES_DSN_FLOOR:-$EXTENDDB_BENCH_POSTGRES_DSN}"
			[[ "$fdsn" != "$EXTENDDB_BENCH_POSTGRES_DSN" ]] ||
				log "warning: floor-postgres shares extenddb-postgres's database; its idle sessions keep extenddb-postgres from its read cache (ADR 0037): set EXTENDDB_BENCH_POSTGRES_DSN_FLOOR"
			PROCS[$s]="$(backend_procs "$fdsn")"
			"$WORK/benchfloor" -listen "127.0.0.1:$port" -postgres "$fdsn" >"$WORK/$s.log" 2>&1 &
		fi
		;;
	esac
	PID[$s]=$!
	PORT[$s]=$port
	wait_port "$s" "$port" "${PID[$s]}"
	log "$s listening on 127.0.0.1:$port (pid ${PID[$s]})"
}

for s in "${SERVER_LIST[@]}"; do
	[[ "$s" == dynalite* ]] && install_dynalite
done
for s in "${SERVER_LIST[@]}"; do
	start_server "$s"
done

# --- runs ------------------------------------------------------------------
# sample_lag PORT FILE: the server's GSI lag gauge every 100 ms, one value a
# line (nothing when the server has no such gauge).
sample_lag() {
	while :; do
		curl -sf --max-time 1 "http://127.0.0.1:$1/metrics" 2>/dev/null | awk '/^extenddb_gsi_outbox_oldest_seconds/ {print $2}' >>"$2" || true
		sleep 0.1
	done
}
FAILED=0
for wl in "${WORKLOAD_LIST[@]}"; do
	for round in $(seq "$ROUNDS"); do
		for s in "${SERVER_LIST[@]}"; do
			json="$RESULTS/$wl.$s.$round.json"
			log "$wl round $round/$ROUNDS on $s"
			extra=()
			[[ -n "${PROCS[$s]:-}" ]] && extra=(--backend-procs "${PROCS[$s]}")
			[[ -z "$PARTITIONS" ]] || extra+=(--partitions "$PARTITIONS")
			if [[ "$s" == extenddb* && ",$LAG_WORKLOADS," == *",$wl,"* ]]; then
				sample_lag "${PORT[$s]}" "$RESULTS/$wl.$s.$round.lag" &
				LAGPID=$!
			fi
			if ! "$BIN" bench --endpoint "http://127.0.0.1:${PORT[$s]}" --server-pid "${PID[$s]}" "${extra[@]}" \
				--workload "$wl" --concurrency "$CONCURRENCY" --duration "$DURATION" --warmup "$WARMUP" \
				--table-prefix "bench-compare" --quiet --json "$json" >"$RESULTS/$wl.$s.$round.txt" 2>&1; then
				log "$wl on $s failed:"
				tail -5 "$RESULTS/$wl.$s.$round.txt" >&2
				FAILED=$((FAILED + 1))
				kill -0 "${PID[$s]}" 2>/dev/null || die "$s is no longer running (log: $(tail -5 "$WORK/$s.log"))"
			fi
			if [[ -n "$LAGPID" ]]; then
				kill "$LAGPID" 2>/dev/null || true
				wait "$LAGPID" 2>/dev/null || true
				LAGPID=""
			fi
		done
	done
done
if [[ -n "$OUT" ]]; then
	for s in "${SERVER_LIST[@]}"; do cp "$WORK/$s.log" "$RESULTS/$s.log"; done
fi

# --- report ----------------------------------------------------------------
echo
echo "extenddb bench comparison: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(uname -sr)"
echo "concurrency $CONCURRENCY, duration $DURATION, warm-up $WARMUP, rounds $ROUNDS (medians); servers: ${SERVER_LIST[*]}"
echo
node - "$RESULTS" "$WORKLOADS" "$SERVERS" <<'JS'
const fs = require("fs"), path = require("path");
const [dir, wls, srvs] = process.argv.slice(2);
const servers = srvs.split(",").map((s) => s.trim()).filter(Boolean);
const runs = {}; // workload -> server -> [result]
const last = {}; // server -> timestamp of its latest run
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".json"))) {
  const [wl, srv] = f.split(".");
  const doc = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
  for (const r of doc.results || []) {
    r.at = doc.timestamp;
    ((runs[wl] ??= {})[srv] ??= []).push(r);
  }
}
const median = (xs) => {
  xs = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!xs.length) return NaN;
  const m = xs.length >> 1;
  return xs.length % 2 ? xs[m] : (xs[m - 1] + xs[m]) / 2;
};
const agg = (rs, f) => median((rs || []).map(f));
const num = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : "-");
const us = (x) => (!Number.isFinite(x) ? "-" : x < 1000 ? x.toFixed(0) + "µs" : x < 1e6 ? (x / 1e3).toFixed(2) + "ms" : (x / 1e6).toFixed(2) + "s");
const cpu = (x) => (Number.isFinite(x) && x > 0 ? x.toFixed(x < 10 ? 2 : 1) + "µs" : "-");
const scpu = (x) => (Number.isFinite(x) ? (x < 0 ? "-" + cpu(-x) : cpu(x)) : "-"); // signed: below the floor shows negative
const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? (a / b).toFixed(2) + "x" : "-");
const mib = (b) => (Number.isFinite(b) ? (b / 1048576).toFixed(1) + "MiB" : "-");

const head = ["workload", "server", "ops/s", "p99", "cpu/req", "above floor", "above floor-pg", "cpu/item", "cpu / dynalite", "cpu / dynalite-path", "cpu / sqlite", "db cpu/req", "errors"];
const rows = [head];
const peak = {}, rss = {};
for (const wl of wls.split(",").map((s) => s.trim()).filter(Boolean)) {
  const R = runs[wl] || {};
  const v = {};
  for (const s of servers) {
    const rs = R[s];
    v[s] = {
      ops: agg(rs, (r) => r.ops_per_s),
      p99: agg(rs, (r) => r.p99_us),
      cpu: agg(rs, (r) => r.server?.cpu_us_per_op),
      item: agg(rs, (r) => r.server?.cpu_us_per_item),
      db: agg(rs, (r) => r.backend?.cpu_us_per_op),
      errs: rs ? rs.reduce((a, r) => a + r.errors, 0) : NaN,
    };
    for (const r of rs || []) {
      if (r.server) {
        peak[s] = Math.max(peak[s] ?? 0, r.server.peak_rss_bytes);
        if (!(r.at < last[s])) [last[s], rss[s]] = [r.at, r.server.rss_bytes];
      }
    }
  }
  const floor = v.floor?.cpu, floorpg = v["floor-postgres"]?.cpu, dyn = v.dynalite?.cpu, dynp = v["dynalite-path"]?.cpu;
  for (const s of servers) {
    const x = v[s];
    rows.push([wl, s, num(x.ops), us(x.p99), cpu(x.cpu), s === "floor" ? "" : cpu(x.cpu - floor),
      s.startsWith("extenddb-postgres") ? scpu(x.cpu - floorpg) : "", cpu(x.item),
      s.startsWith("extenddb") ? ratio(x.cpu, dyn) : "", s.startsWith("extenddb") ? ratio(x.cpu, dynp) : "",
      s === "extenddb-postgres" ? ratio(x.cpu, v.extenddb?.cpu) : s === "extenddb-postgres-before" ? ratio(x.cpu, v["extenddb-before"]?.cpu) : "",
      cpu(x.db), num(x.errs)]);
  }
}
const width = head.map((_, i) => Math.max(...rows.map((r) => [...r[i]].length)));
for (const r of rows) console.log(r.map((c, i) => (i <= 1 ? c.padEnd(width[i]) : c.padStart(width[i]))).join("  "));
console.log();
for (const s of servers) {
  if (peak[s] !== undefined) console.log(`${s} server: peak RSS ${mib(peak[s])}, RSS at the end ${mib(rss[s])}`);
}
// GSI lag samples (extenddb_gsi_outbox_oldest_seconds), pooled over rounds.
const lag = {}; // workload -> server -> [seconds]
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".lag"))) {
  const [wl, srv] = f.split(".");
  const xs = fs.readFileSync(path.join(dir, f), "utf8").split("\n").filter((l) => l.trim() !== "").map(Number).filter(Number.isFinite);
  ((lag[wl] ??= {})[srv] ??= []).push(...xs);
}
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))];
for (const wl of Object.keys(lag)) {
  for (const s of servers) {
    const xs = (lag[wl][s] || []).sort((a, b) => a - b);
    if (!xs.length) continue;
    console.log(`${s} GSI lag during ${wl} (${xs.length} samples every 100 ms): p50 ${us(pct(xs, 0.5) * 1e6)}, p99 ${us(pct(xs, 0.99) * 1e6)}, max ${us(xs[xs.length - 1] * 1e6)}`);
  }
}
JS
if ((FAILED > 0)); then
	die "$FAILED run(s) failed; see above"
fi
