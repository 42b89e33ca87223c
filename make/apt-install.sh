#!/usr/bin/env bash
# Install Debian packages for the set-up scripts, one apt-get at a time: `make test` runs the
# Horovod build, the container image build and the test tools' install at once, and two
# apt-gets at once fail on dpkg's lock instead of waiting for it.
#
#   make/apt-install.sh PACKAGE...      # exit 0 when installed; apt-get's status otherwise
set -euo pipefail
exec 8>"${TMPDIR:-/tmp}/accelml-apt.lock"
flock 8
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q "$@" >/dev/null 2>&1 \
  || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$@" >/dev/null; }
