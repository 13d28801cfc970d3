#!/usr/bin/env bash
# Stop the test sshd started by start_sshd.sh, by its pid file (never by name).
set -euo pipefail
base="${DSV4_SERVICES_DIR:-/tmp/dsv4-test-services}/sshd"
if [[ -s "$base/sshd.pid" ]]; then
    pid="$(cat "$base/sshd.pid")"
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$base/sshd.pid"
    echo "sshd (pid $pid) stopped"
else
    echo "no sshd pid file under $base"
fi
