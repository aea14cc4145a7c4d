"""HTTP object writes: ``reactor serve`` beside a bare FastAPI + SQLAlchemy endpoint.

2,000 ``POST /api/objects`` requests, 50 at a time, from one client process on this
machine, to two servers started alike (uvicorn, one process, SQLite in WAL mode in a
scratch folder, 127.0.0.1): a real ``reactor serve`` of ``bench.serve:make_service``
(tokens, the request guard, the object and its change event in one transaction, the
dispatcher following the events: its reaction agent watches ``Note``, these are
``Position`` objects), and ``bench.bare``'s endpoint, which inserts the same row and
nothing else. The two are measured alternately; every write must answer 201, and all
of reactor's must be stored. Target (DESIGN.md section 29): reactor at >= 50% of the bare rate.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

from bench._runner import Row
from bench.serve import TOKEN, free_port, start_server, wait_ready

WRITES = 2_000
CONCURRENCY = 50
TARGET = 0.5


def _start_bare(folder: Path, port: int) -> subprocess.Popen[bytes]:
    environ = {**os.environ, "PYTHONPATH": os.getcwd()}
    command = [sys.executable, "-m", "bench.bare", "--db", str(folder / "bare.db")]
    with (folder / "bare.log").open("ab") as log:
        return subprocess.Popen(
            [*command, "--port", str(port)], stdout=log, stderr=log, env=environ
        )


async def post_many(client: httpx2.AsyncClient, count: int, type: str, tag: str) -> float:
    """Seconds to create ``count`` objects, ``CONCURRENCY`` requests at a time."""
    gate = asyncio.Semaphore(CONCURRENCY)

    async def write(n: int) -> None:
        async with gate:
            body = {"type": type, "data": {"symbol": f"S{n % 97}", "qty": n, "tag": tag}}
            response = await client.post("/api/objects", json=body)
            if response.status_code != 201:
                raise AssertionError(f"write {n} failed: {response.status_code} {response.text}")

    start = time.perf_counter()
    await asyncio.gather(*(write(n) for n in range(count)))
    return time.perf_counter() - start


async def _round(port: int, process: subprocess.Popen[bytes], writes: int, tag: str) -> float:
    limits = httpx2.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", headers=headers, limits=limits, timeout=120
    ) as client:
        await wait_ready(client, process)
        await post_many(client, 50, "Position", f"{tag}-warm")  # connections, caches
        seconds = await post_many(client, writes, "Position", tag)
        if tag.startswith("r"):  # reactor: all stored
            stored = await client.get("/api/objects", params={"type": "Position", "limit": 10_000})
            if len(stored.json()) != writes + 50:
                raise AssertionError(f"{len(stored.json())} objects stored, {writes + 50} written")
        return seconds


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(60)


def measure(writes: int, rounds: int) -> tuple[float, float]:
    """The best seconds of reactor serve and of the bare endpoint, measured alternately."""
    ours: list[float] = []
    bare: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        for n in range(rounds):
            port = free_port()
            process = start_server(folder / f"reactor{n}", port)
            try:
                ours.append(asyncio.run(_round(port, process, writes, f"r{n}")))
            finally:
                _stop(process)
            port = free_port()
            (folder / f"bare{n}").mkdir()
            process = _start_bare(folder / f"bare{n}", port)
            try:
                bare.append(asyncio.run(_round(port, process, writes, f"b{n}")))
            finally:
                _stop(process)
    return min(ours), min(bare)


def run(runs: int, scale: float) -> list[Row]:
    writes = max(200, int(WRITES * scale))
    ours, bare = measure(writes, max(2, runs // 2))
    return [
        Row(
            workload=(
                f"service: {writes:,} object writes over HTTP (`POST /api/objects`, "
                f"{CONCURRENCY} concurrent clients, reactor serve, SQLite)"
            ),
            ours=f"{writes / ours:,.0f} writes/s",
            baseline=f"{writes / bare:,.0f} writes/s (bare FastAPI + SQLAlchemy, `bench/bare.py`)",
            ratio=bare / ours,
            ratio_text=f"{bare / ours:.0%} of the baseline rate",
            target=">= 50% of the baseline rate",
            met=bare / ours >= TARGET,
        )
    ]
