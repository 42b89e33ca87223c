"""Where the time of an xgboost.dask fit on N workers goes, outside accelml: one
``SpecCluster`` of N worker processes (one GPU each with ``--device cuda``), the rows made
on the workers (no transfer), then the DMatrix build and each boosting round timed apart.

    python benchmarks/gpu/xgb_dask_probe.py --workers 2 --device cuda --rows 1000000 --rounds 20

Prints one line per phase and the rounds' times (first, median, last); with NCCL_DEBUG=INFO
the workers' NCCL set-up (transport per peer) is printed to stderr.
"""

from __future__ import annotations

import argparse
import os
import time


def _rows(seed: int, rows: int, features: int, device: str):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, features), dtype=np.float32)
    y = (x[:, :5].sum(axis=1) + 0.5 * rng.standard_normal(rows) > 0).astype(np.float32)
    if device == "cuda":
        import cupy

        return cupy.asarray(x), cupy.asarray(y)
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--grow-policy", default="depthwise", choices=("depthwise", "lossguide"),
                        help="lossguide: leaf-wise, as accelml's xgboost backend grows trees")
    parser.add_argument("--omp-wait-policy", default="PASSIVE", choices=("PASSIVE", "ACTIVE"),
                        help="the workers' OMP_WAIT_POLICY (accelml's workers: PASSIVE)")
    args = parser.parse_args()

    import dask.array as da
    import numpy as np
    import xgboost
    import xgboost.dask
    from dask.delayed import delayed
    from distributed import Client, Nanny, Scheduler, SpecCluster, wait

    threads = max(1, (os.cpu_count() or 1) // args.workers)
    specs = {f"w{i}": {"cls": Nanny, "options": {
        "nthreads": threads, "memory_limit": 0, "host": "127.0.0.1",
        "env": {"OMP_WAIT_POLICY": args.omp_wait_policy,
                **({"CUDA_VISIBLE_DEVICES": str(i)} if args.device == "cuda" else {})}}}
        for i in range(args.workers)}
    started = time.perf_counter()
    with SpecCluster(workers=specs, scheduler={"cls": Scheduler, "options": {
            "dashboard_address": None, "host": "127.0.0.1"}}) as cluster, Client(cluster) as client:
        client.wait_for_workers(args.workers)
        print(f"cluster of {args.workers}: {time.perf_counter() - started:.2f} s", flush=True)
        addresses = sorted(client.scheduler_info()["workers"])
        share = args.rows // args.workers
        t = time.perf_counter()
        parts = [client.submit(_rows, i, share, args.features, args.device, workers=[a],
                               pure=False) for i, a in enumerate(addresses)]
        wait(parts)
        print(f"rows made on the workers: {time.perf_counter() - t:.2f} s", flush=True)
        meta = client.submit(lambda p: p[0][:0], parts[0], workers=[addresses[0]]).result()
        x = da.concatenate([da.from_delayed(delayed(p)[0], shape=(share, args.features),
                                            dtype=np.float32, meta=meta) for p in parts])
        y = da.concatenate([da.from_delayed(delayed(p)[1], shape=(share,), dtype=np.float32,
                                            meta=meta[:, 0] if meta.ndim == 2 else meta)
                            for p in parts])
        t = time.perf_counter()
        matrix = xgboost.dask.DaskQuantileDMatrix(client, x, y)
        print(f"DaskQuantileDMatrix object: {time.perf_counter() - t:.2f} s", flush=True)
        params = {"tree_method": "hist", "device": args.device, "max_depth": 8,
                  "max_leaves": 255, "objective": "binary:logistic", "eta": 0.1,
                  "grow_policy": args.grow_policy}
        took = {}
        for rounds in (1, 1, args.rounds):   # the first also builds the quantile sketch
            t = time.perf_counter()
            out = xgboost.dask.train(client, params, matrix, num_boost_round=rounds)
            took[rounds] = time.perf_counter() - t
            print(f"train {rounds} round(s): {took[rounds]:.2f} s "
                  f"({out['booster'].num_boosted_rounds()} trees)", flush=True)
        print(f"per round after the first: "
              f"{(took[args.rounds] - took[1]) / max(1, args.rounds - 1):.3f} s", flush=True)

if __name__ == "__main__":
    main()
