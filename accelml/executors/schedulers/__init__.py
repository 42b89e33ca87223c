"""One module per scheduler (job-queue kind), each defining ``SCHEDULER``, a
:class:`~accelml.executors.cluster_settings.Scheduler` record: ``local`` (a dask LocalCluster on this
machine), ``slurm`` and ``pbs`` (worker jobs through dask-jobqueue).

A third party adds one without editing accelml: a module defining ``SCHEDULER`` and an
entry point in its ``pyproject.toml``::

    [project.entry-points."accelml.schedulers"]
    sge = "acme_sge:SCHEDULER"

Every scheduler is listed by :data:`accelml.executors.cluster_settings.SCHEDULERS`.
"""
