#!/usr/bin/env bash
# Run HERE (with network), before a session's GPU calls: fills the ignored folders that `run`
# carries to the lent GPU machines (no network there; Python 3.12, PyTorch, JAX, pandas, pyarrow
# and CuPy are in their image; TensorFlow, Keras, XGBoost and Horovod are not):
#   .whl  the cp312 wheels accelml needs there (versions from make/constraints.txt)
#   .hvd  Horovod's sdist and its build dependencies (device.sh horovod-torch builds it there)
#   .xgb  XGBoost's wheel packed for sm_90 (H100/H200), checked by its sha256 there
# Then: run(command="bash benchmarks/gpu/device.sh install .whl && ...", carry=[".whl", ".hvd", ".xgb"]).
# Idempotent: files already there are kept.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
pin() { grep -i "^$1==" make/constraints.txt | head -1; }
download() {   # pure-Python or manylinux cp312 wheels, no dependencies resolved
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --abi cp312 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$@"
}
mkdir -p .whl .hvd .xgb
for name in keras namex optree dask distributed partd locket tblib zict tornado toolz \
    cloudpickle msgpack sortedcontainers psutil fsspec click rich mdurl Pygments \
    markdown-it-py h5py ml-dtypes threadpoolctl dask-jobqueue Jinja2 MarkupSafe; do
  spec=$(pin "$name") || spec=$name
  download .whl "${spec:-$name}"
done
download .hvd "$(pin cffi)" "$(pin pycparser)"
[ -f .hvd/horovod-0.28.1.tar.gz ] || python3 -m pip download -q --no-deps --no-binary=:all: \
  -d .hvd horovod==0.28.1
if [ ! -f .xgb/xgboost-sm90.tar.xz ]; then
  tmp=$(mktemp -d)
  download "$tmp" "$(pin xgboost)"
  python3 benchmarks/gpu/pack-xgboost-sm90.py "$tmp"/xgboost-*.whl .xgb/xgboost-sm90.tar.xz
  rm -rf "$tmp"
fi
echo "carry these: .whl ($(ls .whl | wc -l) wheels), .hvd, .xgb (sha256 $(sha256sum .xgb/xgboost-sm90.tar.xz | cut -c1-64))"
du -sh .whl .hvd .xgb
