"""Small real case functions for the executor tests (shipped to workers by value)."""

from __future__ import annotations


def where_am_i(label):
    """The batch job and allocation this call ran in."""
    import os

    return {
        "label": label,
        "job": os.environ.get("SLURM_JOB_ID"),
        "cpus_per_task": os.environ.get("SLURM_CPUS_PER_TASK"),
        "pid": os.getpid(),
    }


def hold_until_released(args):
    """Write ``started-<index>-<job>-<pid>`` into ``directory``, then wait for ``directory/release``.

    Lets a test act on a case while it is certainly running, without sleeping for a guess.
    """
    import os
    import time
    from pathlib import Path

    directory, index = args
    job = os.environ.get("SLURM_JOB_ID", "none")
    Path(directory, f"started-{index}-{job}-{os.getpid()}").touch()
    deadline = time.monotonic() + 300
    while not Path(directory, "release").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.05)
    return {"index": index, "job": job, "pid": os.getpid()}


def fit_digits(seed):
    """A real small case: fit a classifier on sklearn's digits, return a digest of its predictions."""
    import hashlib

    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    X, y = load_digits(return_X_y=True)
    model = LogisticRegression(max_iter=200, random_state=seed).fit(X[:1000], y[:1000])
    return hashlib.sha256(model.predict(X[1000:]).tobytes()).hexdigest()


def start_ranks(ranks):
    """Start ``ranks`` processes with the launcher the worker job names, gather what they say."""
    import os
    import subprocess
    import sys

    launcher = os.environ.get("ACCELML_RANK_LAUNCHER", "")
    command = ["srun", f"--ntasks={ranks}", "--kill-on-bad-exit=1", sys.executable, "-c",
               "import os; print(os.environ['SLURM_PROCID'], os.environ['SLURM_JOB_ID'])"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    lines = sorted(line.split() for line in out.stdout.splitlines() if line.strip())
    return {"launcher": launcher, "ranks": [rank for rank, _ in lines], "jobs": [job for _, job in lines]}


def http_listeners(_):
    """This worker's listening sockets other than its dask comm port, and whether its HTTP
    server's port (distributed starts one on every worker) accepts a connection."""
    import socket

    import psutil
    from distributed import get_worker

    worker = get_worker()
    comm_port = int(worker.address.rsplit(":", 1)[1])
    listening = [c.laddr for c in psutil.Process().net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port != comm_port]
    http_port = worker.http_server.port
    try:
        socket.create_connection(("127.0.0.1", http_port), timeout=5).close()
        accepted = True
    except OSError:
        accepted = False
    return {"other_listeners": [f"{a.ip}:{a.port}" for a in listening], "http_accepts": accepted}
def job_facts(label):
    """The time limit SLURM gave this call's job, and what the job's prologue exported."""
    import os
    import subprocess

    job = os.environ.get("SLURM_JOB_ID")
    shown = subprocess.run(["scontrol", "show", "job", str(job)], capture_output=True, text=True).stdout
    limit = next((part.split("=", 1)[1] for part in shown.split() if part.startswith("TimeLimit=")), None)
    return {"label": label, "time_limit": limit, "site_prologue": os.environ.get("ACCELML_SITE_PROLOGUE")}
