"""A redis-server of a test's own on a free port, that the test stops and starts again.

Faults are tested on the real thing: the test owns the server, so stopping it cannot
disturb the Redis other tests share, and a stopped server's port refuses connections
at once (as a Redis that went away does).
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import redis


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on and no other test here was given.

    A port the kernel picks (``bind(0)``) is free only until the socket closes: the
    server the test starts on it can find it taken by another test's server (which took
    ``--port 0``) or redis-server, and the test then talks to that one. So ports come
    from below the kernel's ephemeral range, where nobody else is given one, and from a
    block of this pytest worker's own, one after another.
    """
    while True:
        port = next(_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # in use (or just closed) by some other process: the next one
                continue
            return port


def _ports() -> Iterator[int]:
    """This worker's ports, from a random start in its block (two runs side by side)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as limits:
        ephemeral = int(limits.read().split()[0])
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    size = 1000
    blocks = (ephemeral - FIRST_PORT) // size
    if blocks < 1:  # no room below the ephemeral ports: let the kernel choose
        while True:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                yield sock.getsockname()[1]
    first = FIRST_PORT + int(worker) % blocks * size
    start = random.randrange(size)
    for step in itertools.count():
        yield first + (start + step) % size


FIRST_PORT = 10_000
_PORTS = _ports()


class RedisServer:
    """``redis-server`` on 127.0.0.1:``port``, without persistence, not started yet.

    Args:
        folder: Its working directory.
        port: Its port (a free one by default): it keeps it across restarts.
    """

    def __init__(self, folder: Path, port: int | None = None) -> None:
        self.folder = folder
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, deadline: float = 30) -> None:
        """Start it and wait (polling, up to ``deadline`` seconds) until it answers."""
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.folder)]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        until = time.monotonic() + deadline
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    pass
                if self.process.poll() is not None or time.monotonic() > until:
                    raise AssertionError(f"redis-server did not start on port {self.port}")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        """Kill it (as a crash would) and wait until it is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait(10)
        self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_connect_timeout=2)
