#!/usr/bin/env bash
# Runs the black-box wire suite (pytest + boto3) against extenddb.
#
#   tests/wire/run.sh [pytest args...]
#   tests/wire/run.sh -n 2                       # parallel (pytest-xdist)
#   tests/wire/run.sh tests/wire/test_items.py -k number
#   tests/wire/run.sh --setup-only               # only create the virtualenv
#
# Creates (or refreshes) a virtualenv at $REPO/.venv from the pinned
# tests/wire/requirements.txt, then runs pytest on tests/wire. With no
# EXTENDDB_ENDPOINT the suite builds bin/extenddb and starts its own server.
# Environment:
#   EXTENDDB_ENDPOINT      test an already running server instead
#   EXTENDDB_BIN           use this binary instead of building one
#   EXTENDDB_TEST_BACKEND  backend name to report (default sqlite)
#   EXTENDDB_SERVE_ARGS    extra arguments for `extenddb serve`
#   PYTHON                 interpreter used to create the venv (default python3)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VENV="$REPO/.venv"
REQ="$HERE/requirements.txt"
STAMP="$VENV/.wire-requirements.sha256"
PY="${PYTHON:-python3}"

want="$( (cat "$REQ"; "$PY" -c 'import sys; print(sys.version)') | sha256sum | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"

if [[ ! -x "$VENV/bin/python" || "$want" != "$have" ]]; then
  echo "run.sh: (re)creating virtualenv $VENV" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ"
  echo "$want" > "$STAMP"
fi

if [[ "${1:-}" == --setup-only ]]; then
  exit 0
fi

cd "$REPO"
# Run the whole suite unless the arguments name test files/dirs/node ids.
targets=("$HERE")
for a in "$@"; do
  if [[ "$a" != -* && ( -e "$a" || "$a" == *::* ) ]]; then targets=(); break; fi
done
set +e
"$VENV/bin/python" -m pytest "${targets[@]}" "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
  echo "run.sh: pytest collected no tests; treating as failure" >&2
  exit 5
fi
exit $rc
