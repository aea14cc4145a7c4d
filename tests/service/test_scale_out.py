"""Scale-out: runs as jobs on `reactor worker` processes over Redis Streams (real Redis,
real PostgreSQL, real worker processes killed with SIGKILL)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from reactor import PostgresSignalStore
from reactor.exceptions import RunNotFoundError, ServiceConfigError
from reactor.service import ObjectStore, ReactionService, User
from reactor.service._api.reads import run_info
from reactor.service._api.runs import abort_run, listed_runs
from reactor.service._hosting.launch import RunRequest
from reactor.service._objects.db import Database
from reactor.service._objects.schema import agent_runs, processing_log
from reactor.service._reactions.definitions import AgentDefinition
from reactor.service._scaleout.jobs import RedisKeys
from reactor.service._scaleout.leases import Leases, claim_tick
from reactor.service._scaleout.queue import QueueSettings
from reactor.service._scaleout.worker import live_workers
from tests.service.queued import make_service

REDIS = os.environ.get("REACTOR_TEST_REDIS", "redis://127.0.0.1:6379")
APP = "tests.service.queued:make_service"
RECLAIM = 2.0
PATIENCE = 180.0
"""How long a test waits for what workers do: a loaded machine takes its time (a worker
needs some 20 s to start at a load average of 10, a second or two on a quiet one)."""
GRACE = 60
"""The workers' --grace: what is asked to finish within it has ample time to on a loaded
machine, and what must not wait for it (a held sleeping run) is told apart at GRACE / 2."""
SLOW = 900
"""The pytest timeout of a test that starts workers: a bound on a hang, not a speed check."""


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch, redis_url: str, postgres_url: str) -> str:
    """This process's services queue their runs (as `reactor serve` with Redis does)."""
    monkeypatch.setenv("REACTOR_REDIS_URL", redis_url)
    monkeypatch.setenv("REACTOR_RECLAIM_AFTER", str(RECLAIM))
    return postgres_url


@contextmanager
def workers(
    count: int,
    db: str,
    redis_url: str,
    tmp_path: Path,
    *,
    concurrency: int = 10,
    environ: dict[str, str] | None = None,
    grace: float = GRACE,
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` `reactor worker` processes, stopped (SIGKILL at the latest) at the end."""
    env = {
        **(environ or {}),
        **os.environ,
        "REACTOR_REDIS_URL": redis_url,
        "REACTOR_RECLAIM_AFTER": str(RECLAIM),
        "REACTOR_SERVICE_DB": db,
        "REACTOR_TEST_STEPS": str(tmp_path / "steps.log"),
        "REACTOR_TEST_REACTIONS": str(tmp_path / "reactions.log"),
    }
    command = [sys.executable, "-m", "reactor", "worker", "--app", APP]
    logs = [(tmp_path / f"worker{index}.log").open("wb") for index in range(count)]
    processes = [
        subprocess.Popen(
            [*command, "--concurrency", str(concurrency), "--grace", str(grace)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for log in logs
    ]
    try:
        settings = QueueSettings(redis_url, prefix=env.get("REACTOR_REDIS_PREFIX", "reactor"))

        def up() -> bool:
            for index, process in enumerate(processes):
                if process.poll() is not None:
                    log = (tmp_path / f"worker{index}.log").read_text()
                    raise AssertionError(f"worker {index} exited:\n{log}")
            return len(asyncio.run(live_workers(settings))) == count

        wait_for(up, PATIENCE, "workers up")
        yield processes
    finally:
        for process, log in zip(processes, logs, strict=True):
            if process.poll() is None:
                process.kill()
            process.wait(PATIENCE)
            log.close()


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


async def submit(
    db: str,
    count: int,
    seconds: float = 1.0,
    gate: Path | None = None,
    release: Path | None = None,
) -> list[str]:
    given: dict[str, Any] = {"seconds": seconds}
    if gate is not None:  # the runs wait for this file to exist before their last wait
        given["gate"] = str(gate)
    if release is not None:  # their last wait ends early once this file exists
        given["release"] = str(release)
    service = make_service(db)
    async with service.objects, service:
        return [await service.submit("steps", given) for _ in range(count)]


def recordings(db: str, run_ids: list[str]) -> dict[str, Any]:
    with PostgresSignalStore(db) as store:
        return {run_id: store.load(run_id) for run_id in run_ids}


def ended(db: str, run_ids: list[str]) -> bool:
    with PostgresSignalStore(db) as store:
        done = {info.run_id for info in store.runs() if info.complete}
    return set(run_ids) <= done


@pytest.mark.timeout(SLOW)
def test_a_killed_workers_runs_are_finished_by_another_and_nothing_repeats(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    db = queued
    with workers(2, db, redis_url, tmp_path) as (victim, survivor):
        # each run's second step waits 4 s: a run the victim holds once its first step is
        # recorded is still in flight when it is killed, however slowly the checks run
        run_ids = asyncio.run(submit(db, 40, seconds=4))
        settings = QueueSettings(redis_url, prefix=os.environ["REACTOR_REDIS_PREFIX"])

        def victim_mid_way() -> list[str]:
            """The victim's runs, once each has its first step recorded (else [])."""
            found = {w["pid"]: w["runs"] for w in asyncio.run(live_workers(settings))}
            runs: list[str] = found.get(victim.pid, [])
            if not runs:
                return []
            logs = recordings(db, runs)
            firsts = [
                any(s.name == "agent:first:completed" for s in r.signals) for r in logs.values()
            ]
            return runs if all(firsts) else []

        wait_for(lambda: bool(victim_mid_way()), PATIENCE, "the victim to be mid-way")
        held = victim_mid_way()
        victim.send_signal(signal.SIGKILL)
        victim.wait(PATIENCE)
        # What the victim left unfinished (its heartbeat may name a run it has ended since).
        taken = [run_id for run_id, log in recordings(db, held).items() if not log.complete]
        assert taken, "the victim was killed with no run in flight"
        # A step whose effect happened but whose completion the log had not yet recorded
        # when its process died may run again (at least once); one the log shows
        # completed never does. On a busy machine the victim can have started runs
        # after its last heartbeat (so they are not in ``held``) and be killed between
        # ``first``'s note and its recorded completion: those are the only repeats allowed.
        noted = set((tmp_path / "steps.log").read_text().split())
        with PostgresSignalStore(db) as store:
            started = {info.run_id for info in store.runs()}
        at_kill = recordings(db, sorted(started & set(run_ids)))
        in_flight = {
            run_id
            for run_id, log in at_kill.items()
            if run_id in noted and "agent:first:completed" not in [s.name for s in log.signals]
        }

        wait_for(lambda: ended(db, run_ids), PATIENCE, "every run to end")
        logs = recordings(db, run_ids)
        assert survivor.poll() is None

    assert [log.status for log in logs.values()] == ["completed"] * 40
    for log in logs.values():
        assert [s.name for s in log.signals].count("harness:end") == 1
    executions = (tmp_path / "steps.log").read_text().split()
    assert set(executions) == set(run_ids)
    repeated = {run_id for run_id in run_ids if executions.count(run_id) > 1}
    in_flight |= {run_id for run_id in noted if run_id not in at_kill}  # no log yet at the kill
    assert repeated <= in_flight, "a step the log showed completed ran again"
    assert all(executions.count(run_id) <= 2 for run_id in run_ids)
    for run_id in taken:  # the survivor resumed what the victim had started
        assert "harness:resumed" in [s.name for s in logs[run_id].signals]
        assert [s.name for s in logs[run_id].signals].count("agent:first:completed") == 1


def noted(tmp_path: Path) -> list[tuple[str, int, str, int]]:
    """What the ``orders`` reactions noted: (start|end, pid, object id, version)."""
    path = tmp_path / "reactions.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(what, int(pid), id, int(v)) for what, pid, id, v in map(str.split, lines)]


async def entry_statuses(db: Database) -> list[str]:
    async with db.read() as conn:
        return list(
            (await conn.execute(sa.select(processing_log.c.status).order_by("id"))).scalars()
        )


@pytest.mark.timeout(SLOW)
def test_reactions_run_on_the_workers_once_each_and_in_order_per_object(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    """The serving process only dispatches; workers run the reactions, an object's in order."""
    db = queued
    with workers(2, db, redis_url, tmp_path, concurrency=4) as processes:

        async def serve() -> list[str]:
            service = make_service(db)
            async with service.objects, service:
                ids = [
                    (await service.objects.create("Order", {"n": n, "seconds": 0.05})).id
                    for n in range(12)
                ]
                for version in range(2, 6):  # one object changes four times in a row
                    await service.objects.update(ids[0], {"n": version})
                await service.idle(60)
                assert await entry_statuses(service.db) == ["completed"] * 16
                async with service.db.read() as conn:
                    triggers = (await conn.execute(sa.select(agent_runs.c.trigger))).scalars()
                    assert list(triggers) == ["reaction"] * 16
                return ids

        ids = asyncio.run(serve())
        pids = {process.pid for process in processes}
    notes = noted(tmp_path)
    assert {pid for _, pid, _, _ in notes} <= pids  # none ran in the serving process
    assert sorted((id, v) for what, _, id, v in notes if what == "end") == sorted(
        [(id, 1) for id in ids] + [(ids[0], v) for v in range(2, 6)]
    )
    first = [(what, v) for what, _, id, v in notes if id == ids[0]]
    assert first == [(what, v) for v in range(1, 6) for what in ("start", "end")]


@pytest.mark.timeout(SLOW)
def test_workers_trace_their_runs_and_reactions_with_reactor_otel(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    """``REACTOR_OTEL=1``: a worker exports a trace of each run and reaction it executes."""
    from tests.reactor.otlp import Receiver

    receiver = Receiver()
    environ = {
        "REACTOR_OTEL": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    try:
        with workers(1, queued, redis_url, tmp_path, concurrency=2, environ=environ) as procs:

            async def serve() -> tuple[str, str]:
                service = make_service(queued)
                async with service.objects, service:
                    run_id = await service.submit("steps", {"seconds": 0.01})
                    await service.objects.create("Order", {"n": 1, "seconds": 0.01})
                    await service.idle(60)
                    (entry,) = await service.processing_log()
                    assert entry.run_id is not None
                    return run_id, entry.run_id

            run_id, reaction_id = asyncio.run(serve())

            def traced() -> bool:
                workflows = {
                    a.value.string_value
                    for span in receiver.spans()
                    if span.name.startswith("invoke_workflow")
                    for a in span.attributes
                    if a.key == "reactor.run_id"
                }
                return {run_id, reaction_id} <= workflows

            wait_for(traced, PATIENCE, "the worker's spans")
            (worker,) = procs
            worker.send_signal(signal.SIGTERM)
            worker.wait(PATIENCE)
    finally:
        receiver.close()
    names = {span.name for span in receiver.spans()}
    assert {"invoke_workflow steps", "invoke_agent first", "invoke_agent second"} <= names
    assert {"invoke_workflow orders", "invoke_agent orders"} <= names


@pytest.mark.timeout(SLOW)
def test_an_agent_made_through_the_api_while_workers_run_reaches_them(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    db = queued
    with workers(1, db, redis_url, tmp_path):

        async def serve() -> tuple[list[str], list[str | None]]:
            service = make_service(db)
            async with service.objects, service:
                definition = AgentDefinition(
                    name="greeter",
                    prompt="Greet {{ object.data.name }}",
                    trigger_type="reaction",
                    reaction_config={"types": ["Guest"]},
                )
                await service.catalog.create(definition)
                await service.objects.create("Guest", {"name": "Ada"})
                await service.idle(30)
                entries = await service.processing_log(agent="greeter")
                return [entry.status for entry in entries], [entry.run_id for entry in entries]

        statuses, run_ids = asyncio.run(serve())
    assert statuses == ["completed"]
    (log,) = recordings(db, [str(run_ids[0])]).values()
    (done,) = [s for s in log.signals if s.name == "agent:greeter:completed"]
    assert done.payload["output"]["reasoning"] == "Greet Ada"


@pytest.mark.timeout(SLOW)
def test_a_killed_workers_reaction_is_run_again_by_another(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    db = queued
    with workers(2, db, redis_url, tmp_path, concurrency=1) as processes:

        async def serve() -> tuple[list[str], int]:
            service = make_service(db)
            async with service.objects, service:
                await service.objects.create("Order", {"seconds": 3})
                await asyncio.to_thread(wait_for, lambda: bool(noted(tmp_path)), 20, "a start")
                ((_, pid, _, _),) = noted(tmp_path)
                os.kill(pid, signal.SIGKILL)
                await service.idle(60)
                return await entry_statuses(service.db), pid

        statuses, victim = asyncio.run(serve())
        (survivor,) = [process.pid for process in processes if process.pid != victim]
    assert statuses == ["completed"]
    assert [(what, pid) for what, pid, _, _ in noted(tmp_path)] == [
        ("start", victim),
        ("start", survivor),
        ("end", survivor),
    ]


@pytest.mark.timeout(SLOW)
def test_a_run_on_a_worker_is_aborted_through_the_api(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    """The serving process does not execute it: the abort reaches it through its inbox."""
    db = queued
    with workers(1, db, redis_url, tmp_path):

        async def serve() -> tuple[str, str | None]:
            service = make_service(db)
            async with service.objects, service:
                run_id = await service.submit("steps", {"seconds": 30})
                steps = tmp_path / "steps.log"
                await asyncio.to_thread(wait_for, steps.exists, 20, "the run to start")
                return run_id, await abort_run(service, run_id, "enough", User("ops"))

        run_id, posted = asyncio.run(serve())
        wait_for(lambda: ended(db, [run_id]), PATIENCE, "the run to stop")
    (log,) = recordings(db, [run_id]).values()
    assert posted is not None
    assert posted.startswith("msg_")
    assert log.status == "aborted"
    (abort,) = [s for s in log.signals if s.name == "session:abort"]
    assert (abort.payload, abort.source) == ({"reason": "enough"}, str(User("ops")))
    assert "agent:second:completed" not in [s.name for s in log.signals]


@pytest.mark.timeout(SLOW)
def test_a_queued_run_is_shown_queued_and_what_is_posted_to_it_waits_for_it(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    db = queued

    async def before_any_worker() -> str:
        service = make_service(db)
        async with service.objects, service:
            run_id = await service.submit("steps", {"seconds": 30})
            shown = await run_info(service, run_id)
            assert (shown.status, shown.graph, shown.signals) == ("queued", "steps", 0)
            assert not shown.complete
            listed = await listed_runs(service, status="queued")
            assert [(info.run_id, info.status) for info in listed] == [(run_id, "queued")]
            assert await listed_runs(service, graph="other") == []
            assert await abort_run(service, run_id, "not wanted", User("ops")) is not None
            with pytest.raises(RunNotFoundError):
                await run_info(service, "run_never_queued")
            return run_id

    run_id = asyncio.run(before_any_worker())
    markers = redis.Redis.from_url(redis_url)
    with workers(1, db, redis_url, tmp_path):
        wait_for(lambda: ended(db, [run_id]), PATIENCE, "the run to start and stop")
        # its marker goes once it has a log, at the latest when its job is acknowledged
        queued_markers = f"{os.environ['REACTOR_REDIS_PREFIX']}:queued:*"
        wait_for(lambda: markers.keys(queued_markers) == [], PATIENCE, "the run unmarked")
    (log,) = recordings(db, [run_id]).values()
    assert (log.status, log.info.reason) == ("aborted", "not wanted")
    assert "agent:second:activated" not in [s.name for s in log.signals]


@pytest.mark.timeout(SLOW)
@pytest.mark.parametrize(
    ("count", "concurrency"),
    [
        pytest.param(2, 1, id="reclaimed-by-another-worker"),
        pytest.param(1, 2, id="reclaimed-by-its-own-worker"),
    ],
)
def test_a_long_run_on_a_live_worker_is_not_taken_over(
    queued: str, redis_url: str, tmp_path: Path, count: int, concurrency: int
) -> None:
    """Its job is reclaimed by idle time, but it is not executed again: it runs once."""
    db = queued
    with workers(count, db, redis_url, tmp_path, concurrency=concurrency):
        (run_id,) = asyncio.run(submit(db, 1, seconds=3 * RECLAIM))
        wait_for(lambda: ended(db, [run_id]), PATIENCE, "the long run to end")
    (log,) = recordings(db, [run_id]).values()
    names = [s.name for s in log.signals]
    assert log.status == "completed"
    assert "harness:resumed" not in names
    assert names.count("agent:second:activated") == 1
    assert (tmp_path / "steps.log").read_text().split() == [run_id]


@pytest.mark.timeout(SLOW)
def test_a_job_whose_run_has_ended_is_dropped(
    queued: str, redis_url: str, redis_keys: RedisKeys, tmp_path: Path
) -> None:
    """A job delivered twice: the second finds the run ended and is acknowledged. (A
    job naming a graph the worker lacks is not dropped: test_scale_out_degraded.)"""
    db = queued
    with workers(1, db, redis_url, tmp_path):
        (run_id,) = asyncio.run(submit(db, 1, seconds=0))
        wait_for(lambda: ended(db, [run_id]), PATIENCE, "the run to end")

        async def again() -> None:  # the same job delivered a second time
            service = make_service(db)
            async with service.objects, service:
                assert service.host.queue is not None
                await service.host.queue.enqueue(RunRequest("graph", "steps", run_id=run_id))

        asyncio.run(again())
        client, keys = redis.Redis.from_url(redis_url), redis_keys
        wait_for(
            lambda: (
                client.xpending(keys.stream, keys.group)["pending"] == 0
                and client.xlen(keys.stream) == 0  # done jobs leave the stream
            ),
            PATIENCE,
            "the duplicate to be acknowledged",
        )
        client.close()
    (log,) = recordings(db, [run_id]).values()
    assert [s.name for s in log.signals].count("harness:end") == 1
    assert (tmp_path / "steps.log").read_text().split() == [run_id]


@pytest.mark.timeout(SLOW)
def test_workers_lists_the_live_workers_and_sigterm_drains(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    db = queued
    env = {**os.environ, "REACTOR_REDIS_URL": redis_url}
    gate = tmp_path / "gate"
    with workers(1, db, redis_url, tmp_path) as (worker,):
        (run_id,) = asyncio.run(submit(db, 1, seconds=1, gate=gate))
        settings = QueueSettings(redis_url, prefix=os.environ["REACTOR_REDIS_PREFIX"])
        wait_for(
            lambda: asyncio.run(live_workers(settings))[0]["runs"] == [run_id], PATIENCE, "the run"
        )
        listed = subprocess.run(
            [sys.executable, "-m", "reactor", "workers"],
            env=env,
            capture_output=True,
            text=True,
            timeout=PATIENCE,
        )
        assert listed.returncode == 0
        assert f"pid {worker.pid}" in listed.stdout
        assert run_id in listed.stdout  # the run waits for the gate: it is still there
        gate.touch()
        worker.send_signal(signal.SIGTERM)  # the run in flight finishes within the grace
        assert worker.wait(PATIENCE) == 0
    assert recordings(db, [run_id])[run_id].status == "completed"
    assert asyncio.run(live_workers(settings)) == []
    empty = subprocess.run(
        [sys.executable, "-m", "reactor", "workers"],
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert "No live workers" in empty.stdout


def test_a_worker_needs_redis_configured() -> None:
    env = {k: v for k, v in os.environ.items() if k != "REACTOR_REDIS_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "reactor", "worker", "--app", APP, "--log-format", "console"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "REACTOR_REDIS_URL is not set" in done.stderr
    with pytest.raises(ServiceConfigError, match="Redis URL"):
        QueueSettings.from_env({"REACTOR_REDIS_URL": "http://x"})
    with pytest.raises(ServiceConfigError, match="REACTOR_RECLAIM_AFTER"):
        QueueSettings.from_env({"REACTOR_REDIS_URL": "redis://x", "REACTOR_RECLAIM_AFTER": "soon"})


async def test_a_lease_is_one_workers_until_its_heartbeat_stops(postgres_url: str) -> None:
    ttl = 2.0
    db = Database(postgres_url)
    await db.open()
    try:
        one, two = Leases(db, "one", ttl=ttl), Leases(db, "two", ttl=ttl)
        assert await one.take("run_x")
        assert not await two.take("run_x")
        assert await one.take("run_x")  # its own again
        for _ in range(10):  # renewed half-way, looked at past the first ttl: still alive
            await two.give_back("run_x")  # what a stalled attempt let it take
            taken = time.monotonic()
            assert await one.take("run_x")
            await asyncio.sleep(ttl * 0.6)
            renewed = time.monotonic()
            assert await one.renew(["run_x"]) == []
            await asyncio.sleep(max(0.0, taken + ttl * 1.2 - time.monotonic()))
            held = not await two.take("run_x")
            if time.monotonic() - renewed < ttl:  # else the machine stalled: try again
                break
        else:
            pytest.fail("never looked at the lease within the ttl of its renewal")
        assert held, "a renewed lease was taken over"
        while not await two.take("run_x"):  # silent for longer than the ttl: taken over
            assert time.monotonic() - renewed < PATIENCE, "a silent lease was never taken over"
            await asyncio.sleep(0.05)
        assert time.monotonic() - renewed >= ttl, "taken over while its heartbeat was fresh"
        assert await one.holder("run_x") == "two"
        await two.give_back("run_x")
        assert await one.holder("run_x") is None
    finally:
        await db.close()


async def test_a_cron_tick_runs_once_across_serving_processes(
    queued: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two services fire the same schedule at the same minute: it runs once."""
    monkeypatch.delenv("REACTOR_REDIS_URL")  # both execute their runs themselves
    first, second = make_service(queued), make_service(queued)
    async with first.objects, second.objects, first, second:
        await asyncio.gather(first.host.scheduled("tick"), second.host.scheduled("tick"))
        await first.idle(10)
        await second.idle(10)
        async with first.db.read() as conn:
            rows = (await conn.execute(sa.select(agent_runs))).mappings().all()
        assert first.host.record is not None
        statuses = [first.host.record.info(row["run_id"]).status for row in rows]
        assert await claim_tick(first.db, "other")  # another agent's tick is its own
        assert not await claim_tick(second.db, "other")
    assert [(row["agent"], row["trigger"]) for row in rows] == [("tick", "cron")]
    assert statuses == ["completed"]


async def test_without_redis_the_service_runs_everything_itself(postgres_url: str) -> None:
    assert QueueSettings.from_env({}) is None
    service = ReactionService(
        objects=ObjectStore(postgres_url),
        graphs={"steps": make_service(postgres_url).runs.graphs["steps"]},
    )
    async with service.objects, service:
        assert service.host.queue is None
        run_id = await service.submit("steps", {"seconds": 0})
        await service.idle(10)
    with PostgresSignalStore(postgres_url) as store:
        assert store.load(run_id).status == "completed"


@pytest.mark.timeout(SLOW)
def test_sigterm_holds_a_sleeping_run_at_once_and_another_worker_wakes_it_on_time(
    queued: str, redis_url: str, tmp_path: Path
) -> None:
    db = queued

    async def start() -> str:
        service = make_service(db)
        async with service.objects, service:
            return await service.submit("sleeper", {"seconds": 6})

    with workers(1, db, redis_url, tmp_path) as (worker,):
        run_id = asyncio.run(start())

        def sleeping() -> bool:
            with PostgresSignalStore(db) as store:
                return [info.status for info in store.runs()] == ["waiting"]

        wait_for(sleeping, PATIENCE, "the run to sleep")
        started = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(PATIENCE) == 0
        assert time.monotonic() - started < GRACE / 2  # held at once, not after the grace
    assert not ended(db, [run_id])
    with workers(1, db, redis_url, tmp_path):
        wait_for(lambda: ended(db, [run_id]), PATIENCE, "the run to end")
    recording = recordings(db, [run_id])[run_id]
    assert recording.status == "completed"
    set_ = next(s for s in recording.signals if s.name == "timer:set")
    assert recording.state["woke"] >= datetime.fromisoformat(set_.payload["until"]).timestamp()
    names = [s.name for s in recording.signals]
    assert (names.count("timer:set"), names.count("timer:fired")) == (1, 1)
    assert names.count("harness:end") == 1
