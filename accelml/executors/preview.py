"""What ``compare --cluster KIND`` would submit to a batch system, as text (``accelml slurm-script``).

The worker job scripts are built by the same code the executor uses
(:func:`accelml.executors.scripts.worker_job_script`), pool by pool and job by job. Three
things are only known when a comparison starts and appear as placeholders: the scheduler
address (``SCHEDULER-ADDRESS:PORT``), the run name (``accelml-XXXXXX``) and its private
certificate directory (``tls-XXXXXXXX``).
"""

from __future__ import annotations

import shlex

from accelml.cases import Experiment
from accelml.containers import wrap
from accelml.executors.cluster_settings import SCHEDULERS, ClusterSettings, Scheduler
from accelml.executors.jobqueue import plan_pools
from accelml.executors.resources import CaseNeeds
from accelml.executors.scripts import (
    batch_script,
    placeholder_security,
    worker_job_script,
)

RUN_PLACEHOLDER = "accelml-XXXXXX"


def previewed_scheduler(settings: ClusterSettings) -> Scheduler:
    """The scheduler whose scripts ``slurm-script`` prints for ``settings``: its own, or for
    one that submits no jobs (``local``), the one its record names (``preview_as``)."""
    scheduler = SCHEDULERS.get(settings.kind)
    if scheduler.job_queue is None and scheduler.preview_as is not None:
        return SCHEDULERS.get(scheduler.preview_as)
    return scheduler


def worker_jobs_preview(scheduler: Scheduler, experiment: Experiment, settings: ClusterSettings) -> str:
    """Every worker job script of the run, with a comment header per pool."""
    queue = scheduler.queue()
    cases = list(experiment.cases)
    needs = [CaseNeeds.of_case(case) for case in cases]
    pools = plan_pools(needs, settings.resources, settings.jobs)
    run_directory = settings.shared_path / RUN_PLACEHOLDER
    security = placeholder_security(str(run_directory)) if settings.tls else None
    address = "tls://SCHEDULER-ADDRESS:PORT" if settings.tls else "tcp://SCHEDULER-ADDRESS:PORT"
    total_jobs = sum(jobs for _, jobs, _ in pools)
    spec = experiment.path or "<embedded spec>"
    out = [
        f"# accelml slurm-script: {spec} -> {total_jobs} worker job(s) for {len(cases)} case(s), "
        f"submitted with {queue.submit} by 'python -m accelml compare --cluster {scheduler.name}'",
        f"# Filled in when the comparison starts: SCHEDULER-ADDRESS:PORT (the scheduler it runs, "
        f"{'mutual TLS' if settings.tls else 'NO TLS'}), {RUN_PLACEHOLDER} (the run name) and "
        "tls-XXXXXXXX (the run's 0700 certificate directory).",
    ]
    for number, (resources, jobs, indices) in enumerate(pools, start=1):
        labels = [cases[index].label for index in indices]
        out += ["", f"# ---- pool {number}/{len(pools)}: {len(indices)} case(s) on {jobs} job(s): "
                    f"{resources.describe()}"]
        out += [f"#      {label}" for label in labels[:8]]
        if len(labels) > 8:
            out.append(f"#      ... and {len(labels) - 8} more")
        for job in range(jobs):
            out += [f"# ---- job {job + 1}/{jobs} of pool {number}",
                    worker_job_script(scheduler, resources, settings, address=address, job_name=RUN_PLACEHOLDER,
                                      worker_name=f"{resources.pool_tag}-{job}",
                                      log_directory=str(run_directory / "logs"), security=security).rstrip()]
    return "\n".join(out + container_commands(experiment)) + "\n"


def container_commands(experiment: Experiment) -> list[str]:
    """For each case in a container image, the command its worker starts it with (the
    paths of its scratch folder as placeholders); the ranks it starts (horovodrun, torch's
    local processes) run inside the same container."""
    lines = []
    for case in experiment.cases:
        if case.container is None:
            continue
        argv = [case.container.python, "-m", "accelml", "run-case", "SCRATCH/input.json",
                "--output", "SCRATCH/result.json"]
        wrapped = wrap(case.container, argv, {}, binds=["ACCELML-SOURCE", "SCRATCH", "DATASET-CACHE", "HOME"],
                       gpus=case.device == "cuda", workdir="SCRATCH", check=False)
        lines += ["", f"# ---- case {case.label}: its worker starts it in its container as",
                  "#   " + " ".join(shlex.quote(word) for word in wrapped.argv)]
    if lines:
        lines.insert(1, "# SCRATCH: the case's scratch folder; ACCELML-SOURCE: accelml's own source; "
                        "DATASET-CACHE: the dataset cache; HOME: the home folder (each bound at the same path)")
    return lines


def batch_preview(scheduler: Scheduler, spec_path: str | None, experiment: Experiment,
                  settings: ClusterSettings) -> str:
    """One job that runs the whole comparison on one node (``--batch``)."""
    jobs = settings.jobs or 1
    spec = spec_path or "<embedded>"
    script = batch_script(scheduler, spec_path or "", settings, jobs=jobs)
    if spec_path is None:
        script = script.replace(" compare  --cluster", " compare --cluster")
    header = (f"# accelml slurm-script --batch: the whole comparison of {spec} "
              f"({len(experiment.cases)} case(s)) as one {scheduler.queue().submit} job\n")
    lines = script.splitlines(keepends=True)
    return lines[0] + header + "".join(lines[1:])
