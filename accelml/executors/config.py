"""Cluster settings: packaged YAML defaults < dask config < --cluster-config < spec < flags.

The defaults live in ``accelml/executors/accelml-cluster.yaml`` (the ``accelml.cluster``
namespace of dask's config). dask already reads the user's ``~/.config/dask/*.yaml`` and
``DASK_ACCELML__...`` environment variables into ``dask.config``; this module only reads
that, never writes it.

>>> settings = load_cluster_settings(spec_table={"kind": "slurm", "resources": {"partition": "gpu"}},
...                                  overrides={"jobs": 4, "resources": {"walltime": "00:10:00"}})
>>> settings.kind, settings.jobs, settings.resources.partition, settings.resources.walltime
('slurm', 4, 'gpu', '00:10:00')
>>> settings.tls
True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources as package_files
from pathlib import Path

from accelml.errors import SpecError
from accelml.executors.resources import Resources

KINDS = ("local", "slurm", "pbs")
DEFAULTS_FILE = "accelml-cluster.yaml"
_SETTING_KEYS = ("kind", "jobs", "retries", "tls", "shared_directory", "worker_start_timeout",
                 "interface", "python", "launcher", "srun_mpi", "resources")
LAUNCHERS = ("srun", "mpirun")


@dataclass(frozen=True)
class ClusterSettings:
    """Where and how cases run. ``resources`` is the default request of one worker job."""

    kind: str = "local"
    jobs: int | None = None
    retries: int = 2
    tls: bool = True
    shared_directory: str = "~/.accelml/jobs"
    worker_start_timeout: float = 900.0
    interface: str | None = None
    python: str | None = None
    launcher: str = "srun"
    srun_mpi: str | None = "pmix"
    resources: Resources = field(default_factory=Resources)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise SpecError(f"cluster.kind = {self.kind!r}: allowed: {', '.join(KINDS)}")
        if self.jobs is not None and (isinstance(self.jobs, bool) or not isinstance(self.jobs, int)
                                      or self.jobs < 1):
            raise SpecError(f"cluster.jobs = {self.jobs!r}: expected an integer >= 1")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise SpecError(f"cluster.retries = {self.retries!r}: expected an integer >= 0")
        if not isinstance(self.tls, bool):
            raise SpecError(f"cluster.tls = {self.tls!r}: expected true or false")
        if self.srun_mpi is not None and (not isinstance(self.srun_mpi, str) or not self.srun_mpi.isidentifier()):
            raise SpecError(f"cluster.srun-mpi = {self.srun_mpi!r}: expected an MPI plugin name "
                            "('pmix', 'pmi2', see srun --mpi=list) or null")
        if self.launcher not in LAUNCHERS:
            raise SpecError(f"cluster.launcher = {self.launcher!r}: allowed: {', '.join(LAUNCHERS)}")
        if not (isinstance(self.worker_start_timeout, (int, float)) and self.worker_start_timeout > 0):
            raise SpecError(
                f"cluster.worker-start-timeout = {self.worker_start_timeout!r}: expected seconds > 0"
            )

    @property
    def shared_path(self) -> Path:
        return Path(os.path.expanduser(os.path.expandvars(self.shared_directory)))


def packaged_defaults() -> dict:
    """The ``accelml`` section of the YAML shipped in the package."""
    import yaml

    text = package_files.files("accelml.executors").joinpath(DEFAULTS_FILE).read_text()
    return yaml.safe_load(text)["accelml"]


def read_config_file(path: str | os.PathLike) -> dict:
    """The ``accelml`` section of a dask-style YAML file (``--cluster-config``)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise SpecError(f"{path}: cannot read the cluster config: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise SpecError(f"{path}: not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("accelml", {}), Mapping):
        raise SpecError(f"{path}: expected a mapping with an 'accelml:' section")
    if "accelml" not in data:
        raise SpecError(f"{path}: no 'accelml:' section (expected accelml: cluster: ...)")
    return dict(data["accelml"])


def _canonical(mapping: Mapping, where: str) -> dict:
    """Keys with '-' turned into '_' and checked against the known settings."""
    result = {}
    for raw_key, value in mapping.items():
        key = str(raw_key).replace("-", "_")
        if key not in _SETTING_KEYS:
            raise SpecError(f"{where}.{raw_key}: unknown cluster setting; allowed: "
                            + ", ".join(k.replace("_", "-") for k in _SETTING_KEYS))
        result[key] = value
    return result


def _merge(layers: list[tuple[str, Mapping | None]]) -> ClusterSettings:
    values: dict = {}
    resources = Resources()
    for where, layer in layers:
        if not layer:
            continue
        if not isinstance(layer, Mapping):
            raise SpecError(f"{where}: expected a table of cluster settings, got {layer!r}")
        for key, value in _canonical(layer, where).items():
            if key == "resources":
                resources = resources.updated(value, f"{where}.resources")
            elif value is not None or key in {"jobs", "interface", "python", "srun_mpi"}:
                if value is None and key in values:
                    continue
                values[key] = value
    if isinstance(values.get("worker_start_timeout"), int):
        values["worker_start_timeout"] = float(values["worker_start_timeout"])
    return ClusterSettings(resources=resources, **values)


def load_cluster_settings(
    spec_table: Mapping | None = None,
    overrides: Mapping | None = None,
    config_file: str | os.PathLike | None = None,
) -> ClusterSettings:
    """Settings from every layer; a later layer wins key by key (resources field by field).

    ``spec_table`` is the spec's ``[cluster]`` table; ``overrides`` the command-line flags
    (``None`` values mean "not given").
    """
    import dask

    user = dask.config.get("accelml.cluster", default=None)
    layers = [
        (f"accelml/executors/{DEFAULTS_FILE}", packaged_defaults().get("cluster")),
        ("dask config accelml.cluster", user),
    ]
    if config_file is not None:
        layers.append((f"{config_file}: accelml.cluster", read_config_file(config_file).get("cluster")))
    layers.append(("[cluster]", spec_table))
    layers.append(("command line", overrides))
    return _merge(layers)
