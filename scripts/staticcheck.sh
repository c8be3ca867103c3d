#!/usr/bin/env bash
# Prints the path of staticcheck, installing the pinned version from the Go
# module proxy into $EXTENDDB_CACHE/bin the first time (the lint layer of
# make test-all runs it with its default checks; staticcheck.conf, if any,
# narrows them).
#   "$(scripts/staticcheck.sh)" ./...
set -euo pipefail
VERSION=2026.2.2 # honnef.co/go/tools v0.8.2
MODVER=v0.8.2
CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
BIN="$CACHE/bin/staticcheck-$MODVER"
if [[ ! -x "$BIN" ]]; then
	mkdir -p "$CACHE/bin/tmp-$$"
	echo "staticcheck.sh: installing staticcheck $VERSION into $CACHE/bin" >&2
	GOBIN="$CACHE/bin/tmp-$$" go install "honnef.co/go/tools/cmd/staticcheck@$MODVER" >&2
	mv "$CACHE/bin/tmp-$$/staticcheck" "$BIN"
	rmdir "$CACHE/bin/tmp-$$"
fi
echo "$BIN"
