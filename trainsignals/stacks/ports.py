"""Free TCP ports on 127.0.0.1 for the processes a stack starts (trainsignals/stacks/stack.py,
the fleet replay, the test stacks)."""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

HOST = "127.0.0.1"


def _ephemeral_low(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> int:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


_PORTS_FLOOR = 10000
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def free_port() -> int:
    """A port free on HOST now, below the kernel's ephemeral range, never handed out before
    by this process. A port the kernel picks for `bind(0)` is in that range, where every
    outgoing connection (Prometheus scraping eight stacks' simulators each second) and every
    other `bind(0)` draws its local port too: one could take it before the server started on
    it binds, and that server would exit ("address already in use": the likeliest cause of a
    matrix Alertmanager that exited at start, its log lost with its folder). Below the range only
    another free_port() can pick the same port: this process never does, another process
    picks at random among ~20,000."""
    ceiling = _ephemeral_low()
    if ceiling - _PORTS_FLOOR < 1000:  # an ephemeral range reaching down here: the kernel's pick
        with socket.socket() as s:
            s.bind((HOST, 0))
            return s.getsockname()[1]
    for _ in range(1000):
        port = random.randrange(_PORTS_FLOOR, ceiling)
        with _handed_out_lock:
            if port in _handed_out:
                continue
            with socket.socket() as s:
                try:
                    s.bind((HOST, port))
                except OSError:
                    continue
            _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port on {HOST} between {_PORTS_FLOOR} and {ceiling}")
