"""A real ``reactor serve`` process on a free loopback port, for the HTTP tests."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest

ALICE = "tok-alice-0123456789"
"""An admin's token."""
BOB = "tok-bob-9876543210"
"""An approver's (and operator's) token."""
CAROL = "tok-carol-1357924680"
"""A viewer's token."""
DAN = "tok-dan-2468013579"
"""An operator's token (a line without roles)."""
ERIN = "tok-erin-1122334455"
"""An approver's token (an approver alone)."""
TOKENS = (
    f"{ALICE}:alice:admin,{BOB}:bob:approver+operator,{CAROL}:carol:viewer,{DAN}:dan,"
    f"{ERIN}:erin:approver"
)
APP = "tests.service.served:make_service"


@dataclasses.dataclass
class Server:
    """A running server: its address, its process, what it logged and its database."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path
    db: str

    def client(self, token: str | None = ALICE, **options: Any) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx2.Client(base_url=self.url, headers=headers, timeout=30, **options)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then wait for the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def serve_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "reactor", "serve", *options]


@contextmanager
def serving(
    db: str,
    log: Path,
    *,
    app: str | None = APP,
    grace: float = 5,
    env: Mapping[str, str] | None = None,
) -> Iterator[Server]:
    """``reactor serve`` on ``db`` until the block ends (stopped, also on failure).

    It listens on a free port it takes itself (``--port 0``) and logs: a port chosen here
    and bound there could be taken in between, by another test's server.
    """
    options = ["--db", db, "--port", "0", "--grace", str(grace)]
    if app is not None:
        options += ["--app", app]
    environ = {**os.environ, "PYTHONPATH": os.getcwd(), "REACTOR_API_TOKENS": TOKENS}
    environ.update(env or {})
    with log.open("ab") as sink:
        logged = sink.tell()  # what earlier servers wrote to the same log
        process = subprocess.Popen(serve_command(*options), stdout=sink, stderr=sink, env=environ)
    try:
        server = Server(_listening(process, log, logged), process, log, db)
        _ready(server)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


DATABASES = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres")]
"""The kinds of database a module's server runs on (its fixture's ``params``)."""


@contextmanager
def serving_on(request: pytest.FixtureRequest, app: str = APP) -> Iterator[Server]:
    """``reactor serve`` on a new database of the kind ``request.param`` names.

    A SQLite file, or the module's own PostgreSQL database (``postgres_database``).
    """
    folder: Path = request.getfixturevalue("tmp_path_factory").mktemp(str(request.param))
    if request.param == "sqlite":
        db = f"sqlite:///{folder / 'app.db'}"
    else:
        db = str(request.getfixturevalue("postgres_database"))
    with serving(db, folder / "server.log", app=app) as running:
        yield running


def _listening(
    process: subprocess.Popen[bytes], log: Path, logged: int, timeout: float = 60
) -> str:
    """The address its ``listening`` line gives (written to ``log`` after ``logged``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with log.open("rb") as written:
            written.seek(logged)
            for line in written.read().split(b"\n")[:-1]:  # whole lines only
                if line.startswith(b"{") and (entry := json.loads(line))["event"] == "listening":
                    url: str = entry["url"]
                    return url
        if process.poll() is not None:
            output = log.read_text(errors="replace")
            pytest.fail(f"reactor serve exited ({process.returncode}):\n{output}")
        time.sleep(0.1)
    pytest.fail(f"reactor serve did not listen in {timeout} s:\n{log.read_text(errors='replace')}")


def _ready(server: Server, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            pytest.fail(f"reactor serve exited ({server.process.returncode}):\n{server.output()}")
        try:
            if httpx2.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"reactor serve was not ready in {timeout} s:\n{server.output()}")


def ok(response: Any, status: int = 200) -> Any:
    """The JSON of an answer of status ``status`` (httpx's or the ASGI test client's)."""
    assert response.status_code == status, response.text
    return response.json()


def wait_for(check: Any, timeout: float = 60, every: float = 0.1) -> Any:
    """Call ``check()`` until it returns something truthy; that value (fails after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"still {value!r} after {timeout} s")
        time.sleep(every)
