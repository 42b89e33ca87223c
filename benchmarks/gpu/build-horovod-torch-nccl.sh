#!/usr/bin/env bash
# On the lent GPU machines (no network, no TensorFlow): Horovod 0.28.1 with PyTorch + NCCL + Gloo.
# Measured recipe (2026-11-26, 2 x H200, 32 cores: ~60 s; shared/gpu/README.md of the steering repo).
# There: PyTorch 2.11 / CUDA 13.0, NCCL 2.28 from pip, nvcc 13, cmake 4.
# Needs, in WHEEL_DIR: horovod-0.28.1.tar.gz (pip download --no-binary=:all: --no-deps horovod==0.28.1),
# cffi and pycparser cp312 wheels. Installs horovod into TARGET (put it on PYTHONPATH).
#   usage: build-horovod-torch-nccl.sh WHEEL_DIR TARGET
set -euo pipefail
src=${1:?wheel dir}; target=${2:?target dir}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
work=$(mktemp -d)
python3 -m pip install -q --no-index --no-deps --target "$work/build-deps" "$src"/cffi-*.whl "$src"/pycparser-*.whl
export PYTHONPATH="$work/build-deps${PYTHONPATH:+:$PYTHONPATH}"
tar -C "$work" -xzf "$src"/horovod-0.28.1.tar.gz
cd "$work/horovod-0.28.1"
sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 17)/' CMakeLists.txt horovod/torch/CMakeLists.txt
nccl=$(python3 -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])")
mkdir -p "$work/nccl/lib" && ln -sfn "$nccl/include" "$work/nccl/include"
ln -sf "$(ls "$nccl"/lib/libnccl.so.* | head -1)" "$work/nccl/lib/libnccl.so"
export CMAKE_POLICY_VERSION_MINIMUM=3.5 CXXFLAGS="-include stdexcept -include string -include cstdint" \
  HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_GPU_OPERATIONS=NCCL \
  HOROVOD_NCCL_HOME="$work/nccl" HOROVOD_CUDA_HOME=/usr/local/cuda HOROVOD_BUILD_CUDA_CC_LIST=90 \
  HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 MAKEFLAGS="-j$(nproc)"
python3 -m pip wheel -q --no-build-isolation --no-deps -w "$work/whl" . > "$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; exit 1; }
python3 -m pip install -q --no-deps --upgrade --target "$target" "$work"/whl/horovod-*.whl
echo "horovod installed into $target (check: PYTHONPATH=$target python3 -c 'import horovod.torch as h; print(h.nccl_built())')"
