"""The shared rate limit while its Redis is away: the process keeps the rate, nothing hangs.

A private ``redis-server`` the test stops and starts again; the real SDK against the
fake Messages endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from structlog.testing import capture_logs

from reactor import AnthropicProvider, RunResult, agent, run_reactive
from reactor._providers.limits import Limits
from reactor.testing import FakeAnthropic, turn
from tests.redis_server import RedisServer

UNREACHABLE = "the shared rate limit is unreachable; limiting in this process"
REACHABLE = "the shared rate limit is reachable again"


@pytest.fixture(autouse=True)
def no_real_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_") or name == "REACTOR_REDIS_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    redis_server = RedisServer(tmp_path)
    redis_server.start()
    try:
        yield redis_server
    finally:
        redis_server.stop()


class TimedFake(FakeAnthropic):
    """The fake endpoint, noting when each request arrived."""

    def __init__(self) -> None:
        super().__init__(brain=lambda body: turn("ok"))
        self.times: list[float] = []

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.times.append(time.monotonic())
        return await super().handle(request)


async def call(provider: AnthropicProvider) -> RunResult:
    return await run_reactive(agent(name="w", prompt="Go."), provider=provider)


@pytest.mark.timeout(180)
async def test_with_redis_away_every_call_completes_at_the_processs_own_rate(
    server: RedisServer,
) -> None:
    """600 a minute shared through Redis; Redis stops: 30 calls at once all complete, at
    10 a second (a second's worth at once, then the rate), with one warning; Redis
    comes back: the calls take their tokens from the shared bucket again."""
    fake = TimedFake()
    provider = fake.provider(requests_per_minute=600, rate_limit_url=server.url)
    bucket = f"reactor:ratelimit:{provider.limits.key}"
    shared = server.client()
    try:
        assert (await call(provider)).status == "completed"
        bucket = f"reactor:ratelimit:{provider.limits.key}"
        assert shared.exists(bucket), "the first call did not use the shared bucket"
        server.stop()
        fake.times.clear()
        with capture_logs() as logs:
            started = time.monotonic()
            results = await asyncio.wait_for(
                asyncio.gather(*(call(provider) for _ in range(30))), timeout=90
            )
            took = time.monotonic() - started
        assert [r.status for r in results] == ["completed"] * 30
        assert took < 60
        times = sorted(fake.times)
        assert len(times) == 30
        # 10 at once, then one every 0.1 s: never faster than the rate.
        assert times[-1] - times[0] >= 1.8
        warned = [e["event"] for e in logs if e["log_level"] == "warning"]
        assert warned == [UNREACHABLE]

        server.start()
        shared.delete(bucket)
        with capture_logs() as logs:
            deadline = time.monotonic() + 60
            while not shared.exists(bucket):  # tried again after a backoff, not at once
                assert time.monotonic() < deadline, "the shared bucket was never used again"
                assert (await call(provider)).status == "completed"
        assert REACHABLE in [e["event"] for e in logs]
    finally:
        shared.close()
        await provider.aclose()
        await fake.aclose()


@pytest.mark.timeout(120)
async def test_a_request_cancelled_while_it_asks_redis_again_does_not_keep_it_unasked(
    tmp_path: Path,
) -> None:
    """While Redis is away one request at a time asks it again. That request may be
    cancelled (its run aborted, its worker stopping) while Redis does not answer: the
    next requests still ask, and find the shared bucket once Redis is back."""
    redis_server = RedisServer(tmp_path)
    stalled = socket.create_server(("127.0.0.1", redis_server.port))  # accepts, never answers
    limits = Limits(requests_per_minute=6000, redis_url=redis_server.url, key=uuid.uuid4().hex)
    bucket = f"reactor:ratelimit:{limits.key}"

    async def one() -> None:
        async with limits.slot():
            pass

    try:
        with capture_logs() as logs:
            await one()  # Redis does not answer: the process's bucket
        assert [e["event"] for e in logs if e["log_level"] == "warning"] == [UNREACHABLE]
        deadline = time.monotonic() + 60
        while True:  # until a request hangs: it is the one asking Redis again
            assert time.monotonic() < deadline, "no request asked Redis again"
            asking = asyncio.create_task(one())
            done, _ = await asyncio.wait({asking}, timeout=1.0)
            if not done:
                asking.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await asking
                break
        stalled.close()
        redis_server.start()
        shared = redis_server.client()
        try:
            while not shared.exists(bucket):
                assert time.monotonic() < deadline, "the shared bucket was never asked again"
                await one()
                await asyncio.sleep(0.05)
        finally:
            shared.close()
    finally:
        stalled.close()
        await limits.aclose()
        redis_server.stop()
