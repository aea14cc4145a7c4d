"""Authorization's cost: the same HTTP workload with tokens and roles on, and with auth off.

Two real ``reactor serve`` processes of one app (SQLite in scratch folders, 127.0.0.1):
one with API tokens carrying roles (each request is authenticated into a principal, and
every route checks the role it needs), one without tokens (the local admin: no token is
looked up). The workload is the same on both, 50 requests at a time: objects created
(an operator's), read back one by one, and the suggestions and processing log listed (a
viewer's). The rounds alternate between the two servers; the best round of each is
compared. Target: on is at most 10% slower.
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
from bench.serve import free_port, wait_ready
from reactor.service import ObjectStore, ReactionService

REQUESTS = 2_000
TOKEN = "bench-operator"
TOKENS = f"{TOKEN}:bench:operator,bench-viewer:viewer-1:viewer,bench-admin:root:admin"
TARGET = 1.10


def make_service(url: str) -> ReactionService:
    """The served service: an object store, no agents (the HTTP layer is what is measured)."""
    return ReactionService(objects=ObjectStore(url))


def _start(folder: Path, port: int, tokens: str | None) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    environ = {**os.environ, "PYTHONPATH": os.getcwd()}
    environ.pop("REACTOR_API_TOKENS", None)
    if tokens is not None:
        environ["REACTOR_API_TOKENS"] = tokens
    command = [sys.executable, "-m", "reactor", "serve", "--app", "bench.authority:make_service"]
    command += ["--db", f"sqlite:///{folder / 'serve.db'}", "--port", str(port)]
    with (folder / "server.log").open("ab") as log:
        return subprocess.Popen(command, stdout=log, stderr=log, env=environ)


async def _workload(client: httpx2.AsyncClient, requests: int) -> float:
    """Seconds for ``requests`` requests: a quarter writes, the rest reads."""
    gate = asyncio.Semaphore(50)
    created: list[str] = []

    async def one(n: int) -> None:
        async with gate:
            if n % 4 == 0 or not created:
                body = {"type": "Note", "data": {"text": f"note {n}"}}
                answer = await client.post("/api/objects", json=body)
                if answer.status_code != 201:
                    raise AssertionError(f"write {n}: {answer.status_code} {answer.text}")
                created.append(answer.json()["id"])
                return
            path = (
                f"/api/objects/{created[n % len(created)]}"
                if n % 4 != 3
                else ("/api/suggestions" if n % 8 == 3 else "/api/processing-log?agent=none")
            )
            answer = await client.get(path)
            if answer.status_code != 200:
                raise AssertionError(f"read {path}: {answer.status_code} {answer.text}")

    start = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(requests)))
    return time.perf_counter() - start


async def _rounds(rounds: int, requests: int) -> tuple[float, float]:
    """The best seconds of the workload with authorization on, and off."""
    with tempfile.TemporaryDirectory() as scratch:
        ports = {"on": free_port(), "off": free_port()}
        processes = {
            "on": _start(Path(scratch) / "on", ports["on"], TOKENS),
            "off": _start(Path(scratch) / "off", ports["off"], None),
        }
        best = {"on": float("inf"), "off": float("inf")}
        limits = httpx2.Limits(max_connections=60, max_keepalive_connections=60)
        try:
            clients = {
                kind: httpx2.AsyncClient(
                    base_url=f"http://127.0.0.1:{port}",
                    headers={"Authorization": f"Bearer {TOKEN}"} if kind == "on" else {},
                    limits=limits,
                    timeout=120,
                )
                for kind, port in ports.items()
            }
            for kind, client in clients.items():
                await wait_ready(client, processes[kind])
                await _workload(client, requests // 4)  # warm up
            for _ in range(rounds):
                for kind in ("off", "on"):
                    best[kind] = min(best[kind], await _workload(clients[kind], requests))
            for client in clients.values():
                await client.aclose()
        finally:
            for process in processes.values():
                process.send_signal(signal.SIGTERM)
                process.wait(60)
    return best["on"], best["off"]


def run(runs: int, scale: float) -> list[Row]:
    requests = max(400, int(REQUESTS * scale))
    on, off = asyncio.run(_rounds(max(2, runs), requests))
    return [
        Row(
            workload=(
                f"authorization: {requests:,} HTTP requests, 50 at a time (a quarter object "
                "writes, the rest reads), with API tokens and roles checked on every route "
                "(reactor serve, SQLite)"
            ),
            ours=f"{requests / on:,.0f} requests/s",
            baseline=f"{requests / off:,.0f} requests/s (auth off: no tokens)",
            ratio=on / off,
            ratio_text=f"{on / off:.2f}x the time",
            target="<= 1.10x (at most 10% slower)",
            met=on / off <= TARGET,
        )
    ]
