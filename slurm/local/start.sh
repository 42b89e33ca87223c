#!/usr/bin/env bash
# A one-node SLURM cluster on this host, for accelml's tests and for trying
# `accelml compare --cluster slurm` on a laptop or CI runner.
#
#   slurm/local/start.sh start    # install (Debian, root) if missing, start munge, slurmctld, slurmd; wait for idle
#   slurm/local/start.sh stop     # stop the daemons again
#   slurm/local/start.sh status   # sinfo, or why it is not up
#
# Exit codes: 0 done; 3 cannot run here (not root, not Debian), with the reason on stdout;
# 1 a step failed, with the step and the reason on stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
state=${ACCELML_SLURM_STATE:-/var/lib/accelml-slurm}
conf=/etc/slurm/slurm.conf
marker="# accelml local single-node SLURM"
host=$(hostname -s)

fail() { echo "slurm/local: step '$1' failed: $2" >&2; exit 1; }

cannot_run_here() {
  if [ "$(id -u)" != 0 ]; then echo "not root: a local SLURM needs root to start its daemons"; return 0; fi
  if [ ! -f /etc/debian_version ]; then echo "not Debian: slurm/local installs Debian's slurm packages"; return 0; fi
  return 1
}

# libpmix-dev: slurmd's mpi/pmix plugin dlopens Debian's pmix2/lib/libpmix.so, which only
# that package ships, and accelml's job scripts start their ranks with srun's PMIx
# (SLURM_MPI_TYPE=pmix): it must be there before slurmd starts (see slurmd_lacks_mpi).
packages=(slurmctld slurmd slurm-client munge libpmix-dev)

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
     && command -v sinfo >/dev/null && command -v munged >/dev/null \
     && dpkg-query -W -f='${Status}' libpmix-dev 2>/dev/null | grep -q "ok installed"; then return 0; fi
  echo "installing Debian's ${packages[*]}"
  bash "$here/../../make/apt-install.sh" "${packages[@]}" \
    || fail "apt-get install" "could not install ${packages[*]}"
}

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
  munge_works && return 0
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1 \
      || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
    chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  fi
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  runuser -u munge -- /usr/sbin/munged || fail "start munged" "munged did not start (see /var/log/munge/munged.log)"
  for _ in $(seq 50); do munge_works && return 0; sleep 0.2; done
  fail "start munged" "munge -n | unmunge does not work"
}

write_config() {
  if [ -f "$conf" ] && ! head -n 1 "$conf" | grep -q "^$marker"; then
    fail "write $conf" "a slurm.conf not written by accelml is already there; refusing to overwrite it"
  fi
  local cpus mem
  cpus=${ACCELML_SLURM_CPUS:-$(( $(nproc) > 4 ? $(nproc) : 4 ))}
  mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  mkdir -p "$state/ctld" "$state/d" /etc/slurm
  sed -e "s|@HOST@|$host|g" -e "s|@STATE@|$state|g" -e "s|@CPUS@|$cpus|g" -e "s|@MEM@|${mem:-1024}|g" \
      -e "s|@CTLD_PORT@|${ACCELML_SLURMCTLD_PORT:-6817}|g" -e "s|@D_PORT@|${ACCELML_SLURMD_PORT:-6818}|g" \
      "$here/slurm.conf.in" > "$conf.new.$$"
  if cmp -s "$conf.new.$$" "$conf"; then rm -f "$conf.new.$$"; else mv "$conf.new.$$" "$conf"; fi   # (several tests start it at once)
}

running() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# slurmd loads every MPI plugin once, when it starts; srun loads the one its step asks for
# when it runs. A slurmd started before the PMIx library was installed (make test starts
# SLURM, then build-horovod.sh installs Open MPI, which brings libpmix-dev) lacks mpi/pmix,
# and then every `srun --mpi=pmix` step hangs: slurmd finds no plugin of the step's id in
# mpi_conf_send_stepd, stops the step daemon's set-up half-way ("_send_slurmstepd_init
# failed"), yet returns errno, 0, which its caller takes as success; it then waits for the
# daemon's reply while the daemon waits for the rest of its set-up (Slurm 22.05
# src/slurmd/slurmd/req.c, src/common/slurm_mpi.c). Whether slurmd logged, since it last
# started, an MPI plugin it could not load:
slurmd_lacks_mpi() {
  [ -f "$state/slurmd.log" ] || return 1
  awk '/slurmd version .* started/ { lacks = 0 } /MPI: Cannot create context for mpi\// { lacks = 1 }
       END { exit !lacks }' "$state/slurmd.log"
}

# Such a slurmd is restarted once a package was installed after it started (its running
# steps go on; it is restarted once, as it starts after that install).
restart_slurmd_lacking_mpi() {
  running "$state/slurmd.pid" && slurmd_lacks_mpi && [ /var/lib/dpkg/status -nt "$state/slurmd.pid" ] \
    || return 0
  echo "slurm/local: restarting slurmd: it could not load an MPI plugin and packages were installed since" >&2
  stop_daemon "$state/slurmd.pid"
}

stop_daemon() {
  local pid
  running "$1" || return 0
  pid=$(cat "$1"); kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
  fail "stop $(basename "$1" .pid)" "pid $pid still runs 10 s after SIGTERM"
}

node_state() { sinfo --noheader --node="$host" --format=%T 2>/dev/null | head -n 1; }

# A step daemon whose set-up slurmd stopped half-way (as in slurmd_lacks_mpi) waits on its
# pipe for ever, never renames itself "slurmstepd: [job.step]", and its job stays completing,
# holding the node. Such a daemon, 10 s old or more, is killed; its job then ends.
clear_stuck_steps() {
  local pid age
  for pid in $(pgrep -x slurmstepd 2>/dev/null); do
    [ "$(tr -d '\0' < "/proc/$pid/cmdline" 2>/dev/null)" = /usr/sbin/slurmstepd ] || continue
    age=$(ps -o etimes= -p "$pid" 2>/dev/null | tr -d ' ') || continue   # (it ended meanwhile)
    if [ -n "$age" ] && [ "$age" -ge 10 ]; then
      echo "slurm/local: killing step daemon $pid, stuck in its set-up for $age s" >&2
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
}

start() {
  local why
  if why=$(cannot_run_here); then echo "$why"; exit 3; fi
  install_packages
  start_munge
  write_config
  exec 9>"$state/start.lock"   # (the SLURM tests start it each, several at once: one restarts a daemon)
  flock 9
  restart_slurmd_lacking_mpi
  running "$state/slurmctld.pid" || slurmctld 9>&- || fail "start slurmctld" "see $state/slurmctld.log"
  running "$state/slurmd.pid" || slurmd 9>&- || fail "start slurmd" "see $state/slurmd.log"
  flock -u 9
  local node=""
  clear_stuck_steps
  for _ in $(seq 120); do
    node=$(node_state)
    case "$node" in
      idle|mixed|allocated) echo "SLURM up: node $host $node"; return 0 ;;
      down*|drain*|drained*) scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true ;;
      completing*) clear_stuck_steps ;;   # (only daemons 10 s into their set-up)
    esac
    sleep 0.5
  done
  fail "wait for node" "node $host is '${node:-unknown}' after 60 s (see $state/slurmctld.log, $state/slurmd.log)"
}

stop() {
  scancel --quiet --user="$(id -un)" 2>/dev/null || true
  stop_daemon "$state/slurmd.pid"
  stop_daemon "$state/slurmctld.pid"
  echo "SLURM stopped"
}

status() {
  if sinfo >/dev/null 2>&1; then sinfo; else echo "SLURM is not answering"; exit 1; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
