"""Backpressure over HTTP: a send to a run whose store is behind is a 503, never queued.

The store's writer is held back for real: another connection holds SQLite's write lock,
so what the runs emit waits in the store's backlog. While that backlog is at the store's
``max_backlog``, ``POST /api/runs/{id}/signals`` answers ``503`` with ``Retry-After``
and queues nothing; once the lock goes and the writer catches up, the same send is
accepted and delivered.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from reactor import AgentContext, SQLiteSignalStore, agent, reactive
from reactor.service import ObjectStore, ReactionService, create_app
from tests.service.server import ok, wait_for

TOKEN = "tok-backpressure-0123456789"
API = {"Authorization": f"Bearer {TOKEN}"}
LIMIT = 20


async def _listen(ctx: AgentContext[Any]) -> Any:
    return ctx.signal.payload


async def _nap(ctx: AgentContext[Any]) -> None:
    await ctx.sleep(600)  # keeps the run open for what is sent to it


GO = threading.Event()
"""Set by the test once the store's writer is held back: the chatter speaks then."""


async def _chatter(ctx: AgentContext[Any]) -> None:
    await asyncio.to_thread(GO.wait, 120)
    for number in range(LIMIT * 5):  # more than the backlog holds while nothing is written
        ctx.emit("chatty:tick", {"n": number})


GRAPHS = {
    "listener": reactive(
        {
            "listen": agent(run=_listen, activate_on="quote", updates="heard"),
            "nap": agent(run=_nap),
        },
        state={"heard": None},
        external=["quote"],
        name="listener",
    ),
    "chatty": reactive({"chatter": agent(run=_chatter, emits=["chatty:tick"])}, name="chatty"),
}


@pytest.fixture
def runs_db(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture
def client(tmp_path: Path, runs_db: Path) -> Iterator[TestClient]:
    store = SQLiteSignalStore(runs_db, max_backlog=LIMIT)
    service = ReactionService(
        objects=ObjectStore(f"sqlite:///{tmp_path / 'app.db'}"), graphs=GRAPHS, record=store
    )
    with TestClient(create_app(service, tokens={TOKEN: "alice"}), base_url="http://localhost") as c:
        yield c
    store.close()


def _status(client: TestClient, run_id: str) -> str:
    status: str = ok(client.get(f"/api/runs/{run_id}", headers=API))["info"]["status"]
    return status


def test_a_send_while_the_store_is_behind_is_a_503_and_is_accepted_once_it_caught_up(
    client: TestClient, runs_db: Path
) -> None:
    GO.clear()
    ok(client.post("/api/runs", json={"graph": "chatty"}, headers=API), 202)
    listener = ok(client.post("/api/runs", json={"graph": "listener"}, headers=API), 202)
    run_id = listener["run_id"]
    wait_for(lambda: _status(client, run_id) in ("running", "waiting"), 60)
    send = f"/api/runs/{run_id}/signals"
    lock = sqlite3.connect(runs_db, timeout=60, isolation_level=None)
    try:
        lock.execute("BEGIN EXCLUSIVE")  # the store's writer waits for this lock
        GO.set()
        refused = wait_for(
            lambda: (
                (
                    answer := client.post(send, json={"name": "quote", "payload": 1}, headers=API)
                ).status_code
                == 503
                and answer
            ),
            60,
        )
        assert refused.headers["Retry-After"].isdigit()
        assert "Nothing was queued" in refused.json()["detail"]
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    accepted = wait_for(
        lambda: (
            (
                answer := client.post(send, json={"name": "quote", "payload": 2}, headers=API)
            ).status_code
            != 503
            and answer
        ),
        60,
    )
    assert accepted.status_code == 202, accepted.text

    def heard() -> list[Any]:
        page = ok(client.get(f"/api/runs/{run_id}/signals?names=quote", headers=API))
        return [signal["payload"] for signal in page["signals"]]

    wait_for(lambda: heard() == [2], 60)  # the refused send never reached the run
