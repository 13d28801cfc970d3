#!/usr/bin/env bash
# Stop the test Slurm started by start_slurm.sh: cancel its jobs, let their steps finish, then stop
# slurmd, slurmctld and the private munged by their pid files (never by name).
set -euo pipefail
base="${DSV4_SERVICES_DIR:-/tmp/dsv4-test-services}/slurm"
export SLURM_CONF="$base/slurm.conf"

live() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid_file() {
    local file="$1"
    live "$file" || return 0
    local pid
    pid="$(cat "$file")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    echo "stopped pid $pid ($file)"
}

if live "$base/slurmctld.pid" && live "$base/slurmd.pid"; then
    # Every job on this throwaway cluster belongs to the tests: end them so no slurmstepd lingers.
    scancel --quiet --full --user "$(id -un)" || true
    for _ in $(seq 150); do
        [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break
        sleep 0.1
    done
fi
stop_pid_file "$base/slurmd.pid"
stop_pid_file "$base/slurmctld.pid"
stop_pid_file "$base/munge/munged.pid"
