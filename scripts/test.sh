#!/usr/bin/env bash
# make test: every layer that needs only this repository, each ending with
# its own summary line, then one line per layer (with its wall time) and a
# total:
#   lint (gofmt, go vet, staticcheck; run beside the Go tests, its output
#   printed after theirs), go (unit + conformance, -short: the crash and
#   extra-configuration tests run in make test-all), fuzz
#   (scripts/fuzz.sh, FUZZTIME each), scripts (tests/scripts/*.sh), wire
#   (two pytest workers, each with a server of its own; WIRE_ARGS
#   replaces "-n 2"; it runs beside the Go tests, its output printed
#   after theirs).
# Exits non-zero when any layer failed (every layer still runs).
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
declare -a summary=()
tp=0 tf=0 ts=0
started=$SECONDS
add() { # layer passed failed skipped note seconds
  summary+=("$(printf '%-8s %4ss  %s passed, %s failed, %s skipped%s' "$1:" "$6" "$2" "$3" "$4" "$5")")
  tp=$((tp + $2)); tf=$((tf + $3)); ts=$((ts + $4))
}
log=$(mktemp -t extenddb-test.XXXXXX)
lintlog=$(mktemp -t extenddb-lint.XXXXXX)

lint() {
  local fail=0 out
  out=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.venv/*'))
  if [ -n "$out" ]; then echo "gofmt needed:"; echo "$out"; fail=1; fi
  $GO vet ./... || fail=1
  "$(scripts/staticcheck.sh)" ./... || fail=1
  echo "$fail $((SECONDS - started))" >"$lintlog.rc"
}
# The linters are CPU work, the Go tests wait on timers and I/O as much
# as they compute: side by side they finish sooner than one after the
# other.
lint >"$lintlog" 2>&1 &
lintpid=$!

# The wire suite runs beside the Go tests: each alone leaves a core idle
# much of the time (waits on servers, sleeps), so together they end
# sooner than one after the other.
wirelog=$(mktemp -t extenddb-wire.XXXXXX)
trap 'rm -f "$log" "$lintlog" "$lintlog.rc" "$wirelog" "$wirelog.rc"' EXIT
${MAKE:-make} -s build || exit 1
wire() {
  local t0=$SECONDS rc
  # shellcheck disable=SC2086 # WIRE_ARGS is a list of pytest arguments
  EXTENDDB_BIN="$PWD/bin/extenddb" tests/wire/run.sh -q ${WIRE_ARGS--n 2} "$@" >"$wirelog" 2>&1
  rc=$?
  echo "$rc $((SECONDS - t0))" >"$wirelog.rc"
}
wire "$@" &
wirepid=$!

echo "== go test (-short)"
t0=$SECONDS
scripts/go-test.sh -short | tee "$log"
grc=${PIPESTATUS[0]}
gsecs=$((SECONDS - t0))
line=$(grep -E '^go: [0-9]+ passed' "$log" | tail -1)
read -r gp gf gs < <(sed -E 's/^go: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/' <<<"${line:-go: 0 passed, 1 failed, 0 skipped}")
backends=$(grep -hoE '^storage backends exercised: [a-z]+' "$log" | sed 's/.*: //' | sort -u | paste -sd, -)
stores=$(grep -hoE '^store conformance: asked for [^;]+' "$log" | sed 's/.*asked for //' | head -1)
if [ "$grc" -ne 0 ] && [ "$gf" -eq 0 ]; then gf=1; fi

echo "== lint (gofmt, go vet, staticcheck)"
wait "$lintpid"
cat "$lintlog"
read -r lint_fail lsecs <"$lintlog.rc" 2>/dev/null || { lint_fail=1; lsecs=0; }
if [ "$lint_fail" -eq 0 ]; then add lint 1 0 0 " (gofmt, go vet, staticcheck)" "$lsecs"; else add lint 0 1 0 " (gofmt, go vet, staticcheck)" "$lsecs"; fi
add go "$gp" "$gf" "$gs" " (backends: ${backends:-none}; stores: ${stores:-none})" "$gsecs"

echo "== fuzz (denial-of-service targets, ${FUZZTIME:-5s} each)"
t0=$SECONDS
scripts/fuzz.sh "${FUZZTIME:-5s}" | tee "$log"
frc=${PIPESTATUS[0]}
fn=$(grep -c '^== fuzz ' "$log" || true)
if [ "$frc" -eq 0 ]; then add fuzz "$fn" 0 0 " (targets)" $((SECONDS - t0)); else add fuzz 0 "${fn:-1}" 0 " (targets)" $((SECONDS - t0)); fi

echo "== script tests (tests/scripts)"
t0=$SECONDS
sp=0 sf=0
for t in tests/scripts/*.sh; do
  if "$t"; then sp=$((sp + 1)); else sf=$((sf + 1)); echo "FAILED: $t"; fi
done
add scripts "$sp" "$sf" 0 "" $((SECONDS - t0))

echo "== wire suite (pytest + boto3, ${EXTENDDB_TEST_BACKEND:-memory}; ran beside the Go tests)"
wait "$wirepid"
cat "$wirelog"
read -r wrc wsecs <"$wirelog.rc" 2>/dev/null || { wrc=1; wsecs=0; }
last=$(grep -E '[0-9]+ (passed|failed|error)' "$wirelog" | tail -1)
num() { grep -oE "[0-9]+ $1" <<<"$last" | grep -oE '^[0-9]+' || echo 0; }
wp=$(num passed) wf=$(( $(num failed) + $(num error) + $(num errors) )) ws=$(num skipped)
if [ "$wrc" -ne 0 ] && [ "$wf" -eq 0 ]; then wf=1; fi
add wire "$wp" "$wf" "$ws" " (backend: ${EXTENDDB_TEST_BACKEND:-memory})" "$wsecs"

echo "== summary"
printf '%s\n' "${summary[@]}"
if [ "$tf" -eq 0 ]; then echo "make test: OK"; else echo "make test: FAILED"; fi
echo "total: $tp passed, $tf failed, $ts skipped in $((SECONDS - started))s"
[ "$tf" -eq 0 ]
