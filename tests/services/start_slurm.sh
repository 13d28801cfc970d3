#!/usr/bin/env bash
# Start a one-node Slurm cluster (munged + slurmctld + slurmd) on this machine for the tests.
#
# Config, state, spool and logs live under $DSV4_SERVICES_DIR/slurm (default
# /tmp/dsv4-test-services/slurm); clients find the cluster through SLURM_CONF=<that>/slurm.conf.
# The node advertises two fake GPUs (gres "gpu" on character devices that are not GPUs) so that --gres=gpu:N and
# --gpus=N requests schedule. Partition "debug" is the default. munged runs as user munge with
# Debian's key, on a socket of its own. Ports: DSV4_SLURMCTLD_PORT/DSV4_SLURMD_PORT (6817/6818).
# Idempotent; stop with stop_slurm.sh.
set -euo pipefail

base="${DSV4_SERVICES_DIR:-/tmp/dsv4-test-services}/slurm"
ctld_port="${DSV4_SLURMCTLD_PORT:-6817}"
slurmd_port="${DSV4_SLURMD_PORT:-6818}"
host="$(hostname -s)"
mkdir -p "$base/state" "$base/spool"
for i in 0 1; do  # stand-ins for /dev/nvidiaN (character devices like /dev/null): Slurm only counts them
    [[ -e "$base/fake-gpu$i" ]] || mknod "$base/fake-gpu$i" c 1 3
done

live() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# -- munge: the authentication Slurm's daemons and clients share ---------------------------
# A private munged (own socket under $base/munge) so that several test sessions never share or
# stop each other's daemons; it uses the distribution's key.
mkdir -p "$base/munge"
chown munge:munge "$base/munge"
chmod 0755 "$base" "$base/munge"
if [[ ! -s /etc/munge/munge.key ]]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
fi
if ! live "$base/munge/munged.pid"; then
    runuser -u munge -- /usr/sbin/munged --socket="$base/munge/munge.sock" \
        --pid-file="$base/munge/munged.pid" --log-file="$base/munge/munged.log" \
        --seed-file="$base/munge/munged.seed" --key-file=/etc/munge/munge.key
fi

cat > "$base/slurm.conf" <<CONF
ClusterName=dsv4test
# Loopback addresses: this works even where the host name does not resolve.
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$base/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$base/state
SlurmdSpoolDir=$base/spool
SlurmctldPidFile=$base/slurmctld.pid
SlurmdPidFile=$base/slurmd.pid
SlurmctldLogFile=$base/slurmctld.log
SlurmdLogFile=$base/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=30
SlurmctldTimeout=30
MinJobAge=600
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF

cat > "$base/gres.conf" <<CONF
AutoDetect=off
NodeName=$host Name=gpu File=$base/fake-gpu[0-1]
CONF

export SLURM_CONF="$base/slurm.conf"
live "$base/slurmctld.pid" || /usr/sbin/slurmctld -c -f "$SLURM_CONF"
live "$base/slurmd.pid" || /usr/sbin/slurmd -f "$SLURM_CONF"

for _ in $(seq 100); do
    if sinfo -h -N -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
        echo "slurm running (node $host idle); export SLURM_CONF=$SLURM_CONF"
        exit 0
    fi
    sleep 0.2
done
echo "slurm did not come up; see $base/slurmctld.log and $base/slurmd.log" >&2
sinfo -N -l >&2 || true
exit 1
