#!/usr/bin/env bash
# Script test: point-in-time recovery keeps what it acknowledged when the
# server and its database are lost. Two runs of scripts/bench-rpo.sh --ci
# (ship interval 1 s, SIGKILL after 3-4 s of PutItem load, the data
# directory deleted, the table restored from the store on a fresh
# catalog): every write acknowledged more than ship interval + 2 s before
# the kill, and every write acknowledged before the restored instant, is
# in the restored table, no restored item was never written, and both
# restores succeed. A durability check, not a speed test (about 20 s).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(scripts/bench-rpo.sh --ci 2>&1) || {
	echo "bench-rpo: FAIL" >&2
	sed 's/^/  | /' <<<"$out" >&2
	exit 1
}
grep -q "missing acknowledged writes" <<<"$out" || { echo "bench-rpo: FAIL: no summary" >&2; sed 's/^/  | /' <<<"$out" >&2; exit 1; }
echo "bench-rpo: ok"
