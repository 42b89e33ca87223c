"""Where the time of one data-parallel ResNet step goes, on the GPUs of one host (Keras 3 on JAX).

Times accelml's own ``jax-pmean`` step (:func:`accelml.dl.strategies.jax_steps.build_device_step`,
the step training runs) under its options: how gradients are averaged (``allreduce``: one
mean per variable; ``buckets``: buckets in backward order, one all-reduce each;
``reduce-scatter``: ZeRO style, sharded update, weights gathered as the next step starts;
``none``: no collective, the floor no reduction can beat), the dtype they travel in
(float32, bfloat16), BatchNorm moving
statistics averaged every step instead of once per epoch, per-GPU batch, precision, and XLA
flags. Variants that share XLA flags run in one process (flags are read once per process):
each compiles, warms up, then times ``--steps`` steps over uint8 images already on the GPUs,
and appends one JSON row; the sweep prints a table: step ms, img/s, scaling efficiency
(against 1 GPU at the same batch in this run), TFLOP/s per GPU and its fraction of peak.

A set of variants is cut to ``--budget-s`` seconds of wall time (compilation included): a
group that would start with less than a minute left is skipped and listed, and rows already
measured are kept when a group runs out of time.

    python benchmarks/bench_jax_step.py --set scaling            # all GPUs against one
    python benchmarks/bench_jax_step.py --set single             # 1-GPU throughput variants
    python benchmarks/bench_jax_step.py --list                   # what each set runs

Needs JAX with GPUs and Keras 3 (KERAS_BACKEND=jax is set here). Figures name the card.
``--platform cpu`` (with ``XLA_FLAGS=--xla_force_host_platform_device_count=2``,
``--model small_resnet --image-size 16``) only tries the script out.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelml.dl.strategies.jax_steps import StepOptions, set_gpu_xla_flags  # noqa: E402

LATENCY_HIDING = "--xla_gpu_enable_latency_hiding_scheduler=true"
PEAK_TFLOPS = 790.0
"""bf16 dense TFLOP/s measured on the lent H100/H200 cards (benchmarks/RESULTS.md)."""


@dataclass(frozen=True)
class Variant:
    """One timed configuration: ``workers`` GPUs (0: all of them), per-GPU ``batch``, the
    step's options, and the Keras precision policy."""

    workers: int
    batch: int
    reduction: str = "allreduce"
    dtype: str = "float32"
    bucket_mb: float = 25.0
    each_step: bool = False
    precision: str = "mixed_bfloat16"

    @property
    def options(self) -> StepOptions:
        return StepOptions(self.reduction, self.dtype, self.bucket_mb, self.each_step)

    @property
    def label(self) -> str:
        buckets = f" {self.bucket_mb:g}MB" if self.reduction in ("buckets", "reduce-scatter") else ""
        dtype = " bf16" if self.dtype == "bfloat16" else ""
        return f"{self.reduction}{dtype}{buckets}{' +bn/step' if self.each_step else ''}"


@dataclass(frozen=True)
class Group:
    """Variants run in one process, with ``flags`` added to XLA_FLAGS and ``env`` set."""

    name: str
    variants: tuple[Variant, ...]
    flags: str = ""
    env: tuple[tuple[str, str], ...] = ()


ALL = 0          # workers: every GPU the run uses
SETS: dict[str, tuple[Group, ...]] = {
    # one command on N GPUs: the reference, the all-reduce as accelml ran it, then the
    # variants that hide it (XLA's combiners held to one bucket by the step's own flags)
    "scaling": (
        Group("all-reduce", (Variant(1, 256), Variant(ALL, 256, dtype="bfloat16"),
                             Variant(ALL, 256))),
        Group("buckets 25MB", (Variant(ALL, 256, "buckets", "bfloat16"),
                               Variant(ALL, 256, "reduce-scatter", "bfloat16"))),
        Group("buckets 4MB", (Variant(ALL, 256, "buckets", "bfloat16", bucket_mb=4),)),
    ),
    # what gradient_reduction = "auto" picks for a large model: float32 or bfloat16 buckets
    "dtype": (
        Group("buckets 25MB", (Variant(1, 256), Variant(ALL, 256, "buckets"),
                               Variant(ALL, 256, "buckets", "bfloat16"))),
        Group("all-reduce", (Variant(ALL, 256),)),
    ),
    "scaling-more": (
        Group("all-reduce", (Variant(1, 512), Variant(ALL, 512, dtype="bfloat16"),
                             Variant(ALL, 256, "none"))),
        Group("buckets 25MB", (Variant(ALL, 512, "buckets", "bfloat16"),
                               Variant(ALL, 512, "reduce-scatter", "bfloat16"),
                               Variant(2, 256, "buckets", "bfloat16"))),
        Group("buckets 8MB fp32", (Variant(ALL, 256, "buckets", bucket_mb=8),)),
        Group("collectives first", (Variant(ALL, 256, "buckets", "bfloat16"),),
              flags="--xla_gpu_enable_highest_priority_async_stream=true"),
        Group("no latency hiding", (Variant(ALL, 256, "buckets", "bfloat16"),),
              flags="--xla_gpu_enable_latency_hiding_scheduler=false"),
    ),
    # one GPU: batch size, then allocator and XLA flags at the hand-measured batch 512
    "single": (
        Group("batch", (Variant(1, 256), Variant(1, 512), Variant(1, 1024))),
        Group("preallocate", (Variant(1, 512),),
              env=(("XLA_PYTHON_CLIENT_PREALLOCATE", "true"),
                   ("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9"))),
        Group("exhaustive tiling", (Variant(1, 512),),
              flags="--xla_gpu_exhaustive_tiling_search=true"),
    ),
    "single-more": (
        Group("batch", (Variant(1, 512), Variant(1, 768), Variant(1, 1536))),
        Group("force NHWC", (Variant(1, 512),), flags="--xla_gpu_force_conv_nhwc=true"),
        Group("no command buffers", (Variant(1, 512),),
              flags="--xla_gpu_enable_command_buffer="),
        Group("bn every step", (Variant(1, 512, each_step=True),)),
    ),
    # one GPU, with --profile: where a step's time goes at the hand-measured and best batch
    "profile": (
        Group("batch", (Variant(1, 512), Variant(1, 1024))),
    ),
}


def measure(variants: list[Variant], steps: int, model_name: str, image_size: int,
            platform: str, rows_path: str, profile_dir: str | None) -> None:
    """Time each variant in this process; append one JSON row per variant to ``rows_path``."""
    if len({v.options.xla_flags for v in variants}) > 1:
        raise SystemExit("variants of one group must share their XLA flags")
    if platform == "gpu":
        set_gpu_xla_flags(variants[0].options)
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import jax
    import keras
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from accelml.dl.common import make_learning_rate, make_optimizer
    from accelml.dl.config import TrainingConfig
    from accelml.dl.models import build_model
    from accelml.dl.strategies.jax_steps import build_device_step, make_preprocess

    jax.config.update("jax_compilation_cache_dir",
                      os.path.join(tempfile.gettempdir(), "accelml-jax-cache"))
    visible = jax.devices(platform)
    models = {}
    for variant in variants:
        workers = variant.workers or len(visible)
        if workers > len(visible):
            print(f"unavailable: {workers} {platform} devices asked for, JAX sees "
                  f"{len(visible)}", file=sys.stderr, flush=True)
            continue
        devices = visible[:workers]
        mesh = Mesh(np.array(devices), ("batch",))
        split, replicated = NamedSharding(mesh, P("batch")), NamedSharding(mesh, P())
        if variant.precision not in models:
            keras.mixed_precision.set_global_policy(variant.precision)
            keras.utils.set_random_seed(0)
            models[variant.precision] = build_model(model_name, keras,
                                                    (image_size, image_size, 3), 10)
        model = models[variant.precision]
        config = TrainingConfig(strategy="jax-pmean", ranks=workers, batch_size=variant.batch,
                                precision=variant.precision, learning_rate=0.01,
                                device="gpu" if platform == "gpu" else "cpu",
                                gradient_reduction=("allreduce" if variant.reduction == "none"
                                                    else variant.reduction),
                                gradient_reduce_dtype=variant.dtype,
                                gradient_bucket_mb=variant.bucket_mb)
        learning_rate = make_learning_rate(keras, keras.ops, config, steps)
        program = build_device_step(
            model, lambda config=config, rate=learning_rate: make_optimizer(keras, config, rate),
            keras.losses.SparseCategoricalCrossentropy(), mesh, variant.batch,
            make_preprocess(None), variant.options)

        block = 4 * variant.batch
        rng = np.random.default_rng(0)
        x = jax.device_put(rng.integers(0, 256, (workers, block, image_size, image_size, 3),
                                        dtype=np.uint8), split)
        y = jax.device_put(rng.integers(0, 10, (workers, block), dtype=np.int32), split)
        order = jax.device_put(np.stack([rng.permutation(block) for _ in range(workers)])
                               .astype(np.int32), split)
        totals = jax.device_put(np.zeros((workers, 3), np.float32), split)
        step_numbers = [jax.device_put(np.int32(s % 4), replicated) for s in range(4)]
        state = program.state
        # XLA's CPU devices can deadlock with several all-reduce steps queued
        lockstep = platform != "gpu" and workers > 1

        start = time.perf_counter()
        lowered = program.step.lower(state, totals, x, y, order, step_numbers[0])
        compiled = lowered.compile()
        compile_s = time.perf_counter() - start
        gflop_per_image = training_gflop_per_image(model, variant.batch, image_size)
        for s in range(5):
            state, totals = compiled(state, totals, x, y, order, step_numbers[s % 4])
            if lockstep:
                jax.block_until_ready(totals)
        jax.block_until_ready((state, totals))

        start = time.perf_counter()
        for s in range(steps):
            state, totals = compiled(state, totals, x, y, order, step_numbers[s % 4])
            if lockstep:
                jax.block_until_ready(totals)
        dispatched = time.perf_counter() - start
        jax.block_until_ready((state, totals))
        step_s = (time.perf_counter() - start) / steps
        profile: dict[str, float] = {}
        top_kernels: list[list] = []
        if profile_dir:
            where = os.path.join(profile_dir, f"{workers}x{variant.batch}-"
                                 f"{variant.label.replace(' ', '_')}")
            with jax.profiler.trace(where, create_perfetto_trace=True):
                for s in range(PROFILED_STEPS):
                    state, totals = compiled(state, totals, x, y, order, step_numbers[s % 4])
                jax.block_until_ready((state, totals))
            try:
                profile, top_kernels = summarise_trace(where, PROFILED_STEPS)
            except (OSError, ValueError, KeyError) as error:
                profile = {"not summarised": 0.0}
                top_kernels = [[f"{type(error).__name__}: {error}", "-", 0.0, 0]]
        stats = devices[0].memory_stats() or {}
        row = {**dataclasses.asdict(variant), "workers": workers, "label": variant.label,
               "xla_flags": os.environ.get("XLA_FLAGS", ""), "steps": steps,
               "step_ms": 1e3 * step_s, "dispatch_ms": 1e3 * dispatched / steps,
               "images_per_s": workers * variant.batch / step_s, "compile_s": compile_s,
               "gflop_per_image": gflop_per_image,
               "tflops_per_gpu": tflops_per_gpu(gflop_per_image, variant.batch / step_s),
               "peak_gib_gpu0": stats.get("peak_bytes_in_use", 0) / 2**30, "profile": profile,
               "top_kernels": top_kernels, "device": devices[0].device_kind, "jax": jax.__version__,
               "keras": keras.__version__}
        with open(rows_path, "a") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
        del program, state, totals, compiled, lowered, x, y


_FLOP_COUNTS: dict[tuple[str, str, int, int], float] = {}


def training_gflop_per_image(model, batch: int, image_size: int) -> float:
    """XLA's count of one training step's forward and backward pass of ``model``, per image.

    Counted on the HLO of a plain jitted gradient, lowered but not compiled: once compiled
    for GPUs, convolutions are cuDNN calls XLA cannot count, and inside the library's
    ``shard_map`` step they are hidden from the count too. The optimizer update adds about
    one FLOP per weight per image step, which is left out (< 0.01%).
    """
    import jax
    import jax.numpy as jnp
    import keras

    key = (model.name, keras.mixed_precision.global_policy().name, batch, image_size)
    if key not in _FLOP_COUNTS:
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=False)

        def loss(trainable, non_trainable, x, y):
            outputs, _ = model.stateless_call(trainable, non_trainable, x, training=True)
            return loss_fn(y, outputs)

        def shapes(variables):
            return [jax.ShapeDtypeStruct(tuple(v.shape), v.dtype) for v in variables]

        lowered = jax.jit(jax.grad(loss)).lower(
            shapes(model.trainable_variables), shapes(model.non_trainable_variables),
            jax.ShapeDtypeStruct((batch, image_size, image_size, 3), jnp.float32),
            jax.ShapeDtypeStruct((batch,), jnp.int32))
        cost = lowered.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        _FLOP_COUNTS[key] = float(cost.get("flops", 0.0)) / batch / 1e9 if cost else 0.0
    return _FLOP_COUNTS[key]


def tflops_per_gpu(gflop_per_image: float, images_per_s_per_gpu: float) -> float:
    """TFLOP/s one GPU achieves at this throughput.

    >>> tflops_per_gpu(6.81, 17703)
    120.557...
    """
    return gflop_per_image * images_per_s_per_gpu / 1e3


def retable(path: str, args: argparse.Namespace) -> int:
    """Print the table of rows saved by an earlier sweep, counting the FLOPs of rows that
    have none here (the count is a property of the model, not of the GPU)."""
    import keras

    from accelml.dl.models import build_model

    rows = _read_rows(path)
    models = {}
    for row in rows:
        if not row.get("gflop_per_image"):
            if row["precision"] not in models:
                keras.mixed_precision.set_global_policy(row["precision"])
                models[row["precision"]] = build_model(args.model, keras,
                                                       (args.image_size, args.image_size, 3), 10)
            row["gflop_per_image"] = training_gflop_per_image(models[row["precision"]], row["batch"],
                                                              args.image_size)
            row["tflops_per_gpu"] = tflops_per_gpu(row["gflop_per_image"],
                                                   row["images_per_s"] / row["workers"])
        row.setdefault("group", "-")
    _print_table(rows, args)
    return 0


PROFILED_STEPS = 5
KERNEL_KINDS = (("collective", ("nccl",)),
                ("convolution", ("xmma", "conv", "cudnn", "implicit", "dgrad", "wgrad", "fprop")),
                ("matmul", ("gemm", "cutlass", "cublas", "nvjet")),
                ("copy", ("memcpy", "memset")))
"""Kernel names (lower case) by what they do; other kernels are XLA's fusions."""


def _union_ms(spans: list[tuple[float, float]]) -> float:
    """Milliseconds covered by ``(start, end)`` spans in microseconds.

    >>> _union_ms([(0, 1000), (500, 2000), (3000, 4000)])
    3.0
    """
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total / 1e3


TOP_KERNELS = 12


def summarise_trace(directory: str, steps: int) -> tuple[dict[str, float], list[list]]:
    """Where the first GPU's time went in a ``jax.profiler`` trace under ``directory``, in ms
    per step: kernel time by kind (:data:`KERNEL_KINDS`, overlaps counted in each), the
    time any kernel runs, collectives running while no other kernel does (``exposed
    collective``) and the GPU's idle time within the traced span; and the
    :data:`TOP_KERNELS` kernels that took longest, ``[name, kind, ms per step, launches per
    step]`` each."""
    import glob
    import gzip

    paths = sorted(glob.glob(os.path.join(directory, "**", "perfetto_trace.json.gz"),
                             recursive=True))
    if not paths:
        raise ValueError("no perfetto_trace.json.gz")
    with gzip.open(paths[-1]) as handle:
        events = json.load(handle)["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    gpus = sorted(pid for pid, name in names.items() if "GPU" in name or "gpu" in name)
    if not gpus:
        raise ValueError("no GPU in the trace")
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    kernels = [e for e in events if e.get("ph") == "X" and e["pid"] == gpus[0]
               and threads.get((e["pid"], e.get("tid")), "").startswith("Stream")]
    if not kernels:
        raise ValueError("no stream events for the first GPU")
    spans: dict[str, list[tuple[float, float]]] = {}
    by_name: dict[str, list] = {}
    for event in kernels:
        name = event["name"].lower()
        kind = next((k for k, marks in KERNEL_KINDS if any(m in name for m in marks)), "fusion")
        spans.setdefault(kind, []).append((event["ts"], event["ts"] + event["dur"]))
        entry = by_name.setdefault(event["name"], [event["name"], kind, 0.0, 0])
        entry[2] += event["dur"] / 1e3 / steps
        entry[3] += 1
    every = [span for kind_spans in spans.values() for span in kind_spans]
    compute = [span for kind, kind_spans in spans.items() if kind != "collective"
               for span in kind_spans]
    first, last = min(s for s, _ in every), max(e for _, e in every)
    busy = _union_ms(every)
    summary = {kind: _union_ms(kind_spans) / steps for kind, kind_spans in spans.items()}
    summary["busy"] = busy / steps
    summary["exposed collective"] = (busy - _union_ms(compute)) / steps
    summary["idle"] = ((last - first) / 1e3 - busy) / steps
    top = sorted(by_name.values(), key=lambda entry: -entry[2])[:TOP_KERNELS]
    return summary, [[name, kind, round(ms, 4), round(count / steps, 2)]
                     for name, kind, ms, count in top]


def run_set(args: argparse.Namespace) -> int:
    """Run the groups of ``args.set`` in child processes within the time budget; print a table."""
    started = time.monotonic()
    rows: list[dict] = []
    skipped: list[str] = []
    rows_path = args.out or os.path.join(tempfile.mkdtemp(prefix="bench-jax-step-"), "rows.jsonl")
    for group in SETS[args.set]:
        left = args.budget_s - (time.monotonic() - started)
        names = ", ".join(f"{v.workers or 'N'}x{v.batch} {v.label}" for v in group.variants)
        if left < 60:
            skipped.append(f"{group.name}: {names}")
            continue
        flags = " ".join(f for f in (os.environ.get("XLA_FLAGS", ""), group.flags) if f)
        env = dict(os.environ, XLA_FLAGS=flags, KERAS_BACKEND="jax", **dict(group.env))
        command = [sys.executable, __file__, "--child", json.dumps(
            [dataclasses.asdict(v) for v in group.variants]), "--rows", rows_path,
            "--steps", str(args.steps), "--model", args.model,
            "--image-size", str(args.image_size), "--platform", args.platform]
        if args.profile:
            command += ["--profile", args.profile]
        before = _read_rows(rows_path)
        print(f"# group {group.name} [{group.flags or 'default flags'}"
              f"{' ' + ' '.join(f'{k}={v}' for k, v in group.env) if group.env else ''}]: "
              f"{names} ({left:.0f}s left)", flush=True)
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True,
                                  timeout=left - 5)
            failure = done.returncode and (done.stderr or done.stdout).strip().splitlines()[-1:]
        except subprocess.TimeoutExpired:
            failure = ["out of time budget"]
        new = _read_rows(rows_path)[len(before):]
        for row in new:
            row["group"] = group.name
        rows += new
        if failure or len(new) < len(group.variants):
            print(f"# group {group.name}: {len(new)} of {len(group.variants)} measured; "
                  f"{failure or 'see stderr'}", flush=True)
    _print_table(rows, args)
    for line in skipped:
        print(f"skipped (time budget): {line}")
    print(f"rows: {rows_path}")
    return 0


def _read_rows(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.startswith("{")]


def _print_table(rows: list[dict], args: argparse.Namespace) -> None:
    single = {}
    for r in rows:
        if r["workers"] == 1:
            single.setdefault((r["batch"], r["precision"]), r["images_per_s"])
    device = rows[0]["device"] if rows else "?"
    print(f"\n{device}, {args.model} {args.image_size}x{args.image_size}, {args.steps} timed "
          f"steps; eff: img/s per GPU against the first 1-GPU row at the same batch and "
          f"precision (for 1-GPU rows, their speed-up over it); peak "
          f"{args.peak_tflops:g} TFLOP/s")
    print(f"{'GPUs':>4} {'batch':>5} {'gradient reduction':<28} {'group':<18} {'prec':<5} "
          f"{'step ms':>8} {'img/s':>8} {'eff':>5} {'TFLOP/s':>8} {'peak':>5} "
          f"{'compile':>7} {'GiB':>5}")
    for r in rows:
        base = single.get((r["batch"], r["precision"]))
        efficiency = f"{r['images_per_s'] / (r['workers'] * base):5.3f}" if base else "    -"
        precision = "mixbf" if r["precision"] == "mixed_bfloat16" else r["precision"][:5]
        print(f"{r['workers']:>4} {r['batch']:>5} {r['label']:<28} {r['group'][:18]:<18} "
              f"{precision:<5} {r['step_ms']:>8.2f} {r['images_per_s']:>8.0f} {efficiency} "
              f"{r['tflops_per_gpu']:>8.1f} {r['tflops_per_gpu'] / args.peak_tflops:>5.1%} "
              f"{r['compile_s']:>6.0f}s {r['peak_gib_gpu0']:>5.1f}")
    profiled = [r for r in rows if r.get("profile")]
    if profiled:
        kinds = sorted({k for r in profiled for k in r["profile"]})
        print(f"\nGPU 0 per step, ms ({PROFILED_STEPS} profiled steps; kinds overlap, "
              f"'exposed collective' runs while no other kernel does):")
        print(f"{'GPUs':>4} {'batch':>5} {'gradient reduction':<28} "
              + " ".join(f"{k[:12]:>12}" for k in kinds))
        for r in profiled:
            print(f"{r['workers']:>4} {r['batch']:>5} {r['label']:<28} "
                  + " ".join(f"{r['profile'].get(k, 0.0):>12.2f}" for k in kinds))
        for r in profiled:
            # nearly all of the model's FLOPs are convolutions (1x1 ones as cuBLAS matmuls):
            # the rate of those kernels while they run
            dense_ms = r["profile"].get("convolution", 0.0) + r["profile"].get("matmul", 0.0)
            if dense_ms:
                print(f"\n{r['workers']}x{r['batch']} {r['label']}: convolution and matmul "
                      f"kernels run at {tflops_per_gpu(r['gflop_per_image'], r['batch'] / (dense_ms / 1e3)):.0f}"
                      f" TFLOP/s while they run ({dense_ms:.2f} of {r['step_ms']:.2f} ms per "
                      f"step); the longest kernels, ms per step (launches):")
            for name, kind, ms, launches in r.get("top_kernels", []):
                print(f"  {ms:>8.3f} ({launches:g}x) {kind:<11} {name[:90]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="scaling")
    parser.add_argument("--list", action="store_true", help="print the sets and exit")
    parser.add_argument("--budget-s", type=float, default=225.0,
                        help="wall seconds for the whole set, compilation included")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per variant")
    parser.add_argument("--model", default="resnet50v2")
    parser.add_argument("--image-size", type=int, default=128)
    parser.add_argument("--platform", default="gpu", help="cpu only to try the script out")
    parser.add_argument("--peak-tflops", type=float, default=PEAK_TFLOPS)
    parser.add_argument("--out", help="append the rows (JSON lines) here")
    parser.add_argument("--profile", help="trace 5 more steps of each variant with "
                        "jax.profiler under this directory and print where GPU 0's time goes")
    parser.add_argument("--table", metavar="ROWS",
                        help="print the table of a sweep's saved rows (JSON lines) and exit")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.list:
        for name, groups in SETS.items():
            print(name)
            for group in groups:
                print(f"  {group.name} [{group.flags or 'default flags'}]: "
                      + ", ".join(f"{v.workers or 'N'}x{v.batch} {v.label} {v.precision}"
                                  for v in group.variants))
        return 0
    if args.table:
        return retable(args.table, args)
    if args.child:
        measure([Variant(**v) for v in json.loads(args.child)], args.steps, args.model,
                args.image_size, args.platform, args.rows, args.profile)
        return 0
    return run_set(args)


if __name__ == "__main__":
    sys.exit(main())
