"""``runtime = "singularity"``: ``singularity exec [--nv] --cleanenv --env ... --bind ... IMAGE CMD``
(SingularityCE 3.6+ for ``--env``; SIF files or sandbox directories). See
:mod:`accelml.containers._exec`.

No Singularity was available where accelml was developed: its command lines are tested as
text against SingularityCE's documented options, not run.
"""

from __future__ import annotations

from accelml.containers._exec import exec_runtime

RUNTIME = exec_runtime("singularity", "singularity",
                       "SingularityCE: singularity exec IMAGE.sif CMD (--nv for GPUs)")
