#!/usr/bin/env bash
# System tools the test suite drives for real: Debian's Chromium (the HTML report is opened
# in it headless). Installed once, as root on Debian; elsewhere the report's browser tests
# fail with a message that says what to install.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
  echo "setup: Chromium is missing and cannot be installed here (needs root on Debian): apt-get install chromium" >&2
  exit 0
fi
echo "installing Debian's chromium for the HTML report tests"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q chromium >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } \
  || { echo "setup: step 'install chromium' failed: apt-get install chromium" >&2; exit 1; }
