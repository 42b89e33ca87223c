"""Cluster settings and the scheduler records they name.

Settings come from layers: packaged YAML defaults < the site's dask-jobqueue config <
accelml's dask config < --cluster-config < spec < flags. The defaults live in
``accelml/executors/accelml-cluster.yaml`` (the ``accelml.cluster`` namespace of dask's
config). dask already reads the user's ``~/.config/dask/*.yaml``, ``$DASK_CONFIG`` and
``DASK_ACCELML__...`` environment variables into ``dask.config``; this module only reads
that, never writes it.

The site's dask-jobqueue config (``jobqueue.slurm``, ``jobqueue.pbs``: the scheduler record's
``config_section``, usually ``~/.config/dask/jobqueue.yaml``) is read through
:data:`JOBQUEUE_KEYS`: ``walltime``, ``queue``, ``account``, ``cores``, ``memory``,
``interface`` and ``python`` are defaults that accelml's own layers may override (each
override is named in one warning line); the ``job-script-prologue`` and
``job-extra-directives`` lines come first in every job, before accelml's own. accelml's keys
are spelled the same way (``queue``, ``job-script-prologue``, ``job-extra-directives``).

``kind`` names a :class:`Scheduler`: one module per scheduler in
:mod:`accelml.executors.schedulers` (``local``, ``slurm``, ``pbs``), or a third party's,
registered under the ``accelml.schedulers`` entry-point group (:data:`SCHEDULERS`).

>>> settings = load_cluster_settings(spec_table={"kind": "slurm", "resources": {"partition": "gpu"}},
...                                  overrides={"jobs": 4, "resources": {"walltime": "00:10:00"}})
>>> settings.kind, settings.jobs, settings.resources.partition, settings.resources.walltime
('slurm', 4, 'gpu', '00:10:00')
>>> settings.tls, settings.scheduler.queue().submit
(True, 'sbatch')
>>> SCHEDULERS.get("local").job_queue is None
True
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import shlex
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources as package_files
from pathlib import Path
from typing import Protocol, TypeVar

from accelml.errors import SpecError
from accelml.executors.interface import Executor, ProgressCallback
from accelml.executors.resources import CaseNeeds, Resources
from accelml.plugins import ExtensionPoint, unknown_choice

logger = logging.getLogger(__name__)

DEFAULTS_FILE = "accelml-cluster.yaml"
_SETTING_KEYS = ("kind", "jobs", "retries", "tls", "shared_directory", "worker_start_timeout",
                 "interface", "python", "launcher", "srun_mpi", "dashboard", "resources")
LAUNCHERS = ("srun", "mpirun")
"""How a multi-rank case may start its ranks inside its job (``--launcher``)."""

JobOptions = Mapping[str, object]
"""Keyword arguments of a dask-jobqueue ``Job`` class (``SLURMJob(**options)``)."""
QueueStates = dict[str, tuple[str, str]]
"""``{job id: (state, reason)}`` of the jobs a queue still lists."""

T = TypeVar("T")


def _no_lines(resources: Resources, settings: ClusterSettings) -> tuple[str, ...]:
    return ()


def _mpirun(settings: ClusterSettings) -> str:
    return "mpirun"


def _no_problem() -> str | None:
    return None


def _any_scale(needs: CaseNeeds) -> str | None:
    return None


@dataclass(frozen=True)
class JobQueue:
    """How accelml talks to one batch system through dask-jobqueue.

    * ``job_class`` / ``cluster_class``: dask-jobqueue's classes, ``"module:Class"``
      (imported only when a script is written or a job submitted);
    * ``submit`` / ``cancel`` / ``status``: the queue's commands (``sbatch`` / ``scancel`` /
      ``squeue``); jobs are submitted and cancelled with these;
    * ``directive_prefix``: what starts a directive line (``#SBATCH``);
    * ``job_options(resources)``: the directive mapping, accelml's request of one worker job
      as the job class's scheduler-specific keywords (queue, account, walltime, resource
      lines); the generic ones (cores, memory, prologue, worker arguments, TLS) are accelml's;
    * ``batch_directives(resources, jobs)``: the directives (without prefix) of one batch job
      running a whole comparison, ``jobs`` cases at once; ``batch_prologue``: its first lines;
    * ``read_queue(job_name, job_ids)``: this run's jobs that the queue still lists (raises
      ``OSError`` or ``subprocess.SubprocessError`` when the queue cannot be read just now);
      ``pending_states``: states of a job waiting to start; ``ending_states``: of a job on
      its way out (not cancelled again);
    * ``rank_launcher(settings)``: what starts the ranks of a multi-rank case inside its job
      (``srun`` / ``mpirun``, exported as ``ACCELML_RANK_LAUNCHER``); ``rank_exports(resources,
      settings)``: further lines such a job needs (e.g. ``SRUN_CPUS_PER_TASK``);
    * ``probe()``: why jobs cannot be submitted from here although ``submit`` is on PATH
      (e.g. the controller does not answer), or None;
    * ``config_section``: the section of dask-jobqueue's config for this job class
      (``jobqueue.<section>``) whose site settings accelml applies (None: none).
    """

    job_class: str
    cluster_class: str
    submit: str
    cancel: str
    status: str
    directive_prefix: str
    job_options: Callable[[Resources], JobOptions]
    batch_directives: Callable[[Resources, int], tuple[str, ...]]
    read_queue: Callable[[str, tuple[str, ...]], QueueStates]
    pending_states: frozenset[str]
    ending_states: frozenset[str] = frozenset()
    batch_prologue: tuple[str, ...] = ()
    rank_launcher: Callable[[ClusterSettings], str] = _mpirun
    rank_exports: Callable[[Resources, ClusterSettings], tuple[str, ...]] = _no_lines
    probe: Callable[[], str | None] = _no_problem
    config_section: str | None = None

    def unavailable(self) -> str | None:
        """Why jobs cannot be submitted from this machine, or None."""
        command = shlex.split(self.submit)[0]
        if shutil.which(command) is None:
            return f"'{command}' is not on PATH on this machine"
        return self.probe()


class ExecutorFactory(Protocol):
    """An executor class: ``Factory(settings, progress=...)``."""

    def __call__(self, settings: ClusterSettings, *,
                 progress: ProgressCallback | None = None) -> Executor: ...


@dataclass(frozen=True)
class Scheduler:
    """Where cases run: one record per module of :mod:`accelml.executors.schedulers`.

    ``executor`` runs the cases (a dask LocalCluster here, or
    :class:`~accelml.executors.jobqueue.JobQueueExecutor` for batch systems);
    ``job_queue`` says how to write, submit, watch and cancel worker jobs (None: no jobs);
    ``preview_as`` names the scheduler whose job scripts ``accelml slurm-script`` prints
    for this one when it writes none itself; ``scale_problem(needs)`` says why a case with
    these needs is beyond what the scheduler can give (checked before anything runs: refused,
    or skipped with ``--only-available``), or None; ``shortfall(needs)`` why the machine the
    cases run on lacks what a case needs (GPUs), or None: such a case is recorded unavailable
    without starting, before cases are grouped to take turns, and the others run.
    """

    name: str
    executor: ExecutorFactory
    job_queue: JobQueue | None = None
    preview_as: str | None = None
    scale_problem: Callable[[CaseNeeds], str | None] = _any_scale
    shortfall: Callable[[CaseNeeds], str | None] = _any_scale

    def queue(self) -> JobQueue:
        """:attr:`job_queue`; a one-line :class:`SpecError` for a scheduler that submits no jobs."""
        if self.job_queue is None:
            raise SpecError(f"--cluster {self.name} submits no batch jobs (it has no job scripts)")
        return self.job_queue

    def unavailable(self) -> str | None:
        """Why this scheduler cannot run cases from this machine, or None."""
        return None if self.job_queue is None else self.job_queue.unavailable()


SCHEDULERS: ExtensionPoint[Scheduler] = ExtensionPoint(
    "scheduler", "accelml.schedulers", "accelml.executors.schedulers", "SCHEDULER", Scheduler)
"""Every scheduler: accelml's modules, then third parties' ``accelml.schedulers`` entry points."""


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
    dashboard: bool = False
    resources: Resources = field(default_factory=Resources)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or SCHEDULERS.find(self.kind) is None:
            raise _invalid("kind", self.kind)
        if self.jobs is not None and (isinstance(self.jobs, bool) or not isinstance(self.jobs, int)
                                      or self.jobs < 1):
            raise _invalid("jobs", self.jobs)
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise _invalid("retries", self.retries)
        if not isinstance(self.tls, bool):
            raise _invalid("tls", self.tls)
        if not isinstance(self.dashboard, bool):
            raise _invalid("dashboard", self.dashboard)
        if self.srun_mpi is not None and (not isinstance(self.srun_mpi, str) or not self.srun_mpi.isidentifier()):
            raise _invalid("srun_mpi", self.srun_mpi)
        if self.launcher not in LAUNCHERS:
            raise _invalid("launcher", self.launcher)
        if not (isinstance(self.worker_start_timeout, (int, float)) and self.worker_start_timeout > 0):
            raise _invalid("worker_start_timeout", self.worker_start_timeout)

    @property
    def shared_path(self) -> Path:
        return Path(os.path.expanduser(os.path.expandvars(self.shared_directory)))

    @property
    def scheduler(self) -> Scheduler:
        """The :class:`Scheduler` that ``kind`` names."""
        return SCHEDULERS.get(self.kind)


def _invalid(key: str, value: object) -> SpecError:
    """The one-line error for the cluster setting ``key`` set to ``value``."""
    if key == "kind":
        expected = unknown_choice("scheduler", value, SCHEDULERS.names())
    else:
        expected = {
            "jobs": "expected an integer >= 1",
            "retries": "expected an integer >= 0",
            "tls": "expected true or false",
            "dashboard": "expected true or false",
            "srun_mpi": "expected an MPI plugin name ('pmix', 'pmi2', see srun --mpi=list) or null",
            "launcher": f"allowed: {', '.join(LAUNCHERS)}",
            "worker_start_timeout": "expected seconds > 0",
        }.get(key, "expected text")
    return SpecError(f"cluster.{key.replace('_', '-')} = {value!r}: {expected}")


def _setting(values: Mapping[str, object], key: str, kind: type[T], default: T) -> T:
    """``values[key]`` (``default`` when absent) if it is a ``kind``, else :func:`_invalid`."""
    value = values.get(key, default)
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    raise _invalid(key, value)


def _optional_setting(values: Mapping[str, object], key: str, kind: type[T], default: T | None) -> T | None:
    """:func:`_setting` for a setting that may be null."""
    return None if values.get(key, default) is None else _setting(values, key, kind, default)


def _settings(values: Mapping[str, object], resources: Resources) -> ClusterSettings:
    """The settings ``values`` give (the rest at their defaults); a value of the wrong type is a
    :class:`SpecError` naming the setting."""
    base = ClusterSettings()
    return ClusterSettings(
        kind=_setting(values, "kind", str, base.kind),
        jobs=_optional_setting(values, "jobs", int, base.jobs),
        retries=_setting(values, "retries", int, base.retries),
        tls=_setting(values, "tls", bool, base.tls),
        shared_directory=_setting(values, "shared_directory", str, base.shared_directory),
        worker_start_timeout=_setting(values, "worker_start_timeout", float, base.worker_start_timeout),
        interface=_optional_setting(values, "interface", str, base.interface),
        python=_optional_setting(values, "python", str, base.python),
        launcher=_setting(values, "launcher", str, base.launcher),
        srun_mpi=_optional_setting(values, "srun_mpi", str, base.srun_mpi),
        dashboard=_setting(values, "dashboard", bool, base.dashboard),
        resources=resources,
    )


def packaged_defaults() -> dict[str, object]:
    """The ``accelml`` section of the YAML shipped in the package."""
    import yaml

    text = package_files.files("accelml.executors").joinpath(DEFAULTS_FILE).read_text()
    section: dict[str, object] = yaml.safe_load(text)["accelml"]
    return section


def read_config_file(path: str | os.PathLike[str]) -> dict[str, object]:
    """The ``accelml`` section of a dask-style YAML file (``--cluster-config``)."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise SpecError(f"{path}: cannot read the cluster config: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise SpecError(f"{path}: not a cluster config: not UTF-8 text (byte {error.start})") from None
    except yaml.YAMLError as error:
        raise SpecError(f"{path}: not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("accelml", {}), Mapping):
        raise SpecError(f"{path}: expected a mapping with an 'accelml:' section")
    if "accelml" not in data:
        raise SpecError(f"{path}: no 'accelml:' section (expected accelml: cluster: ...)")
    return dict(data["accelml"])


def _canonical(mapping: Mapping[object, object], where: str) -> dict[str, object]:
    """Keys with '-' turned into '_' and checked against the known settings."""
    result = {}
    for raw_key, value in mapping.items():
        key = str(raw_key).replace("-", "_")
        if key not in _SETTING_KEYS:
            raise SpecError(f"{where}.{raw_key}: unknown cluster setting; allowed: "
                            + ", ".join(k.replace("_", "-") for k in _SETTING_KEYS))
        result[key] = value
    return result


JOBQUEUE_KEYS: Mapping[str, str] = {
    "walltime": "resources.walltime", "queue": "resources.partition", "account": "resources.account",
    "cores": "resources.cores", "memory": "resources.memory",
    "job-script-prologue": "resources.prologue", "env-extra": "resources.prologue",
    "job-extra-directives": "resources.directives", "job-extra": "resources.directives",
    "interface": "interface", "python": "python",
}
"""dask-jobqueue config key -> the accelml setting it sets (``resources.`` a worker job's)."""
JOBQUEUE_OWN_KEYS = ("processes", "death-timeout", "worker-extra-args", "extra", "job-directives-skip",
                     "log-directory", "shared-temp-directory", "scheduler-options", "name",
                     "resource-spec", "job-cpu", "job-mem")
"""dask-jobqueue keys accelml sets itself for each job: a site value of one is not applied (warned).
The keys of neither tuple (``local-directory``, ``shebang``, ``worker-command``, ...) are
left to dask-jobqueue, which reads them from the same config."""
_LINE_KEYS = ("resources.prologue", "resources.directives")
_SITE = "site"


@dataclass(frozen=True)
class SiteJobQueueConfig:
    """The settings a site's dask-jobqueue config section gives (only what it sets itself,
    not dask-jobqueue's packaged defaults), as accelml settings.

    >>> site = SiteJobQueueConfig.from_section("slurm", {"walltime": "02:30:00", "queue": "batch",
    ...     "job-script-prologue": ["module load Python"], "processes": 4})
    >>> site.layer()
    {'resources': {'walltime': '02:30:00', 'partition': 'batch'}}
    >>> site.lines, site.not_applied
    ({'resources.prologue': ('module load Python',)}, ('processes',))
    """

    section: str
    values: Mapping[str, object] = field(default_factory=dict)
    lines: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    not_applied: tuple[str, ...] = ()

    @classmethod
    def from_section(cls, section: str, config: Mapping[str, object]) -> SiteJobQueueConfig:
        values: dict[str, object] = {}
        lines: dict[str, tuple[str, ...]] = {}
        for raw_key, value in config.items():
            key = str(raw_key).replace("_", "-")
            target = JOBQUEUE_KEYS.get(key)
            if target in _LINE_KEYS and value:
                items = (value,) if isinstance(value, str) else tuple(str(item) for item in value)  # type: ignore[attr-defined]
                lines[target] = lines.get(target, ()) + items
            elif target is not None and value is not None:
                values[target] = value
        not_applied = tuple(sorted(str(key).replace("_", "-") for key, value in config.items()
                                   if str(key).replace("_", "-") in JOBQUEUE_OWN_KEYS))
        return cls(section, values, lines, not_applied)

    def layer(self) -> dict[str, object]:
        """The scalar settings as a layer of cluster settings (lines are added after the merge)."""
        layer: dict[str, object] = {key: value for key, value in self.values.items() if "." not in key}
        resources = {key.split(".", 1)[1]: value for key, value in self.values.items() if "." in key}
        if resources:
            layer["resources"] = resources
        return layer

    def warning(self, settings: ClusterSettings, origins: Mapping[str, str]) -> str | None:
        """One line naming each site value a later layer replaced, and the keys not applied."""
        overridden = []
        for target, value in self.values.items():
            final = _value_at(settings, target)
            if origins.get(target, _SITE) != _SITE and str(final) != str(value):
                overridden.append(f"{target.split('.')[-1]} {value!r} by {origins[target]} ({final!r})")
        parts = [f"overridden: {', '.join(overridden)}"] if overridden else []
        if self.not_applied:
            parts.append(f"not applied (accelml sets them for each job): {', '.join(self.not_applied)}")
        if not parts:
            return None
        return f"accelml: the site's dask-jobqueue config jobqueue.{self.section}: {'; '.join(parts)}"


def _value_at(settings: ClusterSettings, target: str) -> object:
    owner: object = settings.resources if target.startswith("resources.") else settings
    return getattr(owner, target.split(".")[-1])


def _jobqueue_defaults() -> dict[str, object]:
    """dask-jobqueue's packaged defaults (read from its YAML file, without importing it)."""
    import yaml

    spec = importlib.util.find_spec("dask_jobqueue")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations))) / "jobqueue.yaml"
    loaded = yaml.safe_load(path.read_text()) if path.is_file() else None
    return dict(loaded.get("jobqueue", {})) if isinstance(loaded, Mapping) else {}


def site_jobqueue_config(section: str) -> SiteJobQueueConfig:
    """What the site's dask config sets in ``jobqueue.<section>``: the values of its YAML files
    (``~/.config/dask``, ``$DASK_CONFIG``, ...) and environment, and any set in this process
    (``dask.config.set``), but not dask-jobqueue's packaged defaults."""
    import dask

    current = dask.config.get(f"jobqueue.{section}", default=None)
    if not isinstance(current, Mapping):
        return SiteJobQueueConfig(section)
    written = dask.config.collect().get("jobqueue", {}).get(section, {}) or {}
    defaults = _jobqueue_defaults().get(section, {})
    written_keys = {str(key).replace("_", "-") for key in written}
    default_values = {str(key).replace("_", "-"): value for key, value in
                      (defaults.items() if isinstance(defaults, Mapping) else ())}
    chosen = {}
    for raw_key, value in current.items():
        key = str(raw_key).replace("_", "-")
        if value in (None, [], {}) or (key not in written_keys and value == default_values.get(key)):
            continue
        chosen[key] = value
    return SiteJobQueueConfig.from_section(section, chosen)


def _merge(layers: list[tuple[str, object]]) -> tuple[ClusterSettings, dict[str, str]]:
    """The settings the layers give, and which layer set each (``resources.<field>``)."""
    values: dict[str, object] = {}
    origins: dict[str, str] = {}
    resources = Resources()
    for where, layer in layers:
        if not layer:
            continue
        if not isinstance(layer, Mapping):
            raise SpecError(f"{where}: expected a table of cluster settings, got {layer!r}")
        for key, value in _canonical(layer, where).items():
            if key == "resources":
                if isinstance(value, Mapping):
                    resources = resources.updated(value, f"{where}.resources")
                    for name, item in value.items():
                        field_name = str(name).replace("-", "_")
                        if item is not None:
                            origins[f"resources.{Resources.KEY_NAMES.get(field_name, field_name)}"] = where
                elif value:
                    raise SpecError(f"{where}.resources: expected a table of resources, got {value!r}")
            elif value is not None or key in {"jobs", "interface", "python", "srun_mpi"}:
                if value is None and key in values:
                    continue
                values[key] = value
                origins[key] = where
    timeout = values.get("worker_start_timeout")
    if isinstance(timeout, int) and not isinstance(timeout, bool):
        values["worker_start_timeout"] = float(timeout)
    return _settings(values, resources), origins


def load_cluster_settings(
    spec_table: Mapping[str, object] | None = None,
    overrides: Mapping[str, object] | None = None,
    config_file: str | os.PathLike[str] | None = None,
    *,
    site: bool = True,
) -> ClusterSettings:
    """Settings from every layer; a later layer wins key by key (resources field by field).

    ``spec_table`` is the spec's ``[cluster]`` table; ``overrides`` the command-line flags
    (``None`` values mean "not given"). The site's dask-jobqueue config of the chosen
    scheduler (:func:`site_jobqueue_config`) sits just above accelml's packaged defaults;
    its prologue and directive lines come before those of the other layers. ``site=False``
    leaves it out (validating a spec's table alone).
    """
    import dask

    user = dask.config.get("accelml.cluster", default=None)
    defaults: tuple[str, object] = (f"accelml/executors/{DEFAULTS_FILE}", packaged_defaults().get("cluster"))
    above: list[tuple[str, object]] = [("dask config accelml.cluster", user)]
    if config_file is not None:
        above.append((f"{config_file}: accelml.cluster", read_config_file(config_file).get("cluster")))
    above.append(("[cluster]", spec_table))
    above.append(("command line", overrides))
    chosen, _ = _merge([defaults, *above])
    job_queue = chosen.scheduler.job_queue
    if not site or job_queue is None or job_queue.config_section is None:
        return chosen
    site_config = site_jobqueue_config(job_queue.config_section)
    settings, origins = _merge([defaults, (_SITE, site_config.layer()), *above])
    if site_config.lines:
        resources = settings.resources
        for target, lines in site_config.lines.items():
            name = target.split(".")[-1]
            own: tuple[str, ...] = getattr(resources, name)
            resources = resources.updated({name: lines + tuple(line for line in own if line not in lines)})
        settings = dataclasses.replace(settings, resources=resources)
    warning = site_config.warning(settings, origins)
    if warning:
        logger.warning(warning)
    return settings
