#!/usr/bin/env bash
# scripts/bench-rpo.sh — the recovery point objective of point-in-time
# recovery, measured: how many acknowledged writes are lost when the
# server and its whole database are lost and the table is restored from
# the backup store.
#
# Each ship interval is one `extenddb bench rpo` run (see `extenddb bench
# rpo --help`) of --runs kill-and-restore runs: `extenddb serve` on SQLite
# in a fresh data directory with a fresh filesystem store, a table with
# point-in-time recovery on, 4 writers doing PutItem of unique keys (each
# write's acknowledgement time recorded), SIGKILL after a random 3-8 s and
# the data directory deleted; then a fresh catalog adopts the store
# (`extenddb backup sync --adopt-store --force`), a new server restores
# the table by its ARN to its latest restorable time, and the restored
# table is compared with what was acknowledged. Per run: the acknowledged
# writes missing, the lost window (the kill minus the oldest missing
# write's acknowledgement), the restored instant's distance from the
# kill; then p50, p99 and max. Every run also checks that no restored item
# was never written and that no write acknowledged before the restored
# instant is missing; with --check (and --ci) those, a failed restore, or
# a missing write acknowledged more than ship interval + 2 s before the
# kill fail the script.
#
#   scripts/bench-rpo.sh [options] [-- extra `bench rpo` flags]
#     --runs N          runs per ship interval (default 20)
#     --intervals LIST  backup.pitr.ship_interval values (default 1s,5s)
#     --out DIR         rpo-<interval>.json per interval (default: none kept)
#     --port P          servers listen on 127.0.0.1:P and P+1 (default: free ports)
#     --check           fail on a durability violation
#     --ci              the CI size: 2 runs at 1 s, killed after 3-4 s, --check
#
# Environment: EXTENDDB_BIN (a binary instead of building bin/extenddb).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS=20
INTERVALS="1s,5s"
OUT=""
PORT=""
CHECK=0
EXTRA=()

log() { echo "bench-rpo: $*" >&2; }
die() { log "$*"; exit 1; }

while [[ $# -gt 0 ]]; do
	case "$1" in
	--runs) RUNS="$2"; shift 2 ;;
	--intervals) INTERVALS="$2"; shift 2 ;;
	--out) OUT="$2"; shift 2 ;;
	--port) PORT="$2"; shift 2 ;;
	--check) CHECK=1; shift ;;
	--ci) RUNS=2 INTERVALS=1s CHECK=1 EXTRA=(--kill-min 3s --kill-max 4s "${EXTRA[@]}"); shift ;;
	--) shift; EXTRA+=("$@"); break ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

BIN="${EXTENDDB_BIN:-}"
if [[ -z "$BIN" ]]; then
	(cd "$ROOT" && go build -o bin/extenddb ./cmd/extenddb)
	BIN="$ROOT/bin/extenddb"
fi
[[ -n "$OUT" ]] && mkdir -p "$OUT"

rc=0
IFS=', ' read -r -a INTERVAL_LIST <<<"$INTERVALS"
for iv in "${INTERVAL_LIST[@]}"; do
	args=(bench rpo --runs "$RUNS" --ship-interval "$iv" --bin "$BIN" -q)
	[[ "$CHECK" == 1 ]] && args+=(--check)
	[[ -n "$PORT" ]] && args+=(--port "$PORT")
	[[ -n "$OUT" ]] && args+=(--json "$OUT/rpo-$iv.json")
	log "ship interval $iv: $RUNS runs on $(nproc) cores, $(date -u +%FT%TZ)"
	"$BIN" "${args[@]}" "${EXTRA[@]}" || rc=1
done
exit $rc
