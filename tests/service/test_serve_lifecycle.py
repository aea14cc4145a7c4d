"""``reactor serve`` as a process: refusing to start unsafely, SIGTERM, resuming, WebSockets."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from reactor.service._api.serve import _bind
from tests.service.server import ALICE, BOB, serve_command, serving, wait_for


def test_a_public_host_without_tokens_is_refused(tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("REACTOR_API_TOKENS")}
    done = subprocess.run(
        serve_command(
            *("--host", "0.0.0.0", "--db", f"sqlite:///{tmp_path / 'app.db'}"),
            *("--log-format", "console"),
        ),
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "reactor serve: error: refusing to listen on 0.0.0.0 without API tokens; set "
        "REACTOR_API_TOKENS='token:user,...' or --tokens-file, or use --host 127.0.0.1"
    ]
    assert not (tmp_path / "app.db").exists()


def _status(client: httpx2.Client, run_id: str) -> str:
    return str(client.get(f"/api/runs/{run_id}").json()["info"]["status"])


def test_sigterm_lets_short_work_finish_and_holds_long_runs_for_the_next_start(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    log = tmp_path / "server.log"
    with serving(db, log, grace=15) as server, server.client() as api:  # the 1 s run fits
        short = api.post("/api/runs", json={"graph": "nap", "input": {"seconds": 1}}).json()
        long = api.post("/api/runs", json={"graph": "nap", "input": {"seconds": 600}}).json()
        started = time.monotonic()
        assert server.stop(timeout=120) == 0
        took = time.monotonic() - started
    assert took < 120, server.output()  # the grace and the short run, not the 600 s one
    assert "Finished server process" in server.output()
    assert ALICE not in server.output()
    assert "never retrieved" not in server.output()  # the suspended run's end is heard
    assert '"level": "error"' not in server.output()  # a deploy is no error
    with serving(db, log) as again, again.client() as api:
        assert _status(api, short["run_id"]) == "completed"
        run = api.get(f"/api/runs/{long['run_id']}").json()
        assert run["info"]["live"] is True
        names = [s["name"] for s in run["signals"]]
        assert "harness:end" not in names
        assert "harness:resumed" in names
        api.post(f"/api/runs/{long['run_id']}/abort")
        wait_for(lambda: _status(api, long["run_id"]) == "aborted")


def test_the_websocket_channel_streams_signals_and_takes_commands(tmp_path: Path) -> None:
    with serving(f"sqlite:///{tmp_path / 'app.db'}", tmp_path / "server.log") as server:
        with server.client() as api:
            run_id = api.post(
                "/api/runs", json={"graph": "relay", "input": {"seconds": 120}}
            ).json()["run_id"]
        uri = f"ws{server.url.removeprefix('http')}/api/runs/{run_id}/ws"
        with pytest.raises(InvalidStatus):
            connect(uri, open_timeout=10).close()
        messages: list[dict[str, Any]] = []
        with connect(uri, additional_headers={"Authorization": f"Bearer {ALICE}"}) as ws:
            ws.send(json.dumps({"type": "send", "name": "go", "payload": "hi"}))
            ws.send(json.dumps({"type": "dance"}))
            for text in ws:
                messages.append(json.loads(text))
    answers = [m for m in messages if m["type"] != "signal"]
    assert answers[0]["type"] == "ok"
    assert answers[0]["command"] == "send"
    assert answers[1]["type"] == "error"
    assert answers[1]["error"] == "invalid"
    names = [m["signal"]["name"] for m in messages if m["type"] == "signal"]
    assert names[0] == "harness:start"
    assert names[-1] == "harness:end"
    assert "echoed" in names


def test_the_crm_example_serves_as_documented(tmp_path: Path) -> None:
    app = "examples.crm_enrichment.service:service"
    db = f"sqlite:///{tmp_path / 'crm.db'}"
    with serving(db, tmp_path / "server.log", app=app) as server, server.client() as api:
        person = {"name": "Ada Lovelace", "email": "ada@analytical-engines.org"}
        ada = api.post("/api/objects", json={"type": "Person", "data": person}).json()
        suggestions = wait_for(
            lambda: api.get("/api/suggestions", params={"status": "pending"}).json()
        )
        approve = f"/api/suggestions/{suggestions[0]['id']}/approve"
        assert api.post(approve).status_code == 403  # alice made the change it reacted to
        with server.client(BOB) as bob:
            assert bob.post(approve).status_code == 200
            assert bob.post(approve).status_code == 409
        found = api.get(f"/api/objects/{ada['id']}").json()
    assert found["data"]["employer"] == "Analytical Engines"
    assert found["actor"] == {"type": "agent", "id": "enrich"}


async def test_the_served_connections_send_without_waiting_for_acks() -> None:
    # The listening socket reactor serve binds first must say it is TCP: asyncio turns
    # Nagle off only on such sockets' connections, and with it on, every answer on a
    # kept-alive connection waited 40 ms for the client's delayed ACK.
    listening = _bind("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(connected, sock=listening)
    async with server:
        port = listening.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(accepted, 30) != 0
        writer.close()
