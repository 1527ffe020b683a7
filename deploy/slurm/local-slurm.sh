#!/usr/bin/env bash
# A one-node Slurm on this machine, for trying and testing `dpipe train --cluster slurm`.
#
#   deploy/slurm/local-slurm.sh start DIR   # munged, slurmctld and slurmd; prints the SLURM_CONF line
#   export SLURM_CONF=DIR/slurm.conf         # then sbatch, squeue, scancel, dpipe ... --cluster slurm
#   deploy/slurm/local-slurm.sh stop DIR    # stops all three (scancel of the jobs left included)
#
# Everything lives in DIR (created if absent): its own munge key and socket, slurm.conf, the
# controller's state, the spool, the logs (slurmctld.log, slurmd.log, munged.log) and jobcomp.log,
# one line per finished job (there is no accounting database, so no sacct). No system file is
# touched, so it runs beside a real Slurm; it needs the slurm-wlm and munge packages
# (Debian: apt-get install -y slurm-wlm munge) and runs its daemons as the calling user, which
# is why it is meant for root in a throw-away machine or container (CI).
#
# The node is "localhost" (127.0.0.1) with this machine's CPUs and half its memory; the partition
# "debug" is the default. No cgroups: proctrack/linuxproc, task/none. Ports: SLURMCTLD_PORT and
# SLURMD_PORT (default 6817 and 6818). start waits up to START_TIMEOUT seconds (default 60) for
# the node to be idle and exits 1 naming the failing daemon (with the tail of its log) otherwise.
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|status DIR" >&2
  exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$2
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf
export SLURM_CONF=$conf

fail() {
  # fail MESSAGE [LOG]: one line, then the last lines of the daemon's log
  echo "local-slurm: $1" >&2
  if [ $# -gt 1 ] && [ -f "$2" ]; then
    tail -n 20 "$2" | sed 's/^/  | /' >&2
  fi
  exit 1
}

alive() {
  # alive PIDFILE: the process named by PIDFILE runs
  [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

write_conf() {
  local cpus mem_mb
  cpus=$(nproc)
  mem_mb=$(awk '/^MemTotal:/ {print int($2 / 1024 / 2)}' /proc/meminfo)
  cat >"$conf" <<EOF
# written by deploy/slurm/local-slurm.sh: a one-node Slurm on localhost
ClusterName=dpipe-local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${SLURMCTLD_PORT:-6817}
SlurmdPort=${SLURMD_PORT:-6818}
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/jobcomp.log
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  command -v munged >/dev/null || fail "munged not found: apt-get install -y munge"
  command -v slurmctld >/dev/null || fail "slurmctld not found: apt-get install -y slurm-wlm"
  command -v slurmd >/dev/null || fail "slurmd not found: apt-get install -y slurm-wlm"
  if alive "$dir/slurmctld.pid" || alive "$dir/slurmd.pid" || alive "$dir/munged.pid"; then
    fail "a local Slurm already runs in $dir: $0 stop $dir first"
  fi
  chmod 700 "$dir"
  mkdir -p "$dir/state" "$dir/spool"
  rm -f "$dir"/*.log
  if [ ! -s "$dir/munge.key" ]; then
    (umask 077 && head -c 1024 /dev/urandom >"$dir/munge.key")
  fi
  write_conf
  munged --force --socket="$dir/munge.socket" --key-file="$dir/munge.key" --pid-file="$dir/munged.pid" \
    --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" ||
    fail "munged did not start" "$dir/munged.log"
  slurmctld -c -f "$conf" || fail "slurmctld did not start" "$dir/slurmctld.log"
  slurmd -N localhost -f "$conf" || fail "slurmd did not start" "$dir/slurmd.log"
  local deadline=$((SECONDS + ${START_TIMEOUT:-60})) state=""
  while [ $SECONDS -lt $deadline ]; do
    alive "$dir/slurmctld.pid" || { sleep 0.5; alive "$dir/slurmctld.pid" || fail "slurmctld exited" "$dir/slurmctld.log"; }
    state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
    case $state in
      idle | mixed | allocated) echo "local-slurm: node localhost $state; export SLURM_CONF=$conf"; return 0 ;;
    esac
    sleep 0.5
  done
  alive "$dir/slurmd.pid" || fail "slurmd exited" "$dir/slurmd.log"
  fail "node localhost not idle within ${START_TIMEOUT:-60} s (state: ${state:-unknown})" "$dir/slurmctld.log"
}

stop_pid() {
  # stop_pid PIDFILE: TERM, then KILL after 10 s
  local pid i
  [ -s "$1" ] || return 0
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || { rm -f "$1"; return 0; }
  for i in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$1"; return 0; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$1"
}

stop() {
  [ -f "$conf" ] || fail "no local Slurm in $dir (no slurm.conf)"
  if alive "$dir/slurmctld.pid"; then
    scancel --full --quiet --user "$(id -un)" 2>/dev/null || true
  fi
  stop_pid "$dir/slurmd.pid"
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munged.pid"
  echo "local-slurm: stopped ($dir)"
}

case $cmd in
  start) start ;;
  stop) stop ;;
  status) sinfo && squeue ;;
  *) usage ;;
esac
