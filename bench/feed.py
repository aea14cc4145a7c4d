"""A market feed into a reaction service: admission keeps the analyst at market rate.

DESIGN.md section 39: a feed of ``SYMBOLS`` symbols paced to ``RATE`` updates a second
for ``SECONDS`` seconds, one ``Quote`` object per symbol, and an ``analyst`` reaction
agent whose model answers in ``LATENCY`` seconds (a ``ScriptedProvider`` with that
latency), admitted with ``Latest()`` per symbol, on SQLite and on PostgreSQL. The feed
is ``SYMBOLS`` writers, one per symbol, each paced to its share of the rate, writing
through the ``ObjectStore`` API while the service runs in the same process, as a desk's
would.

Three targets, each checked:

* every update is in the object history (the events stored equal the writes made);
* the agent's lag is at most the model's latency + 250 ms. Section 36 names the lag: how
  long the oldest entry waiting for the agent has waited (``reactor_agent_lag_seconds``,
  :meth:`ReactionService.lag`). Two figures, both held to it: the 99th percentile of the
  lag sampled every ``SAMPLE_EVERY`` seconds from the feed's start until the service is
  idle, and the worst symbol's wait after the feed's end (from the feed's last write to
  the start of the run that took that symbol's last version: what dispatch, admission
  and the call in flight before it add up to). With ``Latest`` one call per symbol is in
  flight and the newest version waits for it, so a symbol's last version *completes* up
  to two model latencies after the end; that figure is reported beside the targets;
* at most one model call per symbol per model latency (``SYMBOLS x (seconds / LATENCY
  + 1)``, over the seconds the feed took).

The feed stops at its time: a writer behind its pace (the writes are the bound when
the service shares the process) catches up until then, not beyond, so that runs are
alike in length and their rates compare.

The baseline is the same feed with no service: what the store writes alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench._runner import Row, percentile
from bench.recording import scratch_database
from reactor import Latest, ScriptedProvider, agent, tune_gc
from reactor.service import Changes, ObjectStore, Reaction, ReactionService, User

SYMBOLS = 50
RATE = 10_000.0
SECONDS = 30.0
LATENCY = 1.0
SLACK = 0.25
"""What the agent's lag may be beyond the model's latency."""
SAMPLE_EVERY = 0.1
"""How often the agent's lag is sampled, in seconds."""

analyst = agent(
    prompt="Quote {{ object.data.symbol }} at {{ object.data.price }}: anything to do?",
    output=Changes,
    reaction=Reaction(types=["Quote"], events=["updated"], admit=Latest()),
    execution_mode="execute",
)


_HOLD = '{"reasoning": "hold", "operations": []}'
"""The model's answer: nothing to do (the feed measures admission, not changes)."""


@dataclass(frozen=True)
class Fed:
    """What one run of the feed measured."""

    written: int
    seconds: float
    stored: int = 0
    lag_p99: float = 0.0
    """The 99th percentile of the agent's lag, sampled from the feed's start until idle."""
    taken: float = 0.0
    """Seconds from the feed's last write to the start of the worst symbol's last run."""
    behind: float = 0.0
    """Seconds from the feed's last write to the last symbol's last completed entry."""
    calls: int = 0


async def feed(objects: ObjectStore, seconds: float, rate: float) -> tuple[int, float]:
    """Write the quotes' updates, each symbol's writer paced to its share; (writes, seconds)."""
    quotes = [
        await objects.create("Quote", {"symbol": f"S{n:02d}", "price": 100.0}, actor=User("feed"))
        for n in range(SYMBOLS)
    ]
    share = rate / SYMBOLS
    start = time.perf_counter()
    counts = [0] * SYMBOLS

    async def writer(index: int) -> None:
        quote = quotes[index]
        while (elapsed := time.perf_counter() - start) < seconds:
            due = int(elapsed * share) + 1
            # behind its pace, a writer catches up until the feed's time is over, no longer
            while counts[index] < due and time.perf_counter() - start < seconds:
                counts[index] += 1
                price = 100.0 + counts[index] / 100
                await objects.update(quote.id, {"price": price}, actor=User("feed"))
            await asyncio.sleep(0.005)

    async with asyncio.TaskGroup() as group:
        for index in range(SYMBOLS):
            group.create_task(writer(index))
    return sum(counts), time.perf_counter() - start


async def with_service(url: str, seconds: float, rate: float) -> Fed:
    """The feed while the desk's service reacts; what it measured."""
    provider = ScriptedProvider(default=lambda _: _HOLD, latency=LATENCY, keep_requests=1)
    lags: list[float] = []
    async with (
        ObjectStore(url) as objects,
        ReactionService(objects=objects, agents={"analyst": analyst}, provider=provider) as service,
    ):

        async def sample() -> None:
            while True:
                lag = (await service.lag("analyst"))["analyst"]
                lags.append(lag.oldest or 0.0)
                await asyncio.sleep(SAMPLE_EVERY)

        sampler = asyncio.create_task(sample())
        written, took = await feed(objects, seconds, rate)
        ended = datetime.now(UTC)
        await service.idle(timeout=600)
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        stored = len(await objects.events(limit=10_000_000)) - SYMBOLS
        latest = {quote.id: quote.version for quote in await objects.list("Quote", limit=SYMBOLS)}
        done = await service.processing_log(agent="analyst", status="completed")
        last = [entry for entry in done if entry.object_version == latest[entry.object_id]]
        record = service.host.record
        assert record is not None, "the service records its runs"
        started = [record.info(entry.run_id).started_at for entry in last if entry.run_id]
    if {entry.object_id for entry in last} != set(latest) or len(started) != len(last):
        raise AssertionError(
            f"the last version of {len(set(latest) - {e.object_id for e in last})} symbols "
            "was never processed"
        )
    return Fed(
        written,
        took,
        stored,
        lag_p99=percentile(lags, 0.99),
        taken=max(at - ended.timestamp() for at in started),
        behind=max((entry.updated_at - ended).total_seconds() for entry in last),
        calls=len(done),
    )


async def alone(url: str, seconds: float, rate: float) -> Fed:
    """The same feed with no service: the store's writes alone."""
    async with ObjectStore(url) as objects:
        written, took = await feed(objects, seconds, rate)
    return Fed(written, took)


def _measure(kind: str, seconds: float, rate: float, service: bool) -> Fed:
    with _database(kind) as url:
        return asyncio.run((with_service if service else alone)(url, seconds, rate))


@contextlib.contextmanager
def _database(kind: str) -> Iterator[str]:
    if kind == "postgres":
        with scratch_database() as url:
            yield url
        return
    with tempfile.TemporaryDirectory() as folder:
        yield f"sqlite:///{Path(folder) / 'desk.db'}"


def run(runs: int, scale: float) -> list[Row]:
    seconds = max(3.0, SECONDS * scale)
    rows = []
    context = multiprocessing.get_context("spawn")
    for kind, name in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        with ProcessPoolExecutor(1, mp_context=context, initializer=tune_gc) as pool:
            ours = pool.submit(_measure, kind, seconds, RATE, True).result()
            base = pool.submit(_measure, kind, seconds, RATE, False).result()
        # one call per symbol per model latency over the time the feed took
        calls_most = SYMBOLS * (ours.seconds / LATENCY + 1)
        met = (
            ours.stored == ours.written
            and max(ours.lag_p99, ours.taken) <= LATENCY + SLACK
            and ours.calls <= calls_most
        )
        rows.append(
            Row(
                workload=(
                    f"a feed of {SYMBOLS} symbols paced to {RATE:,.0f} updates/s for "
                    f"{seconds:g} s, an analyst with a {LATENCY:g} s model admitted with "
                    f"Latest() per symbol ({name}, the service in the feed's process, tuned "
                    "as reactor serve): feed rate reached; every update stored; the agent's "
                    "lag (p99 sampled; the worst symbol's last version taken after the feed's "
                    "end; it completes a call later); model calls"
                ),
                ours=(
                    f"{ours.written / ours.seconds:,.0f} updates/s; {ours.stored:,} of "
                    f"{ours.written:,} stored; lag p99 {ours.lag_p99:.2f} s, last versions "
                    f"taken {ours.taken:.2f} s after the end (completed {ours.behind:.2f} s); "
                    f"{ours.calls:,} calls in {ours.seconds:.0f} s"
                ),
                baseline=(
                    f"{base.written / base.seconds:,.0f} updates/s (the feed alone, no service)"
                ),
                ratio=(ours.written / ours.seconds) / (base.written / base.seconds),
                ratio_text=(
                    f"{(ours.written / ours.seconds) / (base.written / base.seconds):.2f}x the "
                    "feed alone"
                ),
                target=(
                    f"every update stored; lag <= {LATENCY + SLACK:g} s; "
                    f"<= {calls_most:,.0f} calls (one per symbol per model latency)"
                ),
                met=met,
            )
        )
    return rows
