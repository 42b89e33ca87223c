"""Run a comparison: spec -> cases -> executor -> one process per case -> results store.

:func:`run_experiment` is what ``python -m accelml compare`` and :func:`accelml.compare`
call: it stores one run and, as each case finishes, that case's result (one transaction
each), so an interrupted run keeps every finished case and ``resume=RUN_ID`` runs only the
missing ones. :func:`plan_run` decides deterministic mode, :func:`comparison_groups` which
cases take their timed rounds in turn, and :func:`stored_experiment` what a resumed run
may take from its store (its signed spec, never where it runs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from accelml.cases import INTERLEAVED, Experiment
from accelml.datasets.loaders import PICKLE_OPT_IN
from accelml.errors import AccelmlError, SpecError
from accelml.executors import ensure_scale, make_executor, submits_jobs
from accelml.executors.cluster_settings import ClusterSettings
from accelml.executors.interface import CaseOutcome
from accelml.executors.resources import CaseNeeds
from accelml.probe import usable_cores
from accelml.report.speed import reference_cases, scaling_baselines
from accelml.results.records import CaseResult, FailureKind, RunRecord, utc_now
from accelml.results.store import LOGS_DIR, ResultsStore
from accelml.runner.determinism import deterministic_experiment
from accelml.runner.fingerprint import fingerprint
from accelml.runner.interleave import GroupTask
from accelml.runner.process import CaseOutput, CaseTask, accept_cases, end_running_cases
from accelml.runner.retry import execute_with_retries
from accelml.spec.load import load_spec_text

ResultCallback = Callable[[CaseResult, int, int], None]
Progress = Callable[[Any], None]
"""A cluster executor's progress callback (it gets the executor's job/worker/case counts)."""


def new_run_id() -> str:
    """A run id that sorts by start time: ``20261126T051502-3fa9c1``."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


def default_threads(jobs: int) -> int:
    """Threads per case: the usable cores shared by the cases that run at once."""
    return max(1, usable_cores() // max(1, jobs))


@dataclass(frozen=True)
class RunPlan:
    """What :func:`run_experiment` runs: the cases as they will run, and in which mode.

    ``environment`` holds the variables every case process gets on top of the client's own
    (deterministic mode's ``PYTHONHASHSEED``, TF/cuDNN/XLA determinism, Horovod fusion off);
    the client's own environment is never changed.
    """

    experiment: Experiment
    deterministic: bool
    environment: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def plan_run(experiment: Experiment, *, deterministic: bool = False,
             resumed: RunRecord | None = None) -> RunPlan:
    """The one place deterministic mode is decided: asked for by ``deterministic`` (the
    ``--deterministic`` flag, ``compare(deterministic=True)``), by the spec's
    ``deterministic = true``, or by the run being resumed having run in it. In that mode
    the cases get their seeds filled in where the spec left them unset (which changes those
    case ids; :func:`accelml.runner.determinism.deterministic_experiment`).

    >>> experiment = load_spec_text(
    ...     '[datasets.d]\\nsource = "shipped"\\nname = "iris"\\n[[cases]]\\n'
    ...     'algorithm = "random_forest_classifier"\\nbackend = "sklearn"\\ndataset = "d"\\n',
    ...     "inline.toml")
    >>> plain, seeded = plan_run(experiment), plan_run(experiment, deterministic=True)
    >>> plain.deterministic, dict(plain.experiment.cases[0].params), dict(plain.environment)
    (False, {}, {})
    >>> seeded.deterministic, dict(seeded.experiment.cases[0].params), seeded.environment["PYTHONHASHSEED"]
    (True, {'random_state': 0}, '0')
    """
    if deterministic or experiment.deterministic or (resumed is not None and resumed.deterministic):
        seeded, environment = deterministic_experiment(experiment)
        return RunPlan(seeded, True, MappingProxyType(dict(environment)))
    return RunPlan(experiment, False)


RETRIED_FAILURES = frozenset({FailureKind.LOST, FailureKind.TIMEOUT, FailureKind.KILLED})
"""Failures that may not happen again (a lost worker, a time limit on a busy machine, a
process killed from outside): what ``retry_failed`` runs again on resume."""


def _spec_location(path: str) -> str:
    """Where a spec file is, absolute, so that ``--resume`` from any directory resolves its
    relative dataset paths as the first run did; a spec that is no file (``<...>``) as is."""
    return path if path.startswith("<") else str(Path(path).resolve())
RESUME_SETTINGS_NOTE = ("where its cases run (cluster kind, prologue, python, environment, launcher) "
                        "comes from the command line and site config, never from the store")
"""What a resume from the stored spec says about its execution settings (one line)."""


KEY_FILE_VARIABLE = "ACCELML_KEY_FILE"
"""Names the file of the key stored specs are signed with (default: ~/.config/accelml/spec-key)."""


def _signing_key() -> bytes:
    """This user's key for signing stored specs: 32 random bytes in a file only its owner can
    read, made on first use."""
    path = Path(os.environ.get(KEY_FILE_VARIABLE)
                or Path.home() / ".config" / "accelml" / "spec-key")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(handle, "wb") as key_file:
            key_file.write(secrets.token_bytes(32))
    except FileExistsError:
        pass               # another run made it meanwhile
    except OSError as error:
        raise AccelmlError(f"cannot make the key that signs stored specs at {path}: "
                           f"{error.strerror or error} (set {KEY_FILE_VARIABLE})") from None
    return path.read_bytes()


def spec_signature(spec_text: str, spec_path: str) -> str:
    """The HMAC-SHA256 of a stored spec and the directory its paths resolve against, with
    this user's key: an edited spec (or path) in a shared store no longer matches it, and
    nobody without the key can make one that does."""
    message = spec_path.encode() + b"\0" + spec_text.encode()
    return hmac.new(_signing_key(), message, hashlib.sha256).hexdigest()


def stored_experiment(run: RunRecord, base_dir: Path | None = None) -> Experiment:
    """The spec stored with ``run``, to resume it from: integrity-checked, and without the
    settings of where it runs (its ``[cluster]`` table is dropped).

    Anyone who can write a shared store can edit a stored spec (and recompute its
    ``spec_hash``), so nothing that decides what executes is taken from it: the caller's
    command line and site config give the cluster kind, prologue, python, environment and
    launcher. A spec whose text does not match its recorded digest, or that no longer
    expands to the cases the run planned, is refused.

    >>> experiment = load_spec_text('[datasets.d]\\nsource = "shipped"\\nname = "iris"\\n'
    ...     '[cluster]\\nkind = "slurm"\\n[[cases]]\\nalgorithm = "kmeans"\\nbackend = "sklearn"\\n'
    ...     'dataset = "d"\\n', "x.toml")
    >>> run = RunRecord(run_id="r1", spec_name="x", spec_hash=experiment.text_hash,
    ...                 spec_text=experiment.text, spec_path="x.toml", reference_backend=None,
    ...                 created_at="", planned_cases=1,
    ...                 case_ids=tuple(case.case_id for case in experiment.cases),
    ...                 spec_signature=spec_signature(experiment.text, "x.toml"))
    >>> stored_experiment(run).cluster is None
    True
    >>> stored_experiment(dataclasses.replace(run, spec_text=run.spec_text + "seed = 1\\n"))
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    accelml.errors.SpecError: run r1: its stored spec is not signed with your key ...
    """
    text_hash = hashlib.sha256(run.spec_text.encode()).hexdigest()
    if not run.spec_signature or not hmac.compare_digest(
            spec_signature(run.spec_text, run.spec_path), run.spec_signature):
        raise SpecError(f"run {run.run_id}: its stored spec is not signed with your key (edited "
                        "in the store, or stored by another user); give the SPEC file to resume it")
    if not hmac.compare_digest(text_hash, run.spec_hash):
        raise SpecError(f"run {run.run_id}: its stored spec does not match its recorded digest "
                        "(was the store edited?); give the SPEC file to resume it")
    experiment = load_spec_text(run.spec_text, run.spec_path or f"<run {run.run_id}>", base_dir)
    planned = plan_run(experiment, resumed=run).experiment
    if run.case_ids and {case.case_id for case in planned.cases} != set(run.case_ids):
        raise SpecError(f"run {run.run_id}: its stored spec does not expand to the cases the run "
                        "planned (was the store edited?); give the SPEC file to resume it")
    return dataclasses.replace(experiment, cluster_json="")


def _lost(task: CaseTask, run_id: str, error: str, failure: str | None = None) -> CaseResult:
    """The failed result of a task the executor returned no result for (``failure``: the
    executor's reason kind, e.g. "unavailable"; a lost worker otherwise)."""
    return CaseResult.failed(task.case, run_id,
                             FailureKind(failure) if failure else FailureKind.LOST,
                             error or "no result", threads=task.threads, attempts=task.attempt)


def _attempts(task: CaseTask, outcome: CaseOutcome[GroupTask, tuple[CaseOutput, ...]],
              result: CaseResult | None) -> int:
    """The attempts at a case so far: those of earlier runs, each re-run after a lost worker,
    and those of its ``result`` (with each re-run after a kill, :mod:`accelml.runner.retry`);
    at least one where it never started or only lost workers.

    >>> from accelml.cases import Case, DatasetSpec
    >>> case = Case("kmeans", "sklearn", "cpu", DatasetSpec("d", "generated"))
    >>> task = CaseTask(case, "r", attempt=2)
    >>> group = GroupTask((task,))
    >>> lost = CaseOutcome(0, group, error="lost", lost_workers=3)
    >>> retried = CaseResult.failed(case, "r", FailureKind.ERROR, "x", attempts=3)
    >>> _attempts(task, lost, None), _attempts(task, CaseOutcome(0, group, lost_workers=1), retried)
    (4, 4)
    """
    if result is None:
        return task.attempt - 1 + max(1, outcome.lost_workers)
    return result.attempts + outcome.lost_workers


REFERENCE_DONE = ("its reference case had finished before this resumed run, so they could not "
                  "take turns: measured alone")
"""The measurement note of a case resumed without its reference case."""
OTHER_MACHINE = ("it needs another kind of machine than its reference case ({mine} GPU(s) "
                 "against {theirs}), so they do not take turns: measured alone")
"""The measurement note of a case whose reference case runs on another kind of machine."""


def comparison_groups(tasks: Sequence[CaseTask], experiment: Experiment,
                      finished: Sequence[str] = ()) -> tuple[tuple[GroupTask, ...], dict[str, str]]:
    """The executor's items: each reference case with the cases compared with it on the same
    kind of machine (as many GPUs: its comparison group, interleaved;
    :mod:`accelml.runner.interleave`), a training on several ranks with its 1-rank
    case (:func:`accelml.report.speed.scaling_baselines`; on the machine of the most GPUs),
    every other case alone. Also the notes of cases that
    are measured alone although the run interleaves (their reference case among
    ``finished``, the case ids a resumed run already has, or on another kind of machine).

    >>> experiment = load_spec_text('reference = "sklearn"\\n[datasets.d]\\nsource = "shipped"\\n'
    ...     'name = "iris"\\n[[cases]]\\nalgorithm = ["kmeans", "pca"]\\n'
    ...     'backend = ["sklearn", "sklearnex"]\\ndataset = "d"\\n', "x.toml")
    >>> tasks = [CaseTask(case, "r") for case in experiment.cases]
    >>> groups, notes = comparison_groups(tasks, experiment)
    >>> [[task.case.backend for task in group.tasks] for group in groups], notes
    ([['sklearn', 'sklearnex'], ['sklearn', 'sklearnex']], {})
    >>> groups, notes = comparison_groups(tasks[1:], experiment, [tasks[0].case_id])
    >>> [len(group.tasks) for group in groups], list(notes.values()) == [REFERENCE_DONE]
    ([1, 2], True)
    >>> gpu = [dataclasses.replace(task, case=dataclasses.replace(task.case, device="cuda"))
    ...        if task.case.backend == "sklearnex" else task for task in tasks]
    >>> groups, notes = comparison_groups(gpu, experiment)
    >>> [len(group.tasks) for group in groups], sorted(notes.values())[0].split(" (")[0]
    ([1, 1, 1, 1], 'it needs another kind of machine than its reference case')
    >>> alone = dataclasses.replace(experiment, measurement="isolated")
    >>> [len(group.tasks) for group in comparison_groups(tasks, alone)[0]]
    [1, 1, 1, 1]
    """
    everything = [task.case for task in tasks] + [case for case in experiment.cases
                                                    if case.case_id in set(finished)]
    scaled = {case_id: case.case_id for case_id, case in scaling_baselines(everything).items()}
    if experiment.measurement != INTERLEAVED or (experiment.reference is None and not scaled):
        return tuple(GroupTask((task,)) for task in tasks), {}
    pending = {task.case_id for task in tasks}
    references = {} if experiment.reference is None else {
        case_id: case.case_id
        for case_id, case in reference_cases(everything, experiment.reference).items()}
    # A training on N ranks takes turns with its 1-rank case (the scaling baseline), on
    # the N-rank machine: the 1-rank case uses one of its devices, as it would alone.
    references.update(scaled)
    gpus = {task.case_id: CaseNeeds.of_case(task).gpus for task in tasks}
    members: dict[str, list[CaseTask]] = {}
    notes = {}
    for task in tasks:
        reference = references.get(task.case_id)
        if reference is not None and reference in pending and (
                gpus[reference] == gpus[task.case_id] or task.case_id in scaled):
            members.setdefault(reference, []).append(task)
        else:
            members.setdefault(task.case_id, []).append(task)
            if reference in pending and reference != task.case_id:
                notes[task.case_id] = OTHER_MACHINE.format(mine=gpus[task.case_id],
                                                           theirs=gpus[reference])
            elif reference is not None and reference != task.case_id:
                notes[task.case_id] = REFERENCE_DONE
    groups = []
    for key, found in members.items():
        first = sorted(found, key=lambda task: task.case_id != key)   # the reference first
        groups.append(GroupTask(tuple(first)))
    return tuple(groups), notes


def run_experiment(
    experiment: Experiment,
    store: ResultsStore,
    *,
    settings: ClusterSettings | None = None,
    resume: str | None = None,
    cache_dir: str | None = None,
    on_plan: Callable[[RunRecord, int], None] | None = None,
    on_result: ResultCallback | None = None,
    progress: Progress | None = None,
    deterministic: bool = False,
    retry_failed: bool = False,
    allow_pickle: bool = False,
    only_available: bool = False,
) -> RunRecord:
    """Run every case of ``experiment`` (or, with ``resume``, the ones a run still lacks).

    ``settings`` chooses the executor (``kind``: local, slurm, pbs; ``jobs``: cases at once;
    see :func:`accelml.executors.make_executor`); None is one local case at a time.
    ``on_plan(run, n_pending)`` is called once before the first case starts;
    ``on_result(result, done, total)`` after each case is stored.
    ``deterministic`` (or the spec's ``deterministic = true``, or resuming a run that was
    deterministic) runs every case in deterministic mode (:func:`plan_run`): seeds filled in
    where the spec left them unset (which changes those cases' ids), the mode's environment
    passed to each case process with its task, each case process seeding Python and NumPy
    first; the run is stored with ``deterministic = true``. The client's own environment is
    left as it is.
    ``retry_failed`` (with ``resume``) also runs again the cases whose stored result failed
    for a reason that may not recur (:data:`RETRIED_FAILURES`); the new result replaces the
    old one and counts the attempts of both. Every result records its attempts: the
    executor's re-runs after lost workers included. ``allow_pickle`` lets the case processes
    read pickled data (CIFAR batches) outside Keras's own cache
    (:data:`accelml.datasets.loaders.PICKLE_OPT_IN`). ``only_available``
    (``--only-available``): a case beyond what this machine or cluster can give (more
    ranks than cores) is recorded as unavailable, not run, instead of refusing the run.
    """
    previous = store.get_run(resume) if resume is not None else None
    run_id = previous.run_id if previous is not None else new_run_id()
    # one process runs a run's cases at a time: a second resume (or a resume of a run still
    # running) is refused with one line rather than running the same cases again
    with store.run_lock(run_id):
        try:
            return _run_locked(experiment, store, run_id, previous, settings=settings,
                               cache_dir=cache_dir, on_plan=on_plan, on_result=on_result,
                               progress=progress, deterministic=deterministic,
                               retry_failed=retry_failed, allow_pickle=allow_pickle,
                               only_available=only_available)
        except BaseException:
            # stopped at any moment once it was marked running (Ctrl-C included)
            with contextlib.suppress(AccelmlError):
                if store.get_run(run_id).status == RunRecord.RUNNING:
                    store.set_run_status(run_id, RunRecord.INTERRUPTED)
            raise


def _run_locked(experiment: Experiment, store: ResultsStore, run_id: str,
                previous: RunRecord | None, *, settings: ClusterSettings | None,
                cache_dir: str | None, on_plan: Callable[[RunRecord, int], None] | None,
                on_result: ResultCallback | None, progress: Progress | None,
                deterministic: bool, retry_failed: bool, allow_pickle: bool,
                only_available: bool) -> RunRecord:
    """:func:`run_experiment` once it holds the run's lock."""
    plan = plan_run(experiment, deterministic=deterministic, resumed=previous)
    experiment = plan.experiment
    beyond = ensure_scale(experiment.cases, settings, only_available=only_available)
    case_ids = tuple(case.case_id for case in experiment.cases)
    attempts_before: dict[str, int] = {}
    finished_before: tuple[str, ...] = ()
    if previous is not None:
        run = store.get_run(run_id)     # as it is now that the lock is held
        if run.spec_hash != experiment.text_hash:
            raise SpecError(f"run {run.run_id} was made from a different spec (its text has "
                            "changed); resume it without a SPEC argument to use its own copy")
        if run.case_ids and set(run.case_ids) != set(case_ids):
            raise SpecError(f"run {run.run_id} planned other cases than this spec gives "
                            "(was it expanded by another version of accelml?)")
        done = store.finished_case_ids(run.run_id)
        if retry_failed:
            for stored in store.case_results(run.run_id):
                if not stored.ok and stored.failure in RETRIED_FAILURES:
                    done.discard(stored.case_id)
                    attempts_before[stored.case_id] = stored.attempts
        pending = [case for case in experiment.cases if case.case_id not in done]
        finished_before = tuple(done)
        store.set_run_status(run.run_id, RunRecord.RUNNING)
    else:
        run = RunRecord(
            run_id=run_id, spec_name=experiment.name, spec_hash=experiment.text_hash,
            spec_text=experiment.text, spec_path=_spec_location(experiment.path),
            reference_backend=experiment.reference, created_at=utc_now(),
            planned_cases=len(case_ids), environment=fingerprint(), case_ids=case_ids,
            deterministic=plan.deterministic,
            spec_signature=spec_signature(experiment.text, _spec_location(experiment.path)),
        )
        store.create_run(run)
        pending = list(experiment.cases)
    if on_plan is not None:
        on_plan(run, len(pending))
    if not pending:
        store.set_run_status(run.run_id, RunRecord.FINISHED)
        return store.get_run(run.run_id)
    settings = settings or ClusterSettings()
    finished = 0
    total = len(pending)
    for case in [case for case in pending if case.case_id in beyond]:
        # never started: recorded as a GPU shortfall is (skipped with --only-available)
        result = CaseResult.failed(case, run.run_id, FailureKind.UNAVAILABLE,
                                   beyond[case.case_id])
        store.add_case_result(result, {}, replace_failed=retry_failed)
        finished += 1
        if on_result is not None:
            on_result(result, finished, total)
    pending = [case for case in pending if case.case_id not in beyond]
    jobs = settings.jobs or 1
    in_jobs = submits_jobs(settings)
    environment = {**plan.environment, **({PICKLE_OPT_IN: "1"} if allow_pickle else {})}
    tasks = []
    for case in pending:
        # Locally the cases running at once share this machine's cores; on a cluster each
        # case gets the cores of the worker job it runs in.
        threads = case.threads or (settings.resources.cores
                                   if in_jobs and settings.resources.cores
                                   else default_threads(jobs))
        tasks.append(CaseTask(case=dataclasses.replace(case, threads=threads), run_id=run.run_id, cache_dir=cache_dir,
                              threads=threads, environment=environment or None,
                              deterministic=plan.deterministic,
                              attempt=attempts_before.get(case.case_id, 0) + 1,
                              retries=settings.retries,
                              logs_dir=str(store.directory / LOGS_DIR / run.run_id)))
    groups, notes = comparison_groups(tasks, experiment, finished_before)
    accept_cases()   # after an earlier run of this process that was stopped
    try:
        with make_executor(settings, progress=progress) as executor:
            try:
                for outcome in executor.map(execute_with_retries, groups,
                                            needs=[group.needs for group in groups]):
                    for index, task in enumerate(outcome.item.tasks):
                        if outcome.result is not None:
                            result, arrays = outcome.result[index].result, outcome.result[index].arrays
                            attempts = _attempts(task, outcome, result)
                        else:
                            result = _lost(task, run.run_id, outcome.error or "", outcome.failure)
                            arrays, attempts = {}, _attempts(task, outcome, None)
                        result = dataclasses.replace(result, attempts=attempts)
                        if task.case_id in notes and not result.measurement_note:
                            result = dataclasses.replace(result, measurement_note=notes[task.case_id])
                        store.add_case_result(result, arrays, replace_failed=retry_failed)
                        finished += 1
                        if on_result is not None:
                            on_result(result, finished, total)
            except BaseException:
                # cases running on this machine (and their launchers and ranks) end with the run
                end_running_cases()
                raise
    except BaseException:
        store.set_run_status(run.run_id, RunRecord.INTERRUPTED)
        raise
    store.set_run_status(run.run_id, RunRecord.FINISHED)
    return store.get_run(run.run_id)
