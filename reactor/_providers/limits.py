"""Limits a provider shares between runs: requests at once, requests per minute, retries.

An account's rate limits belong to the account, not to a run: a desk that starts 5,000
runs at once must not send 5,000 requests at once. :class:`Limits` is held by the
provider, so every run that uses the provider in the process shares it:

* ``max_concurrency``: at most that many requests in flight (a semaphore per event
  loop, since asyncio's primitives belong to the loop they first wait on);
* ``requests_per_minute``: a token bucket refilled continuously (a second's worth of
  requests may go at once, then the rate holds). With a Redis URL (the
  ``REACTOR_REDIS_URL`` of workers), the bucket lives in Redis, so every process that
  shares the Redis shares the rate; when Redis cannot be reached, the process falls
  back to a bucket of its own (logged once per outage) rather than failing runs or
  holding them: a request waits at most what that bucket says, and Redis is asked
  again after a jittered backoff (:data:`OUTAGE_FIRST` doubling to
  :data:`OUTAGE_MAX`), by one request while the others keep to the process's bucket.

A request refused with ``429`` (rate limited) or ``529`` (overloaded), or failing in
another way that may pass, is tried again after :func:`backoff` says: what the
``retry-after`` header asks, or a jittered exponential wait. Each retry is announced
as a :class:`~reactor._providers.base.Retry` event, which the run records as
``provider:retry``; replay reproduces it without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import time
from collections.abc import AsyncIterator
from typing import Any

from reactor._signals.diagnostics import log
from reactor._signals.settings import settings
from reactor.exceptions._extras import require_extras

__all__ = ["BACKOFF_CAP", "Limits", "backoff"]

BACKOFF_BASE = 0.5
"""Seconds before the first retry when the API does not say (doubled for each next one)."""
BACKOFF_CAP = 60.0
"""The longest wait between two attempts, ``retry-after`` included."""
OUTAGE_FIRST = 1.0
OUTAGE_MAX = 30.0
"""Seconds before the shared bucket is asked again after Redis failed (doubled after
each failure, jittered), and the most between two attempts."""

# Takes one token from the bucket at KEYS[1] (rate per second ARGV[1], capacity
# ARGV[2]) and returns "0", or returns the seconds until a token is there. The time is
# the Redis server's, so processes whose clocks differ agree.
_TAKE = """
local now = redis.call('TIME')
now = tonumber(now[1]) + tonumber(now[2]) / 1000000
local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2])
local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(bucket[1]) or capacity
local at = tonumber(bucket[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 60)
return tostring(wait)
"""


def backoff(attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before attempt ``attempt + 1`` (``attempt`` counts from 1).

    What the API asked (``retry-after``) when it said, else a full-jitter exponential
    wait (uniform between 0 and ``BACKOFF_BASE * 2 ** (attempt - 1)``), never over
    :data:`BACKOFF_CAP`.
    """
    if retry_after is not None and retry_after >= 0:
        return min(retry_after, BACKOFF_CAP)
    return random.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1)))


class _Bucket:
    """A token bucket in this process."""

    def __init__(self, rate: float, capacity: float) -> None:
        self.rate, self.capacity = rate, capacity
        self.tokens, self.at = capacity, time.monotonic()

    def take(self) -> float:
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        wait = (1 - self.tokens) / self.rate
        self.tokens -= 1  # the token is ours once the wait is over
        return wait


class Limits:
    """What a provider's requests share (see the module docstring).

    Args:
        max_concurrency: Requests in flight at once, or ``None`` for no bound.
        requests_per_minute: Requests started per minute, or ``None`` for no bound.
        redis_url: Share ``requests_per_minute`` through this Redis; ``None`` reads
            ``REACTOR_REDIS_URL`` when the first request is made; ``""`` keeps it in
            the process.
        key: The bucket's name in Redis (one per account: see :meth:`key_for`).

    Raises:
        ValueError: A limit is not a positive number.
    """

    def __init__(
        self,
        *,
        max_concurrency: int | None = None,
        requests_per_minute: float | None = None,
        redis_url: str | None = None,
        key: str = "anthropic",
    ) -> None:
        for name, value in (
            ("max_concurrency", max_concurrency),
            ("requests_per_minute", requests_per_minute),
        ):
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise ValueError(
                    f"{name} must be a positive number (or None for no limit), got {value!r}."
                )
        self.max_concurrency = max_concurrency
        self.requests_per_minute = requests_per_minute
        self._redis_url = redis_url
        self.key = key
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        self._redis: dict[asyncio.AbstractEventLoop, Any] = {}
        self._bucket: _Bucket | None = None
        self._redis_down = False
        self._failures = 0  # attempts at the shared bucket failed since it last answered
        self._retry_at = 0.0  # when (monotonic) the shared bucket is asked again
        self._probing = False  # one request asks it; the others keep to the local bucket
        if requests_per_minute is not None:
            rate = requests_per_minute / 60
            self._bucket = _Bucket(rate, max(1.0, rate))

    @property
    def active(self) -> bool:
        """Whether any limit is set (without one, requests skip this entirely)."""
        return self.max_concurrency is not None or self.requests_per_minute is not None

    @staticmethod
    def key_for(secret: str | None) -> str:
        """A bucket name for an account: a digest of its API key, never the key."""
        if not secret:
            return "anthropic"
        return "anthropic:" + hashlib.sha256(secret.encode()).hexdigest()[:16]

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a place among the requests in flight, and a token of the minute's rate."""
        semaphore = self._semaphore()
        if semaphore is None:
            await self._token()
            yield
            return
        async with semaphore:
            await self._token()
            yield

    def _semaphore(self) -> asyncio.Semaphore | None:
        if self.max_concurrency is None:
            return None
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            for old in [known for known in self._semaphores if known.is_closed()]:
                del self._semaphores[old]
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
        return semaphore

    async def _token(self) -> None:
        bucket = self._bucket
        if bucket is None:
            return
        url = self._redis_url if self._redis_url is not None else settings().redis_url or ""
        while url and self._shared_usable():
            wait = await self._shared_take(url, bucket)
            if wait is None:
                break  # Redis is away: the process's bucket, below
            if wait <= 0:
                return
            await asyncio.sleep(wait)  # then ask again: another process may take it first
        # The local bucket reserves the token: it is ours once the wait is over. Asking
        # again would reserve another, and waits would grow for as long as Redis is away.
        wait = bucket.take()
        if wait > 0:
            await asyncio.sleep(wait)

    def _shared_usable(self) -> bool:
        """Whether to ask the shared bucket: it answers, or it is time to try it again."""
        if not self._redis_down:
            return True
        if self._probing or time.monotonic() < self._retry_at:
            return False
        self._probing = True  # this request asks; the others use the local bucket
        return True

    async def _shared_take(self, url: str, bucket: _Bucket) -> float | None:
        """A token from the shared bucket: 0, or the seconds until one is there.

        ``None`` when Redis cannot be reached: the caller takes from ``bucket`` instead.
        """
        require_extras("scaleout", what="A rate limit shared over Redis (REACTOR_REDIS_URL)")
        try:
            client = self._redis_client(url)
            found = await client.eval(
                _TAKE, 1, f"reactor:ratelimit:{self.key}", bucket.rate, bucket.capacity
            )
        except Exception as exc:  # Redis away: keep the rate in this process meanwhile
            self._failures += 1
            delay = min(OUTAGE_MAX, OUTAGE_FIRST * 2 ** min(self._failures - 1, 8))
            delay *= random.uniform(0.5, 1.0)  # processes do not all come back at once
            self._retry_at = time.monotonic() + delay
            if not self._redis_down:
                self._redis_down = True
                log(
                    "reactor.limits",
                    "warning",
                    "the shared rate limit is unreachable; limiting in this process",
                    redis=url,
                    error=repr(exc),
                    retry_in_s=round(delay, 2),
                )
            return None
        finally:  # also when the request is cancelled meanwhile: the next one may ask
            self._probing = False
        if self._redis_down:
            self._redis_down = False
            log(
                "reactor.limits",
                "info",
                "the shared rate limit is reachable again",
                redis=url,
                after=self._failures,
            )
        self._failures = 0
        return float(found)

    def _redis_client(self, url: str) -> Any:
        loop = asyncio.get_running_loop()
        client = self._redis.get(loop)
        if client is None:
            from reactor._signals.redisclient import redis_at

            for old in [known for known in self._redis if known.is_closed()]:
                del self._redis[old]
            client = self._redis[loop] = redis_at(url, socket_connect_timeout=2, socket_timeout=2)
        return client

    async def aclose(self) -> None:
        """Close the Redis connections of the running loop."""
        client = self._redis.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def __repr__(self) -> str:
        return (
            f"Limits(max_concurrency={self.max_concurrency!r}, "
            f"requests_per_minute={self.requests_per_minute!r})"
        )
