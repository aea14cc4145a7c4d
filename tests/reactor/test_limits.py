"""Shared rate limits and retries: requests at once, requests per minute, 429s waited out."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import redis
from structlog.testing import capture_logs

from reactor import (
    AnthropicProvider,
    MemorySignalStore,
    ProviderError,
    agent,
    reactive,
    run_reactive,
)
from reactor._providers.limits import BACKOFF_CAP, Limits, backoff
from reactor.testing import Failure, FakeAnthropic, turn

REDIS = os.environ.get("REACTOR_TEST_REDIS", "redis://127.0.0.1:6379")


@pytest.fixture(autouse=True)
def no_real_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_") or name == "REACTOR_REDIS_URL":
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    endpoint = FakeAnthropic()
    yield endpoint
    await endpoint.aclose()


class SlowFake(FakeAnthropic):
    """A fake endpoint that takes its time and counts the requests it serves at once."""

    def __init__(self) -> None:
        super().__init__(brain=lambda body: turn("ok"))
        self.now = 0
        self.most = 0

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0.02)
            return await super().handle(request)
        finally:
            self.now -= 1


async def test_a_429_is_waited_out_as_retry_after_says_and_recorded(
    fake: FakeAnthropic,
) -> None:
    fake.replies.extend([Failure(429, "rate_limit_error", "Slow down.", retry_after=0.2), "Hi."])
    result = await run_reactive(
        agent(name="w", prompt="Go."), provider=fake.provider(max_retries=2)
    )
    assert result.output == "Hi."
    (retry,) = result.select("provider:retry")
    assert (retry.payload["attempt"], retry.payload["wait_s"], retry.payload["status"]) == (
        1,
        0.2,
        429,
    )
    assert [s.name for s in result.signals if s.name.startswith("provider:")] == [
        "provider:start",
        "provider:retry",
        "provider:end",
    ]


async def test_an_overloaded_api_is_retried_with_jittered_backoff(fake: FakeAnthropic) -> None:
    busy = Failure(529, "overloaded_error", "Overloaded.")
    fake.replies.extend([busy, busy, "Hi."])
    provider = fake.provider(max_retries=3)
    result = await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert result.output == "Hi."
    retries = [s.payload for s in result.select("provider:retry")]
    assert [(r["attempt"], r["status"]) for r in retries] == [(1, 529), (2, 529)]


async def test_retries_stop_at_max_retries_and_the_run_fails(fake: FakeAnthropic) -> None:
    busy = Failure(529, "overloaded_error", "Overloaded.")
    fake.replies.extend([busy, busy, busy, "never reached"])
    result = await run_reactive(
        agent(name="w", prompt="Go."), provider=fake.provider(max_retries=2)
    )
    assert result.status == "failed"
    assert isinstance(result.error, ProviderError)
    assert result.error.status_code == 529
    assert len(result.select("provider:retry")) == 2
    assert len(fake.requests) == 3


async def test_a_bad_request_is_never_retried(fake: FakeAnthropic) -> None:
    fake.replies.append(Failure(400, "invalid_request_error", "bad"))
    result = await run_reactive(
        agent(name="w", prompt="Go."), provider=fake.provider(max_retries=5)
    )
    assert result.status == "failed"
    assert result.select("provider:retry") == []
    assert len(fake.requests) == 1


async def test_a_replay_reproduces_the_retries_without_waiting(fake: FakeAnthropic) -> None:
    fake.replies.extend([Failure(429, "rate_limit_error", "Slow down.", retry_after=2), "Hi."])
    graph = reactive(agents={"w": agent(prompt="Go.")})
    store = MemorySignalStore()
    result = await graph.run(provider=fake.provider(max_retries=1), record=store)
    recording = store.load(result.run_id)
    assert recording.select("provider:retry")[0].payload["wait_s"] == 2
    replayed = await asyncio.wait_for(graph.run(replay=recording), timeout=1.5)  # no 2 s wait
    assert replayed.select("agent:w:completed")[0].payload["output"] == "Hi."
    assert len(replayed.select("provider:retry")) == 1
    assert recording.diff(replayed) is None


def test_backoff_follows_retry_after_or_jitters_exponentially() -> None:
    assert backoff(1, 2.5) == 2.5
    assert backoff(3, 1e6) == BACKOFF_CAP
    for attempt in range(1, 12):
        wait = backoff(attempt, None)
        assert 0 <= wait <= min(BACKOFF_CAP, 0.5 * 2 ** (attempt - 1))


async def test_max_concurrency_bounds_the_requests_in_flight_across_runs() -> None:
    slow = SlowFake()
    provider = AnthropicProvider(client=slow.client(), max_concurrency=3, max_retries=0)
    graph = reactive(agents={"w": agent(prompt="Go.")})
    results = await asyncio.gather(*(graph.run(provider=provider) for _ in range(12)))
    await slow.aclose()
    assert [r.status for r in results] == ["completed"] * 12
    assert slow.most == 3


async def test_without_limits_nothing_waits() -> None:
    slow = SlowFake()
    provider = AnthropicProvider(client=slow.client(), max_retries=0)
    graph = reactive(agents={"w": agent(prompt="Go.")})
    await asyncio.gather(*(graph.run(provider=provider) for _ in range(12)))
    await slow.aclose()
    assert slow.most == 12
    assert not provider.limits.active


async def test_requests_per_minute_is_a_token_bucket_of_a_seconds_worth() -> None:
    limits = Limits(requests_per_minute=60, redis_url="")  # one a second, one at once
    bucket = limits._bucket
    assert bucket is not None
    waits = [bucket.take() for _ in range(3)]
    assert waits[0] == 0
    assert waits[1] == pytest.approx(1.0, abs=0.05)
    assert waits[2] == pytest.approx(2.0, abs=0.05)


@pytest.mark.parametrize(
    ("name", "value"),
    [("max_concurrency", 0), ("requests_per_minute", -5), ("max_concurrency", True)],
)
def test_a_limit_must_be_a_positive_number(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must be a positive number"):
        Limits(**{name: value})  # type: ignore[arg-type]


async def test_processes_sharing_a_redis_share_the_rate() -> None:
    url = f"{REDIS}/7"
    key = f"test:{uuid.uuid4().hex}"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=5).ping()
    except redis.ConnectionError as exc:
        pytest.fail(f"Redis is not reachable at {REDIS} ({exc}); start it as .ci/run does.")
    first = Limits(requests_per_minute=60, redis_url=url, key=key)
    second = Limits(requests_per_minute=60, redis_url=url, key=key)  # another process
    assert first._bucket is not None
    try:
        assert await first._shared_take(url, first._bucket) == 0
        wait = await second._shared_take(url, first._bucket)
        assert wait == pytest.approx(1.0, abs=0.1)
    finally:
        await first.aclose()
        await second.aclose()
        redis.Redis.from_url(url).delete(f"reactor:ratelimit:{key}")


async def test_an_unreachable_shared_limit_falls_back_to_the_process_and_says_so() -> None:
    limits = Limits(requests_per_minute=6000, redis_url="redis://127.0.0.1:1/0")
    with capture_logs() as logs:
        for _ in range(3):
            async with limits.slot():
                pass
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert [e["event"] for e in warnings] == [
        "the shared rate limit is unreachable; limiting in this process"
    ]
    await limits.aclose()


async def test_the_fake_endpoint_says_when_it_has_no_reply_left(fake: FakeAnthropic) -> None:
    fake.replies.append("first")
    graph = reactive(
        agents={
            "a": agent(prompt="One.", emits=["one:done"]),
            "b": agent(prompt="Two.", activate_on="one:done"),
        }
    )
    result = await graph.run(provider=fake.provider())
    assert result.status == "failed"
    assert "the fake endpoint has no reply left for request 2" in str(result.error)
