#!/usr/bin/env bash
# Git commit-msg hook (make hooks installs it): the subject is at most 72
# characters and, when there is a body, a blank line separates it from the
# subject. Git's own comment lines (#) are ignored; merge commits pass.
#   scripts/commit-msg.sh FILE
set -euo pipefail
# What git keeps: the text above `git commit -v`'s scissors line, without
# comment lines and leading blank lines.
msg=$(sed '/^# -\{8,\} >8 -\{8,\}$/,$d' "$1" | grep -v '^#' | sed '/./,$!d' || true)
subject=$(head -n 1 <<<"$msg")
second=$(sed -n 2p <<<"$msg")
if [[ -z "${subject// /}" ]]; then
	echo "commit-msg: the subject is empty" >&2
	exit 1
fi
if [[ ${#subject} -gt 72 ]]; then
	echo "commit-msg: the subject has ${#subject} characters (at most 72): $subject" >&2
	echo "commit-msg: keep the subject to one short line; the reason and figures go in the body" >&2
	exit 1
fi
if [[ -n "$second" ]]; then
	echo "commit-msg: leave a blank line between the subject and the body" >&2
	exit 1
fi
