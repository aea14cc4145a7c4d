"""Runs as jobs on taskiq's Redis Streams broker: what scale-out is made of.

With ``REACTOR_REDIS_URL`` set, the service does not execute the runs it starts: it
puts a job on a Redis stream ("run graph G with input X as run R", or "resume R") and
``reactor worker`` processes execute them (:mod:`reactor.service._scaleout.worker`). The stream
has one consumer group: each job goes to one worker, which acknowledges it once the run
has ended. A reaction (an object event logged for an agent) is a job too, "process
processing-log entry E", acknowledged once the entry is settled. A worker that dies
leaves its jobs pending; once a job has been idle for ``REACTOR_RECLAIM_AFTER`` seconds
another worker claims it and resumes the run from its log (or runs the reaction again).
Without the variable everything runs in the serving process. How a worker takes jobs
(reclaiming, backoff, jobs left to other workers) is :mod:`reactor.service._scaleout.broker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

from taskiq.kicker import AsyncKicker

from reactor._recording.info import RunInfo
from reactor._signals.diagnostics import log
from reactor._signals.redisclient import Redis, redis_at
from reactor.exceptions import ServiceConfigError
from reactor.service._hosting.launch import RunRequest
from reactor.service._objects.changes import ProcessingEntry
from reactor.service._objects.db import Database
from reactor.service._scaleout.broker import (
    BACKOFF_FIRST,
    BACKOFF_MAX,
    REACTION,
    RECLAIM_ENV,
    REDIS_ENV,
    JobBroker,
    QueueSettings,
)
from reactor.service._scaleout.jobs import QueuedJobs

__all__ = [
    "REACTION",
    "RECLAIM_ENV",
    "REDIS_ENV",
    "TASK",
    "JobBroker",
    "JobQueue",
    "QueueSettings",
    "live_workers",
]

TASK = "reactor.run"
QUEUED_FOR = 7 * 24 * 3600
"""Seconds a queued run's key lives at most (a job no worker can take stays visible)."""
_PUSH = """
if ARGV[1] == '1' and not redis.call('SET', KEYS[1], '1', 'NX') then return 0 end
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3]) end
redis.call('XADD', KEYS[3], '*', 'data', ARGV[4])
return 1
"""
"""Queue a job (:meth:`JobQueue._push`): KEYS its marker, its queued marker, the stream;
ARGV whether to set the marker (if not there, else do nothing), the queued marker (or
nothing), its lifetime, the job as taskiq puts it on the stream."""


class JobQueue:
    """The serving side of the queue: puts the runs it is asked for on the stream.

    Args:
        settings: Where the queue is.
        db: The service's database: each job is kept there too until it is
            acknowledged, so that one Redis loses is queued again
            (:mod:`reactor.service._scaleout.jobs`).
    """

    def __init__(self, settings: QueueSettings, db: Database | None = None) -> None:
        self.settings = settings
        self.keys = settings.keys
        self.broker = JobBroker(settings)
        self.jobs = (
            None
            if db is None
            else QueuedJobs(
                db, lambda: Redis(connection_pool=self.broker.connection_pool), self.keys
            )
        )
        self._started = False

    async def enqueue(self, request: RunRequest) -> None:
        """Queue ``request`` (its ``run_id`` or ``resume`` names the run).

        A new run is marked queued until a worker starts it (:meth:`queued`), so that
        it can be looked at before it has a log. A run whose job is on the stream
        already is not queued twice.
        """
        key = request.resume or request.run_id
        if key is None:
            await self._kick(job_of(request))
            return
        await self._queue(key, job_of(request))

    async def _queue(self, key: str, job: dict[str, Any]) -> None:
        jobs = self.jobs
        if jobs is not None:
            await jobs.add(key, job)
        try:
            await self._push(key, job, mark=jobs is not None)
        except BaseException:
            if jobs is not None:  # not queued after all
                with contextlib.suppress(Exception):
                    await jobs.remove(key)
            raise

    async def kick_again(self, key: str, job: dict[str, Any]) -> None:
        """Put ``job`` on the stream (a new run is shown queued until a worker starts it)."""
        await self._push(key, job, mark=False)

    async def _push(self, key: str, job: dict[str, Any], *, mark: bool) -> bool:
        """Put ``job`` on the stream; False if ``mark`` and its marker was there already.

        One command (a script, all or nothing): ``mark`` sets the job's marker if it
        is not there (:meth:`QueuedJobs.mark`), else nothing is done; a new run is
        marked queued until a worker starts it (:meth:`queued`); then the job goes on
        the stream as taskiq's kicker would put it.
        """
        if not self._started:
            await self.broker.startup()
            self._started = True
        new_run = REACTION not in job and job.get("resume") is None and job.get("run_id")
        kicker: AsyncKicker[Any, None] = AsyncKicker(TASK, self.broker, {"ack_type": "manual"})
        message = self.broker.formatter.dumps(kicker._prepare_message(job))
        marker = json.dumps({**job, "queued_at": time.time()}) if new_run else ""
        keys = [self.keys.job + key, self.keys.queued + key, self.keys.stream]
        pushed = await self.broker.redis.eval(
            _PUSH, len(keys), *keys, int(mark), marker, QUEUED_FOR, message.message
        )
        return bool(pushed)

    async def remove(self, key: str) -> None:
        """A job was acknowledged: the database no longer keeps it."""
        if self.jobs is not None:
            await self.jobs.remove(key)

    async def requeue_lost(self) -> list[str]:
        """Queue again the jobs the database keeps and Redis lost; their keys."""
        if self.jobs is None:
            return []
        if not self._started:
            await self.broker.startup()
            self._started = True
        return await self.jobs.requeue_lost(self.kick_again)

    async def requeue_after_reconnects(self, wake: asyncio.Event) -> None:
        """Queue again what Redis lost each time ``wake`` is set, for ever.

        ``wake`` is set at the start and after each reconnect to Redis. Until it can
        look (Redis or the database is away), it tries again after a jittered backoff,
        or at once when ``wake`` is set again; said once per outage.
        """
        failures = 0
        while True:
            await wake.wait()
            wake.clear()
            try:
                requeued = await self.requeue_lost()
            except Exception as exc:  # Redis or the database went away again: next time
                failures += 1
                if failures == 1:
                    log("reactor.worker", "warning", "cannot look for lost jobs", error=repr(exc))
                wait = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(failures - 1, 8))
                with contextlib.suppress(TimeoutError):  # or woken by a reconnect
                    async with asyncio.timeout(wait * (0.5 + random.random())):
                        await wake.wait()
                wake.set()
                continue
            if failures:
                log("reactor.worker", "info", "looked for lost jobs again", after=failures)
            failures = 0
            for key in requeued:
                log("reactor.worker", "warning", "job lost by redis; queued again", job=key)

    async def queued(self, run_id: str) -> RunInfo | None:
        """A run queued and not started yet, as ``queued`` (None otherwise).

        Redis marks it until a worker starts it; when Redis lost its data (restarted
        empty), the database still keeps the job (until it is requeued and marked again):
        an accepted run is never unknown.
        """
        async with Redis(connection_pool=self.broker.connection_pool) as redis:
            found = await redis.get(self.keys.queued + run_id)
        if found is not None:
            return _queued_info(run_id, found)
        kept = None if self.jobs is None else await self.jobs.find(run_id)
        if kept is None:
            return None
        job, queued_at = kept
        if REACTION in job or job.get("resume") is not None or job.get("run_id") != run_id:
            return None  # a reaction's or a resume's: the run has a log already
        return _queued_info(run_id, json.dumps({**job, "queued_at": queued_at.timestamp()}))

    async def requeue_every(self, seconds: float) -> None:
        """Queue again what Redis lost, looking every ``seconds``, for ever.

        ``reactor serve`` looks too, not only the workers after they reconnect: with no
        worker running, a job Redis lost is queued again all the same.
        """
        wake = asyncio.Event()

        async def tick() -> None:
            while True:
                wake.set()
                await asyncio.sleep(seconds)

        async with asyncio.TaskGroup() as group:
            group.create_task(tick())
            group.create_task(self.requeue_after_reconnects(wake))

    async def queued_runs(self, limit: int) -> list[RunInfo]:
        """The runs queued and not started yet, newest first (at most ``limit``)."""
        async with Redis(connection_pool=self.broker.connection_pool) as redis:
            queued = self.keys.queued
            keys = [key async for key in redis.scan_iter(match=queued + "*", count=1000)]
            values = await redis.mget(keys) if keys else []
        infos = [
            _queued_info(key.decode().removeprefix(self.keys.queued), value)
            for key, value in zip(keys, values, strict=True)
            if value is not None
        ]
        return sorted(infos, key=lambda info: info.started_at, reverse=True)[:limit]

    async def enqueue_reactions(self, entries: Sequence[ProcessingEntry]) -> None:
        """Queue a job per pending processing-log entry: its reaction, run by a worker."""
        for entry in entries:
            await self._queue(f"reaction:{entry.id}", {REACTION: entry.id, "agent": entry.agent})

    async def _kick(self, job: dict[str, Any]) -> None:
        if not self._started:
            await self.broker.startup()
            self._started = True
        kicker: AsyncKicker[Any, None] = AsyncKicker(TASK, self.broker, {"ack_type": "manual"})
        await kicker.kiq(job)

    async def aclose(self) -> None:
        """Close the connections to Redis."""
        await self.broker.shutdown()


async def live_workers(settings: QueueSettings) -> list[dict[str, Any]]:
    """The workers whose heartbeat is fresh: id, host, pid, concurrency, runs, started, beat."""
    found = []
    async with redis_at(settings.url) as redis:
        async for key in redis.scan_iter(match=settings.keys.worker + "*"):
            value = await redis.get(key)
            if value is not None:
                found.append(json.loads(value))
    return sorted(found, key=lambda worker: str(worker["id"]))


def _queued_info(run_id: str, marker: str | bytes) -> RunInfo:
    """What the service shows of a queued run: its request, status ``queued``."""
    job = dict(json.loads(marker))
    queued_at = float(job.pop("queued_at", 0.0))
    request = request_of(job)
    return RunInfo(run_id, request.name, request.run_tags(), started_at=queued_at, status="queued")


def job_of(request: RunRequest) -> dict[str, Any]:
    """The job's JSON: the request's fields."""
    return dataclasses.asdict(request)


def request_of(job: Mapping[str, Any]) -> RunRequest:
    """The request a job carries (a job of another version of reactor is refused)."""
    names = {field.name for field in dataclasses.fields(RunRequest)}
    unknown = set(job) - names
    if unknown or "kind" not in job or "name" not in job:
        raise ServiceConfigError(f"Not a reactor job: {dict(job)!r}.")
    return RunRequest(**job)
