#!/usr/bin/env bash
# scripts/bench-pitr-restore.sh — RestoreTableToPointInTime against
# BatchWriteItem, on a real `extenddb serve` (SQLite in a data directory,
# or PostgreSQL) with a filesystem backup store and point-in-time recovery
# shipping:
#
#   1. load a table with `extenddb bench -w batchwrite` (BatchWriteItem of
#      25 items of ~1 KiB, --concurrency workers, through the wire) until it
#      holds at least --items items: the load rate is BatchWriteItem's, the
#      reload a restore is compared with;
#   2. turn point-in-time recovery on and wait for the first base (it
#      holds the loaded items);
#   3. apply as many changes as the table holds, with BatchWriteItem from
#      a parallel Scan (boto3): of every 10 items scanned, 8 overwritten
#      (a new payload of the same size), 1 deleted and 1 new item put, so
#      that the table keeps its size;
#   4. wait until DescribeContinuousBackups' LatestRestorableDateTime is
#      past the last change (the history is shipped);
#   5. RestoreTableToPointInTime (UseLatestRestorableTime) into a new
#      table, timed until it is ACTIVE; then the two tables' items are
#      counted (Scan, Select COUNT) and must be equal;
#
# and prints the restore's items/s (items in the restored table), the
# server's CPU time per item and its peak RSS during the restore (VmHWM,
# reset through /proc/PID/clear_refs before it) beside the load's.
#
#   scripts/bench-pitr-restore.sh [--backend sqlite|postgres] [--dsn DSN] [--items N] [-c N] [--port P]
#
# --dsn is required with postgres: a freshly created and migrated database
# of your own for every run (its tables are left behind). --port: the
# server's port (default: a free one). EXTENDDB_BIN uses that binary
# instead of building bin/extenddb; the run's directory is under TMPDIR.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BACKEND=sqlite
DSN=""
ITEMS=100000
CONCURRENCY=16
PORT=""

log() { echo "bench-pitr-restore: $*" >&2; }
die() { log "$*"; exit 1; }

while [[ $# -gt 0 ]]; do
	case "$1" in
	--backend) BACKEND="$2"; shift 2 ;;
	--dsn) DSN="$2"; shift 2 ;;
	--items) ITEMS="$2"; shift 2 ;;
	-c | --concurrency) CONCURRENCY="$2"; shift 2 ;;
	--port) PORT="$2"; shift 2 ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1" ;;
	esac
done
[[ "$BACKEND" == postgres && -z "$DSN" ]] && die "--dsn is required with --backend postgres"
python3 -c 'import boto3' 2>/dev/null || die "the changes need python3 with boto3"

BIN="${EXTENDDB_BIN:-}"
if [[ -z "$BIN" ]]; then
	(cd "$ROOT" && go build -o bin/extenddb ./cmd/extenddb)
	BIN="$ROOT/bin/extenddb"
fi

# shellcheck source=scripts/bench-lib.sh
source "$ROOT/scripts/bench-lib.sh"
bench_serve "$PORT"

# 1. Load (as scripts/bench-backup.sh: a 3 s window for the rate, its
# table deleted, then one long enough for ITEMS).
read -r table loaded load_s load_cpu < <(load 3s)
secs=$(python3 -c "import math; print(max(1, math.ceil($load_s * $ITEMS / max($loaded, 1) * (1.6 if $ITEMS >= 500000 else 1.15))))")
log "3 s loaded $loaded items (table deleted); loading a table for ${secs}s"
read -r table loaded load_s load_cpu < <(load "${secs}s" --keep)
((loaded >= ITEMS)) || log "WARNING: the table holds $loaded items, fewer than --items $ITEMS (the load slowed down)"
load_rate=$(python3 -c "print($loaded / $load_s)")
log "loaded $loaded items into $table at $(printf %.0f "$load_rate") items/s (BatchWriteItem, concurrency $CONCURRENCY)"

lrt() { call DescribeContinuousBackups "{\"TableName\":\"$table\"}" | field ContinuousBackupsDescription.PointInTimeRecoveryDescription.LatestRestorableDateTime; }

# 2. Point-in-time recovery and its first base.
call UpdateContinuousBackups "{\"TableName\":\"$table\",\"PointInTimeRecoverySpecification\":{\"PointInTimeRecoveryEnabled\":true}}" >/dev/null
tb0=$(now)
until [[ -n "$(lrt)" ]]; do sleep 0.5; done
log "first base shipped after $(python3 -c "print(round($(now) - $tb0, 1))")s"

# 3. Changes after the base.
tc0=$(now)
python3 - "$EP" "$table" "$CONCURRENCY" >"$WORK/changes.out" <<'PY'
import sys, threading, boto3
from botocore.config import Config
ep, table, segs = sys.argv[1], sys.argv[2], int(sys.argv[3])
totals = [0] * segs

def run(seg):
    c = boto3.client("dynamodb", endpoint_url=ep, region_name="us-east-1",
                     config=Config(retries={"max_attempts": 10, "mode": "standard"}))
    def flush(reqs):
        while reqs:
            out = c.batch_write_item(RequestItems={table: reqs})
            reqs = out.get("UnprocessedItems", {}).get(table, [])
    args = {"TableName": table, "Segment": seg, "TotalSegments": segs, "Limit": 250}
    j, reqs = 0, []
    while True:
        page = c.scan(**args)
        for it in page["Items"]:
            if it["pk"]["S"].startswith("c"):
                continue  # an item this run put
            k = j % 10
            if k < 8:
                p = it["payload"]["S"]
                it["payload"] = {"S": ("x" if p[:1] != "x" else "y") + p[1:]}
                it["ver"] = {"N": str(int(it.get("ver", {"N": "0"})["N"]) + 1)}
                reqs.append({"PutRequest": {"Item": it}})
            elif k == 8:
                reqs.append({"DeleteRequest": {"Key": {"pk": it["pk"], "sk": it["sk"]}}})
            else:
                new = dict(it)
                new["pk"] = {"S": "c%d-%d" % (seg, j)}
                reqs.append({"PutRequest": {"Item": new}})
            j += 1
            if len(reqs) == 25:
                flush(reqs)
                totals[seg] += 25
                reqs = []
        if "LastEvaluatedKey" not in page:
            break
        args["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    flush(reqs)
    totals[seg] += len(reqs)

ts = [threading.Thread(target=run, args=(s,)) for s in range(segs)]
for t in ts: t.start()
for t in ts: t.join()
print(sum(totals))
PY
tc1=$(now)
changes=$(cat "$WORK/changes.out")
log "applied $changes changes in $(python3 -c "print(round($tc1 - $tc0, 1))")s"

# 4. Shipped past the last change.
until python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)" "$(lrt)" "$tc1"; do sleep 0.5; done
log "shipped past the last change $(python3 -c "print(round($(now) - $tc1, 1))")s after it"

# 5. Restore.
sleep 1
echo 5 >"/proc/$PID/clear_refs"
rss0=$(rss) t0=$(now) c0=$(cpu) p0=$(pgcpu)
call RestoreTableToPointInTime "{\"SourceTableName\":\"$table\",\"TargetTableName\":\"$table-restored\",\"UseLatestRestorableTime\":true}" >/dev/null
while :; do
	st=$(call DescribeTable "{\"TableName\":\"$table-restored\"}" | field Table.TableStatus)
	[[ "$st" == ACTIVE ]] && break
	[[ "$st" == CREATING ]] || die "restored table $st"
	sleep 0.2
done
t1=$(now) c1=$(cpu) p1=$(pgcpu) hwm_r=$(hwm)

count() {
	python3 - "$EP" "$1" "$CONCURRENCY" <<'PY'
import sys, threading, boto3
ep, table, segs = sys.argv[1], sys.argv[2], int(sys.argv[3])
n = [0] * segs
def run(seg):
    c = boto3.client("dynamodb", endpoint_url=ep, region_name="us-east-1")
    for page in c.get_paginator("scan").paginate(TableName=table, Select="COUNT", Segment=seg, TotalSegments=segs):
        n[seg] += page["Count"]
ts = [threading.Thread(target=run, args=(s,)) for s in range(segs)]
for t in ts: t.start()
for t in ts: t.join()
print(sum(n))
PY
}
src=$(count "$table") dst=$(count "$table-restored")
[[ "$src" == "$dst" ]] || die "the restored table holds $dst items, the source $src"

python3 - "$BACKEND" "$dst" "$changes" "$load_rate" "$t0" "$t1" "$c0" "$c1" "$p0" "$p1" "$TICK" "$rss0" "$hwm_r" "$CONCURRENCY" "$load_cpu" <<'PY'
import sys
(backend, n, changes, load_rate, t0, t1, c0, c1, p0, p1, tick, rss0, hwm_r, conc, load_cpu) = sys.argv[1:]
n, load_rate = int(n), float(load_rate)
tr = float(t1) - float(t0)
cr = (float(c1) - float(c0)) / float(tick)
mib = lambda kib: int(kib) / 1024
print(f"backend {backend}, {n} items of ~1 KiB restored to {changes} changes after the base")
print(f"  BatchWriteItem load (concurrency {conc}): {load_rate:,.0f} items/s")
print(f"  restore: {tr:6.2f} s  {n / tr:9,.0f} items/s  server CPU {cr:5.2f} s  RSS {mib(rss0):.0f} MiB before, peak {mib(hwm_r):.0f} MiB")
print(f"  restore / BatchWriteItem: {n / tr / load_rate:.2f}x (target >= 2)")
lc, rc = float(load_cpu), cr * 1e6 / n
if lc > 0 and rc > 0:
    print(f"  server CPU per item: BatchWriteItem {lc:.1f} us, restore {rc:.1f} us: {lc / rc:.2f}x")
if backend == "postgres":
    pc = (float(p1) - float(p0)) / float(tick)
    print(f"  PostgreSQL backends' CPU during the restore: {pc:.2f} s, {pc * 1e6 / n:.1f} us per item")
PY
