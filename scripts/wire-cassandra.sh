#!/usr/bin/env bash
# scripts/wire-cassandra.sh — the wire suite against `extenddb serve
# --backend cassandra` (make test-wire-cassandra; make test-all).
#
# Uses the node named by EXTENDDB_TEST_CASSANDRA_HOSTS, or starts one with
# scripts/cassandra.sh (and stops it at the end). Migrates a fresh keyspace
# (extenddb_wire_<pid>_<time>) with `extenddb migrate`, then runs
# tests/wire/run.sh with two xdist workers whose servers share that
# keyspace (two servers on one Cassandra). Extra arguments go to pytest.
# Exit status: pytest's (non-zero when any test failed); the last lines
# are pytest's summary and "wire on cassandra: ..." with the duration.
set -euo pipefail
cd "$(dirname "$0")/.."
export EXTENDDB_CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"

hosts="${EXTENDDB_TEST_CASSANDRA_HOSTS:-}"
if [[ -z "$hosts" ]]; then
	hosts=$(scripts/cassandra.sh start)
	trap 'scripts/cassandra.sh stop >/dev/null 2>&1 || true' EXIT
fi
bin="${EXTENDDB_BIN:-$PWD/bin/extenddb}"
[[ -n "${EXTENDDB_BIN:-}" ]] || make -s build
ks="extenddb_wire_$$_$(date +%s)"
t0=$SECONDS
"$bin" migrate --backend cassandra --cassandra-hosts "$hosts" --cassandra-keyspace "$ks" >/dev/null
echo "== wire suite on cassandra ($hosts, keyspace $ks)"
set +e
EXTENDDB_BIN="$bin" EXTENDDB_TEST_BACKEND=cassandra \
	EXTENDDB_SERVE_ARGS="--backend cassandra --cassandra-hosts $hosts --cassandra-keyspace $ks" \
	tests/wire/run.sh -q -n "${EXTENDDB_WIRE_WORKERS:-2}" "$@"
rc=$?
set -e
echo "wire on cassandra: exit $rc after $((SECONDS - t0))s (keyspace $ks)"
exit $rc
