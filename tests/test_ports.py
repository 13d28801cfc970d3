"""The port the agent picks for a server it starts (tools/jobs/processes.py:free_port), on this machine's
real kernel: free to bind, and outside the range the kernel hands out to outgoing connections, so no
client on the machine can take it between the pick and the server's bind."""
from __future__ import annotations

import socket

import pytest

from tools.jobs import processes
from tools.jobs.executor import free_local_port


def _ephemeral_range() -> tuple[int, int]:
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    return low, high


def test_a_picked_port_binds_and_lies_below_the_clients_range():
    low, _ = _ephemeral_range()
    if low - processes.FIRST_SERVER_PORT < 1000:
        pytest.skip(f"this kernel's ephemeral range starts at {low}: no room below it, the kernel picks")
    picked = {free_local_port() for _ in range(20)}
    assert all(processes.FIRST_SERVER_PORT <= port < low for port in picked), picked
    assert len(picked) > 1  # chosen at random, so parallel pickers rarely meet
    for port in picked:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_port_someone_listens_on_is_never_picked():
    """Hold every port of a small window: whatever is picked lies outside it and still binds."""
    held = []
    try:
        for _ in range(200):
            s = socket.socket()
            s.bind(("127.0.0.1", free_local_port()))
            s.listen()
            held.append(s)
        taken = {s.getsockname()[1] for s in held}
        for _ in range(50):
            port = processes.free_port("127.0.0.1")
            assert port not in taken
    finally:
        for s in held:
            s.close()


def test_ipv6_loopback_and_every_interface_are_served():
    assert processes.free_port("") > 0
    if socket.has_ipv6:
        try:
            port = processes.free_port("::1")
        except OSError:
            pytest.skip("no IPv6 loopback here")
        assert port > 0
