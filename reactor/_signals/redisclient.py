"""The Redis client reactor talks to Redis with: one that never loses a cancellation.

redis-py's asyncio client can answer a command whose task was cancelled while the
command was under way as if nothing had happened (redis/redis-py#2028; measured here
with redis 8.2: a command cancelled a fraction of a millisecond after it began
returned its result in about one case of eight). The task then runs on: a loop that
waits for its next wake-up after that command never stops, and the service whose
shutdown waits for it hangs. :class:`Redis` raises the cancellation once such a
command has returned, and :func:`kept_cancellation` does the same around a call into
code that uses redis-py's own client (taskiq's ``kick``, a pipeline).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any, cast

import redis.asyncio

__all__ = ["Redis", "kept_cancellation", "redis_at"]


@contextlib.contextmanager
def kept_cancellation() -> Iterator[None]:
    """Raise :class:`asyncio.CancelledError` after a block that went on though cancelled.

    (A library inside it took the cancellation: the task was asked to stop meanwhile.)
    """
    task = asyncio.current_task()
    asked = 0 if task is None else task.cancelling()
    yield
    if task is not None and task.cancelling() > asked:
        raise asyncio.CancelledError


class Redis(redis.asyncio.Redis):
    """redis-py's asyncio client, whose commands never swallow their task's cancellation."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with kept_cancellation():
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated


def redis_at(url: str, **options: Any) -> Redis:
    """A client of a connection pool of its own for ``url`` (closed with the client)."""
    return cast(Redis, Redis.from_url(url, **options))
