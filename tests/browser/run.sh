#!/usr/bin/env bash
# The browser test (make test-all, CI): headless Chromium (Debian's
# package, installed by scripts/chromium.sh when missing) loads a page
# from another origin that uses the AWS SDK for JavaScript v3 against
# extenddb. Needs node/npm (the SDK and esbuild come from the npm
# registry, pinned in package-lock.json).
#   EXTENDDB_BIN   the server binary (default: bin/extenddb, built if missing)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
bin="${EXTENDDB_BIN:-$REPO/bin/extenddb}"
if [ ! -x "$bin" ]; then (cd "$REPO" && make -s build); fi
chromium=$("$REPO/scripts/chromium.sh")
cd "$HERE"
if [ ! -d node_modules/@aws-sdk/lib-dynamodb ] || [ package-lock.json -nt node_modules ]; then
  npm ci --no-audit --no-fund --loglevel=error >&2
fi
out=$(mktemp -d -t extenddb-browser-bundle.XXXXXX)
trap 'rm -rf "$out"' EXIT
npx --no-install esbuild entry.js --bundle --format=iife --global-name=ExtenddbSDK \
  --platform=browser --minify --log-level=warning --outfile="$out/sdk.bundle.js"
python3 "$HERE/browser_test.py" "$bin" "$chromium" "$out/sdk.bundle.js"
