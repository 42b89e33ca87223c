#!/usr/bin/env bash
# Steps to run accelml's GPU specs on a GPU machine that has Python, JAX and the NVIDIA driver
# but neither TensorFlow nor XGBoost, and no network (the lent machine these figures came
# from). Everything it needs travels as wheels; nothing here is needed where `make` works.
#
#   benchmarks/gpu/device.sh install WHEEL_DIR          # pip --target /tmp/site, no index
#   benchmarks/gpu/device.sh install-xgboost TARBALL SHA256   # xgboost packed for sm_90, checked
#   benchmarks/gpu/device.sh horovod-torch WHEEL_DIR    # build Horovod (PyTorch + NCCL) into /tmp/site
#   benchmarks/gpu/device.sh check-xgboost              # CUDA build, the NCCL it loads, xgboost.dask imports
#   benchmarks/gpu/device.sh compare SPEC RESULTS [ARGS...]   # python -m accelml compare on the GPUs
#   benchmarks/gpu/device.sh pair SPEC RESULTS          # compare twice (RESULTS-1, RESULTS-2; cases
#                                                       # needing more GPUs than here skipped), then
#                                                       # whether each efficiency repeats within +-0.02
#   benchmarks/gpu/device.sh pack RESULTS TARBALL       # the results dir as one file
#
# The xgboost wheel (132 MB, CUDA code for eight GPU generations) does not fit the machine's
# transfer limit beside the repository and the wheels: benchmarks/gpu/pack-xgboost-sm90.py
# packs it for H100/H200 (sm_90 only) into a 23 MB .tar.xz, carried in `.xgb`. XGBoost on several GPUs
# (experiments/xgboost_scaling.toml) needs nothing more: its dask workers are plain
# distributed processes pinned to one GPU each (no dask-cuda), xgboost.dask's pandas and
# pyarrow are in the machine's image, and XGBoost loads NCCL from the image's nvidia-nccl
# package (check-xgboost prints the path it will load).
set -euo pipefail
site=/tmp/site
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

case "${1:-}" in
  install)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "${2:?wheel dir}"/*.whl ;;
  install-xgboost)
    echo "${3:?sha256}  ${2:?tarball}" | sha256sum -c - && mkdir -p "$site" && tar -xJf "$2" -C "$site" ;;
  check-xgboost)
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    python3 -c "import xgboost, xgboost.dask, xgboost.collective as c; i = xgboost.build_info(); \
print(xgboost.__version__, 'USE_CUDA', i.get('USE_CUDA'), 'USE_DLOPEN_NCCL', i.get('USE_DLOPEN_NCCL'), \
'nccl', c._find_nccl()); \
import numpy as np; x = np.random.default_rng(0).random((4096, 8), dtype=np.float32); \
b = xgboost.train({'device': 'cuda', 'tree_method': 'hist'}, xgboost.DMatrix(x, label=x[:, 0] > 0.5), 5); \
print('a 5-round fit on', b.save_config().count('cuda'), 'cuda mentions; ok')" ;;
  horovod-torch)
    bash "$repo/benchmarks/gpu/build-horovod-torch-nccl.sh" "${2:?wheel dir}" "$site" ;;
  compare)
    spec=${2:?spec}; results=${3:?results dir}; shift 3
    export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}" KERAS_BACKEND=jax PYTHONUNBUFFERED=1 \
      PATH="$site/bin:$PATH" NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
    cd "$repo" && python3 -m accelml compare "$spec" --results-dir "$results" --no-progress "$@" ;;
  pair)
    spec=${2:?spec}; results=${3:?results dir}
    for run in 1 2; do "$0" compare "$spec" "$results-$run" --only-available; done
    PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}" python3 "$repo/benchmarks/gpu/scaling_repeat.py" \
      "$results-1" "$results-2" ;;
  pack)
    tar -czf "${3:?tarball}" -C "$(dirname "${2:?results dir}")" "$(basename "$2")" ;;
  *)
    sed -n '2,22p' "$0"; exit 2 ;;
esac
