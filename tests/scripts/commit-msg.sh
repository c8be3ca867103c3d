#!/usr/bin/env bash
# Script test: scripts/commit-msg.sh accepts a short subject (with or
# without a body after a blank line) and refuses a subject over 72
# characters, an empty one, and a body glued to the subject.
set -euo pipefail
cd "$(dirname "$0")/../.."
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
check() { # want(0|1) message
	printf '%b' "$2" >"$d/msg"
	if scripts/commit-msg.sh "$d/msg" 2>/dev/null; then got=0; else got=1; fi
	if [[ $got != "$1" ]]; then echo "commit-msg: FAIL: exit $got, want $1, for: $2" >&2; exit 1; fi
}
long=$(printf 'x%.0s' $(seq 1 73))
check 0 'engine: a short subject\n'
check 0 'engine: a short subject\n\nThe reason, and figures.\n# a git comment line\n'
check 0 "$(printf 'y%.0s' $(seq 1 72))\n"
check 1 "$long\n"
check 0 '\n\nsubject after blank lines\n'
check 0 'subject\n# ------------------------ >8 ------------------------\ndiff --git a/x b/x\n'
check 1 '\n\n# only comments\n'
check 1 'subject\nbody glued to it\n'
echo "commit-msg: ok"
