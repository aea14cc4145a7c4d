"""Degraded, not stuck: a worker started while Redis is down (a real `reactor worker`
process, a private redis-server the test starts late, real PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reactor.service._scaleout.queue import QueueSettings
from reactor.service._scaleout.worker import live_workers
from tests.redis_server import RedisServer
from tests.service.test_scale_out import ended, recordings, submit, wait_for

NEW = "tests.service.queued:make_service"
RECLAIM = 2.0


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    """A redis-server of the test's own, not started yet; this process queues to it."""
    redis_server = RedisServer(tmp_path)
    monkeypatch.setenv("REACTOR_REDIS_URL", redis_server.url)
    try:
        yield redis_server
    finally:
        redis_server.stop()


@contextmanager
def worker(
    app: str, db: str, url: str, tmp_path: Path, name: str, reclaim: float = RECLAIM
) -> Iterator[subprocess.Popen[bytes]]:
    """A `reactor worker` of ``app`` (its output in ``<name>.log``), killed at the end."""
    env = {
        **os.environ,
        "REACTOR_REDIS_URL": url,
        "REACTOR_RECLAIM_AFTER": str(reclaim),
        "REACTOR_SERVICE_DB": db,
        "REACTOR_TEST_STEPS": str(tmp_path / "steps.log"),
        "REACTOR_TEST_REACTIONS": str(tmp_path / "reactions.log"),
    }
    command = [sys.executable, "-m", "reactor", "worker", "--app", app, "--concurrency", "4"]
    with (tmp_path / f"{name}.log").open("wb") as log:
        process = subprocess.Popen(
            [*command, "--grace", "5"], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def beating(process: subprocess.Popen[bytes], url: str, tmp_path: Path, name: str) -> None:
    """Wait until ``process`` is among the live workers (it never exits meanwhile)."""

    def listed() -> bool:
        alive(process, tmp_path, name)
        return any(w["pid"] == process.pid for w in asyncio.run(live_workers(QueueSettings(url))))

    wait_for(listed, 60, f"{name} to beat")


def alive(process: subprocess.Popen[bytes], tmp_path: Path, name: str) -> None:
    if process.poll() is not None:
        said = (tmp_path / f"{name}.log").read_text()
        raise AssertionError(f"{name} exited with {process.returncode}:\n{said}")


def said(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text()


@pytest.mark.timeout(150)
def test_a_worker_started_while_redis_is_down_waits_for_it_and_then_works(
    postgres_url: str, server: RedisServer, tmp_path: Path
) -> None:
    """Redis is not there when the worker starts: it retries with backoff, saying so, and
    never exits; once Redis is up it takes jobs as usual."""
    db = postgres_url
    with worker(NEW, db, server.url, tmp_path, "worker") as process:

        def retried() -> bool:
            alive(process, tmp_path, "worker")
            return said(tmp_path, "worker").count("redis unreachable; waiting for it") >= 3

        wait_for(retried, 60, "the worker to try Redis three times")
        server.start()
        beating(process, server.url, tmp_path, "worker")
        (run_id,) = asyncio.run(submit(db, 1, seconds=0.1))
        wait_for(lambda: ended(db, [run_id]), 60, "the run to end")
        alive(process, tmp_path, "worker")
    (log,) = recordings(db, [run_id]).values()
    assert log.status == "completed"
    assert "redis reconnected" in said(tmp_path, "worker")
