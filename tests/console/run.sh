#!/usr/bin/env bash
# The console's browser test (make test-all, CI): headless Chromium
# (Debian's package, installed by scripts/chromium.sh when missing) drives
# the web console served by extenddb through the DevTools protocol: tables,
# items and the query builder, hostile attribute names and values, and the
# signed-in flow against a server with access keys; unit_test.mjs first
# checks the modules that need no browser. Needs only node (20+:
# its WebSocket drives the DevTools protocol; no npm packages).
# Screenshots of each page are written to tests/console/screenshots/.
#   EXTENDDB_BIN   the server binary (default: bin/extenddb, built first so
#                  that it embeds the console's current files)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
bin="${EXTENDDB_BIN:-$REPO/bin/extenddb}"
if [ -z "${EXTENDDB_BIN:-}" ]; then (cd "$REPO" && make -s build); fi
chromium=$("$REPO/scripts/chromium.sh")
node "$HERE/unit_test.mjs"
exec node --experimental-websocket --no-warnings "$HERE/console_test.mjs" "$bin" "$chromium" "$HERE/screenshots"
