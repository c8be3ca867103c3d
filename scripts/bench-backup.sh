#!/usr/bin/env bash
# scripts/bench-backup.sh — backup and restore against BatchWriteItem, on a
# real `extenddb serve` (SQLite in a data directory, or PostgreSQL), with a
# filesystem backup store:
#
#   1. load a table with `extenddb bench -w batchwrite` (BatchWriteItem of
#      25 items of ~1 KiB, --concurrency workers, through the wire) until it
#      holds at least --items items: the load rate is BatchWriteItem's;
#   2. `extenddb backup create --wait` of that table;
#   3. `extenddb backup restore --wait` of the backup into a new table;
#
# and prints items/s of each, restore/BatchWriteItem, the server's CPU time
# and its peak RSS during each job (VmHWM, reset through
# /proc/PID/clear_refs before each job); on PostgreSQL also the CPU time of
# the PostgreSQL backend processes serving the --dsn database during the
# restore (from /proc, so the PostgreSQL server must run on this machine).
#
#   scripts/bench-backup.sh [--backend sqlite|postgres] [--dsn DSN] [--items N] [-c N]
#
# --dsn is required with postgres: a freshly created and migrated database
# of your own for every run (its catalog binds the run's temporary store;
# its tables are left behind). EXTENDDB_BIN uses that binary instead of
# building bin/extenddb.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BACKEND=sqlite
DSN=""
ITEMS=100000
CONCURRENCY=16

log() { echo "bench-backup: $*" >&2; }
die() { log "$*"; exit 1; }

while [[ $# -gt 0 ]]; do
	case "$1" in
	--backend) BACKEND="$2"; shift 2 ;;
	--dsn) DSN="$2"; shift 2 ;;
	--items) ITEMS="$2"; shift 2 ;;
	-c | --concurrency) CONCURRENCY="$2"; shift 2 ;;
	-h | --help) sed -n '2,24p' "$0"; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
done
[[ "$BACKEND" == postgres && -z "$DSN" ]] && die "--dsn is required with --backend postgres"

BIN="${EXTENDDB_BIN:-}"
if [[ -z "$BIN" ]]; then
	(cd "$ROOT" && go build -o bin/extenddb ./cmd/extenddb)
	BIN="$ROOT/bin/extenddb"
fi

WORK="$(mktemp -d -t extenddb-bench-backup-XXXXXX)"
mkdir -m 0700 "$WORK/store" "$WORK/data" "$WORK/spool"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
EP="http://127.0.0.1:$PORT"
ARGS=(--data-dir "$WORK/data")
[[ "$BACKEND" == postgres ]] && ARGS=(--backend postgres --dsn "$DSN")

EXTENDDB__BACKUP__STORE__KIND=filesystem EXTENDDB__BACKUP__STORE__ROOT="$WORK/store" \
	EXTENDDB__BACKUP__SPOOL_DIR="$WORK/spool" EXTENDDB__LOG__LEVEL=warn \
	"$BIN" serve --listen "127.0.0.1:$PORT" "${ARGS[@]}" >"$WORK/server.log" 2>&1 &
PID=$!
cleanup() {
	kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
for _ in $(seq 100); do
	curl -fs "$EP/health" >/dev/null 2>&1 && break
	sleep 0.1
done
curl -fs "$EP/health" >/dev/null || die "server did not start: $(cat "$WORK/server.log")"

cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$PID/status"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$PID/status"; }
now() { date +%s.%N; }
# pgcpu: the CPU ticks of the PostgreSQL backend processes serving the
# --dsn database (their process titles name it; the shared background
# processes, WAL writer and checkpointer, are not counted), 0 on SQLite.
PGDB=""
[[ "$BACKEND" == postgres ]] && PGDB="$(python3 -c 'import sys, urllib.parse; print(urllib.parse.urlparse(sys.argv[1]).path.lstrip("/"))' "$DSN")"
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
TICK="$(getconf CLK_TCK)"

# 1. Load: a 3 s BatchWriteItem window of the load tool (its table deleted
# at its end) gives the rate; then a window long enough for ITEMS into the
# table that is backed up. The server then holds one table in every run,
# whatever ITEMS: a probe table left beside a large one had its statistics
# computed during the backup (DescribeTable, /metrics), which a small run
# did not pay.
export AWS_ACCESS_KEY_ID=extenddb-bench AWS_SECRET_ACCESS_KEY=extenddb-bench
load() {
	"$BIN" bench --endpoint "$EP" -w batchwrite -c "$CONCURRENCY" -d "$1" --warmup 0 "${@:2}" -q \
		--table-prefix "bb" --server-pid "$PID" --json "$WORK/load.json" >/dev/null
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"][0]; print(r["table"], r["items"], r["duration_s"], (r.get("server") or {}).get("cpu_us_per_item", 0))' "$WORK/load.json"
}
read -r table loaded load_s load_cpu < <(load 3s)
# The rate falls as the table grows (the 3 s window's table is small): a
# margin of 1.6 over the first window's rate for a large table, 1.15 for a
# small one (so that --items 100000 loads about 100k items).
secs=$(python3 -c "import math; print(max(1, math.ceil($load_s * $ITEMS / max($loaded, 1) * (1.6 if $ITEMS >= 500000 else 1.15))))")
log "3 s loaded $loaded items (table deleted); loading a table for ${secs}s"
read -r table loaded load_s load_cpu < <(load "${secs}s" --keep)
((loaded >= ITEMS)) || log "WARNING: the table holds $loaded items, fewer than --items $ITEMS (the load slowed down)"
load_rate=$(python3 -c "print($loaded / $load_s)")
log "loaded $loaded items into $table at $(printf %.0f "$load_rate") items/s (BatchWriteItem, concurrency $CONCURRENCY)"

# 2. Backup.
echo 5 >"/proc/$PID/clear_refs"
rss0=$(rss) c0=$(cpu) t0=$(now)
"$BIN" backup create --endpoint "$EP" --table "$table" --name bench --wait >"$WORK/backup.out"
t1=$(now) c1=$(cpu) hwm_b=$(hwm)
arn=$(head -1 "$WORK/backup.out" | awk '{print $1}')

# 3. Restore.
echo 5 >"/proc/$PID/clear_refs"
rss1=$(rss) t2=$(now) c2=$(cpu) p2=$(pgcpu)
"$BIN" backup restore --endpoint "$EP" --target "$table-restored" --wait "$arn" >"$WORK/restore.out"
t3=$(now) c3=$(cpu) p3=$(pgcpu) hwm_r=$(hwm)

python3 - "$BACKEND" "$loaded" "$load_rate" "$t0" "$t1" "$t2" "$t3" "$c0" "$c1" "$c2" "$c3" "$TICK" "$rss0" "$hwm_b" "$rss1" "$hwm_r" "$CONCURRENCY" "$load_cpu" "$p2" "$p3" <<'EOF'
import sys
(backend, n, load_rate, t0, t1, t2, t3, c0, c1, c2, c3, tick, rss0, hwm_b, rss1, hwm_r, conc, load_cpu, p2, p3) = sys.argv[1:]
n, load_rate = int(n), float(load_rate)
tb, tr = float(t1) - float(t0), float(t3) - float(t2)
cb, cr = (float(c1) - float(c0)) / float(tick), (float(c3) - float(c2)) / float(tick)
mib = lambda kib: int(kib) / 1024
print(f"backend {backend}, {n} items of ~1 KiB")
print(f"  BatchWriteItem load (concurrency {conc}): {load_rate:,.0f} items/s")
print(f"  backup:  {tb:6.2f} s  {n / tb:9,.0f} items/s  server CPU {cb:5.2f} s  RSS {mib(rss0):.0f} MiB before, peak {mib(hwm_b):.0f} MiB")
print(f"  restore: {tr:6.2f} s  {n / tr:9,.0f} items/s  server CPU {cr:5.2f} s  RSS {mib(rss1):.0f} MiB before, peak {mib(hwm_r):.0f} MiB")
print(f"  restore / BatchWriteItem: {n / tr / load_rate:.2f}x (target >= 2)")
# The server's own CPU per item (a PostgreSQL server's processes are not
# counted, for either): what the ratio would approach with a core free.
lc, rc = float(load_cpu), cr * 1e6 / n
if lc > 0 and rc > 0:
    print(f"  server CPU per item: BatchWriteItem {lc:.1f} us, restore {rc:.1f} us: {lc / rc:.2f}x")
if backend == "postgres":
    pc = (float(p3) - float(p2)) / float(tick)
    print(f"  PostgreSQL backends' CPU during the restore: {pc:.2f} s, {pc * 1e6 / n:.1f} us per item")
EOF
