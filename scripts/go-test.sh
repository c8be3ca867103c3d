#!/usr/bin/env bash
# Runs the Go tests verbosely into a log, then prints a summary: each
# package's result, the backends and stores the suites say they exercised,
# and the test counts. Exits non-zero when any test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp -t extenddb-go-test.XXXXXX)
go test -count=1 -timeout 30m -v "$@" ./... >"$log" 2>&1
rc=$?
echo "== go test packages"
grep -E '^(ok|FAIL|---|panic:|\?)' "$log" | grep -vE '^--- (PASS|SKIP)' | grep -vE '^\?' || true
echo "== exercised (as the suites report)"
grep -iE 'exercised|not exercised|stores:|backends:' "$log" | grep -v '^=== ' | sort -u || true
pass=$(grep -cE '^\s*--- PASS' "$log")
fail=$(grep -cE '^\s*--- FAIL' "$log")
skip=$(grep -cE '^\s*--- SKIP' "$log")
if [ "$rc" -ne 0 ]; then
  echo "== failures (log: $log)"
  grep -E -B2 -A25 '^\s*--- FAIL|^panic:|build failed|\[setup failed\]' "$log" | head -300
fi
echo "go: $pass passed, $fail failed, $skip skipped"
exit $rc
