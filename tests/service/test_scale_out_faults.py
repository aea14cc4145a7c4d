"""Scale-out under faults: Redis restarted under the workers, a worker stalled past its
lease (real `reactor worker` processes, a private redis-server, real PostgreSQL)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from reactor import PostgresSignalStore, Signal
from reactor.service._objects.db import Database
from reactor.service._objects.schema import queued_jobs
from reactor.service._scaleout.durable import LogFence
from reactor.service._scaleout.leases import Leases
from reactor.service._scaleout.queue import QueueSettings
from reactor.service._scaleout.worker import live_workers
from tests.redis_server import free_port
from tests.service.server import ok, serving
from tests.service.test_scale_out import (
    APP,
    PATIENCE,
    SLOW,
    ended,
    recordings,
    submit,
    wait_for,
    workers,
)


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
            process.wait(PATIENCE)


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

    wait_for(up, PATIENCE, "redis-server to start")
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


@pytest.mark.timeout(SLOW)
@pytest.mark.parametrize("shutdown", ["nosave", "save"])
def test_runs_in_flight_and_queued_survive_a_redis_restart(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shutdown: str
) -> None:
    """Redis stops while 30 runs are running or queued on 3 workers and comes back 4 s
    later, without its data (``nosave``: the stream and its jobs are gone) or with it
    (``save``): every run completes, once."""
    db = postgres_url
    with private_redis(tmp_path) as (url, servers):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        monkeypatch.setenv("REACTOR_REDIS_URL", url)
        with workers(3, db, url, tmp_path, concurrency=4) as processes:
            run_ids = asyncio.run(submit(db, 30, seconds=1.5))
            steps = tmp_path / "steps.log"
            wait_for(
                lambda: steps.exists() and len(steps.read_text().split()) >= 6, PATIENCE, "runs"
            )
            subprocess.run(["redis-cli", "-p", str(port), "shutdown", shutdown], check=False)
            servers[0].wait(PATIENCE)
            started_before = len(steps.read_text().split())
            assert started_before < 30, "every run started before Redis stopped"
            asyncio.run(asyncio.sleep(4))
            servers.append(start_redis(port, tmp_path))
            wait_for(lambda: ended(db, run_ids), PATIENCE, "every run to end")
            wait_for(lambda: not asyncio.run(queued_rows(db)), PATIENCE, "every job acknowledged")
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
    each = [(tmp_path / f"worker{i}.log").read_text() for i in range(3)]
    for worker_said in each:  # every worker says it lost Redis and got it back
        assert "redis connection lost; reconnecting" in worker_said
        assert "redis reconnected" in worker_said
    said = "".join(each)
    if shutdown == "nosave":  # the database knew what Redis forgot
        assert "job lost by redis; queued again" in said
    else:  # Redis kept its jobs: nothing to queue again
        assert "job lost by redis; queued again" not in said


async def test_the_log_refuses_appends_from_a_stale_lease(postgres_url: str) -> None:
    """A worker whose lease was taken over writes nothing more of that run to the log,
    even what it appended before it could notice; other runs are written as usual."""
    db = Database(postgres_url)
    await db.open()
    store = PostgresSignalStore(postgres_url)
    refused: set[str] = set()
    mine = Leases(db, "one", ttl=0.3)
    store.fence = LogFence(mine, refused.update)
    try:
        assert await mine.take("run_fenced")
        store.append(Signal("harness:start", {}, seq=1, run_id="run_fenced"))
        store.flush()
        await asyncio.sleep(0.5)
        other = Leases(db, "other", ttl=0.3)
        assert await other.take("run_fenced")  # silent past its ttl: taken over
        store.append(Signal("note:late", seq=2, run_id="run_fenced"))
        store.append(Signal("harness:start", {}, seq=1, run_id="run_unleased"))
        store.flush()
        assert [s.name for s in store.load("run_fenced").signals] == ["harness:start"]
        assert [s.name for s in store.load("run_unleased").signals] == ["harness:start"]
        await asyncio.sleep(0)
        assert refused == {"run_fenced"}  # the worker is told: it stops the run
    finally:
        store.close()
        await db.close()


@pytest.mark.timeout(SLOW)
def test_a_stalled_worker_whose_run_was_taken_over_stops_it_and_writes_nothing_more(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGSTOP past the reclaim time: another worker takes the run over and finishes it;
    SIGCONT: the first one stops the run at once, and nothing of it reaches the log."""
    db = postgres_url
    with private_redis(tmp_path) as (url, _):
        monkeypatch.setenv("REACTOR_REDIS_URL", url)
        with workers(2, db, url, tmp_path, concurrency=1) as processes:
            (run_id,) = asyncio.run(submit(db, 1, seconds=4))
            settings = QueueSettings(url)

            def holder() -> int | None:
                for found in asyncio.run(live_workers(settings)):
                    if run_id in found["runs"]:
                        names = [s.name for s in recordings(db, [run_id])[run_id].signals]
                        if "agent:second:activated" in names:
                            return int(found["pid"])
                return None

            wait_for(lambda: holder() is not None, PATIENCE, "the run to be mid-way")
            (stalled,) = [p for p in processes if p.pid == holder()]
            (other,) = [p for p in processes if p is not stalled]
            stalled.send_signal(signal.SIGSTOP)
            try:

                def resumed() -> bool:
                    names = [s.name for s in recordings(db, [run_id])[run_id].signals]
                    return "harness:resumed" in names

                wait_for(resumed, PATIENCE, "the other worker to take the run over")
            finally:
                stalled.send_signal(signal.SIGCONT)
            wait_for(lambda: ended(db, [run_id]), PATIENCE, "the run to end")
            assert stalled.poll() is None
        log = recordings(db, [run_id])[run_id]
    names = [s.name for s in log.signals]
    assert log.status == "completed"
    assert names.count("harness:end") == 1
    assert names.count("agent:first:completed") == 1
    (done,) = [s for s in log.signals if s.name == "agent:second:completed"]
    assert done.payload["output"] == f"done by {other.pid}"
    assert names.count("harness:resumed") == 1
    assert (tmp_path / "steps.log").read_text().split() == [run_id]
    said = (tmp_path / f"worker{processes.index(stalled)}.log").read_text()
    assert "lease lost; stopping the run here" in said


@pytest.mark.timeout(SLOW)
def test_serve_alone_queues_again_what_redis_lost_and_its_runs_stay_known(
    postgres_url: str, tmp_path: Path
) -> None:
    """Runs accepted by ``reactor serve`` while no worker runs; Redis restarts empty: the
    runs are still shown ``queued`` (never 404), serve queues their jobs again by itself,
    and a worker started later runs each once. Its prefix keeps its keys apart."""
    db = postgres_url
    with private_redis(tmp_path) as (url, servers):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        env = {
            "REACTOR_REDIS_URL": url,
            "REACTOR_RECLAIM_AFTER": "1",
            "REACTOR_REDIS_PREFIX": "desk",
        }
        with (
            serving(db, tmp_path / "server.log", app=APP, env=env) as server,
            server.client() as api,
        ):
            started = [
                api.post("/api/runs", json={"graph": "steps", "input": {"seconds": 0}})
                for _ in range(3)
            ]
            run_ids = [ok(answer, 202)["run_id"] for answer in started]
            client = redis.Redis.from_url(url)
            assert client.xlen("desk:jobs") == 3
            assert client.keys("reactor:*") == []  # nothing outside its prefix
            client.close()
            subprocess.run(["redis-cli", "-p", str(port), "shutdown", "nosave"], check=False)
            servers[0].wait(PATIENCE)
            servers.append(start_redis(port, tmp_path))
            for run_id in run_ids:  # Redis forgot them; the database did not
                shown = ok(api.get(f"/api/runs/{run_id}"))
                assert shown["info"]["status"] == "queued"

            def requeued() -> bool:
                again = redis.Redis.from_url(url)
                try:
                    return bool(again.xlen("desk:jobs") == 3)
                except redis.ConnectionError:
                    return False
                finally:
                    again.close()

            wait_for(requeued, PATIENCE, "serve to queue the lost jobs again")
            wait_for(
                lambda: server.output().count("job lost by redis; queued again") == 3,
                PATIENCE,
                "serve to say so",
            )
            with workers(1, db, url, tmp_path, environ={"REACTOR_REDIS_PREFIX": "desk"}):
                wait_for(lambda: ended(db, run_ids), PATIENCE, "every run to end")
                done = redis.Redis.from_url(url)
                wait_for(lambda: done.xlen("desk:jobs") == 0, PATIENCE, "done jobs trimmed")
                done.close()
    executions = (tmp_path / "steps.log").read_text().split()
    assert sorted(executions) == sorted(run_ids), "a run ran twice (or never)"
