"""Recording workloads: a million signals to SQLite, then to PostgreSQL, rate and peak memory.

Each measurement runs in a subprocess so that the peak RSS measured is its workload's
alone. The PostgreSQL figure is measured beside SQLite's in the same run, on a scratch
database made on the server at ``REACTOR_BENCH_POSTGRES`` (by default
``postgresql://postgres@127.0.0.1:5432``) and dropped afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
from psycopg import sql

from bench._runner import Row, peak_rss_kb
from reactor import PostgresSignalStore, RunInfo, SignalBus, SignalStoreBase, SQLiteSignalStore

SIGNALS = 1_000_000
HISTORY = 1_000
SERVER = os.environ.get("REACTOR_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432")


def record(count: int, kind: str, where: str) -> dict[str, float]:
    """Emit ``count`` signals on a bus whose every signal is recorded to ``where``."""
    store: SignalStoreBase = (
        SQLiteSignalStore(where) if kind == "sqlite" else PostgresSignalStore(where)
    )
    bus = SignalBus(history_limit=HISTORY, run_id="run_bench")
    store.start_run(RunInfo(run_id="run_bench", graph="bench", started_at=time.time()))
    bus.subscribe("**", store.append)
    payload = {"agent": "writer", "content": "a token of text"}
    emit = bus.emit
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(count):
        emit("text:delta", payload, source="writer")
    store.flush()
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    store.close()
    return {"seconds": elapsed, "cpu": used, "peak_mb": peak_rss_kb() / 1024, "count": count}


@contextmanager
def scratch_database() -> Iterator[str]:
    """A new PostgreSQL database for one measurement, dropped afterwards."""
    name = f"reactor_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield f"{SERVER}/{name}"
        finally:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def measure(count: int, kind: str, env: dict[str, str] | None = None) -> dict[str, float]:
    """Record ``count`` signals to a new database of ``kind`` in a subprocess.

    ``env``: variables set in the subprocess (``REACTOR_AUDIT_CHAIN``, say).
    """
    with tempfile.TemporaryDirectory() as folder, ExitStack() as scratch:
        if kind == "postgres":
            where = scratch.enter_context(scratch_database())
        else:
            where = str(Path(folder) / "runs.db")
        output = subprocess.run(
            [sys.executable, "-m", "bench.recording", str(count), kind, where],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **(env or {})},
        ).stdout
    figures: dict[str, float] = json.loads(output)
    return figures


def run(runs: int, scale: float) -> list[Row]:
    count = max(10_000, int(SIGNALS * scale))
    best: dict[str, dict[str, float]] = {}
    for _ in range(min(runs, 2)):  # alternately, so both see the same machine
        for kind in ("sqlite", "postgres"):
            figures = measure(count, kind)
            if kind not in best or figures["seconds"] < best[kind]["seconds"]:
                best[kind] = figures
    sqlite, postgres = (best[kind] for kind in ("sqlite", "postgres"))
    sqlite_rate = sqlite["count"] / sqlite["seconds"]
    postgres_rate = postgres["count"] / postgres["seconds"]
    return [
        Row(
            workload=f"record {count:,} signals to SQLite (history_limit={HISTORY:,})",
            ours=f"{sqlite_rate:,.0f} signals/s, peak RSS {sqlite['peak_mb']:,.0f} MB",
            baseline="—",
            ratio=sqlite_rate,
            ratio_text="—",
            target=">= 100,000/s, <= 200 MB",
            met=sqlite_rate >= 100_000 and sqlite["peak_mb"] <= 200,
        ),
        Row(
            workload=f"record {count:,} signals to PostgreSQL (local server, COPY batches)",
            ours=f"{postgres_rate:,.0f} signals/s, peak RSS {postgres['peak_mb']:,.0f} MB",
            baseline=f"{sqlite_rate:,.0f} signals/s (SQLite, same run)",
            ratio=postgres_rate / sqlite_rate,
            ratio_text=f"{postgres_rate / sqlite_rate:.0%} of SQLite's rate",
            target=">= 50,000/s",
            met=postgres_rate >= 50_000,
        ),
    ]


if __name__ == "__main__":
    print(json.dumps(record(int(sys.argv[1]), sys.argv[2], sys.argv[3])))
