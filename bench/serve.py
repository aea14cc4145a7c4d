"""Service workload: 200 SSE clients on one live run while 1,000 objects are written.

A real ``reactor serve`` process (this module's ``make_service``, SQLite in a scratch
folder, 127.0.0.1 only) runs a graph whose agent emits a ``tick`` every few
milliseconds. 200 clients follow the run's ``/events`` stream at once, while 1,000
objects are created over the API, 50 requests at a time; every ``Note`` wakes a
reaction agent. Nothing may be lost: every client must receive every signal of the run,
``harness:start`` to ``harness:end`` with no gap in ``seq``, exactly as recorded; all
1,000 objects must be stored and each processed once by the reaction. The figures are
the writes per second under that load, beside the same writes with no client watching,
and the signals delivered per second to the clients.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2

from bench._runner import Row
from reactor import AgentContext, agent, reactive
from reactor.service import ObjectStore, Reaction, ReactionService

CLIENTS = 200
WRITES = 1_000
TICKS = 3_000
TOKEN = "bench-token"
TARGET = 0.7


async def _ticks(ctx: AgentContext[Any]) -> int:
    count = int(ctx.input or TICKS)
    for n in range(count):
        ctx.emit("tick", n)
        if n % 10 == 9:
            await asyncio.sleep(0.01)
    return count


async def _note(ctx: AgentContext[Any]) -> int:
    return len(ctx.object.data.get("text", ""))


def make_service(url: str) -> ReactionService:
    """The served service: a ticking graph, and a reaction agent on ``Note`` objects."""
    graph = reactive({"ticker": agent(run=_ticks, emits="tick")}, name="ticker")
    notes = agent(run=_note, reaction=Reaction(types=["Note"], events=["created"]))
    return ReactionService(
        objects=ObjectStore(url), agents={"notes": notes}, graphs={"ticker": graph}
    )


def free_port() -> int:
    """A TCP port nothing listens on now (127.0.0.1)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(folder: Path, port: int) -> subprocess.Popen[bytes]:
    """``reactor serve`` of :func:`make_service` on ``port``, its database in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    environ = {**os.environ, "REACTOR_API_TOKENS": f"{TOKEN}:bench", "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "reactor", "serve", "--app", "bench.serve:make_service"]
    command += ["--db", f"sqlite:///{folder / 'serve.db'}", "--port", str(port)]
    with (folder / "server.log").open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=log, env=environ)


async def wait_ready(client: httpx2.AsyncClient, process: subprocess.Popen[bytes]) -> None:
    """Until the server answers ``/healthz``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("reactor serve exited before it was ready")
        try:
            if (await client.get("/healthz")).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise RuntimeError("reactor serve was not ready in 60 s")


_EVENT = re.compile(rb"id: (\d+)\ndata: \{[^\n]*?\"seq\": ?(\d+)")


async def _follow(client: httpx2.AsyncClient, run_id: str) -> list[int]:
    """The ``seq`` of each event of the stream, as its ``data`` says (checked against ``id``).

    Parsed with one regular expression per chunk: the client shares the server's
    cores, so it does as little per event as it can.
    """
    seqs: list[int] = []
    pending = b""
    async with client.stream("GET", f"/api/runs/{run_id}/events", timeout=300) as response:
        async for chunk in response.aiter_bytes():
            pending += chunk
            complete, _, pending = pending.rpartition(b"\n\n")
            for ident, seq in _EVENT.findall(complete):
                if ident != seq:
                    raise AssertionError(f"event id {ident!r} carries seq {seq!r}")
                seqs.append(int(seq))
    return seqs


async def _writes(client: httpx2.AsyncClient, count: int, tag: str) -> float:
    gate = asyncio.Semaphore(50)

    async def write(n: int) -> None:
        async with gate:
            body = {"type": "Note", "data": {"text": f"{tag} {n}"}}
            response = await client.post("/api/objects", json=body)
            if response.status_code != 201:
                raise AssertionError(f"write {n} failed: {response.status_code} {response.text}")

    start = time.perf_counter()
    await asyncio.gather(*(write(n) for n in range(count)))
    return time.perf_counter() - start


async def measure(clients: int, writes: int, ticks: int) -> dict[str, float]:
    """One round: the quiet writes, then the writes under the clients; checks nothing is lost."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        port = free_port()
        process = start_server(folder, port)
        limits = httpx2.Limits(max_connections=clients + 100, max_keepalive_connections=100)
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            async with httpx2.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers=headers, limits=limits, timeout=120
            ) as client:
                await wait_ready(client, process)
                quiet = await _writes(client, writes, "quiet")
                started = await client.post("/api/runs", json={"graph": "ticker", "input": ticks})
                run_id = started.json()["run_id"]
                begin = time.perf_counter()
                followers = [asyncio.create_task(_follow(client, run_id)) for _ in range(clients)]
                busy = await _writes(client, writes, "busy")
                streams = await asyncio.gather(*followers)
                streamed = time.perf_counter() - begin
                recorded = (await client.get(f"/api/runs/{run_id}")).json()["signals"]
                expected = [s["seq"] for s in recorded]
                lost = sum(1 for seqs in streams if seqs != expected)
                if lost or recorded[-1]["name"] != "harness:end":
                    raise AssertionError(f"{lost} of {clients} clients missed signals")
                stored = (await client.get("/api/objects", params={"limit": 10_000})).json()
                if len(stored) != 2 * writes:
                    raise AssertionError(f"{len(stored)} objects stored, {2 * writes} written")
                for _ in range(600):
                    log = (await client.get("/api/processing-log")).json()
                    if sum(e["status"] == "completed" for e in log) == 2 * writes:
                        break
                    await asyncio.sleep(0.1)
                if len(log) != 2 * writes or {e["status"] for e in log} != {"completed"}:
                    raise AssertionError(f"processing log not exact: {len(log)} entries")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    return {
        "quiet": quiet,
        "busy": busy,
        "streamed": streamed,
        "delivered": float(len(expected) * clients),
    }


def run(runs: int, scale: float) -> list[Row]:
    clients = max(20, int(CLIENTS * scale))
    writes = max(100, int(WRITES * scale))
    rounds = [asyncio.run(measure(clients, writes, TICKS)) for _ in range(max(1, runs // 2))]
    best = min(rounds, key=lambda r: r["busy"])
    delivered = max(r["delivered"] / r["streamed"] for r in rounds)
    return [
        Row(
            workload=(
                f"service: {writes:,} object writes over HTTP while {clients} SSE clients follow "
                f"one live run (reactor serve, SQLite; nothing lost)"
            ),
            ours=f"{writes / best['busy']:,.0f} writes/s",
            baseline=f"{writes / best['quiet']:,.0f} writes/s (no client watching)",
            ratio=best["busy"] / best["quiet"],
            ratio_text=f"{best['quiet'] / best['busy']:.0%} of the baseline rate",
            target=">= 70% of the baseline rate",
            met=best["quiet"] / best["busy"] >= TARGET,
        ),
        Row(
            workload=(
                f"service: signals delivered to the {clients} SSE clients of that run "
                f"({best['delivered'] / clients:,.0f} signals each, every one received)"
            ),
            ours=f"{delivered:,.0f} signals/s",
            baseline="—",
            ratio=1.0,
            ratio_text="—",
            target="report",
            met=None,
        ),
    ]
