"""Where the time of one data-parallel ResNet step goes, on the GPUs of one host (Keras 3 on JAX).

The ``jax-pmean`` step of accelml, taken apart: each variant runs in its own process (XLA
reads its flags once per process), compiles, warms up, then times ``--steps`` steps over
uint8 images already on the GPUs, and prints one JSON line; the sweep prints a table.

Variants of the collectives in a step (per-GPU step under ``jax.shard_map``):
  grads+bn+metrics  gradients, BatchNorm moving statistics and the metric totals averaged
                    every step (accelml before this benchmark)
  grads             only the gradients every step; metric totals stay per GPU and the
                    moving statistics are averaged once per epoch (they are linear in the
                    batch statistics, so the result is the same)
  grads-bf16        as ``grads``, the gradients cast to bfloat16 for the all-reduce
  none              no collective at all: the cost of running GPUs side by side, a floor
                    that no gradient averaging can beat

    python benchmarks/bench_jax_step.py                          # the sweep, all GPUs
    python benchmarks/bench_jax_step.py --one --workers 2 --variant grads --batch 256

Needs JAX with GPUs and Keras 3 (KERAS_BACKEND=jax is set here). Figures name the card.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = ("grads+bn+metrics", "grads", "grads-bf16", "none")
LATENCY_HIDING = "--xla_gpu_enable_latency_hiding_scheduler=true"


def measure(workers: int, batch: int, variant: str, steps: int, precision: str,
            model_name: str, image_size: int, platform: str = "gpu") -> dict:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax
    import jax.numpy as jnp
    import keras
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from accelml.dl.models import build_model

    devices = jax.devices(platform)[:workers]
    if len(devices) < workers:
        raise SystemExit(f"unavailable: {workers} {platform} devices asked for, "
                         f"JAX sees {len(devices)}")
    mesh = Mesh(np.array(devices), ("batch",))
    split, replicated = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
    keras.mixed_precision.set_global_policy(precision)
    keras.utils.set_random_seed(0)
    model = build_model(model_name, keras, (image_size, image_size, 3), 10)
    optimizer = keras.optimizers.SGD(0.01 * workers, momentum=0.9)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    floating = [jnp.issubdtype(v.dtype, jnp.floating) for v in model.non_trainable_variables]

    block = 4 * batch
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.integers(0, 256, (workers, block, image_size, image_size, 3),
                                    dtype=np.uint8), split)
    y = jax.device_put(rng.integers(0, 10, (workers, block), dtype=np.int32), split)

    def device_step(state, totals, x_block, y_block, order, step):
        trainable, non_trainable, optimizer_vars = state
        index = jax.lax.dynamic_slice_in_dim(order[0], step * batch, batch)
        images = jnp.take(x_block[0], index, axis=0).astype(jnp.float32) / 255.0
        labels = jnp.take(y_block[0], index, axis=0)

        def loss_of(trainable):
            predictions, updated = model.stateless_call(trainable, non_trainable, images,
                                                        training=True)
            return loss_fn(labels, predictions), (predictions, updated)

        (loss, (predictions, non_trainable)), grads = jax.value_and_grad(
            loss_of, has_aux=True)(trainable)
        step_totals = jnp.stack([loss.astype(jnp.float32),
                                 jnp.sum(jnp.argmax(predictions, -1) == labels).astype(
                                     jnp.float32)])
        if variant == "grads+bn+metrics":
            moving = [v for v, f in zip(non_trainable, floating, strict=False) if f]
            grads, moving = jax.lax.pmean((grads, moving), "batch")
            moving = iter(moving)
            non_trainable = [next(moving) if f else v for v, f in zip(non_trainable, floating, strict=False)]
            step_totals = jax.lax.psum(step_totals, "batch")
        elif variant == "grads":
            grads = jax.lax.pmean(grads, "batch")
        elif variant == "grads-bf16":
            grads = [jax.lax.pmean(g.astype(jnp.bfloat16), "batch").astype(g.dtype)
                     for g in grads]
        trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        return (trainable, non_trainable, optimizer_vars), totals + step_totals[None]

    step_fn = jax.jit(jax.shard_map(
        device_step, mesh=mesh,
        in_specs=(P(), P("batch"), P("batch"), P("batch"), P("batch"), P()),
        out_specs=(P(), P("batch")), check_vma=False), donate_argnums=(0, 1))

    state = jax.device_put(([v.value for v in model.trainable_variables],
                            [v.value for v in model.non_trainable_variables],
                            [v.value for v in optimizer.variables]), replicated)
    totals = jax.device_put(np.zeros((workers, 2), np.float32), split)
    order = jax.device_put(np.stack([rng.permutation(block) for _ in range(workers)]).astype(
        np.int32), split)
    step_numbers = [jax.device_put(np.int32(s % 4), replicated) for s in range(max(steps, 4))]

    start = time.perf_counter()
    lowered = step_fn.lower(state, totals, x, y, order, step_numbers[0])
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start
    # before optimisation: once compiled for GPUs, convolutions are cuDNN calls XLA can't count
    cost = lowered.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    flops = float(cost.get("flops", 0.0)) if cost else 0.0
    for s in range(10):
        state, totals = compiled(state, totals, x, y, order, step_numbers[s % 4])
    jax.block_until_ready((state, totals))

    start = time.perf_counter()
    for s in range(steps):
        state, totals = compiled(state, totals, x, y, order, step_numbers[s])
    dispatched = time.perf_counter() - start
    jax.block_until_ready((state, totals))
    elapsed = time.perf_counter() - start
    step_s = elapsed / steps
    return {"workers": workers, "batch": batch, "variant": variant, "precision": precision,
            "xla_flags": os.environ.get("XLA_FLAGS", ""), "steps": steps,
            "step_ms": 1e3 * step_s, "dispatch_ms": 1e3 * dispatched / steps,
            "images_per_s": workers * batch / step_s, "compile_s": compile_s,
            "gflop_per_image": flops / batch / 1e9,
            "tflops_per_gpu": flops / step_s / 1e12,
            "device": devices[0].device_kind, "jax": jax.__version__,
            "keras": keras.__version__}


def sweep(args) -> int:
    import jax
    gpus = len(jax.devices(args.platform))
    del jax
    mixed = args.precision
    cases = [(1, 256, "grads+bn+metrics", LATENCY_HIDING, mixed)]
    if gpus >= 2:
        cases += [(2, 256, v, LATENCY_HIDING, mixed) for v in VARIANTS]
        cases += [(2, 256, "grads", "", mixed),
                  (2, 256, "grads", LATENCY_HIDING
                   + " --xla_gpu_all_reduce_combine_threshold_bytes=8388608", mixed)]
        cases += [(1, 512, "grads", LATENCY_HIDING, mixed),
                  (2, 512, "grads", LATENCY_HIDING, mixed)]
    cases += [(1, 256, "grads", LATENCY_HIDING, "bfloat16")]
    rows = []
    for workers, batch, variant, flags, precision in cases:
        env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + flags).strip())
        command = [sys.executable, __file__, "--one", "--workers", str(workers), "--batch",
                   str(batch), "--variant", variant, "--steps", str(args.steps),
                   "--precision", precision, "--model", args.model,
                   "--image-size", str(args.image_size), "--platform", args.platform]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode or not lines:
            print(f"failed: {workers} x {batch} {variant} [{flags}]: "
                  f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}", flush=True)
            continue
        row = json.loads(lines[-1])
        row["added_flags"] = flags
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(rows, handle, indent=1)
    single = {r["batch"]: r["images_per_s"] for r in rows
              if r["workers"] == 1 and r["precision"] == args.precision}
    print(f"\n{rows[0]['device'] if rows else '?'} x {gpus}, {args.model} "
          f"{args.image_size}x{args.image_size} {args.precision}, {args.steps} timed steps")
    print(f"{'GPUs':>4} {'batch':>5} {'variant':<17} {'precision':<14} {'flags':<22} {'step ms':>8} "
          f"{'dispatch':>8} {'img/s':>8} {'eff':>5} {'TFLOP/s/GPU':>11}")
    for r in rows:
        flags = r["added_flags"].replace("--xla_gpu_", "").replace(
            "enable_latency_hiding_scheduler=true", "lhs").replace(
            "all_reduce_combine_threshold_bytes", "combine")
        efficiency = r["images_per_s"] / (r["workers"] * single[r["batch"]]) \
            if r["batch"] in single and r["precision"] == args.precision else float("nan")
        print(f"{r['workers']:>4} {r['batch']:>5} {r['variant']:<17} {r['precision']:<14} "
              f"{flags[:22]:<22} "
              f"{r['step_ms']:>8.2f} {r['dispatch_ms']:>8.2f} {r['images_per_s']:>8.0f} "
              f"{efficiency:>5.2f} {r['tflops_per_gpu']:>11.1f}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", action="store_true", help="measure one variant, print JSON")
    parser.add_argument("--workers", type=int, default=1, help="with --one")
    parser.add_argument("--batch", type=int, default=256, help="per GPU, with --one (the "
                        "sweep runs 256 and 512)")
    parser.add_argument("--variant", choices=VARIANTS, default="grads", help="with --one")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--precision", default="mixed_bfloat16")
    parser.add_argument("--model", default="resnet50v2")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--platform", default="gpu", help="cpu only to try the script out "
                        "(with XLA_FLAGS=--xla_force_host_platform_device_count=2)")
    parser.add_argument("--out", help="write the sweep's rows as JSON here")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.workers, args.batch, args.variant, args.steps,
                                 args.precision, args.model, args.image_size,
                                 args.platform)), flush=True)
        return 0
    return sweep(args)


if __name__ == "__main__":
    sys.exit(main())
