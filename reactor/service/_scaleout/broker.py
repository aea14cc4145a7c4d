"""The queue's Redis and the broker workers take their jobs with: settings, reclaim, backoff.

:class:`QueueSettings` says where the jobs are (``REACTOR_REDIS_URL``) and when a
silent job is taken over (``REACTOR_RECLAIM_AFTER``). :class:`JobBroker` is taskiq's
Redis Streams broker as a worker uses it: as many jobs per read as the worker has
room for, the jobs done acknowledged together, jobs idle past the reclaim time claimed
first, a Redis that is away (also at the start) waited for with a jittered backoff,
and jobs the worker's code cannot run left to the other workers
(:meth:`JobBroker.park`, :mod:`reactor.service._scaleout.waiting`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import random
import re
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from taskiq import AckableMessage, BrokerMessage
from taskiq_redis import RedisStreamBroker

from reactor._signals.diagnostics import log
from reactor._signals.redisclient import Redis, kept_cancellation
from reactor._signals.settings import masked_url, settings_from
from reactor.exceptions import ServiceConfigError
from reactor.service._scaleout.durable import Grouped
from reactor.service._scaleout.jobs import RedisKeys

__all__ = [
    "BACKOFF_FIRST",
    "BACKOFF_MAX",
    "PREFIX_ENV",
    "REACTION",
    "RECLAIM_ENV",
    "REDIS_ENV",
    "STREAM_ID",
    "JobBroker",
    "QueueSettings",
    "RedisKeys",
]

REDIS_ENV = "REACTOR_REDIS_URL"
RECLAIM_ENV = "REACTOR_RECLAIM_AFTER"
PREFIX_ENV = "REACTOR_REDIS_PREFIX"
REACTION = "reaction"
"""The key of a reaction's job: ``{"reaction": <entry id>, "agent": <name>}``."""
STREAM_ID = "reactor_stream_id"
"""The label that gives a job's function its message id on the stream (to park it)."""
BACKOFF_FIRST = 0.2
BACKOFF_MAX = 10.0
"""Seconds before the first reconnection to Redis, and the most between two."""
_PREFIX = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
PENDING_PAGE = 100
"""Idle jobs looked at per round trip when looking for one to claim."""
CLAIM_EVERY = 0.25
"""Seconds between two looks for idle jobs while new jobs keep coming (a quiet stream
is looked at on every round): a look per job would cost each job a round trip."""


@dataclasses.dataclass(frozen=True)
class QueueSettings:
    """Where the jobs are: the Redis URL, when a silent job is taken over, the keys' prefix.

    Attributes:
        url: ``redis://host:port/db``.
        reclaim_after: Seconds a job may stay unacknowledged without its worker's
            heartbeat before another worker takes it over (and how old a run's lease
            may get).
        prefix: What the service's keys in Redis begin with (:class:`RedisKeys`).
    """

    url: str
    reclaim_after: float = 30.0
    prefix: str = "reactor"

    @property
    def keys(self) -> RedisKeys:
        """The names of the service's keys in its Redis."""
        return RedisKeys(self.prefix)

    def __post_init__(self) -> None:
        if not self.url.startswith(("redis://", "rediss://", "unix://")):
            raise ServiceConfigError(
                f"{REDIS_ENV} must be a Redis URL like redis://127.0.0.1:6379/0, got "
                f"{masked_url(self.url)!r}."
            )
        if not self.reclaim_after > 0:
            raise ServiceConfigError(
                f"{RECLAIM_ENV} must be a positive number of seconds, got {self.reclaim_after!r}."
            )
        if not _PREFIX.fullmatch(self.prefix):
            raise ServiceConfigError(
                f"{PREFIX_ENV} must be 1 to 64 letters, digits, '_', '-', '.' or ':', got "
                f"{self.prefix!r}."
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> QueueSettings | None:
        """The settings ``REACTOR_REDIS_URL`` and ``REACTOR_RECLAIM_AFTER`` give (else None).

        ``env``: read these variables instead of the process's (checked alike).

        Raises:
            ServiceConfigError: A ``REACTOR_*`` value is bad (one line per bad variable).
        """
        config = settings_from(env)
        if config.redis_url is None:
            return None
        return cls(config.redis_url, config.reclaim_after, config.redis_prefix)


class JobBroker(RedisStreamBroker):
    """taskiq's Redis Streams broker, taking the jobs it has room for and reclaiming idle ones.

    The stock ``listen`` reads new jobs in batches of a set size and looks for idle ones
    only after new ones arrived; a worker here reads as many jobs as it can start at
    once (:attr:`room`: never more, so that jobs spread over workers), acknowledges the
    jobs done at the same moment with one command, and first claims the jobs idle for
    longer than the reclaim time (every :data:`CLAIM_EVERY` seconds while jobs keep
    coming, on every round when the stream is quiet), so a dead worker's jobs are taken
    over at once. It starts (makes its consumer group) in ``listen``, with the same backoff as a
    reconnect: a worker started while Redis is down waits for it instead of exiting.
    """

    def __init__(self, settings: QueueSettings, *, consumer: str | None = None) -> None:
        idle_ms = max(1, int(settings.reclaim_after * 1000))
        super().__init__(
            settings.url,
            queue_name=settings.keys.stream,
            consumer_group_name=settings.keys.group,
            consumer_name=consumer,
            consumer_id="0",  # a group made after jobs were queued still gets them
            xread_block=min(1000, idle_ms),
            idle_timeout=idle_ms,
            xread_count=1,
            health_check_interval=1,  # a connection kept from before a Redis restart is
        )  # found closed by a ping and made again, not by the command it was taken for
        self.keys = settings.keys
        """The names of the service's keys in Redis (its stream, its group)."""
        self.reconnected: Callable[[], None] = lambda: None
        """Called after Redis came back (a worker then looks for jobs Redis lost)."""
        self.ready = False
        """Whether :meth:`startup` went through (it needs Redis: ``listen`` retries it)."""
        self.parked: dict[str, float] = {}
        """Message ids this worker leaves to the others, until when (monotonic)."""
        self.in_hand = 0
        """Jobs given to the worker and not done yet (the worker counts them down)."""
        self.room: Callable[[], int] = lambda: 1
        """How many jobs this worker can start now: read at once, in one round trip."""
        self._acks: Grouped[bytes | str] = Grouped(self._ack_all)

    @functools.cached_property
    def redis(self) -> Redis:
        """A client of the broker's connection pool, kept (one per command costs)."""
        return Redis(connection_pool=self.connection_pool)

    async def startup(self) -> None:
        """Make the consumer group (taskiq's start); ``ready`` once it is made."""
        with kept_cancellation():  # taskiq talks to Redis through redis-py's own client
            await super().startup()
        self.ready = True

    async def kick(self, message: BrokerMessage) -> None:
        """Put ``message`` on the stream (taskiq's kick, its cancellation kept)."""
        with kept_cancellation():
            await super().kick(message)

    async def park(self, message_id: str, seconds: float) -> None:
        """Leave a job pending for the other workers, and alone here for ``seconds``.

        Its idle time is set to the reclaim time, so another worker claims it on its
        next round rather than after the reclaim time; this one skips it meanwhile.
        """
        self.parked[message_id] = time.monotonic() + seconds
        async with Redis(connection_pool=self.connection_pool) as redis:
            await redis.xclaim(
                self.keys.stream,
                self.keys.group,
                self.consumer_name,
                min_idle_time=0,
                message_ids=[message_id],
                idle=self.idle_timeout,
                justid=True,
            )

    async def listen(self) -> AsyncGenerator[AckableMessage, None]:
        """Jobs, for ever: a lost connection to Redis is retried with backoff, logged.

        Started here unless it was (a ``Receiver`` made with ``run_startup=False``): a
        Redis that does not answer yet is waited for like one that went away.
        """
        failures = 0

        def answered() -> None:
            nonlocal failures
            if failures:
                log("reactor.worker", "info", "redis reconnected", after=failures)
                failures = 0
                self.reconnected()

        while True:
            try:
                if not self.ready:
                    await self.startup()
                async for message in self._listen(answered):
                    yield message
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                failures += 1
                wait = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** min(failures - 1, 8))
                wait *= 0.5 + random.random()  # jitter: workers do not reconnect in step
                log(
                    "reactor.worker",
                    "warning",
                    "redis connection lost; reconnecting"
                    if self.ready
                    else "redis unreachable; waiting for it",
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
                await redis.xgroup_create(self.keys.stream, self.keys.group, id="0", mkstream=True)

    async def _listen(self, answered: Callable[[], None]) -> AsyncGenerator[AckableMessage, None]:
        async with Redis(connection_pool=self.connection_pool) as redis:
            looked = -CLAIM_EVERY  # when idle jobs were last looked for (monotonic)
            while True:
                # Jobs idle for too long first (their workers died, or left them to
                # others), one at a time and without waiting while there are more,
                # looked for at most every CLAIM_EVERY seconds while jobs keep coming;
                # then new jobs, as many as this worker has room for, waiting a while.
                if time.monotonic() - looked >= CLAIM_EVERY:
                    claimed = await self._claim_idle(redis)
                    answered()  # Redis answers (again)
                    if claimed is not None:
                        message_id, fields = claimed
                        log(
                            "reactor.worker",
                            "info",
                            "job reclaimed",
                            message=_text(message_id),
                            job=_key(fields),
                            idle_s=round(self.idle_timeout / 1000, 1),
                        )
                        self.in_hand += 1
                        yield self._message(message_id, fields)
                        continue
                    looked = time.monotonic()
                fetched: Any = await redis.xreadgroup(
                    self.keys.group,
                    self.consumer_name,
                    {self.keys.stream: ">"},
                    count=max(1, self.room()),
                    block=self.block,
                )
                answered()
                got = False
                for _stream, messages in fetched or ():
                    for message_id, fields in messages:
                        got = True
                        self.in_hand += 1
                        yield self._message(message_id, fields)
                if not got:
                    looked = -CLAIM_EVERY  # a quiet stream: look for idle jobs each round

    async def _claim_idle(self, redis: Redis) -> tuple[Any, Mapping[bytes, bytes]] | None:
        """Claim the oldest job idle past the reclaim time, or None if there is none.

        Jobs this worker leaves to the others (:meth:`park`) are not its to claim.
        """
        now = time.monotonic()
        for message_id in [m for m, until in self.parked.items() if until <= now]:
            del self.parked[message_id]  # its time is up: tried here again if still pending
        start = "-"
        while True:
            pending: Any = await redis.xpending_range(
                self.keys.stream,
                self.keys.group,
                min=start,
                max="+",
                count=PENDING_PAGE,
                idle=self.idle_timeout,
            )
            for entry in pending:
                message_id = _text(entry["message_id"])
                if message_id in self.parked:
                    continue
                claimed: Any = await redis.xclaim(
                    self.keys.stream,
                    self.keys.group,
                    self.consumer_name,
                    min_idle_time=self.idle_timeout,
                    message_ids=[message_id],
                )  # another worker may have claimed it first: then nothing
                for found_id, fields in claimed:
                    if fields:  # a job deleted from the stream leaves an empty entry
                        return found_id, fields
            if len(pending) < PENDING_PAGE:
                return None
            start = "(" + _text(pending[-1]["message_id"])

    def _message(self, message_id: Any, fields: Mapping[bytes, bytes]) -> AckableMessage:
        """The job for taskiq, labelled with its message id (to park it)."""
        data = fields[b"data"]
        with contextlib.suppress(ValueError, TypeError, AttributeError, KeyError):
            message = json.loads(data)
            message["labels"][STREAM_ID] = _text(message_id)
            data = json.dumps(message).encode()
        return AckableMessage(data=data, ack=functools.partial(self._acks, message_id))

    async def _ack_all(self, message_ids: list[bytes | str]) -> None:
        """Acknowledge the jobs done at once, and take them off the stream: one round trip.

        A job acknowledged is done (its run's log and lease say the rest), so it leaves
        the stream then: the stream holds the jobs waiting or in hand, never a history
        of every job that ever ran.
        """
        with kept_cancellation():
            async with self.redis.pipeline(transaction=True) as both:
                both.xack(self.keys.stream, self.keys.group, *message_ids)
                both.xdel(self.keys.stream, *message_ids)
                await both.execute()


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
