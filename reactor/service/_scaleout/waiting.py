"""Jobs a worker's code cannot run: left pending for a worker whose code can.

During a rolling deploy the workers of the old code and of the new one take jobs from
the same stream, and a job may name a graph (or an agent defined in code) that the
worker holding it lacks. That is no reason to drop it: a worker that has the graph
will come, or is there already. So the worker leaves the job pending (neither
acknowledged nor deleted) and hands it back at once (:meth:`JobBroker.park
<reactor.service._scaleout.broker.JobBroker.park>`: another worker claims it on its
next round, within a second), skips it itself for a while (the reclaim time, doubling
up to :data:`PARK_MAX`, jittered: it does not spin on it), and says so once per job.

While it waits, the job has a key in Redis (``<prefix>:waiting:<key>``: what it waits
for and since when), deleted when a worker acknowledges it: ``/workers`` in the web UI
and ``reactor workers`` show such jobs (:func:`waiting_jobs`).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import sqlalchemy as sa
from taskiq import Context

from reactor._signals.diagnostics import log
from reactor._signals.redisclient import Redis, redis_at
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.schema import agents
from reactor.service._scaleout.broker import STREAM_ID, JobBroker, QueueSettings

__all__ = ["PARK_MAX", "Waiting", "waiting_jobs"]

PARK_MAX = 600.0
"""The most seconds a worker leaves alone a job its code cannot run, before it looks
at it again (an agent made since over the API may have turned up)."""
WAITING_FOR = 7 * 24 * 3600
"""Seconds a waiting job's key lives at most (it goes when the job is acknowledged)."""
FORGET_AFTER = 3 * PARK_MAX
"""Seconds after which a worker forgets a job it left (it was taken by another)."""


class Waiting:
    """What a worker's code lacks, and the jobs it leaves because of it.

    Args:
        service: The worker's service: its graphs and agents.
        broker: The worker's broker (to park a job).
        worker: The worker's id (in the log lines).
        reclaim_after: The first time a job is left alone, in seconds.
        reread: Reads the agents from the database again if they changed.
    """

    def __init__(
        self,
        service: ReactionService,
        broker: JobBroker,
        worker: str,
        reclaim_after: float,
        reread: Callable[[], Awaitable[None]],
    ) -> None:
        self.service, self.broker, self.worker = service, broker, worker
        self.reclaim_after = reclaim_after
        self._reread = reread
        self.left: dict[str, tuple[int, float]] = {}  # job key -> (times left, when last)

    async def lacks(self, kind: str, name: str) -> str | None:
        """What this worker's code lacks to run ``kind`` (graph, agent) ``name``, if anything.

        ``graph 'name'`` or ``agent 'name'``, else None. An agent the database
        defines (over the API) is never lacking: every worker builds it (once it has
        read it); one whose row says it is defined in code, and that this code does not
        define, is.
        """
        if kind == "graph":
            return None if name in self.service.host.runs.graphs else f"graph {name!r}"
        catalog = self.service.catalog
        if name in catalog.agents or name in catalog.code:
            return None
        await self._reread()  # made over the API since it was last read?
        if name in catalog.agents:
            return None
        async with self.service.db.read() as conn:
            defined_in = await conn.scalar(
                sa.select(agents.c.defined_in).where(agents.c.name == name)
            )
        return f"agent {name!r}" if defined_in == "code" else None

    async def leave(self, key: str, lacks: str, context: Context) -> None:
        """Leave the job ``key`` to the workers that have what this one ``lacks``.

        Not acknowledged: it stays pending, handed back for another worker to claim,
        and left alone here for a while (longer each time it comes back).
        """
        now = time.monotonic()
        for old in [k for k, (_, at) in self.left.items() if now - at > FORGET_AFTER]:
            del self.left[old]
        times = self.left.get(key, (0, now))[0] + 1
        self.left[key] = (times, now)
        wait = min(PARK_MAX, self.reclaim_after * 2 ** min(times - 1, 16))
        wait *= random.uniform(0.75, 1.25)  # workers do not look at it again in step
        if times == 1:
            log(
                "reactor.worker",
                "warning",
                "job left for a worker with its code",
                job=key,
                waits_for=lacks,
                worker=self.worker,
                look_again_in_s=round(wait, 1),
            )
        message_id = context.message.labels.get(STREAM_ID)
        try:
            if message_id is not None:
                await self.broker.park(str(message_id), wait)
            shown = json.dumps({"job": key, "waits_for": lacks, "since": time.time()})
            async with Redis(connection_pool=self.broker.connection_pool) as redis:
                await redis.set(self.broker.keys.waiting + key, shown, nx=True, ex=WAITING_FOR)
        except Exception as exc:  # Redis away: it stays pending, reclaimed when idle
            log("reactor.worker", "warning", "job not handed back", job=key, error=repr(exc))


async def waiting_jobs(settings: QueueSettings) -> list[dict[str, Any]]:
    """The jobs waiting for a worker with their code, oldest first.

    Each is ``{"job": run id or "reaction:<entry>", "waits_for": "graph 'x'",
    "since": epoch seconds}``; only those still queued (their marker is there).
    """
    names = settings.keys
    async with redis_at(settings.url) as redis:
        keys = [key async for key in redis.scan_iter(match=names.waiting + "*", count=1000)]
        if not keys:
            return []
        values = await redis.mget(keys)
        jobs = [key.decode().removeprefix(names.waiting) for key in keys]
        queued = await redis.mget([names.job + job for job in jobs])
    found = [
        json.loads(value)
        for value, marker in zip(values, queued, strict=True)
        if value is not None and marker is not None
    ]
    return sorted(found, key=lambda job: float(job["since"]))
