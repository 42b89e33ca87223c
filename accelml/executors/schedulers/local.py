"""``--cluster local`` (the default): a dask LocalCluster on this machine, no batch jobs.

``accelml slurm-script`` shows the SLURM jobs such a comparison would submit.
"""

from __future__ import annotations

from accelml.executors.cluster_settings import Scheduler
from accelml.executors.local_cluster import LocalExecutor, machine_shortfall, scale_problem

SCHEDULER = Scheduler(name="local", executor=LocalExecutor, preview_as="slurm",
                      scale_problem=scale_problem, shortfall=machine_shortfall)
