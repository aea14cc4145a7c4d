"""Scale-out under faults: Redis restarted under the workers, a worker stalled past its
lease (real `reactor worker` processes, a private redis-server, real PostgreSQL)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from reactor.service._objects.db import Database
from reactor.service._objects.schema import queued_jobs
from tests.service.server import free_port
from tests.service.test_scale_out import ended, recordings, submit, wait_for, workers


@contextmanager
def private_redis(tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A redis-server of the test's own on a free port, without persistence; its URL and
    its processes (the test restarts it: the last one is the live one)."""
    port = free_port()
    processes: list[subprocess.Popen[bytes]] = []
    processes.append(start_redis(port, tmp_path))
    try:
        yield f"redis://127.0.0.1:{port}/0", processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait(10)


def start_redis(port: int, tmp_path: Path) -> subprocess.Popen[bytes]:
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    command += ["--appendonly", "no", "--dir", str(tmp_path)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port, socket_connect_timeout=1)

    def up() -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    wait_for(up, 20, "redis-server to start")
    client.close()
    return process


async def queued_rows(db: str) -> list[str]:
    database = Database(db)
    await database.open()
    try:
        async with database.read() as conn:
            return list((await conn.execute(sa.select(queued_jobs.c.key))).scalars())
    finally:
        await database.close()


@pytest.mark.timeout(150)
def test_runs_in_flight_and_queued_survive_a_redis_restart_without_its_data(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Redis stops (``shutdown nosave``: the stream and its jobs are gone) while 30 runs are
    running or queued on 3 workers, and comes back 4 s later: every run completes once."""
    db = postgres_url
    with private_redis(tmp_path) as (url, servers):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        monkeypatch.setenv("REACTOR_REDIS_URL", url)
        with workers(3, db, url, tmp_path, concurrency=4) as processes:
            run_ids = asyncio.run(submit(db, 30, seconds=1.5))
            steps = tmp_path / "steps.log"
            wait_for(lambda: steps.exists() and len(steps.read_text().split()) >= 6, 30, "runs")
            subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], check=False)
            servers[0].wait(10)
            started_before = len(steps.read_text().split())
            assert started_before < 30, "every run started before Redis stopped"
            asyncio.run(asyncio.sleep(4))
            servers.append(start_redis(port, tmp_path))
            wait_for(lambda: ended(db, run_ids), 90, "every run to end")
            wait_for(lambda: not asyncio.run(queued_rows(db)), 30, "every job acknowledged")
            assert all(process.poll() is None for process in processes)
        logs = recordings(db, run_ids)
        client = redis.Redis.from_url(url)
        assert client.keys("reactor:queued:*") == []
        client.close()
    assert sorted(log.status for log in logs.values()) == ["completed"] * 30
    for log in logs.values():
        names = [s.name for s in log.signals]
        assert names.count("harness:end") == 1
        assert names.count("agent:first:completed") == 1
    executions = (tmp_path / "steps.log").read_text().split()
    assert sorted(executions) == sorted(run_ids), "a step ran twice (or never)"
    said = "".join((tmp_path / f"worker{i}.log").read_text() for i in range(3))
    assert "redis connection lost; reconnecting" in said
    assert "redis reconnected" in said
    assert "job lost by redis; queued again" in said
