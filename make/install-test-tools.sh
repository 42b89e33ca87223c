#!/usr/bin/env bash
# System tools the test suite drives for real: Debian's Chromium (the HTML report is opened
# in it headless) and iproute2's `ss` (the listener tests list the sockets a case's ranks
# listen on). Installed once, as root on Debian; elsewhere the tests that need them fail
# with a message that says what to install.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v ss >/dev/null 2>&1 || [ -x /usr/sbin/ss ] || [ -x /usr/bin/ss ] || missing+=(iproute2)
if [ "${#missing[@]}" = 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
  echo "setup: ${missing[*]} missing and cannot be installed here (needs root on Debian): apt-get install ${missing[*]}" >&2
  exit 0
fi
echo "installing Debian's ${missing[*]} for the tests"
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" "${missing[@]}" \
  || { echo "setup: step 'install ${missing[*]}' failed: apt-get install ${missing[*]}" >&2; exit 1; }
