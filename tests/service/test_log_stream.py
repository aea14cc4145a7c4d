"""The log as a stream under a real service: a burst never freezes it, reads are pages."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.service.server import serving, wait_for

APP = "tests.service.bursting:make_service"

HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    import sqlalchemy as sa
    from reactor import SQLiteSignalStore
    from reactor.service._objects.db import Database
    from tests.service.bursting import GRAPHS

    async def main(path):
        db = Database(f"sqlite:///{path}")
        await db.open()
        store = SQLiteSignalStore(path, max_backlog=500)
        store.flush()
        locked = asyncio.Event()

        async def hold():  # a service transaction that waits on the loop, holding the lock
            async with db.write() as conn:
                await conn.execute(sa.text("CREATE TABLE IF NOT EXISTS held (n INTEGER)"))
                locked.set()
                await asyncio.sleep(0.5)
                await conn.execute(sa.text("INSERT INTO held VALUES (1)"))

        holding = asyncio.create_task(hold())
        await locked.wait()
        result = await GRAPHS["burst"].run(input=20_000, record=store)
        await holding
        store.close()
        await db.close()
        print(result.status, result.state["emitted"], flush=True)

    asyncio.run(main(sys.argv[1]))
    """
)


def test_a_burst_beside_a_transaction_waiting_on_the_loop_does_not_freeze_it(
    tmp_path: Path,
) -> None:
    # The deadlock of `reactor serve --db sqlite:///...`: a service transaction (the
    # heartbeat) held the file's write lock while it waited for the loop, the loop waited
    # for the store's writer (a full queue), and the writer waited for the lock.
    done = subprocess.run(
        [sys.executable, "-c", HOLDER, str(tmp_path / "app.db")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "completed 20000"), done.stderr


def _timed(client: httpx2.Client, path: str) -> tuple[float, Any]:
    began = time.monotonic()
    answer = client.get(path)
    answer.raise_for_status()
    return time.monotonic() - began, answer.json()


@pytest.mark.parametrize("count", [60_000])
def test_a_long_burst_under_serve_completes_and_the_service_answers_meanwhile(
    url: str, tmp_path: Path, count: int
) -> None:
    log = tmp_path / "serve.log"
    with serving(url, log, app=APP) as server, server.client() as client:
        started = client.post("/api/runs", json={"graph": "burst", "input": count})
        assert started.status_code == 202, started.text
        run_id = started.json()["run_id"]
        slowest: dict[str, float] = {}

        def ended() -> bool:
            for path in ("/healthz", "/api/runs", f"/api/runs/{run_id}"):
                took, answer = _timed(client, path)
                kind = path if "run_" not in path else "/api/runs/{id}"
                slowest[kind] = max(slowest.get(kind, 0.0), took)
            return bool(answer["info"]["complete"])

        wait_for(ended, timeout=300, every=0.2)
        # Each answer came while the burst ran; the bound only catches a loop frozen by it.
        assert max(slowest.values()) < 30, slowest
        info = _timed(client, f"/api/runs/{run_id}")[1]["info"]
        assert info["status"] == "completed"
        assert info["signals"] == info["last_seq"] > count  # the ticks, and the run around them
    with serving(url, tmp_path / "again.log", app=APP) as server, server.client() as client:
        info = _timed(client, f"/api/runs/{run_id}")[1]["info"]
        assert info["status"] == "completed"
        assert server.output().count("Traceback") == 0
        assert server.output().count('"exception"') == 0  # a JSON line's traceback
