"""Degraded, not stuck: a worker started while Redis is down, and a rolling deploy whose
workers do not all have the code a job needs (real `reactor worker` processes, a
private redis-server the test starts late, real PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from reactor.service._objects.db import Database
from reactor.service._objects.schema import processing_log
from reactor.service._scaleout.queue import QueueSettings
from reactor.service._scaleout.waiting import waiting_jobs
from reactor.service._scaleout.worker import live_workers
from tests.redis_server import RedisServer
from tests.service.queued import make_service
from tests.service.test_scale_out import (
    GRACE,
    PATIENCE,
    SLOW,
    ended,
    noted,
    recordings,
    submit,
    wait_for,
)

NEW = "tests.service.queued:make_service"
OLD = "tests.service.rolling:make_old_service"  # no ``steps`` graph, no ``orders`` agent
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
            [*command, "--grace", str(GRACE)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(PATIENCE)


def beating(process: subprocess.Popen[bytes], url: str, tmp_path: Path, name: str) -> None:
    """Wait until ``process`` is among the live workers (it never exits meanwhile)."""

    def listed() -> bool:
        alive(process, tmp_path, name)
        return any(w["pid"] == process.pid for w in asyncio.run(live_workers(QueueSettings(url))))

    wait_for(listed, PATIENCE, f"{name} to beat")


def alive(process: subprocess.Popen[bytes], tmp_path: Path, name: str) -> None:
    if process.poll() is not None:
        said = (tmp_path / f"{name}.log").read_text()
        raise AssertionError(f"{name} exited with {process.returncode}:\n{said}")


def said(tmp_path: Path, name: str) -> str:
    return (tmp_path / f"{name}.log").read_text()


async def order(db: str, until: Callable[[], bool], what: str) -> None:
    """Create an ``Order`` (for the ``orders`` reaction agent), and keep the service that
    queues its reaction up ``until`` (a service that stops while it queues a reaction
    leaves it ``pending`` in the log, for the next one to queue)."""
    service = make_service(db)
    async with service.objects, service:
        await service.objects.create("Order", {"seconds": 0})
        await asyncio.to_thread(wait_for, until, 60, what)


async def entry_statuses(db: str) -> list[str]:
    database = Database(db)
    await database.open()
    try:
        async with database.read() as conn:
            return list((await conn.execute(sa.select(processing_log.c.status))).scalars())
    finally:
        await database.close()


def pending(url: str) -> list[dict[str, Any]]:
    """The jobs delivered and not acknowledged (message id, consumer, deliveries)."""
    client = redis.Redis.from_url(url)
    try:
        found: list[dict[str, Any]] = client.xpending_range(
            "reactor:jobs", "reactor-workers", min="-", max="+", count=100
        )
        return found
    finally:
        client.close()


@pytest.mark.timeout(SLOW)
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

        wait_for(retried, PATIENCE, "the worker to try Redis three times")
        server.start()
        beating(process, server.url, tmp_path, "worker")
        (run_id,) = asyncio.run(submit(db, 1, seconds=0.1))
        wait_for(lambda: ended(db, [run_id]), PATIENCE, "the run to end")
        alive(process, tmp_path, "worker")
    (log,) = recordings(db, [run_id]).values()
    assert log.status == "completed"
    assert "redis reconnected" in said(tmp_path, "worker")


@pytest.mark.timeout(SLOW)
def test_a_job_the_workers_lack_the_code_for_waits_for_a_worker_that_has_it(
    postgres_url: str, server: RedisServer, tmp_path: Path
) -> None:
    """Only a worker of the old code (no ``steps`` graph, no ``orders`` agent): a run of
    ``steps`` and an ``Order``'s reaction stay pending, shown as waiting, and the old
    worker does not spin on them; a worker of the new code comes and runs both."""
    db = postgres_url
    server.start()
    settings = QueueSettings(server.url)
    with worker(OLD, db, server.url, tmp_path, "old") as old:
        beating(old, server.url, tmp_path, "old")
        (run_id,) = asyncio.run(submit(db, 1, seconds=0.1))

        def shown() -> list[tuple[str, str]]:
            return sorted((j["job"], j["waits_for"]) for j in asyncio.run(waiting_jobs(settings)))

        def both() -> bool:
            jobs = shown()
            return [waits for _, waits in jobs] == ["agent 'orders'", "graph 'steps'"]

        asyncio.run(order(db, both, "both jobs to be shown waiting"))
        ((reaction, _), (run, _)) = shown()
        assert run == run_id
        assert reaction.startswith("reaction:")
        # The old worker looks at them again after a while (longer each time), and says
        # it once per job: it does not spin on them, and nothing is acknowledged.
        wait_for(
            lambda: all(entry["times_delivered"] >= 3 for entry in pending(server.url)),
            PATIENCE,
            "the old worker to look at both jobs again, twice",
        )
        assert len(pending(server.url)) == 2
        assert all(entry["times_delivered"] <= 6 for entry in pending(server.url))
        old_said = said(tmp_path, "old")
        assert old_said.count("job left for a worker with its code") == 2
        assert "job dropped" not in old_said
        listed = subprocess.run(
            [sys.executable, "-m", "reactor", "workers"],
            env={**os.environ, "REACTOR_REDIS_URL": server.url},
            capture_output=True,
            text=True,
            check=True,
            timeout=PATIENCE,
        ).stdout
        assert "2 jobs waiting for other code:" in listed
        assert f"{run_id}  waiting for a worker with graph 'steps'" in listed
        assert f"{reaction}  waiting for a worker with agent 'orders'" in listed
        assert not ended(db, [run_id])

        with worker(NEW, db, server.url, tmp_path, "new") as new:
            wait_for(lambda: ended(db, [run_id]), PATIENCE, "the new worker to run the run")
            wait_for(
                lambda: asyncio.run(entry_statuses(db)) == ["completed"],
                PATIENCE,
                "the new worker to run the reaction",
            )
            wait_for(lambda: not pending(server.url), PATIENCE, "both jobs acknowledged")
            # The listing clears once the jobs are done (not in the same instant as the ack).
            wait_for(
                lambda: asyncio.run(waiting_jobs(settings)) == [],
                PATIENCE,
                "no job shown waiting",
            )
            alive(old, tmp_path, "old")
    (log,) = recordings(db, [run_id]).values()
    assert log.status == "completed"
    (done,) = [s for s in log.signals if s.name == "agent:second:completed"]
    assert done.payload["output"] == f"done by {new.pid}"
    assert [(what, pid) for what, pid, _, _ in noted(tmp_path)] == [
        ("start", new.pid),
        ("end", new.pid),
    ]


@pytest.mark.timeout(SLOW)
def test_runs_an_old_worker_takes_are_run_by_a_new_one_at_once(
    postgres_url: str, server: RedisServer, tmp_path: Path
) -> None:
    """A rolling deploy: a worker of the old code and one of the new take jobs from one
    stream; every run of the new graph completes on the new worker, long before the
    reclaim time (60 s here) that a job the old worker took would wait out if it were
    merely left pending."""
    db = postgres_url
    server.start()
    with (
        worker(OLD, db, server.url, tmp_path, "old", reclaim=60) as old,
        worker(NEW, db, server.url, tmp_path, "new", reclaim=60) as new,
    ):
        beating(old, server.url, tmp_path, "old")
        beating(new, server.url, tmp_path, "new")
        run_ids = asyncio.run(submit(db, 12, seconds=0.1))
        wait_for(lambda: ended(db, run_ids), PATIENCE, "every run to end")
        alive(old, tmp_path, "old")
    logs = recordings(db, run_ids)
    assert [log.status for log in logs.values()] == ["completed"] * 12
    for log in logs.values():
        (done,) = [s for s in log.signals if s.name == "agent:second:completed"]
        assert done.payload["output"] == f"done by {new.pid}"
    assert sorted((tmp_path / "steps.log").read_text().split()) == sorted(run_ids)
    old_said = said(tmp_path, "old")
    assert "job dropped" not in old_said
    assert "job left for a worker with its code" in old_said, "the old worker took no job"
