"""Scale-out: runs per second on 1, 2 and 4 ``reactor worker`` processes, and with one killed.

An I/O-bound graph (two model calls in sequence, each waiting 50 ms) is queued N times
through a service with ``REACTOR_REDIS_URL`` set (Redis database 14, flushed) and
executed by worker processes (32 runs at a time each, the default) on a fresh PostgreSQL database;
the figure is N over the time from the first submission to the last run's end. One
worker is set beside the serving process executing the same runs (all N at once, as it
does without a queue) at 32 at a time and at N at a time, the same setting. In the
kill row, one of two workers gets SIGKILL once a third of the runs have ended; its runs
are reclaimed after 2 s and resumed from their logs by the other. Everything runs on
this machine's cores: the workers, Redis, PostgreSQL and the submitter share them.
With ``REACTOR_BENCH_LOGS`` set to a folder, each worker's output is written there.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import psycopg
import redis

from bench._runner import Row
from reactor import PostgresSignalStore, ScriptedProvider, agent, reactive
from reactor._signals.settings import settings
from reactor.service import ObjectStore, ReactionService
from reactor.service._scaleout.queue import QueueSettings
from reactor.service._scaleout.worker import live_workers

SERVER = "postgresql://postgres@127.0.0.1:5432"
REDIS = os.environ.get("REACTOR_BENCH_REDIS", "redis://127.0.0.1:6379") + "/14"
"""Redis database 14 of ``REACTOR_BENCH_REDIS`` (default the local Redis; it is flushed)."""
RECLAIM = 2.0
CONCURRENCY = 32
RUNS = 300
SCALING = 1.6
"""DESIGN.md section 34: 2 workers execute at least 1.6 times the runs of one."""
TARGETS = {2: f">= {SCALING}x one worker"}


def make_service(db: str) -> ReactionService:
    """The app the workers run: ``--app bench.workers:make_service``."""
    graph = reactive(
        {
            "a": agent(prompt="a", updates="a"),
            "b": agent(prompt="b {{ state.a }}", activate_on="state:a:changed", updates="b"),
        },
        state={"a": None, "b": None},
        name="io",
    )
    provider = ScriptedProvider(default=lambda request: "ok", latency=0.05)
    return ReactionService(objects=ObjectStore(db), graphs={"io": graph}, provider=provider)


async def _submit(db: str, n: int) -> list[str]:
    service = make_service(db)
    async with service.objects, service:
        if service.host.queue is None:
            raise RuntimeError("the submitting service has no queue: it would run them itself")
        return [await service.submit("io") for _ in range(n)]


def _ended(db: str) -> list[str]:
    with PostgresSignalStore(db) as store:
        return [info.run_id for info in store.runs() if info.complete]


def measure(workers: int, n: int, *, kill: bool = False, concurrency: int = CONCURRENCY) -> float:
    """Runs per second of ``n`` runs on ``workers`` worker processes, ``concurrency`` each."""
    name = f"reactor_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    db = f"{SERVER}/{name}"
    client = redis.Redis.from_url(REDIS)
    client.flushdb()
    env = {
        **os.environ,
        "REACTOR_REDIS_URL": REDIS,
        "REACTOR_RECLAIM_AFTER": str(RECLAIM),
        "REACTOR_SERVICE_DB": db,
    }
    command = [sys.executable, "-m", "reactor", "worker", "--app", "bench.workers:make_service"]
    logs = os.environ.get("REACTOR_BENCH_LOGS")  # a folder: each worker's output there
    processes = [
        subprocess.Popen(
            [*command, "--concurrency", str(concurrency)],
            env=env,
            stdout=open(f"{logs}/{name}-{i}.log", "wb") if logs else subprocess.DEVNULL,  # noqa: SIM115
            stderr=subprocess.STDOUT if logs else subprocess.DEVNULL,
        )
        for i in range(workers)
    ]
    try:
        queue = QueueSettings(REDIS, RECLAIM)
        deadline = time.monotonic() + 60
        while len(asyncio.run(live_workers(queue))) < workers:
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not start")
            time.sleep(0.1)
        start = time.perf_counter()
        with _environment(REACTOR_REDIS_URL=REDIS, REACTOR_RECLAIM_AFTER=str(RECLAIM)):
            run_ids = asyncio.run(_submit(db, n))  # queued: the workers execute them
        killed = not kill
        deadline = time.monotonic() + 300
        while True:
            done = _ended(db)
            if len(done) >= n:
                break
            if not killed and len(done) >= n // 3:
                processes[0].send_signal(signal.SIGKILL)
                killed = True
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(done)} of {n} runs ended")
            time.sleep(0.05)
        elapsed = time.perf_counter() - start
        with PostgresSignalStore(db) as store:
            for run_id in run_ids:
                recording = store.load(run_id)
                assert recording.status == "completed", (run_id, recording.status)
                assert [s.name for s in recording.signals].count("harness:end") == 1
        return n / elapsed
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait(10)
        client.flushdb()
        client.close()
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def _in_process(db: str, n: int) -> float:
    service = make_service(db)
    async with service.objects, service:
        start = time.perf_counter()
        for _ in range(n):
            await service.submit("io")
        deadline = time.monotonic() + 300
        while len(await asyncio.to_thread(_ended, db)) < n:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {n} in-process runs did not end")
            await asyncio.sleep(0.05)
        return n / (time.perf_counter() - start)


def in_process(n: int) -> float:
    """Runs per second of the same ``n`` runs executed by the serving process (no queue)."""
    name = f"reactor_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        with _environment(REACTOR_REDIS_URL=None):
            return asyncio.run(_in_process(f"{SERVER}/{name}", n))
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextlib.contextmanager
def _environment(**values: str | None) -> Iterator[None]:
    """These ``REACTOR_*`` variables set (None: unset), read again by ``settings()``.

    The process's settings are read once (``reactor.service.settings``): without the
    cache cleared, a service made after the in-process runs would find no Redis and
    execute the runs itself.
    """
    saved = {key: os.environ.get(key) for key in values}

    def put(items: dict[str, str | None]) -> None:
        for key, value in items.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        settings.cache_clear()

    put(values)
    try:
        yield
    finally:
        put(saved)


def run(runs: int, scale: float) -> list[Row]:
    n = max(60, int(RUNS * scale))
    local = in_process(n)
    rates = {count: measure(count, n) for count in (1, 2, 4)}
    killed = measure(2, n, kill=True)
    equal = measure(1, n, concurrency=n)
    base = rates[1]
    rows = [
        Row(
            f"workers: {n} runs of two 50 ms model calls on {count} `reactor worker` "
            f"process{'es' if count > 1 else ''} ({CONCURRENCY} runs at a time each; "
            "Redis Streams, PostgreSQL log, 2 shared cores)",
            f"{rate:.0f} runs/s",
            f"{base:.0f} runs/s (1 worker)",
            rate,
            f"{rate / base:.2f}x",
            TARGETS.get(count, "report"),
            rate / base >= SCALING if count == 2 else None,
        )
        for count, rate in rates.items()
    ]
    rows.append(
        Row(
            f"workers: {n} runs of two 50 ms model calls on 1 `reactor worker` process, beside "
            "the same runs executed by the serving process (PostgreSQL log, no queue)",
            f"{base:.0f} runs/s",
            f"{local:.0f} runs/s (in-process)",
            base / local,
            f"{base / local:.0%} of the in-process rate",
            ">= 50% of the in-process rate",
            base / local >= 0.5,
        )
    )
    rows.append(
        Row(
            f"workers: the same on 1 `reactor worker` process executing all {n} runs at once "
            f"(`--concurrency {n}`, as the serving process does), beside the in-process runs",
            f"{equal:.0f} runs/s",
            f"{local:.0f} runs/s (in-process)",
            equal / local,
            f"{equal / local:.0%} of the in-process rate",
            "report",
            None,
        )
    )
    rows.append(
        Row(
            f"workers: the same on 2 workers, one killed (SIGKILL) after a third of the runs; "
            f"its runs reclaimed after {RECLAIM:.0f} s and resumed (all {n} completed, one "
            "harness:end each)",
            f"{killed:.0f} runs/s",
            f"{rates[2]:.0f} runs/s (2 workers, none killed)",
            killed,
            f"{killed / rates[2]:.2f}x",
            "nothing lost",
            True,
        )
    )
    return rows
