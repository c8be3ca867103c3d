#!/usr/bin/env bash
# scripts/test-cassandra.sh — every test layer on Apache Cassandra (make
# test-cassandra; make test-all with EXTENDDB_TEST_ALL_CASSANDRA=1):
#   1. the Go tests that run on Cassandra when EXTENDDB_TEST_BACKENDS names
#      it: storagetest and the backend's own tests (internal/storage/
#      cassandra), the served backend (internal/server TestServeCassandra),
#   2. the wire suite against `extenddb serve --backend cassandra`, two
#      servers on one keyspace (scripts/wire-cassandra.sh).
# Uses EXTENDDB_TEST_CASSANDRA_HOSTS, or starts a fresh node with
# scripts/cassandra.sh (jars cached in $EXTENDDB_CACHE) and stops it at the
# end. Every layer runs even when an earlier one failed; the last lines are
# one line per layer with its counts and duration, then OK or FAILED.
set -uo pipefail
cd "$(dirname "$0")/.."
export EXTENDDB_CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"

if [[ -z "${EXTENDDB_TEST_CASSANDRA_HOSTS:-}" ]]; then
	t0=$SECONDS
	EXTENDDB_TEST_CASSANDRA_HOSTS=$(EXTENDDB_CASSANDRA_FRESH=1 scripts/cassandra.sh start) || exit 1
	trap 'scripts/cassandra.sh stop >/dev/null 2>&1 || true' EXIT
	echo "== cassandra started in $((SECONDS - t0))s at $EXTENDDB_TEST_CASSANDRA_HOSTS"
fi
export EXTENDDB_TEST_CASSANDRA_HOSTS
rc=0

echo "== go tests on cassandra"
log=$(mktemp -t extenddb-cassandra-go.XXXXXX)
t0=$SECONDS
{
	EXTENDDB_TEST_BACKENDS=cassandra go test -count=1 -v -timeout 20m ./internal/storage/cassandra/
	a=$?
	EXTENDDB_TEST_BACKENDS=cassandra go test -count=1 -v -timeout 10m -run Cassandra ./internal/server/
	b=$?
	exit $((a | b))
} >"$log" 2>&1
grc=$?
godur=$((SECONDS - t0))
grep -E '^(ok|FAIL|panic:)|^\s*--- FAIL|exercised' "$log" | sort -u
[[ $grc -eq 0 ]] || { rc=1; grep -E -A12 '^\s*--- FAIL' "$log" | head -120; echo "(log: $log)"; }
gosum="go on cassandra: $(grep -cE '^\s*--- PASS' "$log") passed, $(grep -cE '^\s*--- FAIL' "$log") failed, $(grep -cE '^\s*--- SKIP' "$log") skipped in ${godur}s"

wlog=$(mktemp -t extenddb-cassandra-wire.XXXXXX)
t0=$SECONDS
scripts/wire-cassandra.sh "$@" 2>&1 | tee "$wlog"
wrc=${PIPESTATUS[0]}
[[ $wrc -eq 0 ]] || rc=1
wsum="wire on cassandra: $(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$wlog" | tail -1 | tr -d '=' | xargs) in $((SECONDS - t0))s"

echo "$gosum"
echo "$wsum"
if [[ $rc -eq 0 ]]; then echo "test-cassandra: OK"; else echo "test-cassandra: FAILED"; fi
exit $rc
