"""Scale-out on one machine: two workers, twenty runs, one worker killed mid-way.

Needs PostgreSQL at 127.0.0.1:5432 (user postgres) and Redis at 127.0.0.1:6379::

    .venv/bin/python -m examples.scale_out

It makes a database ``reactor_scale_out_demo``, uses Redis database 15 (flushed), starts
two ``reactor worker`` processes, submits 20 runs, kills one worker with SIGKILL once it
is mid-way, and waits until the other has finished every run: the killed worker's runs
resume from their logs after ``REACTOR_RECLAIM_AFTER`` (3 s here).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

import psycopg
import redis

from examples.scale_out.app import make_service
from reactor import PostgresSignalStore
from reactor.service._scaleout.queue import QueueSettings
from reactor.service._scaleout.worker import live_workers

SERVER = "postgresql://postgres@127.0.0.1:5432"
DB = f"{SERVER}/reactor_scale_out_demo"
REDIS = "redis://127.0.0.1:6379/15"
RUNS = 20


def database() -> None:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS reactor_scale_out_demo WITH (FORCE)")
        conn.execute("CREATE DATABASE reactor_scale_out_demo")


async def submit() -> list[str]:
    service = make_service(DB)
    async with service.objects, service:
        return [await service.submit("research", {"topic": f"t{i}"}) for i in range(RUNS)]


def main() -> None:
    database()
    redis.Redis.from_url(REDIS).flushdb()
    env = {**os.environ, "REACTOR_REDIS_URL": REDIS, "REACTOR_RECLAIM_AFTER": "3"}
    env["REACTOR_SERVICE_DB"] = DB
    command = [
        sys.executable,
        "-m",
        "reactor",
        "worker",
        "--app",
        "examples.scale_out.app:make_service",
    ]
    workers = [
        subprocess.Popen([*command, "--concurrency", "8"], env=env, stderr=subprocess.DEVNULL)
        for _ in range(2)
    ]
    try:
        settings = QueueSettings(REDIS, 3)
        while len(asyncio.run(live_workers(settings))) < 2:
            time.sleep(0.2)
        os.environ.update(REACTOR_REDIS_URL=REDIS, REACTOR_RECLAIM_AFTER="3")
        started = time.monotonic()
        run_ids = asyncio.run(submit())
        print(f"submitted {len(run_ids)} runs")
        time.sleep(1.5)
        victim = workers[0]
        held = {w["pid"]: w["runs"] for w in asyncio.run(live_workers(settings))}
        print(
            f"killing worker pid {victim.pid} with {len(held.get(victim.pid, []))} runs in flight"
        )
        victim.send_signal(signal.SIGKILL)
        with PostgresSignalStore(DB) as store:
            while sum(info.complete for info in store.runs()) < RUNS:
                time.sleep(0.5)
            logs = [store.load(run_id) for run_id in run_ids]
        resumed = sum("harness:resumed" in [s.name for s in log.signals] for log in logs)
        statuses = sorted({str(log.status) for log in logs})
        print(f"all {RUNS} runs {statuses} in {time.monotonic() - started:.1f}s")
        print(f"{resumed} resumed from their logs by the surviving worker")
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
            worker.wait(30)


if __name__ == "__main__":
    main()
