#!/usr/bin/env bash
# scripts/bench-scale.sh — the scale benchmark in one command: what a
# request costs as a table grows (10k, 1M, 10M items of ~1 KiB by default)
# and as a server holds 10,000 tables, on SQLite and, when
# EXTENDDB_BENCH_POSTGRES_DSN is set, on PostgreSQL; then a table
# (markdown) and a plot (PNG) from the benchmark's own JSON output.
#
# Each backend is one `extenddb bench scale` run (see `extenddb bench scale
# --help`): it starts its own servers (a SQLite data directory, or new
# PostgreSQL databases created beside EXTENDDB_BENCH_POSTGRES_DSN and
# dropped after), grows one table with BatchWriteItem and measures, at every
# size, server CPU per request and p99 of getitem, putitem, updateitem,
# query, one scan page and DescribeTable, start to /ready, backup and
# restore items/s and disk bytes per item; then the many-tables case. The
# targets are printed beside the figures with pass or fail.
#
#   scripts/bench-scale.sh [options] [-- extra `bench scale` flags]
#     --backends LIST  sqlite,postgres (default: sqlite, plus postgres when
#                      EXTENDDB_BENCH_POSTGRES_DSN is set)
#     --sizes LIST     table sizes (default 10k,1M,10M)
#     --tables N       small tables of the many-tables case (default 10000)
#     --out DIR        reports and plot (default bench-scale-out)
#     --no-plot        leave the PNG out
#     --ci             the CI size: SQLite, 10k and 100k items, 1,000 tables,
#                      2 s windows; every check enforced loosely (--loose 2:
#                      per-request CPU at 100k at most 2x that at 10k, the
#                      absolute targets doubled; p99 is not checked); no plot
#
# Environment: EXTENDDB_BIN (a binary instead of building bin/extenddb),
# EXTENDDB_BENCH_POSTGRES_DSN, EXTENDDB_CACHE (default ~/.cache/extenddb: the
# plot's virtualenv with matplotlib goes to $EXTENDDB_CACHE/plot-venv).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
MATPLOTLIB_VERSION=3.11.2
BACKENDS=""
SIZES="10k,1M,10M"
TABLES=10000
OUT="bench-scale-out"
PLOT=1
CI=0
EXTRA=()

log() { echo "bench-scale: $*" >&2; }
die() { log "$*"; exit 1; }

while [[ $# -gt 0 ]]; do
	case "$1" in
	--backends) BACKENDS="$2"; shift 2 ;;
	--sizes) SIZES="$2"; shift 2 ;;
	--tables) TABLES="$2"; shift 2 ;;
	--out) OUT="$2"; shift 2 ;;
	--no-plot) PLOT=0; shift ;;
	--ci) CI=1; shift ;;
	--) shift; EXTRA=("$@"); break ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done
if [[ "$CI" == 1 ]]; then
	BACKENDS="${BACKENDS:-sqlite}" SIZES="10k,100k" TABLES=1000 PLOT=0
	EXTRA=(-d 2s --warmup 500ms --loose 2 "${EXTRA[@]}")
fi
if [[ -z "$BACKENDS" ]]; then
	BACKENDS=sqlite
	[[ -n "${EXTENDDB_BENCH_POSTGRES_DSN:-}" ]] && BACKENDS=sqlite,postgres
fi

BIN="${EXTENDDB_BIN:-}"
if [[ -z "$BIN" ]]; then
	(cd "$ROOT" && go build -o bin/extenddb ./cmd/extenddb)
	BIN="$ROOT/bin/extenddb"
fi
mkdir -p "$OUT"

rc=0
reports=()
IFS=', ' read -r -a BACKEND_LIST <<<"$BACKENDS"
for b in "${BACKEND_LIST[@]}"; do
	[[ "$b" == postgres && -z "${EXTENDDB_BENCH_POSTGRES_DSN:-}" ]] && die "postgres needs EXTENDDB_BENCH_POSTGRES_DSN"
	log "$b: sizes $SIZES, $TABLES tables ($(date -u +%T) UTC)"
	"$BIN" bench scale --backend "$b" --sizes "$SIZES" --tables "$TABLES" --out "$OUT" "${EXTRA[@]}" || rc=$?
	[[ -f "$OUT/scale-$b.json" ]] && reports+=("$OUT/scale-$b.json")
done

if [[ "$PLOT" == 1 && ${#reports[@]} -gt 0 ]]; then
	VENV="$CACHE/plot-venv"
	if ! "$VENV/bin/python" -c "import matplotlib; assert matplotlib.__version__ == '$MATPLOTLIB_VERSION'" 2>/dev/null; then
		log "installing matplotlib $MATPLOTLIB_VERSION into $VENV"
		python3 -m venv "$VENV"
		"$VENV/bin/pip" install -q "matplotlib==$MATPLOTLIB_VERSION"
	fi
	"$VENV/bin/python" "$ROOT/scripts/bench-scale-plot.py" "$OUT/scale.png" "${reports[@]}"
fi
exit $rc
