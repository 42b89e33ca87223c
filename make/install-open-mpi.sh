#!/usr/bin/env bash
# Debian's Open MPI (libopenmpi-dev openmpi-bin), so that make/build-horovod.sh builds Horovod
# with its MPI controller and the mpirun launcher works; as root on Debian, where mpicxx is
# missing. Elsewhere nothing: Horovod is then built without MPI. `make` runs this beside the
# venv's install, so that on a fresh machine its apt-get is not on the Horovod build's path.
#
#   make/install-open-mpi.sh        # exit 0 when present or installed; apt-get's status otherwise
set -euo pipefail
if command -v mpicxx >/dev/null 2>&1 || [ "$(id -u)" != 0 ] || [ ! -f /etc/debian_version ]; then
  exit 0
fi
echo "installing Debian's Open MPI (libopenmpi-dev openmpi-bin) so that Horovod gets its MPI controller"
bash "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh" libopenmpi-dev openmpi-bin
