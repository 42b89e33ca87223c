"""sklearnex vs stock scikit-learn, per algorithm, through accelml.Estimator: speed and agreement.

For every algorithm both backends have, on generated data of 100k-1M rows (SVC: 10k, its
cost grows with the square of the rows; DBSCAN: 50k, sklearnex's DBSCAN is far slower than
stock on low-dimensional data; k-NN: 5k query rows against 100k), it times fit and predict
(or transform / fit_predict) after one untimed warm-up on a 2,000-row slice, takes the median of
``--repeats`` runs (interleaved: sklearn, sklearnex, sklearn, ...), and compares the outputs:
label agreement and accuracy difference (classifiers), max |diff| and R² difference
(regressors), adjusted Rand index (clustering), max |diff| of explained variance ratios
(PCA). The ``fallback`` column lists the sklearnex calls that ran stock scikit-learn instead:
a speedup measured on a fallback is not an sklearnex speedup.

    .venv/bin/python benchmarks/bench_sklearnex.py            # about 5 minutes on 2 busy cores
    .venv/bin/python benchmarks/bench_sklearnex.py --quick    # seconds, small data
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from sklearn.datasets import make_blobs, make_classification, make_regression  # noqa: E402
from sklearn.metrics import accuracy_score, adjusted_rand_score, r2_score  # noqa: E402

from accelml.estimators import Estimator, task_of  # noqa: E402


@dataclass(frozen=True)
class Case:
    algorithm: str
    rows: int
    features: int
    params: dict = field(default_factory=dict)
    predict_rows: int | None = None  # rows predicted (None: all)


CASES = (
    Case("kmeans", 500_000, 20, {"n_clusters": 8, "n_init": 1, "max_iter": 50, "random_state": 0}),
    Case("dbscan", 50_000, 2, {"eps": 0.005, "min_samples": 5}),
    Case("pca", 500_000, 30, {"n_components": 10, "svd_solver": "full"}),
    Case("linear_regression", 1_000_000, 20),
    Case("ridge", 1_000_000, 20, {"alpha": 1.0}),
    Case("logistic_regression", 200_000, 20, {"max_iter": 200}),
    Case("svc", 10_000, 20, {"C": 1.0}),
    Case("knn_classifier", 100_000, 20, {"n_neighbors": 5}, predict_rows=5_000),
    Case("knn_regressor", 100_000, 20, {"n_neighbors": 5}, predict_rows=5_000),
    Case("random_forest_classifier", 100_000, 20, {"n_estimators": 10, "max_depth": 16, "random_state": 0}),
    Case("random_forest_regressor", 100_000, 20,
         {"n_estimators": 10, "max_depth": 12, "max_features": 0.3, "random_state": 0}),
)


def make_data(case: Case, rows: int):
    task = task_of(case.algorithm)
    if task == "classification":
        X, y = make_classification(rows, case.features, n_informative=10, random_state=0)
    elif task == "regression":
        X, y = make_regression(rows, case.features, n_informative=10, noise=5.0, random_state=0)
    elif case.algorithm == "dbscan":
        X, y = make_blobs(rows, case.features, centers=5, cluster_std=0.2, center_box=(0, 10), random_state=0)
    else:
        X, y = make_blobs(rows, case.features, centers=8, random_state=0)
    return X.astype(np.float64), y


def run_once(case: Case, backend: str, X, y):
    """(fit seconds, output seconds, output, fitted estimator); output is what is compared."""
    est = Estimator(case.algorithm, backend=backend, **case.params)
    task = task_of(case.algorithm)
    query = X if case.predict_rows is None else X[: case.predict_rows]
    start = time.perf_counter()
    if case.algorithm == "dbscan":
        est.fit(X)
        fitted = time.perf_counter()
        output = est.labels_
    else:
        est.fit(X, y) if task in ("classification", "regression") else est.fit(X)
        fitted = time.perf_counter()
        output = est.transform(query) if task == "decomposition" else est.predict(query)
    done = time.perf_counter()
    return fitted - start, done - fitted, np.asarray(output), est


def agreement(case: Case, stock, fast, y) -> str:
    (out_a, est_a), (out_b, est_b) = stock, fast
    task = task_of(case.algorithm)
    truth = y if case.predict_rows is None else y[: case.predict_rows]
    if task == "classification":
        return (f"labels agree {np.mean(out_a == out_b):.4f}, "
                f"acc diff {accuracy_score(truth, out_b) - accuracy_score(truth, out_a):+.4f}")
    if task == "regression":
        return (f"max|diff| {np.max(np.abs(out_a - out_b)):.3g}, "
                f"R2 diff {r2_score(truth, out_b) - r2_score(truth, out_a):+.2e}")
    if task == "clustering":
        return f"ARI {adjusted_rand_score(out_a, out_b):.4f}"
    gap = np.max(np.abs(est_a.explained_variance_ratio_ - est_b.explained_variance_ratio_))
    return f"max|diff| explained var ratio {gap:.2e}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1/50 of the rows, one repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", help="algorithms to run")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    warnings.filterwarnings("ignore")

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} logical CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at start; median of {repeats} interleaved runs after a warm-up")
    header = f"{'algorithm':26} {'rows':>9} {'fit sklearn':>11} {'fit skex':>9} {'speedup':>8} " \
             f"{'out sklearn':>11} {'out skex':>9} {'speedup':>8}  agreement; fallback"
    print(header)
    print("-" * len(header))
    for case in CASES:
        if args.only and case.algorithm not in args.only:
            continue
        rows = max(case.rows // 50, 2_000) if args.quick else case.rows
        X, y = make_data(case, rows)
        if case.predict_rows and args.quick:
            case = Case(case.algorithm, rows, case.features, case.params, max(case.predict_rows // 50, 200))
        for backend in ("sklearn", "sklearnex"):  # warm-up: imports, oneDAL initialisation
            run_once(case, backend, X[:2000], y[:2000])
        times = {"sklearn": [], "sklearnex": []}
        last = {}
        for _ in range(repeats):
            for backend in ("sklearn", "sklearnex"):
                fit_s, out_s, output, est = run_once(case, backend, X, y)
                times[backend].append((fit_s, out_s))
                last[backend] = (output, est)
        fit = {b: statistics.median(t[0] for t in times[b]) for b in times}
        out = {b: statistics.median(t[1] for t in times[b]) for b in times}
        fallbacks = sorted({p.call for p in last["sklearnex"][1].fallbacks_}) or ["none"]
        print(f"{case.algorithm:26} {rows:>9,} {fit['sklearn']:>10.3f}s {fit['sklearnex']:>8.3f}s "
              f"{fit['sklearn'] / fit['sklearnex']:>7.1f}x {out['sklearn']:>10.3f}s {out['sklearnex']:>8.3f}s "
              f"{out['sklearn'] / max(out['sklearnex'], 1e-9):>7.1f}x  "
              f"{agreement(case, last['sklearn'], last['sklearnex'], y)}; {', '.join(fallbacks)}", flush=True)
    print("out = predict (transform for pca; dbscan has no predict: its fit is fit_predict, out is 0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
