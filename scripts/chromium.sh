#!/usr/bin/env bash
# Prints the path of a Chromium for the headless browser test, installing
# Debian's package when none is there (make test-all / CI run as root).
set -euo pipefail
for c in chromium chromium-browser; do
  if p=$(command -v "$c"); then echo "$p"; exit 0; fi
done
if [ "$(id -u)" -ne 0 ]; then
  echo "chromium.sh: chromium is not installed and this is not root; install Debian's chromium package" >&2
  exit 1
fi
echo "chromium.sh: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq chromium >&2
command -v chromium
