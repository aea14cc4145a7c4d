"""The desk: one page of 10,000 pending suggestions, and the agents' lag over 100,000 entries.

A real ``reactor serve`` (this module's ``make_service``, 127.0.0.1 only) on a database
that holds 10,000 quotes, each with a pending suggestion of the ``analyst`` agent (a
note), and 100,000 processing-log entries (most completed, some skipped, failed and
pending). Measured beside ``GET /healthz`` on the same server, alternately (each
figure is the best of several rounds):

* the web UI's ``/suggestions`` (signed in as an approver: every card has its forms)
  and ``GET /api/suggestions?status=pending``: the median time of one page, and its
  size (the page holds 50, never all 10,000: the desk's page was 11 MB and took 10 s);
* ``GET /metrics``: one scrape reads every agent's lag (one grouped, indexed query of
  the processing log), and :meth:`ProcessingLog.lag` alone, in process.
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx2
import pydantic

from bench._runner import Row
from bench.recording import scratch_database
from bench.serve import free_port
from reactor import AgentContext, agent
from reactor.service import ObjectStore, Reaction, ReactionService, upgrade_database
from reactor.service._objects.db import Database
from reactor.service._objects.processing import ProcessingLog
from reactor.service._objects.schema import objects, processing_log, suggestions

SUGGESTIONS = 10_000
ENTRIES = 100_000
TOKEN = "bench-token"
ASKS = 40


class Quote(pydantic.BaseModel):
    symbol: str
    price: float
    notes: str | None = None


async def _analyst(ctx: AgentContext[Any]) -> None:
    await ctx.objects.update(ctx.object.id, {"notes": "check the spread"})


def make_service(url: str) -> ReactionService:
    """The served desk: quotes, and an analyst that suggests notes on them."""
    analyst = agent(
        run=_analyst,
        reaction=Reaction(types=["Quote"], events=["created", "updated"]),
        execution_mode="suggest",
    )
    return ReactionService(objects=ObjectStore(url, types=[Quote]), agents={"analyst": analyst})


async def _fill(url: str, count: int, entries: int) -> None:
    """``count`` quotes with a pending suggestion each, and ``entries`` log entries."""
    await upgrade_database(url)
    db = Database(url)
    await db.open()
    now = datetime.now(UTC)
    try:
        for start in range(0, count, 2_000):
            block = range(start, min(count, start + 2_000))
            quotes = [_quote(n, now) for n in block]
            async with db.write() as conn:
                await conn.execute(objects.insert(), quotes)
                await conn.execute(suggestions.insert(), [_suggestion(n, now) for n in block])
        statuses = ("completed",) * 90 + ("skipped",) * 6 + ("failed",) * 3 + ("pending",)
        for start in range(0, entries, 10_000):
            block = range(start, min(entries, start + 10_000))
            rows = [_entry(n, statuses[n % len(statuses)], now) for n in block]
            async with db.write() as conn:
                await conn.execute(processing_log.insert(), rows)
    finally:
        await db.close()


def _quote(n: int, now: datetime) -> dict[str, Any]:
    return {
        "id": f"obj_{n:08}",
        "type": "Quote",
        "version": 1,
        "data": {"symbol": f"S{n:05}", "price": 100.0 + n % 50, "notes": None},
        "actor_type": "user",
        "actor_id": "feed",
        "created_at": now,
        "updated_at": now,
    }


def _suggestion(n: int, now: datetime) -> dict[str, Any]:
    update = {"op": "update", "id": f"obj_{n:08}", "data": {"notes": "check the spread"}}
    return {
        "id": f"sug_{n:08}",
        "agent": "analyst",
        "object_id": f"obj_{n:08}",
        "changes": [update],
        "reasoning": f"S{n:05} moved; note the spread.",
        "status": "pending",
        "run_id": f"run_{n:016x}",
        "object_version": 1,
        "created_at": now + timedelta(microseconds=n),
        "proposer_type": "user",
        "proposer_id": "feed",
        "basis": {"notes": None},
    }


def _entry(n: int, status: str, now: datetime) -> dict[str, Any]:
    # Not the served agent's: a pending entry of an agent the service runs would be taken.
    return {
        "agent": f"desk{n % 4}",
        "object_id": f"obj_{n % SUGGESTIONS:08}",
        "object_version": 1 + n // SUGGESTIONS,
        "event_type": "updated",
        "event_id": n + 1,
        "status": status,
        "created_at": now,
        "updated_at": now,
    }


@contextmanager
def _served(url: str, folder: Path) -> Iterator[str]:
    """``reactor serve`` of :func:`make_service` on ``url``; its base URL."""
    port = free_port()
    environ = {
        **os.environ,
        "REACTOR_API_TOKENS": f"{TOKEN}:bench:approver",
        "PYTHONPATH": os.getcwd(),
    }
    command = [sys.executable, "-m", "reactor", "serve", "--app", "bench.desk:make_service"]
    command += ["--db", url, "--port", str(port), "--grace", "1"]
    with (folder / "server.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, env=environ)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while not _ready(base):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"reactor serve did not start: {(folder / 'server.log').read_text()}"
                )
            time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(30)


def _ready(base: str) -> bool:
    try:
        return httpx2.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx2.TransportError:
        return False


async def _timed(client: httpx2.AsyncClient, path: str) -> tuple[float, int]:
    began = time.perf_counter()
    answer = await client.get(path)
    took = time.perf_counter() - began
    answer.raise_for_status()
    return took, len(answer.content)


async def _measure(base: str) -> dict[str, Any]:
    """Median times (and sizes) of each page, asked alternately with ``/healthz``."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
        form = await client.get("/")
        csrf = re.search(r'name="csrf" value="([^"]*)"', form.text)
        assert csrf is not None
        await client.post("/", data={"token": TOKEN, "csrf": csrf.group(1)})
        paths = {
            "health": "/healthz",
            "web": "/suggestions",
            "api": "/api/suggestions?status=pending",
            "metrics": "/metrics",
        }
        times: dict[str, list[float]] = {name: [] for name in paths}
        sizes: dict[str, int] = {}
        for path in paths.values():  # warm up each (templates, statements)
            await _timed(client, path)
        for _ in range(ASKS):
            for name, path in paths.items():
                took, sizes[name] = await _timed(client, path)
                times[name].append(took)
    return {name: (statistics.median(found), sizes[name]) for name, found in times.items()}


async def _lag(url: str, asks: int) -> float:
    """The median time of :meth:`ProcessingLog.lag` over every agent, in process."""
    db = Database(url)
    await db.open()
    try:
        log, found = ProcessingLog(db), []
        for _ in range(asks):
            began = time.perf_counter()
            lags = await log.lag()
            found.append(time.perf_counter() - began)
        assert sum(sum(lag.statuses.values()) for lag in lags.values()) >= ENTRIES
    finally:
        await db.close()
    return statistics.median(found)


def measure(kind: str, count: int, entries: int, rounds: int) -> dict[str, Any]:
    """``rounds`` rounds on a new database of ``kind``; each figure's best round."""
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        folder = Path(scratch)
        url = (
            f"sqlite:///{folder / 'desk.db'}"
            if kind == "sqlite"
            else stack.enter_context(scratch_database())
        )
        asyncio.run(_fill(url, count, entries))
        base = stack.enter_context(_served(url, folder))
        found = [asyncio.run(_measure(base)) for _ in range(rounds)]
        served = {name: min(each[name] for each in found) for name in found[0]}
        served["lag"] = asyncio.run(_lag(url, ASKS))
    return served


def run(runs: int, scale: float) -> list[Row]:
    rows: list[Row] = []
    count, entries = max(1_000, int(SUGGESTIONS * scale)), max(10_000, int(ENTRIES * scale))
    for kind in ("sqlite", "postgres"):
        found = measure(kind, count, entries, max(1, runs))
        health = found["health"][0]
        name = "SQLite" if kind == "sqlite" else "PostgreSQL"
        for page, what in (("web", "the web UI's /suggestions"), ("api", "GET /api/suggestions")):
            took, size = found[page]
            ratio = took / health
            rows.append(
                Row(
                    workload=f"desk: {what} with {count:,} pending suggestions ({name})",
                    ours=f"{took * 1000:.1f} ms, {size / 1000:,.0f} KB (one page of 50)",
                    baseline=f"{health * 1000:.1f} ms (GET /healthz)",
                    ratio=ratio,
                    ratio_text=f"{ratio:.1f}x",
                    target="<= 100 KB and <= 5x",
                    met=size <= 100_000 and ratio <= 5,
                )
            )
        scrape = found["metrics"][0]
        rows.append(
            Row(
                workload=f"desk: GET /metrics with {entries:,} processing-log entries ({name}); "
                "the lag query alone, in process",
                ours=f"{scrape * 1000:.1f} ms; lag {found['lag'] * 1000:.1f} ms",
                baseline=f"{health * 1000:.1f} ms (GET /healthz)",
                ratio=scrape / health,
                ratio_text=f"{scrape / health:.1f}x",
                target="report the figure",
                met=None,
            )
        )
    return rows
