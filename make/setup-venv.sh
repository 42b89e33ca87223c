#!/usr/bin/env bash
# Create the venv and install accelml with the whole pinned stack into it.
#   make/setup-venv.sh PYTHON VENV
set -euo pipefail
python=${1:?usage: setup-venv.sh PYTHON VENV}
venv=${2:?usage: setup-venv.sh PYTHON VENV}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

fail() { echo "setup: step '$1' failed: $2" >&2; exit 1; }

"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || fail "check Python" "$python is $("$python" --version 2>&1); accelml needs Python >= 3.11 (make PYTHON=python3.11)"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv" || fail "create venv" "'$python -m venv $venv' failed (Debian: apt-get install python3-venv)"
fi
"$venv/bin/python" -m pip install --quiet --upgrade "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0" \
  || fail "upgrade pip" "could not install pip/setuptools/wheel from PyPI"
# PyTorch is pinned to its CPU build (torch==X+cpu, a local version PyPI does not serve, and
# without the gigabytes of CUDA wheels PyPI's plain torch pulls): pip finds it through its
# find-links (this image's pip.conf has /opt/wheels) or PyTorch's CPU wheel index.
torch_pin=$(grep -E '^torch==' "$here/constraints.txt")
"$venv/bin/python" -m pip install --quiet --no-compile -c "$here/constraints.txt" -e "$(dirname "$here")[all]" \
  || fail "install the stack" "pip could not install accelml[all] with make/constraints.txt (see above);
  if it is $torch_pin that cannot be found: pip finds the CPU wheel through a find-links folder
  holding it (pip config set global.find-links DIR) or PyTorch's CPU index (PIP_EXTRA_INDEX_URL)"
# pip compiles the files it installs to bytecode on one core, half of its time here; compileall
# does the same on every core. It exits 1 where a file does not compile (torch ships one for
# Python 3.12 only), which pip ignores too: that file is compiled, or fails, when imported.
# The libraries' own test suites (folders named tests/, a fifth of the files: pandas', SciPy's,
# SymPy's, ...) are left out: nothing imports them.
"$venv/bin/python" -m compileall -q -j 0 -x '/tests/' \
  "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
echo "installed accelml and its pinned stack into $venv"
