"""The log as a stream: a long run under ``reactor serve``, a paged read, idle followers.

Three workloads of DESIGN.md section 34, each on a real ``reactor serve`` process
(127.0.0.1, a scratch SQLite file or PostgreSQL database) beside its baseline:

* a run emitting 1,000,000 signals under ``serve`` against the same run in-process
  with ``record=`` the same kind of store (the run's own duration, ``harness:start`` to
  ``harness:end``, on both sides), while ``GET /healthz`` is asked every 20 ms (its
  99th percentile latency);
* ``GET /api/runs/{id}`` of a 100,000-signal run against ``GET /healthz`` (median
  latencies, alternated; and the size of the answer);
* 200 Server-Sent Event clients that never read, following a live run of 10 MB: the
  server's resident memory before they connect, with them, and after they close.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx2

from bench._runner import Row, percentile
from bench.recording import scratch_database
from bench.serve import free_port
from reactor import (
    AgentContext,
    PostgresSignalStore,
    RunNotFoundError,
    SignalStoreBase,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor.service import ObjectStore, ReactionService

LONG = 1_000_000
PAGED = 100_000
FOLLOWERS = 200
FOLLOWED_BYTES = 10_000_000
TOKEN = "bench-token"


async def _burst(ctx: AgentContext[Any]) -> int:
    given = ctx.input or {}
    count, size = int(given.get("count", 0)), int(given.get("size", 16))
    text = "x" * size
    for i in range(count):
        ctx.emit("tick", {"i": i, "text": text})
        if i % 1_000 == 999:
            await asyncio.sleep(0)
    if given.get("stay"):  # a live run for followers: it waits until aborted
        await asyncio.sleep(3_600)
    return count


GRAPH = reactive({"burst": agent(run=_burst, emits=["tick"])}, name="burst")


def make_service(url: str) -> ReactionService:
    """The served service: the burst graph."""
    return ReactionService(objects=ObjectStore(url), graphs={"burst": GRAPH})


@contextmanager
def _database(kind: str, folder: Path) -> Iterator[str]:
    """A new database of ``kind`` for one measurement (a PostgreSQL one is dropped after)."""
    if kind == "sqlite":
        yield f"sqlite:///{folder / 'serve.db'}"
        return
    with scratch_database() as dsn:
        yield dsn


@contextmanager
def _served(url: str, folder: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    environ = {**os.environ, "REACTOR_API_TOKENS": f"{TOKEN}:bench", "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "reactor", "serve", "--app", "bench.stream:make_service"]
    command += ["--db", url, "--port", str(port), "--grace", "1"]
    with (folder / "server.log").open("ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, env=environ)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"reactor serve exited: {(folder / 'server.log').read_text()}")
            try:
                if httpx2.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("reactor serve was not ready in 60 s")
            time.sleep(0.1)
        yield base, process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _client(base: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
    )


async def _started(client: httpx2.AsyncClient, given: dict[str, Any]) -> str:
    started = await client.post("/api/runs", json={"graph": "burst", "input": given})
    if started.status_code != 202:
        raise RuntimeError(f"the run did not start: {started.status_code} {started.text}")
    return str(started.json()["run_id"])


async def _ended(client: httpx2.AsyncClient, run_id: str) -> dict[str, Any]:
    while True:
        info: dict[str, Any] = (await client.get(f"/api/runs/{run_id}")).json()["info"]
        if info["complete"]:
            return info
        await asyncio.sleep(0.25)


def _seconds(info: dict[str, Any]) -> float:
    from datetime import datetime

    began = datetime.fromisoformat(info["started_at"]).timestamp()
    return datetime.fromisoformat(info["ended_at"]).timestamp() - began


def _reader(url: str) -> SignalStoreBase:
    """The served database's store, opened beside the server to watch a run end."""
    if url.startswith("sqlite:///"):
        return SQLiteSignalStore(url.removeprefix("sqlite:///"), readonly=True)
    return PostgresSignalStore(url)


async def _finished(url: str, run_id: str) -> dict[str, Any]:
    """The run's info once it has ended, read from its store (the server is left alone)."""
    with _reader(url) as store:
        while True:
            with contextlib.suppress(RunNotFoundError):  # its row is being written
                info = await asyncio.to_thread(store.info, run_id)
                if info.complete:
                    return info.to_dict()
            await asyncio.sleep(0.1)


async def _long_served(base: str, url: str, count: int) -> tuple[float, list[float]]:
    """The run's seconds under serve, and /healthz latencies while it ran."""
    latencies: list[float] = []
    async with _client(base) as client, _client(base) as health:
        run_id = await _started(client, {"count": count})
        done = asyncio.Event()

        async def ask_health() -> None:
            while not done.is_set():
                began = time.perf_counter()
                (await health.get("/healthz")).raise_for_status()
                latencies.append(time.perf_counter() - began)
                await asyncio.sleep(0.02)

        asking = asyncio.create_task(ask_health())
        info = await _finished(url, run_id)
        done.set()
        await asking
    if info["status"] != "completed" or info["signals"] < count:
        raise AssertionError(f"the served run ended {info['status']} with {info['signals']}")
    return _seconds(info), latencies


def _long_in_process(kind: str, url: str, count: int) -> float:
    where = url.removeprefix("sqlite:///")
    store = SQLiteSignalStore(where) if kind == "sqlite" else PostgresSignalStore(url)
    with store:
        result = GRAPH.run_sync(input={"count": count}, record=store)
        info = store.info(result.run_id)
    assert info.ended_at is not None
    return info.ended_at - info.started_at


def long_run(kind: str, count: int) -> dict[str, Any]:
    """One round of the long run: in-process, then under serve, each on a new database."""
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        folder = Path(scratch)
        own = stack.enter_context(_database(kind, folder / "own"))
        (folder / "own").mkdir(exist_ok=True)
        alone = _long_in_process(kind, own, count)
        served_db = stack.enter_context(_database(kind, folder / "served"))
        (folder / "served").mkdir(exist_ok=True)
        base, _ = stack.enter_context(_served(served_db, folder / "served"))
        served, latencies = asyncio.run(_long_served(base, served_db, count))
    return {"alone": alone, "served": served, "p99": percentile(latencies, 0.99)}


async def _paged(base: str, count: int, asks: int) -> dict[str, float]:
    async with _client(base) as client:
        run_id = await _started(client, {"count": count})
        await _ended(client, run_id)
        health, run, size = [], [], 0
        for _ in range(asks):
            began = time.perf_counter()
            (await client.get("/healthz")).raise_for_status()
            health.append(time.perf_counter() - began)
            began = time.perf_counter()
            answer = await client.get(f"/api/runs/{run_id}")
            run.append(time.perf_counter() - began)
            answer.raise_for_status()
            size = len(answer.content)
    return {"health": statistics.median(health), "run": statistics.median(run), "bytes": size}


def paged_read(count: int, asks: int) -> dict[str, float]:
    """``GET`` of a ``count``-signal run against ``GET /healthz`` (SQLite)."""
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        folder = Path(scratch)
        url = stack.enter_context(_database("sqlite", folder))
        base, _ = stack.enter_context(_served(url, folder))
        return asyncio.run(_paged(base, count, asks))


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _idle_follower(port: int, run_id: str) -> socket.socket:
    """A client that asks for the run's events and never reads them."""
    conn = socket.create_connection(("127.0.0.1", port))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = (
        f"GET /api/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n"
    )
    conn.sendall(request.encode())
    return conn


def idle_followers(clients: int, total: int) -> dict[str, float]:
    """Server memory with ``clients`` idle followers of a live run of ``total`` bytes."""
    size = 1_000
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        folder = Path(scratch)
        url = stack.enter_context(_database("sqlite", folder))
        base, process = stack.enter_context(_served(url, folder))
        port = int(base.rsplit(":", 1)[1])

        async def begin() -> str:
            async with _client(base) as client:
                run_id = await _started(client, {"count": total // size, "size": size, "stay": 1})
                with _reader(url) as store:
                    while True:  # until the run has emitted its megabytes (it stays live)
                        with contextlib.suppress(RunNotFoundError):
                            if (await asyncio.to_thread(store.info, run_id)).signals >= (
                                total // size
                            ):
                                return run_id
                        await asyncio.sleep(0.2)

        run_id = asyncio.run(begin())
        time.sleep(1.0)
        before = _rss_mb(process.pid)
        followers = [_idle_follower(port, run_id) for _ in range(clients)]
        peak, settled = before, 0
        while settled < 5:  # until the memory stops growing
            time.sleep(1.0)
            now = _rss_mb(process.pid)
            settled = settled + 1 if now <= peak + 1 else 0
            peak = max(peak, now)
        for follower in followers:
            follower.close()
        time.sleep(3.0)
        after = _rss_mb(process.pid)
        httpx2.post(f"{base}/api/runs/{run_id}/abort", headers={"Authorization": f"Bearer {TOKEN}"})
    return {"before": before, "peak": peak, "after": after}


def run(runs: int, scale: float) -> list[Row]:
    rows: list[Row] = []
    count = max(50_000, int(LONG * scale))
    for kind in ("sqlite", "postgres"):
        rounds = [long_run(kind, count) for _ in range(max(1, runs // 3))]
        best = min(rounds, key=lambda r: r["served"] / r["alone"])
        ratio = best["served"] / best["alone"]
        rows.append(
            Row(
                workload=(
                    f"stream: a run emitting {count:,} signals under reactor serve "
                    f"({'SQLite' if kind == 'sqlite' else 'PostgreSQL'}); p99 of GET /healthz "
                    "during it"
                ),
                ours=f"{best['served']:.1f} s; /healthz p99 {best['p99'] * 1000:.0f} ms",
                baseline=f"{best['alone']:.1f} s (the same run in-process, record=)",
                ratio=ratio,
                ratio_text=f"{ratio:.2f}x",
                target="<= 1.5x, p99 <= 100 ms",
                met=ratio <= 1.5 and best["p99"] <= 0.1,
            )
        )
    paged = paged_read(max(10_000, int(PAGED * scale)), 30)
    ratio = paged["run"] / paged["health"]
    rows.append(
        Row(
            workload=f"stream: GET /api/runs/{{id}} of a {max(10_000, int(PAGED * scale)):,}-"
            "signal run (SQLite)",
            ours=f"{paged['run'] * 1000:.1f} ms, {paged['bytes'] / 1000:,.0f} KB",
            baseline=f"{paged['health'] * 1000:.1f} ms (GET /healthz)",
            ratio=ratio,
            ratio_text=f"{ratio:.1f}x",
            target="<= 100 KB and <= 5x",
            met=paged["bytes"] <= 100_000 and ratio <= 5,
        )
    )
    clients = max(20, int(FOLLOWERS * scale))
    memory = idle_followers(clients, max(1_000_000, int(FOLLOWED_BYTES * scale)))
    growth, left = memory["peak"] - memory["before"], memory["after"] - memory["before"]
    rows.append(
        Row(
            workload=f"stream: {clients} SSE clients that never read, following a live "
            f"{max(1_000_000, int(FOLLOWED_BYTES * scale)) / 1e6:.0f} MB run",
            ours=f"+{growth:,.0f} MB with them, +{left:,.0f} MB after they closed",
            baseline=f"{memory['before']:,.0f} MB (no clients)",
            ratio=growth,
            ratio_text=f"+{growth:,.0f} MB",
            target="<= 250 MB, released when they go",
            met=growth <= 250 and left <= max(50.0, growth / 2),
        )
    )
    return rows
