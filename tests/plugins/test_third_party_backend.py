"""A third party's classical backend is one module and one entry point, nothing else.

``acme`` runs scikit-learn's ``KNeighborsClassifier`` for ``knn_classifier`` under its own
name. Installed the way pip would (``install_plugin``), it is listed by ``accelml backends``,
compared against ``sklearn`` end to end (real processes, a real dask LocalCluster), and its
record's determinism expectation and libraries reach the agreement matrix and the
environment fingerprint. A backend cannot exist without saying how its runs repeat.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from accelml.estimators import BACKENDS, Backend, EveryCase
from accelml.expectations import pair_expectation, run_to_run_expectation
from accelml.probe import Availability

REPEATS = "ACME's exact neighbour search draws nothing at random: runs repeat bitwise"
DIFFERS = "ACME breaks distance ties by row order, as scikit-learn does"

ACME = f'''
from accelml.estimators import Backend, EveryCase, Implementation, Rename, same
from accelml.probe import Availability, distribution_version


def probe(device):
    return Availability("acme", device, True, distribution_version("acme-knn"))


BACKEND = Backend(
    name="acme",
    summary="ACME k-nearest neighbours",
    devices=("cpu",),
    probe=probe,
    implementations={{"knn_classifier": Implementation(
        "sklearn.neighbors:KNeighborsClassifier",
        {{**same("n_neighbors", "weights", "leaf_size", "p", "metric", "n_jobs"),
          "neighbor_search": Rename("algorithm")}})}},
    repeat_expectation=EveryCase(True, {REPEATS!r}),
    cross_backend_reason={DIFFERS!r},
    libraries=("acme-knn",),
)
'''

SPEC = """
name = "acme"
reference = "sklearn"
repeats = 2
warmup = 1
time_limit = 120
threads = 1

[datasets.iris]
source = "shipped"
name = "iris"

[[cases]]
algorithm = "knn_classifier"
backend = ["sklearn", "acme"]
dataset = "iris"
params = {n_neighbors = 5}
"""


def accelml(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "accelml", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300, check=False)


@pytest.fixture
def acme(install_plugin):
    return install_plugin("acme-knn", {"acme_knn.py": ACME},
                          {"accelml.backends": {"acme": "acme_knn:BACKEND"}})


def test_accelml_backends_lists_it_and_a_broken_plugin_with_its_reason(acme, install_plugin, tmp_path):
    install_plugin("acme-broken", {"acme_broken.py": "raise ImportError('needs libacme.so')\n"},
                   {"accelml.backends": {"acme-gpu": "acme_broken:BACKEND"}})
    out = accelml("backends", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    [acme_row] = [line for line in out.stdout.splitlines() if line.startswith("acme ")]
    assert "available" in acme_row and "0.1" in acme_row and "ACME k-nearest" in acme_row
    assert "acme-gpu" in out.stdout and "libacme.so" in out.stdout


@pytest.mark.slow
def test_compare_sklearn_and_acme_end_to_end(acme, tmp_path):
    spec = tmp_path / "acme.toml"
    spec.write_text(SPEC)
    out = accelml("compare", str(spec), "--results-dir", str(tmp_path / "results"), "--json",
                  cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    document = json.loads(out.stdout)
    rows = {row["backend"]: row for row in document["rows"]}
    assert set(rows) == {"sklearn", "acme"} and document["failed"] == []
    assert all(row["status"] == "ok" for row in rows.values())
    assert rows["acme"]["agreement"]["kind"] == "label_agreement"
    assert rows["acme"]["agreement"]["value"] == 1.0
    matrix = document["agreement_matrix"]
    [across] = matrix["cross_backend"]
    assert across["label_agreement"] == 1.0 and across["bitwise_identical"] is True
    assert across["expectation"] == {"bitwise": False, "reason": DIFFERS}
    repeats = {entry["case"]["label"].split("/")[1]: entry for entry in matrix["run_to_run"]}
    assert repeats["acme"]["expectation"] == {"bitwise": True, "reason": REPEATS}
    assert repeats["acme"]["identical"] is True and not repeats["acme"]["unexpected"]
    for case in document["cases"]:
        assert ["acme-knn", "0.1"] in case["environment"]["libraries"]


def test_its_record_answers_the_expectations_in_process(acme):
    ours = SimpleNamespace(algorithm="knn_classifier", backend="acme", device="cpu", ranks=1,
                           strategy=None, params=(("n_neighbors", 5),), dataset="iris")
    stock = SimpleNamespace(**{**vars(ours), "backend": "sklearn"})
    assert run_to_run_expectation(ours, deterministic=False).reason == REPEATS
    assert pair_expectation(stock, ours).reason == DIFFERS


def test_a_backend_without_a_repeat_expectation_cannot_exist(install_plugin):
    with pytest.raises(TypeError, match="repeat_expectation"):
        Backend(name="silent", summary="says nothing about repeats", devices=("cpu",),  # type: ignore[call-arg]
                probe=lambda device: Availability("silent", device, True),
                implementations={}, libraries=())
    with pytest.raises(TypeError, match="repeat_expectation must be callable"):
        Backend(name="silent", summary="says nothing about repeats", devices=("cpu",),
                probe=lambda device: Availability("silent", device, True),
                implementations={}, repeat_expectation=None, libraries=())  # type: ignore[arg-type]
    install_plugin("acme-silent", {"acme_silent.py": """
        from accelml.estimators import Backend
        from accelml.probe import Availability

        BACKEND = Backend(name="silent", summary="says nothing about repeats", devices=("cpu",),
                          probe=lambda device: Availability("silent", device, True),
                          implementations={}, libraries=())
    """}, {"accelml.backends": {"silent": "acme_silent:BACKEND"}})
    assert "silent" not in BACKENDS.names()
    [broken] = BACKENDS.broken()
    assert broken.entry_point == "silent = acme_silent:BACKEND"
    assert "repeat_expectation" in broken.reason


def test_a_backend_without_a_rule_for_every_parameter_is_listed_broken(install_plugin):
    install_plugin("acme-partial", {"acme_partial.py": """
        from accelml.estimators import Backend, EveryCase, Implementation, same
        from accelml.probe import Availability

        BACKEND = Backend(name="partial", summary="half a translation", devices=("cpu",),
                          probe=lambda device: Availability("partial", device, True),
                          implementations={"knn_classifier": Implementation(
                              "sklearn.neighbors:KNeighborsClassifier", same("n_neighbors"))},
                          repeat_expectation=EveryCase(True, "exact"), libraries=())
    """}, {"accelml.backends": {"partial": "acme_partial:BACKEND"}})
    assert "partial" not in BACKENDS.names()
    [broken] = BACKENDS.broken()
    assert "knn_classifier has no rule for weights, neighbor_search, leaf_size" in broken.reason


def test_a_backend_not_installed_here_is_not_expected_to_repeat_bitwise():
    gone = SimpleNamespace(algorithm="knn_classifier", backend="uninstalled", device="cpu",
                           ranks=1, strategy=None, params=(), dataset="iris")
    expectation = run_to_run_expectation(gone)
    assert not expectation.bitwise and "not installed here" in expectation.reason


def test_a_probe_that_raises_is_reported_not_raised():
    def probe(device: str) -> Availability:
        raise OSError("no licence server")

    flaky = Backend(name="flaky", summary="needs a licence server", devices=("cpu",), probe=probe,
                    implementations={}, repeat_expectation=EveryCase(True, "seeded"), libraries=())
    found = flaky.availability("cpu")
    assert (found.name, found.available) == ("flaky", False)
    assert found.detail == "its probe failed: OSError: no licence server"
    assert found.summary == "needs a licence server"


ACME_ON_DEVICE = '''
import numpy as np
from sklearn.neighbors import KNeighborsClassifier

from accelml.estimators import Backend, EveryCase, Implementation, Rename, same
from accelml.probe import Availability


class OnDevice(np.ndarray):
    """Rows "in device memory": what to_device hands the fit."""


def to_device(device):
    return lambda array: np.array(array, copy=True).view(OnDevice)


class DeviceKNN(KNeighborsClassifier):
    def fit(self, X, y):
        if not isinstance(X, OnDevice):
            raise TypeError(f"fit got {type(X).__name__}, not the placed rows")
        return super().fit(X, y)

    def predict(self, X):
        if not isinstance(X, OnDevice):
            raise TypeError(f"predict got {type(X).__name__}, not the placed rows")
        return super().predict(X)


BACKEND = Backend(
    name="acme-device",
    summary="ACME k-nearest neighbours from device memory",
    devices=("cpu",),
    probe=lambda device: Availability("acme-device", device, True),
    implementations={"knn_classifier": Implementation(
        "acme_device:DeviceKNN",
        {**same("n_neighbors", "weights", "leaf_size", "p", "metric", "n_jobs"),
         "neighbor_search": Rename("algorithm")})},
    repeat_expectation=EveryCase(True, "exact neighbour search"),
    libraries=(),
    to_device=to_device,
)
'''


@pytest.mark.slow
def test_a_backend_that_trains_from_device_memory_gets_its_rows_placed_and_timed(install_plugin, tmp_path):
    install_plugin("acme-device", {"acme_device.py": ACME_ON_DEVICE},
                   {"accelml.backends": {"acme-device": "acme_device:BACKEND"}})
    spec = tmp_path / "acme.toml"
    spec.write_text(SPEC.replace('["sklearn", "acme"]', '["sklearn", "acme-device"]'))
    out = accelml("compare", str(spec), "--results-dir", str(tmp_path / "results"), "--json",
                  cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    document = json.loads(out.stdout)
    assert document["failed"] == [] and len(document["cases"]) == 2
    phases = {case["backend"]: [t["phase"] for t in case["timings"]] for case in document["cases"]}
    assert "place" in phases["acme-device"] and "place" not in phases["sklearn"]
    assert {"fit", "predict"} <= set(phases["acme-device"])
    rows = {row["backend"]: row for row in document["rows"]}
    assert rows["acme-device"]["agreement"]["value"] == 1.0
