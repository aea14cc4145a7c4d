"""A redis-server of a test's own on a free port, that the test stops and starts again.

Faults are tested on the real thing: the test owns the server, so stopping it cannot
disturb the Redis other tests share, and a stopped server's port refuses connections
at once (as a Redis that went away does).
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    """A TCP port nothing listens on now (on 127.0.0.1)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
