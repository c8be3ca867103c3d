#!/usr/bin/env bash
# Runs the project's fuzz targets that guard against denial of service for
# a bounded time each: scripts/fuzz.sh [DURATION] (default 5s; test-all
# uses longer). EXTENDDB_FUZZ_WORKERS sets the fuzzing processes per
# target (default 2); test-all runs one, beside three other lanes on two
# cores. A failing input is saved under the package's testdata/fuzz and
# fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${1:-5s}"
targets=(
  "./internal/expr FuzzParseLinear"
  "./internal/partiql FuzzParseLinear"
)
for entry in "${targets[@]}"; do
  read -r pkg name <<<"$entry"
  echo "== fuzz $name ($pkg) for $t"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$t" -parallel "${EXTENDDB_FUZZ_WORKERS:-2}" "$pkg" 2>&1 | tail -n 3
done
