#!/usr/bin/env bash
# Start a throwaway OpenSSH server on loopback for the SSH executor tests.
#
# Everything lives under $DSV4_SERVICES_DIR/sshd (default /tmp/dsv4-test-services/sshd): a fresh
# host key, a client key authorized for the current user, sshd_config, and ssh_config (client
# options, host alias "dsv4-test"). Keys are generated here and never committed.
# Idempotent: if the pid file names a live sshd, nothing is started again.
set -euo pipefail

base="${DSV4_SERVICES_DIR:-/tmp/dsv4-test-services}/sshd"
port="${DSV4_SSHD_PORT:-2222}"
sshd_bin="$(command -v sshd || echo /usr/sbin/sshd)"
user="$(id -un)"

if [[ -s "$base/sshd.pid" ]] && kill -0 "$(cat "$base/sshd.pid")" 2>/dev/null; then
    echo "sshd already running (pid $(cat "$base/sshd.pid"), port $port)"
    exit 0
fi

mkdir -p "$base"
chmod 700 "$base"
[[ -f "$base/host_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -f "$base/host_ed25519"
[[ -f "$base/client_ed25519" ]] || ssh-keygen -q -t ed25519 -N '' -f "$base/client_ed25519"
cp "$base/client_ed25519.pub" "$base/authorized_keys"
chmod 600 "$base/authorized_keys"
mkdir -p /run/sshd  # privilege separation directory sshd insists on

cat > "$base/sshd_config" <<CONF
ListenAddress 127.0.0.1
Port $port
HostKey $base/host_ed25519
PidFile $base/sshd.pid
AuthorizedKeysFile $base/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AllowUsers $user
LogLevel VERBOSE
# The campaign tests give the "remote" the environment of a GPU host (doubles on PATH) this way.
AcceptEnv DSV4_* PATH
CONF

cat > "$base/ssh_config" <<CONF
Host dsv4-test
    HostName 127.0.0.1
    Port $port
    User $user
    IdentityFile $base/client_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile $base/known_hosts
    StrictHostKeyChecking accept-new
    BatchMode yes
CONF

"$sshd_bin" -f "$base/sshd_config" -E "$base/sshd.log"
for _ in $(seq 50); do
    [[ -s "$base/sshd.pid" ]] && break
    sleep 0.1
done
if ! [[ -s "$base/sshd.pid" ]]; then
    echo "sshd did not start; see $base/sshd.log" >&2
    exit 1
fi
echo "sshd running (pid $(cat "$base/sshd.pid"), 127.0.0.1:$port, client config $base/ssh_config)"
