"""The scores of a classical case's predictions, whichever way it was trained.

>>> import numpy as np
>>> scores, extra = scores_for("regression", None, None, np.array([1.0, 2.0]), np.array([1.0, 2.0]))
>>> [(score.name, score.value) for score in scores]
[('r2', 1.0), ('rmse', 0.0)]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accelml.results.records import Score
from accelml.runner.timing import host_copy


def scores_for(task: str, estimator: Any, X_test: np.ndarray, y_test: np.ndarray | None,
               predictions: np.ndarray | None) -> tuple[list[Score], dict[str, np.ndarray]]:
    """Scores that fit the task, and extra arrays worth keeping (probabilities)."""
    from sklearn import metrics

    scores: list[Score] = []
    extra: dict[str, np.ndarray] = {}
    if task == "classification" and y_test is not None and predictions is not None:
        scores.append(Score("accuracy", float(metrics.accuracy_score(y_test, predictions)), True))
        scores.append(Score("balanced_accuracy",
                            float(metrics.balanced_accuracy_score(y_test, predictions)), True))
        if hasattr(estimator, "predict_proba"):
            try:
                probabilities = np.asarray(host_copy(estimator.predict_proba(X_test)))
            except (AttributeError, NotImplementedError):
                probabilities = None
            if probabilities is not None:
                extra["probabilities"] = probabilities
                labels = getattr(estimator, "classes_", None)
                scores.append(Score("log_loss", float(metrics.log_loss(
                    y_test, probabilities, labels=labels)), False))
    elif task == "regression" and y_test is not None and predictions is not None:
        scores.append(Score("r2", float(metrics.r2_score(y_test, predictions)), True))
        scores.append(Score("rmse", float(np.sqrt(metrics.mean_squared_error(y_test, predictions))),
                            False))
    elif task == "clustering":
        inertia = getattr(estimator, "inertia_", None)
        if inertia is not None:
            scores.append(Score("inertia", float(inertia), False))
        labels = predictions if predictions is not None else getattr(estimator, "labels_", None)
        if labels is not None:
            n_clusters = len(set(np.asarray(labels).tolist()) - {-1})
            scores.append(Score("n_clusters", float(n_clusters), True))
            if y_test is not None and predictions is not None:
                scores.append(Score("adjusted_rand", float(metrics.adjusted_rand_score(
                    y_test, predictions)), True))
    elif task == "decomposition":
        ratio = getattr(estimator, "explained_variance_ratio_", None)
        if ratio is not None:
            scores.append(Score("explained_variance", float(np.sum(ratio)), True))
    return scores, extra
