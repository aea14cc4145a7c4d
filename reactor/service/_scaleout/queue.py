"""Runs as jobs on taskiq's Redis Streams broker: what scale-out is made of.

With ``REACTOR_REDIS_URL`` set, the service does not execute the runs it starts: it
puts a job on a Redis stream ("run graph G with input X as run R", or "resume R") and
``reactor worker`` processes execute them (:mod:`reactor.service._scaleout.worker`). The stream
has one consumer group: each job goes to one worker, which acknowledges it once the run
has ended. A reaction (an object event logged for an agent) is a job too, "process
processing-log entry E", acknowledged once the entry is settled. A worker that dies
leaves its jobs pending; once a job has been idle for ``REACTOR_RECLAIM_AFTER`` seconds
another worker claims it and resumes the run from its log (or runs the reaction again).
Without the variable everything runs in the serving process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from taskiq import AckableMessage
from taskiq.kicker import AsyncKicker
from taskiq_redis import RedisStreamBroker

from reactor._recording.info import RunInfo
from reactor._signals.diagnostics import log
from reactor.exceptions import ServiceConfigError
from reactor.service._hosting.launch import RunRequest
from reactor.service._objects.changes import ProcessingEntry
from reactor.service._objects.db import Database
from reactor.service._scaleout.jobs import QueuedJobs

__all__ = [
    "QUEUED_KEYS",
    "REACTION",
    "RECLAIM_ENV",
    "REDIS_ENV",
    "STREAM",
    "TASK",
    "WORKER_KEYS",
    "JobBroker",
    "JobQueue",
    "QueueSettings",
    "live_workers",
]

REDIS_ENV = "REACTOR_REDIS_URL"
RECLAIM_ENV = "REACTOR_RECLAIM_AFTER"
STREAM = "reactor:jobs"
GROUP = "reactor-workers"
TASK = "reactor.run"
REACTION = "reaction"
"""The key of a reaction's job: ``{"reaction": <entry id>, "agent": <name>}``."""
WORKER_KEYS = "reactor:worker:"
"""Prefix of the workers' heartbeat keys: ``reactor:worker:<id>``, a JSON value."""
QUEUED_KEYS = "reactor:queued:"
"""Prefix of the keys of runs queued and not started yet: ``reactor:queued:<run id>``."""
BACKOFF_FIRST = 0.2
BACKOFF_MAX = 10.0
"""Seconds before the first reconnection to Redis, and the most between two."""
QUEUED_FOR = 7 * 24 * 3600
"""Seconds a queued run's key lives at most (a job no worker can take stays visible)."""


@dataclasses.dataclass(frozen=True)
class QueueSettings:
    """Where the jobs are: the Redis URL, and when a silent job is taken over.

    Attributes:
        url: ``redis://host:port/db``.
        reclaim_after: Seconds a job may stay unacknowledged without its worker's
            heartbeat before another worker takes it over (and how old a run's lease
            may get).
    """

    url: str
    reclaim_after: float = 30.0

    def __post_init__(self) -> None:
        if not self.url.startswith(("redis://", "rediss://", "unix://")):
            raise ServiceConfigError(
                f"{REDIS_ENV} must be a Redis URL like redis://127.0.0.1:6379/0, got {self.url!r}."
            )
        if not self.reclaim_after > 0:
            raise ServiceConfigError(
                f"{RECLAIM_ENV} must be a positive number of seconds, got {self.reclaim_after!r}."
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> QueueSettings | None:
        """The settings ``REACTOR_REDIS_URL`` and ``REACTOR_RECLAIM_AFTER`` give (else None)."""
        env = os.environ if env is None else env
        url = env.get(REDIS_ENV, "").strip()
        if not url:
            return None
        text = env.get(RECLAIM_ENV, "").strip() or "30"
        try:
            reclaim = float(text)
        except ValueError:
            raise ServiceConfigError(
                f"{RECLAIM_ENV} must be a number of seconds, got {text!r}."
            ) from None
        return cls(url, reclaim)


class JobBroker(RedisStreamBroker):
    """taskiq's Redis Streams broker, taking one job at a time and reclaiming idle ones.

    The stock ``listen`` reads new jobs in batches and looks for idle ones only after
    new ones arrived; a worker here takes one job per read (so that jobs spread over
    workers) and first claims the jobs idle for longer than the reclaim time, on every
    round, also when the stream is quiet, so a dead worker's jobs are taken over at
    once.
    """

    def __init__(self, settings: QueueSettings, *, consumer: str | None = None) -> None:
        idle_ms = max(1, int(settings.reclaim_after * 1000))
        super().__init__(
            settings.url,
            queue_name=STREAM,
            consumer_group_name=GROUP,
            consumer_name=consumer,
            consumer_id="0",  # a group made after jobs were queued still gets them
            xread_block=min(1000, idle_ms),
            idle_timeout=idle_ms,
            xread_count=1,
            health_check_interval=1,  # a connection kept from before a Redis restart is
        )  # found closed by a ping and made again, not by the command it was taken for
        self.reconnected: Callable[[], None] = lambda: None
        """Called after Redis came back (a worker then looks for jobs Redis lost)."""

    async def listen(self) -> AsyncGenerator[AckableMessage, None]:
        """Jobs, for ever: a lost connection to Redis is retried with backoff, logged."""
        failures = 0

        def answered() -> None:
            nonlocal failures
            if failures:
                log("reactor.worker", "info", "redis reconnected", after=failures)
                failures = 0
                self.reconnected()

        while True:
            try:
                async for message in self._listen(answered):
                    yield message
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                failures += 1
                wait = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(failures - 1, 8))
                wait *= 0.5 + random.random()  # jitter: workers do not reconnect in step
                log(
                    "reactor.worker",
                    "warning",
                    "redis connection lost; reconnecting",
                    attempt=failures,
                    retry_in_s=round(wait, 2),
                    error=repr(exc),
                )
                await asyncio.sleep(wait)
            except ResponseError as exc:
                if "NOGROUP" not in str(exc):
                    raise
                # Redis came back without its data (no persistence): make the stream and
                # the group again; the database re-queues what was lost.
                log("reactor.worker", "warning", "job stream lost; making it again")
                await self._make_group()
                answered()
                self.reconnected()

    async def _make_group(self) -> None:
        async with Redis(connection_pool=self.connection_pool) as redis:
            with contextlib.suppress(ResponseError):  # made meanwhile by another worker
                await redis.xgroup_create(STREAM, GROUP, id="0", mkstream=True)

    async def _listen(self, answered: Callable[[], None]) -> AsyncGenerator[AckableMessage, None]:
        async with Redis(connection_pool=self.connection_pool) as redis:
            while True:
                # Jobs idle for too long first (their workers died), one at a time and
                # without waiting while there are more; then new jobs, waiting a while.
                claimed: Any = await redis.xautoclaim(
                    STREAM, GROUP, self.consumer_name, min_idle_time=self.idle_timeout, count=1
                )
                answered()  # Redis answers (again)
                for message_id, fields in claimed[1]:
                    if fields:  # a job deleted from the stream leaves an empty entry
                        log(
                            "reactor.worker", "info", "job reclaimed",
                            message=_text(message_id), job=_key(fields),
                            idle_s=round(self.idle_timeout / 1000, 1),
                        )  # fmt: skip
                        yield self._message(message_id, fields)
                if claimed[1]:
                    continue
                fetched: Any = await redis.xreadgroup(
                    GROUP, self.consumer_name, {STREAM: ">"}, count=1, block=self.block
                )
                for _stream, messages in fetched or ():
                    for message_id, fields in messages:
                        yield self._message(message_id, fields)

    def _message(self, message_id: Any, fields: Mapping[bytes, bytes]) -> AckableMessage:
        return AckableMessage(
            data=fields[b"data"], ack=self._ack_generator(id=message_id, queue_name=STREAM)
        )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _key(fields: Mapping[bytes, bytes]) -> str:
    """The run id (or ``reaction:<entry>``) a job on the stream is for, as far as it says."""
    try:
        (job,) = json.loads(fields[b"data"])["args"]
        if REACTION in job:
            return f"reaction:{job[REACTION]}"
        return str(job.get("resume") or job.get("run_id"))
    except (KeyError, TypeError, ValueError):
        return "?"


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
        self.broker = JobBroker(settings)
        self.jobs = (
            None
            if db is None
            else QueuedJobs(db, lambda: Redis(connection_pool=self.broker.connection_pool))
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
            if jobs is None or await jobs.mark(key):
                await self.kick_again(key, job)
        except BaseException:
            if jobs is not None:  # not queued after all
                with contextlib.suppress(Exception):
                    await jobs.remove(key)
            raise

    async def kick_again(self, key: str, job: dict[str, Any]) -> None:
        """Put ``job`` on the stream (a new run is shown queued until a worker starts it)."""
        if REACTION in job or job.get("resume") is not None or job.get("run_id") is None:
            await self._kick(job)
            return
        marker = json.dumps({**job, "queued_at": time.time()})
        async with Redis(connection_pool=self.broker.connection_pool) as redis:
            await redis.set(QUEUED_KEYS + key, marker, ex=QUEUED_FOR)
            try:
                await self._kick(job)
            except BaseException:
                await redis.delete(QUEUED_KEYS + key)  # not queued after all
                raise

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

    async def queued(self, run_id: str) -> RunInfo | None:
        """A run queued and not started yet, as ``queued`` (None otherwise)."""
        async with Redis(connection_pool=self.broker.connection_pool) as redis:
            found = await redis.get(QUEUED_KEYS + run_id)
        return None if found is None else _queued_info(run_id, found)

    async def queued_runs(self, limit: int) -> list[RunInfo]:
        """The runs queued and not started yet, newest first (at most ``limit``)."""
        async with Redis(connection_pool=self.broker.connection_pool) as redis:
            keys = [key async for key in redis.scan_iter(match=QUEUED_KEYS + "*", count=1000)]
            values = await redis.mget(keys) if keys else []
        infos = [
            _queued_info(key.decode().removeprefix(QUEUED_KEYS), value)
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
    async with Redis.from_url(settings.url) as redis:
        async for key in redis.scan_iter(match=WORKER_KEYS + "*"):
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
