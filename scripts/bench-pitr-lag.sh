#!/usr/bin/env bash
# scripts/bench-pitr-lag.sh — how far point-in-time recovery's shipping
# falls behind a write load, on a real `extenddb serve` (SQLite in a data
# directory, or PostgreSQL) with a filesystem backup store:
#
#   1. `extenddb bench -w batchwrite --pitr` (BatchWriteItem of 25 items of
#      ~1 KiB, --concurrency workers, through the wire) for --duration, on
#      a new table with point-in-time recovery on;
#   2. meanwhile, every 200 ms, the server's extenddb_pitr_lag_seconds
#      from /metrics (now minus the table's latest restorable instant);
#
# and prints the load's items/s and the lag's p50, p99 and max, leaving
# out the first --settle seconds (the new table's first base is taken
# then, before which nothing is restorable).
#
#   scripts/bench-pitr-lag.sh [--backend sqlite|postgres] [--dsn DSN] [-d 30s] [--settle 5] [-c N] [--port P]
#
# --dsn is required with postgres: a freshly created and migrated database
# of your own for every run. EXTENDDB_BIN uses that binary instead of
# building bin/extenddb; the run's directory is under TMPDIR.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BACKEND=sqlite
DSN=""
DURATION=30s
SETTLE=5
CONCURRENCY=16
PORT=""

log() { echo "bench-pitr-lag: $*" >&2; }
die() { log "$*"; exit 1; }

while [[ $# -gt 0 ]]; do
	case "$1" in
	--backend) BACKEND="$2"; shift 2 ;;
	--dsn) DSN="$2"; shift 2 ;;
	-d | --duration) DURATION="$2"; shift 2 ;;
	--settle) SETTLE="$2"; shift 2 ;;
	-c | --concurrency) CONCURRENCY="$2"; shift 2 ;;
	--port) PORT="$2"; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
done
[[ "$BACKEND" == postgres && -z "$DSN" ]] && die "--dsn is required with --backend postgres"

BIN="${EXTENDDB_BIN:-}"
if [[ -z "$BIN" ]]; then
	(cd "$ROOT" && go build -o bin/extenddb ./cmd/extenddb)
	BIN="$ROOT/bin/extenddb"
fi

# shellcheck source=scripts/bench-lib.sh
source "$ROOT/scripts/bench-lib.sh"
bench_serve "$PORT"

load "$DURATION" --pitr >"$WORK/load.out" &
lp=$!
start=$(now)
while kill -0 "$lp" 2>/dev/null; do
	# The largest lag of any table (the load's is the only one).
	lag=$(curl -fs "$EP/metrics" | awk '/^extenddb_pitr_lag_seconds/ { if ($2 > m) m = $2; seen = 1 } END { if (seen) print m }')
	[[ -n "$lag" ]] && echo "$(python3 -c "print($(now) - $start)") $lag" >>"$WORK/lag"
	sleep 0.2
done
wait "$lp" || die "the load failed: $(cat "$WORK/server.log")"
read -r table items secs _ <"$WORK/load.out"
[[ -s "$WORK/lag" ]] || die "no extenddb_pitr_lag_seconds sample (is point-in-time recovery shipping?)"

python3 - "$WORK/lag" "$SETTLE" "$items" "$secs" "$BACKEND" "$CONCURRENCY" <<'PY'
import sys
path, settle, items, secs, backend, conc = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
lags = sorted(float(l.split()[1]) for l in open(path) if float(l.split()[0]) >= settle)
if not lags:
    sys.exit("bench-pitr-lag: no sample after the settle time")
q = lambda p: lags[min(len(lags) - 1, int(p * len(lags)))]
print(f"backend {backend}, BatchWriteItem concurrency {conc}: {items / secs:,.0f} items/s for {secs:.0f} s")
print(f"  shipping lag over {len(lags)} samples after {settle:.0f} s: p50 {q(0.5):.2f} s  p99 {q(0.99):.2f} s  max {lags[-1]:.2f} s (target: at most 2 s at 5,000 writes/s)")
PY
