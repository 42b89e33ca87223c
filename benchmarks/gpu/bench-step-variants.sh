#!/usr/bin/env bash
# accelml's jax-pmean step under each of its variants on the GPUs of this machine, as ONE
# command of at most ~4 minutes (compilation included): benchmarks/bench_jax_step.py --set SET,
# with the environment of benchmarks/gpu/device.sh (wheels in /tmp/site, NVLink multicast off).
# Prints a table (ms/step, img/s, efficiency, TFLOP/s, fraction of peak) and keeps the rows
# and the printed output under $OUT (or /tmp), named after the set and the card.
#
#   benchmarks/gpu/bench-step-variants.sh scaling        # every GPU against one (4 GPUs: 4 vs 1)
#   benchmarks/gpu/bench-step-variants.sh single         # 1-GPU throughput: batch, allocator, flags
#   benchmarks/gpu/bench-step-variants.sh scaling-more   # second tier, if device time is left
#   benchmarks/gpu/bench-step-variants.sh single-more
#   ... [--budget-s 225] [--steps 30] [--profile DIR]    # passed to bench_jax_step.py
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
site=/tmp/site
set_name=${1:-scaling}
shift || true
out=${OUT:-/tmp}
export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}" PATH="$site/bin:$PATH" \
  KERAS_BACKEND=jax PYTHONUNBUFFERED=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  XLA_PYTHON_CLIENT_PREALLOCATE="${XLA_PYTHON_CLIENT_PREALLOCATE:-false}" \
  TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
gpus=$(nvidia-smi -L | wc -l)
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9\n' '_')
name="bench-step-$set_name-${gpus}x$card"
mkdir -p "$out"
rm -f "$out/$name.jsonl"
cd "$repo"
python3 benchmarks/bench_jax_step.py --set "$set_name" --out "$out/$name.jsonl" "$@" \
  2> >(grep -v -e '^WARNING: All log' -e '^I0000' -e '^W0000' >&2) | tee "$out/$name.txt"
