"""A cancelled task stops: what talks to Redis never lets a cancellation pass as an answer.

redis-py's asyncio client can answer a command cancelled while under way as if it had
not been; a service's loop that went on waiting after it kept the service's shutdown
waiting for ever (real Redis, real PostgreSQL).
"""

from __future__ import annotations

import asyncio

from reactor._signals.redisclient import Redis, kept_cancellation
from reactor.service._objects.db import Database
from reactor.service._scaleout.jobs import RedisKeys
from reactor.service._scaleout.queue import JobQueue, QueueSettings

ROUNDS = 200
PATIENCE = 60.0
"""Seconds a cancelled task is given to end: a bound on a hang, not a speed check."""


async def test_a_block_that_took_its_tasks_cancellation_raises_it_after() -> None:
    reached = asyncio.Event()

    async def taking() -> str:
        with kept_cancellation():
            try:
                reached.set()
                await asyncio.sleep(PATIENCE)
            except asyncio.CancelledError:
                pass  # a library that answers as if nothing happened
        return "went on"

    task = asyncio.create_task(taking())
    await reached.wait()
    task.cancel()
    await asyncio.wait({task}, timeout=PATIENCE)
    assert task.cancelled()


async def test_a_block_not_cancelled_returns_as_usual() -> None:
    async def plain() -> str:
        with kept_cancellation():
            await asyncio.sleep(0)
        return "done"

    assert await asyncio.create_task(plain()) == "done"


async def test_a_command_cancelled_at_any_moment_ends_cancelled(redis_url: str) -> None:
    """Cancelled before, during or after its round trip: never answered as if not cancelled."""
    answered = []
    for round_ in range(ROUNDS):
        client = Redis.from_url(redis_url)
        try:
            if round_ % 2:
                await client.ping()  # half on a connection made already
            command = asyncio.ensure_future(client.mget(["a", "b"]))
            await asyncio.sleep(0.0003 * (round_ % 10))
            if command.cancel():  # asked before it was done: it must end cancelled
                await asyncio.wait({command}, timeout=PATIENCE)
                if not command.cancelled():
                    answered.append(round_)
        finally:
            await client.aclose()
    assert answered == []


async def test_looking_for_lost_jobs_stops_when_cancelled_at_any_moment(
    postgres_url: str, redis_url: str, redis_keys: RedisKeys
) -> None:
    """The loop of `reactor serve` and the workers that queues again what Redis lost."""
    db = Database(postgres_url)
    await db.open()
    queue = JobQueue(QueueSettings(redis_url, prefix=redis_keys.prefix), db)
    assert queue.jobs is not None
    await queue.jobs.add("run_lost", {"run_id": "run_lost", "graph": "steps"})
    try:
        for round_ in range(ROUNDS):
            looking = asyncio.create_task(queue.requeue_every(0.001))
            await asyncio.sleep(0.0005 * (round_ % 20))
            looking.cancel()
            await asyncio.wait({looking}, timeout=PATIENCE)
            assert looking.cancelled(), f"round {round_}: still looking after it was cancelled"
    finally:
        await queue.jobs.remove("run_lost")
        await queue.aclose()
        await db.close()
