#!/usr/bin/env bash
# The full test run (make test-all, CI): every layer of `make test`, plus
# the server-backed ones. Each server is installed if missing and started
# privately on 127.0.0.1 by its own script, and stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
export EXTENDDB_CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
mkdir -p "$EXTENDDB_CACHE"

cleanup() {
  scripts/moto.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Second S3 implementation for the store suite.
moto_endpoint=$(scripts/moto.sh start)
export EXTENDDB_TEST_MOTO_ENDPOINT="$moto_endpoint"
export EXTENDDB_TEST_STORES="fs,gofakes3,moto"
export EXTENDDB_TEST_BACKENDS="${EXTENDDB_TEST_BACKENDS:-sqlite}"

echo "== backends: $EXTENDDB_TEST_BACKENDS; stores: $EXTENDDB_TEST_STORES (moto at $moto_endpoint)"
make test
echo "== test-all passed: backends [$EXTENDDB_TEST_BACKENDS], stores [$EXTENDDB_TEST_STORES]"
