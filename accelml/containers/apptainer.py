"""``runtime = "apptainer"``: ``apptainer exec [--nv] --cleanenv --env ... --bind ... IMAGE CMD``
(Apptainer 1.x; SIF files or sandbox directories). See :mod:`accelml.containers._exec`.

No Apptainer was available where accelml was developed: its command lines are tested as
text against Apptainer's documented options, not run.
"""

from __future__ import annotations

from accelml.containers._exec import exec_runtime

RUNTIME = exec_runtime("apptainer", "apptainer",
                       "Apptainer: apptainer exec IMAGE.sif CMD (--nv for GPUs)")
