"""Backpressure on outside input: a producer is paced by the store, never outruns it.

``handle.send()`` refuses (``BackpressureError``, nothing sent) while the run's store
has ``max_backlog`` signals not written yet; ``await handle.asend()`` waits for room.
So what a crash can lose is bounded: a real producer killed with SIGKILL loses at most
``max_backlog`` of the sends it was told were accepted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reactor import BackpressureError, SQLiteSignalStore, agent, reactive

GRAPH = reactive({"opener": agent(run=lambda ctx: "open")}, external=["quote"], name="feed")
LIMIT = 50


async def test_send_refuses_while_the_store_is_behind_and_nothing_is_lost(
    tmp_path: Path,
) -> None:
    with SQLiteSignalStore(tmp_path / "runs.db", max_backlog=LIMIT) as store:
        handle = GRAPH.start(record=store)
        accepted, refusals = 0, []
        for number in range(20_000):  # no await: the writer thread falls behind
            try:
                handle.send("quote", {"n": number})
            except BackpressureError as exc:
                refusals.append(exc)
            else:
                accepted += 1
        assert refusals
        assert {exc.run_id for exc in refusals} == {handle.run_id}
        assert str(refusals[0]).startswith(f"Run {handle.run_id} refused 'quote': its store")
        handle.close()
        result = await handle
        store.flush()
        recorded = [s for s in store.load(result.run_id).signals if s.name == "quote"]
    assert len(recorded) == accepted  # every accepted send is in the log, in order
    assert [s.payload["n"] for s in recorded] == sorted(s.payload["n"] for s in recorded)


async def test_asend_waits_for_room_and_records_every_send(tmp_path: Path) -> None:
    with SQLiteSignalStore(tmp_path / "runs.db", max_backlog=LIMIT) as store:
        handle = GRAPH.start(record=store)
        for number in range(3_000):
            await handle.asend("quote", {"n": number})
        handle.close()
        result = await handle
        store.flush()
        recorded = [s.payload["n"] for s in store.load(result.run_id).signals if s.name == "quote"]
    assert recorded == list(range(3_000))


PRODUCER = textwrap.dedent(
    """
    import asyncio, os, sys

    from reactor import BackpressureError, SQLiteSignalStore, agent, reactive

    graph = reactive({"opener": agent(run=lambda ctx: "open")}, external=["quote"], name="feed")
    accepted = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    async def main():
        store = SQLiteSignalStore(sys.argv[1], max_backlog=int(sys.argv[3]))
        handle = graph.start(record=store)
        os.write(accepted, (handle.run_id + "\\n").encode())
        number = 0
        while True:
            try:
                handle.send("quote", {"n": number})
            except BackpressureError:
                await asyncio.sleep(0)
                continue
            os.write(accepted, b"%d\\n" % number)  # told it was accepted: counted
            number += 1
            if number % 500 == 0:
                await asyncio.sleep(0)

    asyncio.run(main())
    """
)


@pytest.mark.timeout(300)
def test_after_sigkill_at_most_max_backlog_accepted_sends_are_missing(tmp_path: Path) -> None:
    db, counted = tmp_path / "runs.db", tmp_path / "accepted.txt"
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER)
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    process = subprocess.Popen(
        [sys.executable, str(script), str(db), str(counted), str(LIMIT)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if counted.exists() and len(counted.read_bytes().splitlines()) > 5_000:
            break
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        time.sleep(0.05)
    else:
        pytest.fail("the producer did not get going")
    process.send_signal(signal.SIGKILL)
    process.wait(60)
    if process.stderr is not None:
        process.stderr.close()
    run_id, *numbers = counted.read_text().splitlines()
    accepted = len([n for n in numbers if n])  # a line cut by the kill is not counted
    with SQLiteSignalStore(db) as store:
        recorded = {s.payload["n"] for s in store.signals(run_id, names=["quote"], limit=10**6)}
    missing = accepted - len(recorded)
    assert 0 <= missing <= LIMIT, (accepted, len(recorded))
    assert recorded == set(range(len(recorded)))  # what is lost is the newest, never a hole
