#!/usr/bin/env bash
# Stop the test Slurm started by start_slurm.sh: cancel its jobs, let their steps finish, then stop
# slurmd, slurmctld and the private munged by their pid files (never by name).
set -euo pipefail
base="${DSV4_SERVICES_DIR:-/tmp/dsv4-test-services}/slurm"
export SLURM_CONF="$base/slurm.conf"

live() { [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Each daemon takes about 2 s to leave after SIGTERM (and much longer on a loaded machine): they are
# told together and then waited for, by the pids read before any was told (a daemon removes its pid
# file as it leaves).
wait_pid() {
    local pid="$1" file="$2"
    for _ in $(seq 200); do
        kill -0 "$pid" 2>/dev/null || { echo "stopped pid $pid ($file)"; return 0; }
        sleep 0.1
    done
    echo "pid $pid ($file) did not stop within 20 s" >&2
    return 1
}

if live "$base/slurmctld.pid" && live "$base/slurmd.pid"; then
    # Every job on this throwaway cluster belongs to the tests: end them so no slurmstepd lingers.
    scancel --quiet --full --user "$(id -un)" || true
    for _ in $(seq 150); do
        [[ -z "$(squeue -h -o %i 2>/dev/null)" ]] && break
        sleep 0.1
    done
fi
declare -A told=()
for file in "$base/slurmd.pid" "$base/slurmctld.pid" "$base/munge/munged.pid"; do
    live "$file" || continue
    told[$file]="$(cat "$file")"
done
for file in "${!told[@]}"; do kill "${told[$file]}" 2>/dev/null || true; done
for file in "${!told[@]}"; do wait_pid "${told[$file]}" "$file"; done
