#!/usr/bin/env bash
# Build Horovod 0.28.1 for the TensorFlow in the given venv, once, and cache the wheel
# outside the venv so that a rebuilt venv reuses it. Then install it into the venv.
#
#   make/build-horovod.sh .venv
#
# Horovod 0.28.1 (its last release) does not compile against TF >= 2.19 as released:
# horovod/tensorflow/xla_mpi_ops.cc includes XLA headers that moved. It is only needed
# for XLA-compiled MPI ops, so it is left out of the build. Builds with TensorFlow, Gloo
# and, where Open MPI's compiler wrappers are installed, MPI.
set -euo pipefail

venv=${1:?usage: build-horovod.sh VENV}
python="$venv/bin/python"
horovod_version=0.28.1
cache_root=${ACCELML_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/accelml/wheels}

fail() { echo "horovod build: step '$1' failed: $2" >&2; exit 1; }

tf_version=$("$python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null) \
  || fail "find TensorFlow" "'import tensorflow' fails in $venv; install the stack first"
py_tag=$("$python" -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')
if ! command -v mpicxx >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  echo "installing Debian's Open MPI (libopenmpi-dev openmpi-bin) so that Horovod gets its MPI controller"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q libopenmpi-dev openmpi-bin >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libopenmpi-dev openmpi-bin >/dev/null; } \
    || fail "install Open MPI" "apt-get could not install libopenmpi-dev openmpi-bin"
fi
with_mpi=0
if command -v mpicxx >/dev/null 2>&1; then with_mpi=1; fi
command -v cmake >/dev/null 2>&1 || "$python" -m pip install --quiet cmake \
  || fail "find cmake" "cmake is not on PATH and 'pip install cmake' failed"
export PATH="$(dirname "$python"):$PATH"
cache_dir="$cache_root/horovod-$horovod_version-tf$tf_version-$py_tag-mpi$with_mpi"

if "$python" -c 'import horovod.tensorflow as h; assert h.gloo_built()' >/dev/null 2>&1 \
   && [ "$("$python" -c 'import importlib.metadata as m; print(m.version("horovod"))')" = "$horovod_version" ]; then
  echo "horovod $horovod_version already installed in $venv"
  exit 0
fi

wheel=$(ls "$cache_dir"/horovod-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "building horovod $horovod_version for TensorFlow $tf_version ($py_tag, MPI=$with_mpi); about 15 minutes on 2 cores"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$python" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "horovod==$horovod_version" \
    || fail "download source" "pip could not fetch the horovod $horovod_version source distribution"
  tar -xzf "$work"/horovod-$horovod_version.tar.gz -C "$work" || fail "unpack source" "bad archive"
  src="$work/horovod-$horovod_version"
  cmakelists="$src/horovod/tensorflow/CMakeLists.txt"
  sed -i '/xla_mpi_ops\.cc/d' "$cmakelists"
  ! grep -q 'xla_mpi_ops' "$cmakelists" || fail "patch CMakeLists" "xla_mpi_ops.cc is still in $cmakelists"
  export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1
  if [ "$with_mpi" = 1 ]; then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
  export MAKEFLAGS="-j$(nproc)"
  log="$work/build.log"
  if ! "$python" -m pip wheel --no-build-isolation --no-deps -w "$work/dist" "$src" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    fail "compile" "pip wheel exited non-zero (last lines above)"
  fi
  mkdir -p "$cache_dir"
  built=$(ls "$work"/dist/horovod-*.whl)
  cp "$built" "$cache_dir/.partial" && mv "$cache_dir/.partial" "$cache_dir/$(basename "$built")"
  wheel="$cache_dir/$(basename "$built")"
  echo "cached $wheel"
fi

# Horovod's own run-time requirements (its wheel is installed without dependency resolution).
"$python" -m pip install --quiet cloudpickle psutil pyyaml packaging cffi \
  || fail "install Horovod's requirements" "pip could not install cloudpickle psutil pyyaml packaging cffi"
"$python" -m pip install --quiet --no-deps --force-reinstall "$wheel" \
  || fail "install wheel" "pip could not install $wheel"
"$python" -c 'import horovod.tensorflow as h; assert h.gloo_built(), "gloo not built"' \
  || fail "verify" "horovod.tensorflow does not import or lacks Gloo"
echo "horovod $horovod_version installed from $wheel"
