#!/usr/bin/env bash
# The full test run (make test-all, CI): every layer of `make test`, plus
# the server-backed ones. Each server is installed if missing and started
# privately on 127.0.0.1 by its own script, and stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export EXTENDDB_CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
mkdir -p "$EXTENDDB_CACHE"

pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  scripts/moto.sh stop >/dev/null 2>&1 || true
  scripts/postgres.sh stop >/dev/null 2>&1 || true
  scripts/mongodb.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Second S3 implementation for the store suite; PostgreSQL and a
# MongoDB-wire server (FerretDB, built once into $EXTENDDB_CACHE/ferretdb)
# for the backends. EXTENDDB_TEST_MONGODB_URI set by the caller (e.g. a real
# replica set) is used instead of FerretDB; the suites print which server
# kind they ran on.
moto_endpoint=$(scripts/moto.sh start)
pg_dsn=$(scripts/postgres.sh start)
if [ -z "${EXTENDDB_TEST_MONGODB_URI:-}" ]; then
  EXTENDDB_TEST_MONGODB_URI=$(scripts/mongodb.sh start)
fi
mongo_uri="$EXTENDDB_TEST_MONGODB_URI"
export EXTENDDB_TEST_MOTO_ENDPOINT="$moto_endpoint"
export EXTENDDB_TEST_POSTGRES_DSN="$pg_dsn"
export EXTENDDB_TEST_MONGODB_URI="$mongo_uri"
export EXTENDDB_TEST_STORES="fs,gofakes3,moto"
export EXTENDDB_TEST_BACKENDS="sqlite,postgres,mongodb"
echo "== backends: $EXTENDDB_TEST_BACKENDS; stores: $EXTENDDB_TEST_STORES (moto at $moto_endpoint; postgres at $pg_dsn; mongodb at $mongo_uri)"

# Unit, conformance (memory + sqlite + postgres, all stores), a short fuzz
# and the wire suite on the memory backend; then the fuzz targets for longer.
make test
scripts/fuzz.sh 60s

# The wire suite on SQLite (make test ran it on the native memory backend
# that --memory opens): --memory on the SQLite engine, a temporary database
# file per server.
echo "== wire suite on sqlite"
EXTENDDB_BIN="$PWD/bin/extenddb" EXTENDDB_TEST_BACKEND=sqlite EXTENDDB__STORAGE__MEMORY_ENGINE=sqlite \
  EXTENDDB_SERVE_ARGS="--memory" tests/wire/run.sh -q -n 2

# The browser test: headless Chromium (installed by scripts/chromium.sh
# when missing) runs the JavaScript SDK v3 from another origin.
echo "== browser test (headless Chromium, JavaScript SDK v3)"
EXTENDDB_BIN="$PWD/bin/extenddb" tests/browser/run.sh

# The console's browser test: headless Chromium drives the web console
# (tables, items, queries, backups, hostile names, signing in with keys).
echo "== console test (headless Chromium, the web console)"
EXTENDDB_BIN="$PWD/bin/extenddb" tests/console/run.sh

# The wire suite on PostgreSQL: migrate a fresh database, then the harness
# starts one server per worker on it (so two servers share the database).
db="extenddb_wire_$$"
psql "$pg_dsn" -qc "CREATE DATABASE $db" >/dev/null
wire_dsn="${pg_dsn%/*}/$db?sslmode=disable"
bin/extenddb migrate --backend postgres --dsn "$wire_dsn"
echo "== wire suite on postgres"
EXTENDDB_BIN="$PWD/bin/extenddb" EXTENDDB_TEST_BACKEND=postgres \
  EXTENDDB_SERVE_ARGS="--backend postgres --dsn $wire_dsn" tests/wire/run.sh -q -n 2

# The conditional race with the clients split across two server processes
# on one PostgreSQL database.
echo "== aws-sdk-go-v2 tests against two servers on one postgres database"
for port in 18101 18102; do
  bin/extenddb serve --backend postgres --dsn "$wire_dsn" --listen 127.0.0.1:$port >"$EXTENDDB_CACHE/serve-$port.log" 2>&1 &
  pids+=($!)
done
for port in 18101 18102; do
  for i in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
done
EXTENDDB_ENDPOINTS="http://127.0.0.1:18101,http://127.0.0.1:18102" go test -count=1 -v ./tests/sdk/ 2>&1 | grep -E "^(=== RUN|--- |ok|FAIL|PASS|sdk tests)" 
# DynamoDB Streams, the long form: 8 writers for 20 s while a consumer
# follows every shard through rollovers (replay equals the table), and the
# same load with the server SIGKILLed and restarted (make test runs 3 s).
echo "== streams consumer and crash tests (20 s of load each)"
EXTENDDB_STREAM_CONSUMER_SECONDS=20 go test -count=1 -v -run 'TestStreamConsumer$|TestStreamCrash$' ./tests/sdk/ 2>&1 \
  | grep -E "^(=== RUN|--- |ok|FAIL|PASS)|streams_test.go"
echo "== streams crash test on postgres"
EXTENDDB_STREAM_CRASH_POSTGRES_DSN="$wire_dsn" EXTENDDB_STREAM_CONSUMER_SECONDS=20 go test -count=1 -v -run 'TestStreamCrash$' ./tests/sdk/ 2>&1 \
  | grep -E "^(=== RUN|--- |ok|FAIL|PASS)|streams_test.go"
# MongoDB: the wire suite against `extenddb serve --backend mongodb` (one
# server per worker on one fresh database), then the conditional race with
# the clients split across two servers on that database. The wire run
# decides the result unless EXTENDDB_TEST_MONGODB_WIRE=0 (then it is only
# reported: FerretDB/SQLite is slow, and a heavily loaded machine can push
# the restore test past its 30 s wait); the race always decides.
mongo_db="extenddb_wire_$$"
bin/extenddb migrate --backend mongodb --mongodb-uri "$mongo_uri" --mongodb-database "$mongo_db"
mongo_args="--backend mongodb --mongodb-uri $mongo_uri --mongodb-database $mongo_db"
echo "== wire suite on mongodb ($mongo_uri, database $mongo_db)"
set +e
EXTENDDB_BIN="$PWD/bin/extenddb" EXTENDDB_TEST_BACKEND=mongodb EXTENDDB_SERVE_ARGS="$mongo_args" tests/wire/run.sh -q -n 2
mongo_wire_rc=$?
set -e
if [ "$mongo_wire_rc" -ne 0 ]; then
  if [ "${EXTENDDB_TEST_MONGODB_WIRE:-1}" != 0 ]; then
    echo "== wire suite on mongodb FAILED (rc $mongo_wire_rc)"; exit 1
  fi
  echo "== wire suite on mongodb: FAILURES above (rc $mongo_wire_rc); reported only (EXTENDDB_TEST_MONGODB_WIRE=0)"
fi
echo "== aws-sdk-go-v2 tests against two servers on one mongodb database"
for port in 18103 18104; do
  bin/extenddb serve $mongo_args --listen 127.0.0.1:$port >"$EXTENDDB_CACHE/serve-$port.log" 2>&1 &
  pids+=($!)
done
for port in 18103 18104; do
  for i in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
done
# Every sdk test, the streams consumer included (8 writers spread over
# both servers, the consumer on the first; ADR 0017 "Change log" for why
# the publisher keeps up on FerretDB).
EXTENDDB_ENDPOINTS="http://127.0.0.1:18103,http://127.0.0.1:18104" go test -count=1 -v \
  ./tests/sdk/ 2>&1 | grep -E "^(=== RUN|--- |ok|FAIL|PASS|sdk tests)|streams_test.go"
# Apache Cassandra (scripts/test-cassandra.sh: a fresh private node,
# storagetest, the served backend, the wire suite on two servers sharing
# one keyspace; about 800 MB and 9 minutes while it runs).
# EXTENDDB_TEST_ALL_CASSANDRA=0 leaves it out (a local run without Java).
if [[ "${EXTENDDB_TEST_ALL_CASSANDRA:-1}" == 1 ]]; then
  echo "== cassandra"
  env -u EXTENDDB_TEST_BACKENDS scripts/test-cassandra.sh
  cass=", cassandra"
else
  echo "== cassandra: NOT run (EXTENDDB_TEST_ALL_CASSANDRA=0)"
  cass=""
fi
# The abuse test last, on a quiet machine: a real server with keys, 200
# connections that send 15 MB and stall plus 50 that never read a 16 MB
# reply; RSS, p99 and memory after the attack are checked (about a
# minute). Its p99 is compared with the idle p99, so nothing else may load
# the two cores meanwhile: every server above is stopped first. (Run with
# PostgreSQL, FerretDB and moto still up, the idle p99 itself swung
# 1.46 -> 0.78 ms within a minute, 2026-12-01. The MongoDB ledger failures
# seen in the same runs were the ledger's own: TransactGet readers starved
# on a loaded FerretDB, ADR 0041.)
cleanup
echo "== abuse test"
EXTENDDB_TEST_ABUSE=1 EXTENDDB_BIN="$PWD/bin/extenddb" go test -count=1 -v -run 'TestAbuse$' ./tests/abuse/ 2>&1 \
  | grep -E "^(=== RUN|--- |ok|FAIL|PASS)|abuse_test.go"
echo "== test-all passed: backends [$EXTENDDB_TEST_BACKENDS$cass], stores [$EXTENDDB_TEST_STORES]"
