#!/usr/bin/env bash
# scripts/test-cassandra.sh — every test layer on Apache Cassandra (make
# test-cassandra; make test-all and CI, unless EXTENDDB_TEST_ALL_CASSANDRA=0):
#   1. the Go tests that run on Cassandra when EXTENDDB_TEST_BACKENDS names
#      it: backendtest and the backend's own tests (internal/backend/
#      cassandra), the served backend (internal/server TestServeCassandra),
#   2. the wire suite against `extenddb serve --backend cassandra`, two
#      servers on one keyspace (scripts/wire-cassandra.sh),
#   3. the aws-sdk-go-v2 tests against two servers on one keyspace (the
#      32-client conditional race, 20 rounds, clients on both).
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
(
	EXTENDDB_TEST_BACKENDS=cassandra go test -count=1 -v -timeout 20m ./internal/backend/cassandra/
	a=$?
	EXTENDDB_TEST_BACKENDS=cassandra go test -count=1 -v -timeout 10m -run Cassandra ./internal/server/
	b=$?
	exit $((a | b))
) >"$log" 2>&1
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

# Two servers on one keyspace: the sdk tests (aws-sdk-go-v2), the
# conditional race's 32 clients spread over both, 20 rounds.
echo "== aws-sdk-go-v2 tests against two servers on one cassandra keyspace"
t0=$SECONDS
ks="extenddb_sdk_$$_$(date +%s)"
slog=$(mktemp -t extenddb-cassandra-sdk.XXXXXX)
spids=()
bin/extenddb migrate --backend cassandra --cassandra-hosts "$EXTENDDB_TEST_CASSANDRA_HOSTS" --cassandra-keyspace "$ks" >/dev/null
for port in 18111 18112; do
	bin/extenddb serve --backend cassandra --cassandra-hosts "$EXTENDDB_TEST_CASSANDRA_HOSTS" --cassandra-keyspace "$ks" \
		--listen 127.0.0.1:$port >"$EXTENDDB_CACHE/serve-cassandra-$port.log" 2>&1 &
	spids+=($!)
done
for port in 18111 18112; do
	for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
done
# Every sdk test runs, the streams consumer (writers on both servers) and
# the crash tests included.
# The crash tests (TestGSICrash; TestStreamCrash) start their own server
# on the same keyspace (EXTENDDB_CRASH_SERVE_ARGS) and SIGKILL it.
EXTENDDB_SDK_RACE_ROUNDS=20 EXTENDDB_ENDPOINTS="http://127.0.0.1:18111,http://127.0.0.1:18112" \
	EXTENDDB_CRASH_SERVE_ARGS="--backend cassandra --cassandra-hosts $EXTENDDB_TEST_CASSANDRA_HOSTS --cassandra-keyspace $ks" \
	go test -count=1 -v ./tests/sdk/ >"$slog" 2>&1
src=$?
kill "${spids[@]}" 2>/dev/null; wait "${spids[@]}" 2>/dev/null
grep -E "^(--- |ok|FAIL|sdk tests)|rounds|sdk_test" "$slog"
[[ $src -eq 0 ]] || rc=1
ssum="sdk on two cassandra servers: $(grep -cE '^\s*--- PASS' "$slog") passed, $(grep -cE '^\s*--- FAIL' "$slog") failed in $((SECONDS - t0))s"

echo "$gosum"
echo "$wsum"
echo "$ssum"
if [[ $rc -eq 0 ]]; then echo "test-cassandra: OK"; else echo "test-cassandra: FAILED"; fi
exit $rc
