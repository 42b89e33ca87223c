"""Agreement measures and the agreement matrix, on stored results of real scikit-learn fits."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_breast_cancer, make_blobs
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from accelml.agreement.arrays import compare_arrays, match_labels
from accelml.agreement.matrix import agreement_matrix, compare_results, run_to_run
from accelml.expectations import pair_expectation
from accelml.report.matrix_table import format_matrix
from accelml.results.records import DLMeasurements, EpochMeasurement
from accelml.results.store import ResultsStore

from .records import add_result, new_run


def _logistic(C: float):
    return make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=500))


@pytest.fixture(scope="module")
def blobs():
    X, _ = make_blobs(n_samples=400, n_features=4, centers=4, random_state=0)
    return X


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return X[:400], y[:400], X[400:], y[400:]


def test_cluster_labels_and_centres_compare_up_to_permutation(blobs):
    fitted = KMeans(4, n_init=1, random_state=0).fit(blobs)
    permutation = np.array([2, 0, 3, 1])
    relabelled = permutation[fitted.labels_]
    centres = fitted.cluster_centers_
    shuffled = np.empty_like(centres)
    shuffled[permutation] = centres

    labels = compare_arrays("predictions", fitted.labels_, relabelled, task="clustering")
    assert labels.label_agreement == 1.0 and labels.matched == "hungarian"
    assert not labels.identical                       # the ids differ, the clustering does not
    assert compare_arrays("predictions", fitted.labels_, relabelled,
                          task="classification").label_agreement < 0.5

    centre_measure = compare_arrays("cluster_centers", centres, shuffled, task="clustering")
    assert centre_measure.max_abs_diff == 0.0 and centre_measure.matched == "hungarian"
    distances = fitted.transform(blobs)
    columns = compare_arrays("transform", distances, distances[:, np.argsort(permutation)],
                             task="clustering")
    assert columns.max_abs_diff == 0.0

    moved = shuffled.copy()
    moved[0] += 0.5
    assert compare_arrays("cluster_centers", centres, moved, task="clustering").max_abs_diff \
        == pytest.approx(0.5)


def test_a_genuinely_different_clustering_disagrees(blobs):
    a = KMeans(4, n_init=1, random_state=0).fit_predict(blobs)
    b = KMeans(2, n_init=1, random_state=0).fit_predict(blobs)
    measure = compare_arrays("predictions", a, b, task="clustering")
    assert 0.4 < measure.label_agreement < 0.75      # 2 clusters cover at most 2 of the 4
    extra = match_labels(b, a)                       # more clusters than partners
    assert sum(value is None for value in extra.tolist()) > 0


def test_pca_outputs_compare_up_to_sign(blobs):
    pca = PCA(2).fit(blobs)
    transformed = pca.transform(blobs)
    flipped = transformed * np.array([-1.0, 1.0])
    measure = compare_arrays("transform", transformed, flipped, task="decomposition")
    assert measure.matched == "sign" and measure.max_abs_diff == 0.0


def test_stored_pca_outputs_are_values_even_on_labelled_data(tmp_path, blobs):
    store = ResultsStore(tmp_path)
    run_id = new_run(store)
    transformed = PCA(2).fit_transform(blobs)
    # the runner stores the algorithm's task; the data set's task is classification
    a = add_result(store, run_id, algorithm="pca", task="decomposition", dataset_task="classification",
                   arrays={"predictions": transformed})
    b = add_result(store, run_id, algorithm="pca", backend="sklearnex", task="decomposition",
                   dataset_task="classification",
                   arrays={"predictions": transformed * np.array([1.0, -1.0])})
    measure = compare_results(store, a, store, b).array("predictions")
    assert (measure.kind, measure.matched, measure.max_abs_diff) == ("values", "sign", 0.0)


def test_value_differences_absolute_and_relative():
    a = np.array([[0.9, 0.1], [0.5, 0.5]])
    b = np.array([[0.8, 0.2], [0.5, 0.5]])
    measure = compare_arrays("probabilities", a, b, task="classification")
    assert measure.kind == "values" and not measure.identical
    assert measure.max_abs_diff == pytest.approx(0.1)
    assert measure.mean_abs_diff == pytest.approx(0.05)
    assert measure.max_rel_diff == pytest.approx(0.5)          # 0.1 against max(|0.1|, |0.2|)
    same = compare_arrays("probabilities", a, a.copy())
    assert same.identical and same.max_abs_diff == 0.0
    assert compare_arrays("x", a, a.astype(np.float32)).identical is False
    assert compare_arrays("x", a, a[:1]).kind == "shape"
    nan = compare_arrays("x", np.array([np.nan, 1.0]), np.array([np.nan, 2.0]))
    assert nan.max_abs_diff == 1.0
    assert compare_arrays("x", np.array([np.nan]), np.array([1.0])).max_abs_diff == np.inf


def test_cross_backend_and_run_to_run_from_stored_predictions(tmp_path, cancer):
    X, y, X_test, y_test = cancer
    store = ResultsStore(tmp_path)
    run_id = new_run(store)
    reference_model = _logistic(1.0).fit(X, y)
    other_model = _logistic(0.001).fit(X, y)
    reference = add_result(store, run_id, algorithm="gbc", backend="sklearn", task="classification",
                           arrays={"predictions": reference_model.predict(X_test),
                                   "probabilities": reference_model.predict_proba(X_test)},
                           scores={"accuracy": reference_model.score(X_test, y_test)})
    noisy_repeats = [reference_model.predict(X_test), other_model.predict(X_test)]
    other = add_result(store, run_id, algorithm="gbc", backend="xgboost", task="classification",
                       arrays={"predictions": other_model.predict(X_test),
                               "probabilities": other_model.predict_proba(X_test)},
                       scores={"accuracy": other_model.score(X_test, y_test)},
                       repeat_arrays=noisy_repeats)

    agreement = compare_results(store, reference, store, other, kind="cross-backend")
    expected_labels = float(np.mean(reference_model.predict(X_test) == other_model.predict(X_test)))
    assert agreement.value("label_agreement") == pytest.approx(expected_labels)
    probabilities = agreement.array("probabilities")
    assert probabilities.max_abs_diff == pytest.approx(np.abs(
        reference_model.predict_proba(X_test) - other_model.predict_proba(X_test)).max())
    assert agreement.value("score_difference") == pytest.approx(
        other_model.score(X_test, y_test) - reference_model.score(X_test, y_test))
    assert agreement.bitwise_identical is False
    assert agreement.expectation.bitwise is False and "XGBoost" in agreement.expectation.reason
    assert expected_labels < 1.0
    assert not agreement.unexpected

    matrix = agreement_matrix(store, run_id)
    assert [e.b.case_id for e in matrix.cross_backend] == [other.case_id]
    assert {e.case.case_id: e.identical for e in matrix.run_to_run} == {
        reference.case_id: True, other.case_id: False}
    assert [e.case.case_id for e in matrix.unexpected] == [other.case_id]   # repeats should match
    text = format_matrix(matrix)
    assert "run-to-run" in text and "cross-backend" in text and "NO" in text


def test_matrix_pairs_devices_and_scales_and_skips_failures(tmp_path, blobs):
    store = ResultsStore(tmp_path)
    run_id = new_run(store)
    labels = KMeans(4, n_init=1, random_state=0).fit_predict(blobs)
    for device, ranks in (("cpu", 1), ("cuda", 1), ("cpu", 2)):
        add_result(store, run_id, algorithm="kmeans", device=device, ranks=ranks,
                   task="clustering", arrays={"predictions": labels})
    add_result(store, run_id, algorithm="kmeans", backend="sklearnex", status="failed",
               reason="boom", task="clustering")
    matrix = agreement_matrix(store, run_id)
    assert [(e.a.label.split(" on")[0], e.b.label.split(" on")[0]) for e in matrix.cross_device] \
        == [("kmeans/sklearn/cpu", "kmeans/sklearn/cuda")]
    assert [e.b.label.split(" on")[0] for e in matrix.cross_scale] == ["kmeans/sklearn/cpu x2"]
    assert all(e.bitwise_identical for e in matrix.comparisons)
    assert matrix.cross_backend == ()                     # the sklearnex case failed
    assert matrix.skipped and matrix.skipped[0][1] == "boom"
    assert matrix.to_dict()["cross_device"][0]["expectation"]["bitwise"] is False


def test_cross_run_compares_two_stores(tmp_path, cancer):
    X, y, X_test, _ = cancer
    first, second = ResultsStore(tmp_path / "a"), ResultsStore(tmp_path / "b")
    run_a, run_b = new_run(first), new_run(second)
    model = _logistic(1.0).fit(X, y)
    for store, run_id, scale in ((first, run_a, 1.0), (second, run_b, 1.0 + 1e-9)):
        add_result(store, run_id, algorithm="logistic_regression", task="classification",
                   case_id="same-case", arrays={"predictions": model.predict(X_test),
                                                "probabilities": model.predict_proba(X_test) * scale})
    matrix = agreement_matrix(first, run_a, against=(second, run_b))
    (entry,) = matrix.cross_run
    assert entry.array("predictions").identical
    assert 0 < entry.array("probabilities").max_rel_diff < 1e-8


def test_deep_learning_measures_and_rank_agreement(tmp_path):
    store = ResultsStore(tmp_path)
    run_id = new_run(store)

    def dl(ranks, loss, accuracy, digests):
        return DLMeasurements(model="mnist_cnn", epochs=(EpochMeasurement(0, 1.0, loss),),
                              per_rank_batch_size=32, ranks=ranks, learning_rate=0.01,
                              images_per_second=100.0, rank_weight_digests=digests,
                              final_loss=loss, final_accuracy=accuracy)

    one = add_result(store, run_id, algorithm="mnist_cnn", backend="keras", task="classification",
                     dl=dl(1, 0.50, 0.80, ("w1",)))
    two = add_result(store, run_id, algorithm="mnist_cnn", backend="keras", ranks=2,
                     strategy="horovod", task="classification", dl=dl(2, 0.55, 0.78, ("w2", "w3")))
    matrix = agreement_matrix(store, run_id)
    (scale,) = matrix.cross_scale
    assert scale.value("loss_difference") == pytest.approx(0.05)
    assert scale.value("accuracy_difference") == pytest.approx(-0.02)
    assert scale.value("ranks_identical") is False and scale.bitwise_identical is False
    assert scale.expectation.bitwise is False and "global batch" in scale.expectation.reason
    ranks = {e.case.case_id: e for e in matrix.run_to_run}
    assert ranks[two.case_id].ranks_identical is False and ranks[two.case_id].unexpected
    assert ranks[one.case_id].ranks_identical is None     # one rank: nothing to compare


def _dl(ranks, test_accuracy, *, train_accuracy=1.0, updates=256, momentum=0.99, batch=256):
    return DLMeasurements(model="resnet50v2", epochs=(EpochMeasurement(0, 1.0, 0.1),),
                          per_rank_batch_size=batch, ranks=ranks, learning_rate=0.01,
                          images_per_second=100.0, rank_weight_digests=("w",) * ranks,
                          final_loss=0.1, final_accuracy=train_accuracy,
                          test_accuracy=test_accuracy, batchnorm_momentum=momentum,
                          batchnorm_updates=updates)


def test_a_test_accuracy_gap_from_stale_batchnorm_statistics_is_explained(tmp_path):
    store = ResultsStore(tmp_path)
    run_id = new_run(store)
    add_result(store, run_id, algorithm="resnet50v2", backend="keras", task="classification",
               strategy="jax-pmean", dl=_dl(1, 0.99, updates=256))
    add_result(store, run_id, algorithm="resnet50v2", backend="keras", task="classification",
               strategy="jax-pmean", ranks=4, dl=_dl(4, 0.08, updates=64))
    matrix = agreement_matrix(store, run_id)
    (scale,) = matrix.cross_scale
    assert scale.value("test_accuracy_difference") == pytest.approx(-0.91)
    assert scale.headline[0].name == "test_accuracy_difference"   # the heat map's cell
    (note,) = scale.notes
    assert "updated 64 times at momentum 0.99" in note and "weigh 0.53" in note
    assert "weigh 0.53" in format_matrix(matrix) and scale.to_dict()["notes"] == [note]


def test_a_gap_after_few_steps_with_fresh_statistics_names_the_lagging_averages(tmp_path):
    # measured on 4 x H100 (benchmarks/gpu/results/res-strat6): 32 steps at momentum 0.9
    store = ResultsStore(tmp_path)
    run_id = new_run(store)
    add_result(store, run_id, algorithm="resnet50v2", backend="keras", task="classification",
               strategy="torch-ddp", dl=_dl(1, 1.0, updates=128, momentum=0.9, batch=512))
    add_result(store, run_id, algorithm="resnet50v2", backend="keras", task="classification",
               strategy="torch-ddp", ranks=4, dl=_dl(4, 0.089, updates=32, momentum=0.9,
                                                      batch=512))
    (scale,) = agreement_matrix(store, run_id).cross_scale
    (note,) = scale.notes
    assert "updated only 32 times (vs 128)" in note and "last ~10 steps" in note


def test_no_explanation_where_accuracies_agree_or_training_itself_fell_short(tmp_path):
    store = ResultsStore(tmp_path)
    run_id = new_run(store)
    add_result(store, run_id, algorithm="resnet50v2", backend="keras", task="classification",
               strategy="jax-pmean", dl=_dl(1, 0.95, updates=256))
    add_result(store, run_id, algorithm="resnet50v2", backend="keras", task="classification",
               strategy="jax-pmean", ranks=2, dl=_dl(2, 0.93, updates=128))
    add_result(store, run_id, algorithm="resnet50v2", backend="keras", task="classification",
               strategy="jax-pmean", ranks=4, dl=_dl(4, 0.5, train_accuracy=0.55, updates=64,
                                                      momentum=0.5))
    notes = {entry.b.case_id: entry.notes for entry in agreement_matrix(store, run_id).cross_scale}
    two, four = sorted(notes.values(), key=len)
    assert two == ()
    assert len(four) == 1 and "trained less far" in four[0] and "BatchNorm" not in four[0]


def test_strategies_are_compared_at_the_same_worker_count_and_batch(tmp_path):
    store = ResultsStore(tmp_path)
    run_id = new_run(store)
    for strategy, params in (("jax-pmean", {}), ("torch-ddp", {"keras_backend": "torch"}),
                             ("horovod", {"keras_backend": "torch",
                                          "step_capture": "cuda-graph"})):
        for ranks in (1, 4):
            add_result(store, run_id, algorithm="resnet50v2", backend="keras",
                       task="classification", strategy=strategy, ranks=ranks,
                       params=params, dl=_dl(ranks, 0.9 if strategy == "horovod" else 0.95))
    matrix = agreement_matrix(store, run_id)
    pairs = {(e.a.label, e.b.label) for e in matrix.cross_strategy}
    assert len(pairs) == 4                   # torch-ddp and horovod, each at 1 and 4 ranks
    assert all("jax-pmean" in a and "jax-pmean" not in b for a, b in pairs)
    for entry in matrix.cross_strategy:
        assert (" x4" in entry.a.label) == (" x4" in entry.b.label)
        expected = -0.05 if "horovod" in entry.b.label else 0.0
        assert entry.value("test_accuracy_difference") == pytest.approx(expected)
    assert len(matrix.cross_scale) == 3


def test_expectations_name_the_reason():
    from types import SimpleNamespace

    def case(**changes):
        base = dict(algorithm="gradient_boosting_classifier", backend="xgboost", device="cpu",
                    ranks=1, strategy=None, params=(("random_state", 0),), dataset="d")
        return SimpleNamespace(**{**base, **changes})

    device = pair_expectation(case(), case(device="cuda"))
    assert not device.bitwise and "differ by design" in device.reason
    sklearnex = pair_expectation(case(backend="sklearn", algorithm="kmeans"),
                                 case(backend="sklearnex", algorithm="kmeans"))
    assert not sklearnex.bitwise and "different implementations" in sklearnex.reason
    assert pair_expectation(case(), case()).bitwise
    unseeded = case(algorithm="kmeans", backend="sklearn", params=())
    assert not run_to_run(_result_like(unseeded), deterministic=False).expectation.bitwise


def _result_like(case):
    from accelml.results.records import CaseResult

    return CaseResult(run_id="r", case_id="c", algorithm=case.algorithm, backend=case.backend,
                      device=case.device, dataset="d", status="ok", params=case.params)


def test_cross_scale_pairs_each_strategy_with_its_own_one_worker_case(tmp_path):
    store = ResultsStore(tmp_path)
    run_id = new_run(store)

    def dl(ranks, accuracy):
        return DLMeasurements(model="mnist_cnn", epochs=(EpochMeasurement(0, 1.0, 0.5),),
                              per_rank_batch_size=32, ranks=ranks, learning_rate=0.01,
                              images_per_second=100.0, rank_weight_digests=("w",) * ranks,
                              final_loss=0.5, final_accuracy=accuracy)

    cases = {}
    for strategy, ranks in (("horovod", 1), ("horovod", 2), ("multiworker", 1),
                              ("multiworker", 2), ("jax-pmean", 4), (None, 1)):
        result = add_result(store, run_id, algorithm="mnist_cnn", backend="keras",
                            ranks=ranks, strategy=strategy, task="classification",
                            dl=dl(ranks, 0.8), case_id=f"{strategy}-{ranks}")
        cases[result.case_id] = (strategy, ranks)
    pairs = {cases[e.b.case_id]: cases[e.a.case_id]
             for e in agreement_matrix(store, run_id).cross_scale}
    assert pairs == {("horovod", 2): ("horovod", 1), ("multiworker", 2): ("multiworker", 1),
                     ("jax-pmean", 4): (None, 1)}


def test_the_table_shows_the_agreement_the_matrix_computes(tmp_path, blobs):
    """One owner for agreement: a decomposition whose near-zero projections changed sign
    (the component itself did not flip) differs by twice those values. The table used to
    compare absolute values and showed max|d| 0 beside the matrix's real difference."""
    from accelml.report.table import build_rows

    store = ResultsStore(tmp_path)
    run_id = new_run(store)
    transformed = PCA(1).fit_transform(blobs)
    near_zero = np.argsort(np.abs(transformed[:, 0]))[:3]
    moved = transformed.copy()
    moved[near_zero] *= -1
    results = [add_result(store, run_id, algorithm="pca", backend=backend, task="decomposition",
                          arrays={"predictions": array})
               for backend, array in (("sklearn", transformed), ("sklearnex", moved))]
    (comparison,) = agreement_matrix(store, run_id).cross_backend
    expected = 2 * np.abs(transformed[near_zero, 0]).max()
    assert comparison.value("max_abs_diff") == pytest.approx(expected) and expected > 0
    reference, other = build_rows(store, results, "sklearn")
    assert reference.is_reference and other.agreement is not None
    assert other.agreement.value == comparison.value("max_abs_diff")
