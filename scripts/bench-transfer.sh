#!/usr/bin/env bash
# scripts/bench-transfer.sh — an export in AWS's format and its import
# against BatchWriteItem, on a real `extenddb serve` (SQLite in a data
# directory, or PostgreSQL), with a filesystem backup store and a bucket
# directory ([s3] filesystem_root):
#
#   1. load a table with `extenddb bench -w batchwrite` (BatchWriteItem of
#      25 items of ~1 KiB, --concurrency workers, through the wire) until it
#      holds at least --items items: the load rate is BatchWriteItem's;
#   2. turn point-in-time recovery on and wait for the first base (not
#      timed: an export reads the history, ADR 0049);
#   3. ExportTableToPointInTime (DYNAMODB_JSON) until COMPLETED;
#   4. ImportTable (GZIP) of the export's data/ into a new table until
#      COMPLETED;
#
# and prints items/s of each, import/BatchWriteItem, the server's CPU time
# and its peak RSS during each job (VmHWM, reset through
# /proc/PID/clear_refs before each job).
#
#   scripts/bench-transfer.sh [--backend sqlite|postgres] [--dsn DSN] [--items N] [-c N] [--port N]
#
# --port: the server's port (default: a free one); TMPDIR: where the
# run's data directory, store and bucket live.
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
PORT=""

log() { echo "bench-transfer: $*" >&2; }
die() { log "$*"; exit 1; }

while [[ $# -gt 0 ]]; do
	case "$1" in
	--backend) BACKEND="$2"; shift 2 ;;
	--dsn) DSN="$2"; shift 2 ;;
	--items) ITEMS="$2"; shift 2 ;;
	-c | --concurrency) CONCURRENCY="$2"; shift 2 ;;
	--port) PORT="$2"; shift 2 ;;
	-h | --help) sed -n '2,25p' "$0"; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
done
[[ "$BACKEND" == postgres && -z "$DSN" ]] && die "--dsn is required with --backend postgres"

BIN="${EXTENDDB_BIN:-}"
if [[ -z "$BIN" ]]; then
	(cd "$ROOT" && go build -o bin/extenddb ./cmd/extenddb)
	BIN="$ROOT/bin/extenddb"
fi

# The server, its store and the measurements: scripts/bench-lib.sh. The
# buckets of [s3] are directories of the run's (s3.filesystem_root).
dir="$(mktemp -d -t extenddb-bench-transfer-XXXXXX)"
mkdir -m 0700 "$dir/buckets" "$dir/buckets/bkt"
# shellcheck source=scripts/bench-lib.sh
source "$ROOT/scripts/bench-lib.sh"
EXTENDDB__S3__FILESYSTEM_ROOT="$dir/buckets" bench_serve "$PORT" "$dir"

# 1. Load: a 3 s BatchWriteItem window of the load tool (its table deleted
# at its end) gives the rate; then a window long enough for ITEMS into the
# table that is backed up. The server then holds one table in every run,
# whatever ITEMS: a probe table left beside a large one had its statistics
# computed during the backup (DescribeTable, /metrics), which a small run
# did not pay.
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

# 2. Point-in-time recovery and its first base.
call UpdateContinuousBackups "{\"TableName\":\"$table\",\"PointInTimeRecoverySpecification\":{\"PointInTimeRecoveryEnabled\":true}}" >/dev/null
tb0=$(now)
until [[ -n "$(call DescribeContinuousBackups "{\"TableName\":\"$table\"}" | field ContinuousBackupsDescription.PointInTimeRecoveryDescription.LatestRestorableDateTime)" ]]; do
	sleep 0.5
done
log "first base shipped after $(python3 -c "print(round($(now) - $tb0, 1))")s"
tarn=$(call DescribeTable "{\"TableName\":\"$table\"}" | field Table.TableArn)

# 3. Export.
echo 5 >"/proc/$PID/clear_refs"
rss0=$(rss) c0=$(cpu) t0=$(now)
earn=$(call ExportTableToPointInTime "{\"TableArn\":\"$tarn\",\"S3Bucket\":\"bkt\",\"S3Prefix\":\"bench\"}" | field ExportDescription.ExportArn)
while :; do
	d=$(call DescribeExport "{\"ExportArn\":\"$earn\"}")
	st=$(field ExportDescription.ExportStatus <<<"$d")
	[[ "$st" != IN_PROGRESS ]] && break
	sleep 0.2
done
t1=$(now) c1=$(cpu) hwm_e=$(hwm)
[[ "$st" == COMPLETED ]] || die "export $st: $d"
eitems=$(field ExportDescription.ItemCount <<<"$d")
# The load tool counts the batches it saw answered; the export counts the
# table (a batch in flight when the window closed is in it).
((eitems >= loaded)) || die "the export holds $eitems items, the load wrote $loaded"
loaded=$eitems

# 4. Import of the export's data files.
sleep 1
echo 5 >"/proc/$PID/clear_refs"
rss1=$(rss) t2=$(now) c2=$(cpu)
keys=$(call DescribeTable "{\"TableName\":\"$table\"}" | python3 -c 'import json,sys; t=json.load(sys.stdin)["Table"]; p={"KeySchema": t["KeySchema"], "AttributeDefinitions": t["AttributeDefinitions"]}
g=[{k: i[k] for k in ("IndexName", "KeySchema", "Projection")} for i in t.get("GlobalSecondaryIndexes", [])]
if g: p["GlobalSecondaryIndexes"]=g
print(json.dumps(p)[1:-1])')
iarn=$(call ImportTable "{\"S3BucketSource\":{\"S3Bucket\":\"bkt\",\"S3KeyPrefix\":\"bench/AWSDynamoDB/${earn##*/}/data/\"},\"InputFormat\":\"DYNAMODB_JSON\",\"InputCompressionType\":\"GZIP\",\"TableCreationParameters\":{\"TableName\":\"$table-imported\",\"BillingMode\":\"PAY_PER_REQUEST\",$keys}}" | field ImportTableDescription.ImportArn)
while :; do
	d=$(call DescribeImport "{\"ImportArn\":\"$iarn\"}")
	st=$(field ImportTableDescription.ImportStatus <<<"$d")
	[[ "$st" != IN_PROGRESS ]] && break
	sleep 0.2
done
t3=$(now) c3=$(cpu) hwm_i=$(hwm)
[[ "$st" == COMPLETED ]] || die "import $st: $d"
iitems=$(field ImportTableDescription.ImportedItemCount <<<"$d")
[[ "$iitems" == "$loaded" ]] || die "the import holds $iitems items, the table $loaded"

python3 - "$BACKEND" "$loaded" "$load_rate" "$t0" "$t1" "$t2" "$t3" "$c0" "$c1" "$c2" "$c3" "$TICK" "$rss0" "$hwm_e" "$rss1" "$hwm_i" "$CONCURRENCY" "$load_cpu" <<'PY'
import sys
(backend, n, load_rate, t0, t1, t2, t3, c0, c1, c2, c3, tick, rss0, hwm_e, rss1, hwm_i, conc, load_cpu) = sys.argv[1:]
n, load_rate = int(n), float(load_rate)
te, ti = float(t1) - float(t0), float(t3) - float(t2)
ce, ci = (float(c1) - float(c0)) / float(tick), (float(c3) - float(c2)) / float(tick)
mib = lambda kib: int(kib) / 1024
print(f"backend {backend}, {n} items of ~1 KiB")
print(f"  BatchWriteItem load (concurrency {conc}): {load_rate:,.0f} items/s")
print(f"  export: {te:6.2f} s  {n / te:9,.0f} items/s  server CPU {ce:5.2f} s  RSS {mib(rss0):.0f} MiB before, peak {mib(hwm_e):.0f} MiB")
print(f"  import: {ti:6.2f} s  {n / ti:9,.0f} items/s  server CPU {ci:5.2f} s  RSS {mib(rss1):.0f} MiB before, peak {mib(hwm_i):.0f} MiB")
print(f"  import / BatchWriteItem: {n / ti / load_rate:.2f}x (target >= 2)")
lc, ic = float(load_cpu), ci * 1e6 / n
if lc > 0 and ic > 0:
    print(f"  server CPU per item: BatchWriteItem {lc:.1f} us, import {ic:.1f} us: {lc / ic:.2f}x")
PY
