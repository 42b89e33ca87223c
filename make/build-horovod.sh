#!/usr/bin/env bash
# Build Horovod 0.28.1 for the TensorFlow AND the PyTorch in the given venv, once, and cache
# the wheel outside the venv so that a rebuilt venv reuses it. Then install it into the venv.
#
#   make/build-horovod.sh .venv
#
# The cache is $ACCELML_WHEEL_CACHE (default ~/.cache/accelml/wheels), one folder per
# Horovod x TensorFlow x PyTorch x Python x MPI combination.
#
# Horovod 0.28.1 (its last release) needs these changes to build against today's stack:
# - horovod/tensorflow/xla_mpi_ops.cc includes XLA headers that moved in TF >= 2.19. It is
#   only needed for XLA-compiled MPI ops, so it is left out of the build.
# - PyTorch >= 2.1's headers need C++17; Horovod asks for C++14 (CMakeLists.txt and
#   horovod/torch/CMakeLists.txt), so both are raised to 17.
# - GCC 12+ no longer pulls <stdexcept>, <string>, <cstdint> in transitively where Horovod
#   relies on it: CXXFLAGS force-include them.
# - cmake 4 refuses gloo's cmake_minimum_required(2.8.12): CMAKE_POLICY_VERSION_MINIMUM=3.5.
# - Built as Release instead of RelWithDebInfo: both are -O3, Release leaves out the debug
#   info, which makes the compile (the torch headers are heavy) faster and the wheel smaller.
# - Unity builds (CMake's UNITY_BUILD): each framework's library and each of the two Gloo
#   copies is compiled as one translation unit, not ~50: Horovod compiles its common sources
#   once per framework, so each file otherwise parses the same headers again. On 2 cores:
#   359 s and 634 CPU-s as Horovod ships it, 190 s and 304 CPU-s unified (the compile is what
#   a fresh `make test` waits for before its suite starts). Gloo's allreduce_local.cc stays out
#   of its unit (its ReductionFunction is ambiguous there).
# - CMake's questions to Python about the frameworks (seven interpreters importing torch, one
#   importing TensorFlow, one after another) are answered before the build, one interpreter per
#   framework, side by side (make/horovod_probes.py): 16 CPU-s and as many seconds before the
#   first compile, down to TensorFlow's import alone.
# Builds with TensorFlow, PyTorch, Gloo and, where Open MPI's compiler wrappers are
# installed, MPI; the result is checked (horovod.tensorflow and horovod.torch import, with Gloo).
set -euo pipefail

venv=${1:?usage: build-horovod.sh VENV}
python="$venv/bin/python"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
constraints="$here/constraints.txt"
horovod_version=0.28.1
cache_root=${ACCELML_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/accelml/wheels}

fail() { echo "horovod build: step '$1' failed: $2" >&2; exit 1; }

# The installed versions, read from the packages' metadata: importing both frameworks to ask
# costs ~10 CPU-s, and the final check imports them anyway.
installed_version() {
  "$python" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$1" 2>/dev/null
}
tf_version=$(installed_version tensorflow) \
  || fail "find TensorFlow" "tensorflow is not installed in $venv; install the stack first (make/setup-venv.sh)"
torch_version=$(installed_version torch) \
  || fail "find PyTorch" "torch is not installed in $venv; install the stack first (make/setup-venv.sh)"
py_tag=$("$python" -c 'import sys; print(f"cp{sys.version_info.major}{sys.version_info.minor}")')
bash "$here/install-open-mpi.sh" || fail "install Open MPI" "apt-get could not install libopenmpi-dev openmpi-bin"
with_mpi=0
if command -v mpicxx >/dev/null 2>&1; then with_mpi=1; fi
command -v cmake >/dev/null 2>&1 || "$python" -m pip install --quiet -c "$constraints" cmake \
  || fail "find cmake" "cmake is not on PATH and 'pip install cmake' failed"
export PATH="$(dirname "$python"):$PATH"
cache_dir="$cache_root/horovod-$horovod_version-tf$tf_version-torch$torch_version-$py_tag-mpi$with_mpi"

# What a usable install must pass: both frameworks' extensions load and have Gloo (and MPI
# where it was built with MPI).
verify='
import sys
import horovod.tensorflow as hvd_tf
import horovod.torch as hvd_torch
with_mpi = sys.argv[1] == "1"
for name, hvd in (("horovod.tensorflow", hvd_tf), ("horovod.torch", hvd_torch)):
    assert hvd.gloo_built(), f"{name} was built without Gloo"
    assert hvd.mpi_built() == with_mpi, f"{name}: mpi_built() is {hvd.mpi_built()}, expected {with_mpi}"
'

if [ "$(installed_version horovod || true)" = "$horovod_version" ] && "$python" -c "$verify" "$with_mpi" >/dev/null 2>&1; then
  echo "horovod $horovod_version (TensorFlow + PyTorch) already installed in $venv"
  exit 0
fi

wheel=$(ls "$cache_dir"/horovod-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "building horovod $horovod_version for TensorFlow $tf_version and PyTorch $torch_version ($py_tag, MPI=$with_mpi);" \
       "about 3 minutes on 2 cores"
  start=$(date +%s)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$python" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "horovod==$horovod_version" \
    || fail "download source" "pip could not fetch the horovod $horovod_version source distribution"
  tar -xzf "$work"/horovod-$horovod_version.tar.gz -C "$work" || fail "unpack source" "bad archive"
  src="$work/horovod-$horovod_version"
  tf_cmakelists="$src/horovod/tensorflow/CMakeLists.txt"
  sed -i '/xla_mpi_ops\.cc/d' "$tf_cmakelists"
  ! grep -q 'xla_mpi_ops' "$tf_cmakelists" || fail "patch CMakeLists" "xla_mpi_ops.cc is still in $tf_cmakelists"
  for cmakelists in "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"; do
    sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' "$cmakelists"
    grep -q 'set(CMAKE_CXX_STANDARD 17)' "$cmakelists" && ! grep -q 'set(CMAKE_CXX_STANDARD 14)' "$cmakelists" \
      || fail "patch CMakeLists" "could not raise the C++ standard to 17 in $cmakelists"
  done
  sed -i "s/else 'RelWithDebInfo'/else 'Release'/" "$src/setup.py"
  grep -q "else 'Release'" "$src/setup.py" || fail "patch setup.py" "could not switch the build type to Release"
  "$python" "$here/horovod_probes.py" "$src" "$work/probes" \
    || fail "ask TensorFlow and PyTorch" "the probes CMake reads could not be answered (above)"
  unity='PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 0'
  echo "set_target_properties(\${TF_TARGET_LIB} $unity)" >>"$tf_cmakelists"
  echo "set_target_properties(\${PYTORCH_TARGET_LIB} $unity)" >>"$src/horovod/torch/CMakeLists.txt"
  # (the second Gloo is a copy of this file with "gloo " renamed, this line included)
  printf '%s\n' "set_source_files_properties(allreduce_local.cc PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)" \
    "set_target_properties(gloo $unity)" >>"$src/third_party/gloo/gloo/CMakeLists.txt"
  export HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MXNET=1
  if [ "$with_mpi" = 1 ]; then export HOROVOD_WITH_MPI=1; else export HOROVOD_WITHOUT_MPI=1; fi
  export CMAKE_POLICY_VERSION_MINIMUM=3.5 CXXFLAGS="${CXXFLAGS:-} -include stdexcept -include string -include cstdint"
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
  echo "cached $wheel (built in $(( $(date +%s) - start )) s on $(nproc) cores)"
fi

# Horovod's own run-time requirements (its wheel is installed without dependency resolution).
"$python" -m pip install --quiet -c "$constraints" cloudpickle psutil pyyaml packaging cffi \
  || fail "install Horovod's requirements" "pip could not install cloudpickle psutil pyyaml packaging cffi"
"$python" -m pip install --quiet --no-deps --force-reinstall "$wheel" \
  || fail "install wheel" "pip could not install $wheel"
"$python" -c "$verify" "$with_mpi" \
  || fail "verify" "horovod.tensorflow or horovod.torch does not import, or lacks Gloo (MPI expected: $with_mpi)"
echo "horovod $horovod_version (TensorFlow $tf_version + PyTorch $torch_version) installed from $wheel"
