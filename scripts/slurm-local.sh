#!/usr/bin/env bash
# A one-machine Slurm (slurmctld + slurmd + slurmdbd with accounting in MariaDB, munge) for the
# tests and for developers: `scripts/slurm-local.sh start|stop|status|env`. Everything lives
# under $PORTAL_SLURM_DIR (default var/slurm); daemons are started and stopped by pid file.
# Needs Debian's slurm-wlm, slurmdbd and munge, and MariaDB on 127.0.0.1:3306 (root, no
# password). GPUs are declared as GRES backed by placeholder files: no GPU is needed.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${PORTAL_SLURM_DIR:-$ROOT/var/slurm}"
HOST="$(hostname -s)"
# Job ids restart at 1 with every new state directory, so each one gets its own cluster name in
# the accounting database: sacct never mixes this cluster's job 3 with an earlier one's.
mkdir -p "$DIR"
[ -f "$DIR/cluster-name" ] || echo "portal$(date +%s)" > "$DIR/cluster-name"
CLUSTER="${PORTAL_SLURM_CLUSTER:-$(cat "$DIR/cluster-name")}"
GPUS="${PORTAL_SLURM_GPUS:-8}"
DB_HOST="${PORTAL_SLURM_DB_HOST:-127.0.0.1}"
DB_NAME="${PORTAL_SLURM_DB:-slurm_acct_portal}"
CTLD_PORT=16817 SLURMD_PORT=16818 DBD_PORT=16819
ACCOUNTS="${PORTAL_SLURM_ACCOUNTS:-vision radar}"
export SLURM_CONF="$DIR/etc/slurm.conf"

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local seconds=$1 what=$2 deadline; shift 2
  deadline=$((SECONDS + seconds))
  while [ "$SECONDS" -lt "$deadline" ]; do timeout 5 "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "slurm-local: $what did not come up; logs in $DIR/log" >&2
  tail -n 20 "$DIR"/log/*.log >&2 || true
  return 1
}

write_config() {
  mkdir -p "$DIR"/{etc,spool,state,log,run,dev,munge}
  for i in $(seq 0 $((GPUS - 1))); do : > "$DIR/dev/nvidia$i"; done
  local cpus mem
  cpus=$(nproc)
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
  cat > "$DIR/etc/slurm.conf" <<CONF
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu,gres/gpu:h100
AccountingStorageEnforce=associations,limits,qos
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=2
KillWait=2
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$HOST CPUs=$cpus RealMemory=$mem Gres=gpu:h100:$GPUS State=UNKNOWN
PartitionName=gpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
CONF
  cat > "$DIR/etc/gres.conf" <<CONF
NodeName=$HOST Name=gpu Type=h100 File=$DIR/dev/nvidia[0-$((GPUS - 1))]
CONF
  cat > "$DIR/etc/slurmdbd.conf" <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$DIR/run/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=$DB_HOST
StoragePort=3306
StorageUser=root
StorageLoc=$DB_NAME
CONF
  chmod 600 "$DIR/etc/slurmdbd.conf"
}

start() {
  command -v slurmctld >/dev/null || { echo "slurm-local: install slurm-wlm slurmdbd munge" >&2; exit 2; }
  write_config
  # Slurm's clients (sbatch, sacct) talk to munge on its default socket: use a munged already
  # there, or start ours on it.
  if ! (munge -n | unmunge) >/dev/null 2>&1; then
    [ -f "$DIR/munge/munge.key" ] || mungekey -c -k "$DIR/munge/munge.key" 2>/dev/null \
      || dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
    mkdir -p /run/munge
    munged -f --key-file="$DIR/munge/munge.key" --socket=/run/munge/munge.socket.2 \
      --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed"
    wait_for 10 munged bash -c "munge -n | unmunge"
  fi
  if ! pid_alive "$DIR/run/slurmdbd.pid"; then
    slurmdbd  # reads slurmdbd.conf beside $SLURM_CONF
    wait_for 30 slurmdbd sacctmgr -n show cluster
  fi
  sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
  for account in $ACCOUNTS; do
    sacctmgr -i add account "$account" cluster="$CLUSTER" >/dev/null 2>&1 || true
    sacctmgr -i add user root account="$account" cluster="$CLUSTER" >/dev/null 2>&1 || true
  done
  if ! pid_alive "$DIR/run/slurmctld.pid"; then
    slurmctld -f "$SLURM_CONF"
    wait_for 30 slurmctld scontrol ping
  fi
  if ! pid_alive "$DIR/run/slurmd.pid"; then
    slurmd -f "$SLURM_CONF"
  fi
  wait_for 60 "node $HOST" bash -c "sinfo -h -n $HOST -o %t | grep -qE '^(idle|mix|alloc)'"
  echo "slurm-local: up (SLURM_CONF=$SLURM_CONF)"
}

stop() {
  for daemon in slurmd slurmctld slurmdbd munged; do
    local pidfile="$DIR/run/$daemon.pid"
    if pid_alive "$pidfile"; then
      kill "$(cat "$pidfile")"
      for _ in $(seq 40); do pid_alive "$pidfile" || break; sleep 0.25; done
      pid_alive "$pidfile" && kill -9 "$(cat "$pidfile")" || true
    fi
    rm -f "$pidfile"
  done
  echo "slurm-local: stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) scontrol ping && sinfo ;;
  env) echo "export SLURM_CONF=$SLURM_CONF" ;;
  *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
