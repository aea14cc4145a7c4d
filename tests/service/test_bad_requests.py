"""One bad request harms only itself, against a real ``reactor serve`` on both databases.

A NUL character in what a request carries (an abort's reason, an agent's name or
prompt, a reply) is ``422`` naming the field before anything is written, on SQLite as
on PostgreSQL (which cannot store one in text): the run it was aimed at goes on, and
so does every other. A cursor beyond 2^63 - 1 is ``422``, never an overflow in the
database, and a WebSocket asked to follow from beyond a run's end closes once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from reactor.service._api.guard import nul_refusal
from tests.service.server import ALICE, DATABASES, Server, ok, serving_on, wait_for

HUGE = str(2**63)


@pytest.fixture(scope="module", params=DATABASES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    with serving_on(request) as running:
        yield running


def invalid(response: httpx2.Response) -> str:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"] == "invalid"
    return str(body["detail"])


def _status(api: httpx2.Client, run_id: str) -> str:
    return str(ok(api.get(f"/api/runs/{run_id}"))["info"]["status"])


def test_a_nul_in_an_abort_reason_is_422_and_the_runs_go_on(api: httpx2.Client) -> None:
    napping = ok(api.post("/api/runs", json={"graph": "nap", "input": {"seconds": 60}}), 202)
    other = ok(api.post("/api/runs", json={"graph": "count", "input": 1}), 202)
    wait_for(lambda: _status(api, napping["run_id"]) == "running")
    detail = invalid(
        api.post(f"/api/runs/{napping['run_id']}/abort", json={"reason": "stop\u0000now"})
    )
    assert detail.startswith(
        "reason cannot be used: it is a string with a NUL character ('\\x00' at index 4), "
        "which PostgreSQL cannot keep (so neither database takes it): remove it."
    )
    assert wait_for(lambda: _status(api, other["run_id"]) == "completed")
    assert _status(api, napping["run_id"]) == "running"  # the refused abort did nothing
    aborted = ok(api.post(f"/api/runs/{napping['run_id']}/abort", json={"reason": "enough"}))
    assert aborted["status"] == "aborted"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"name": "bad\u0000name", "prompt": "hi"}, "name cannot be used", id="name"),
        pytest.param({"name": "fine", "prompt": "hi \u0000"}, "prompt cannot be used", id="prompt"),
        pytest.param(
            {"name": "fine", "prompt": "hi", "capabilities": {"allowed_types": ["A\u0000"]}},
            "capabilities.allowed_types[0] cannot be recorded",
            id="nested",
        ),
    ],
)
def test_a_nul_in_an_agent_definition_is_422_naming_the_field(
    api: httpx2.Client, body: dict[str, Any], field: str
) -> None:
    detail = invalid(api.post("/api/agents", json=body))
    assert detail.startswith(f"{field}: it is a string with a NUL character")
    assert api.get("/api/agents/fine").status_code == 404


@pytest.mark.parametrize(
    ("path", "params", "headers"),
    [
        pytest.param("/api/runs/{run}/signals", {"after": HUGE}, {}, id="signals-after"),
        pytest.param("/api/runs/{run}/signals", {"before": HUGE}, {}, id="signals-before"),
        pytest.param("/api/processing-log/history", {"after": HUGE}, {}, id="history-after"),
        pytest.param("/api/runs/{run}/events", {}, {"Last-Event-ID": HUGE}, id="last-event-id"),
    ],
)
def test_a_cursor_beyond_2_63_is_422(
    api: httpx2.Client, path: str, params: dict[str, str], headers: dict[str, str]
) -> None:
    run = ok(api.post("/api/runs", json={"graph": "count", "input": 1}), 202)["run_id"]
    wait_for(lambda: _status(api, run) == "completed")
    detail = invalid(api.get(path.format(run=run), params=params, headers=headers))
    assert detail.startswith("The request is invalid: ")
    assert "less than or equal to 9223372036854775807" in detail
    assert ok(api.get("/healthz")) == {"status": "ok"}  # the connection and the server live


def test_a_retry_of_an_entry_beyond_2_63_is_422(api: httpx2.Client) -> None:
    invalid(api.post(f"/api/processing-log/{HUGE}/retry"))


def test_a_websocket_following_from_beyond_the_end_closes_once(
    api: httpx2.Client, server: Server
) -> None:
    run = ok(api.post("/api/runs", json={"graph": "count", "input": 1}), 202)["run_id"]
    wait_for(lambda: _status(api, run) == "completed")
    address = server.url.replace("http://", "ws://") + f"/api/runs/{run}/ws?after=1000000"
    received: list[Any] = []
    with connect(address, additional_headers={"Authorization": f"Bearer {ALICE}"}) as socket:
        closed = False
        while not closed and len(received) < 100:  # a stream that looped sends without end
            try:
                received.append(socket.recv(timeout=30))
            except ConnectionClosed:
                closed = True
    assert closed
    assert len(received) < 100


@pytest.mark.parametrize(
    ("body", "kind", "refused"),
    [
        pytest.param(
            b'{"a": {"b": ["x", "y\\u0000"]}}', "application/json", "a.b[1] cannot", id="json"
        ),
        pytest.param(
            b'"\\u0000"', "application/json; charset=utf-8", "the body cannot", id="string"
        ),
        pytest.param(b'{"k\\u0000": 1}', "application/json", "a field's name cannot", id="key"),
        pytest.param(
            b"reason=a%00b&x=1", "application/x-www-form-urlencoded", "reason cannot", id="form"
        ),
        pytest.param(b'{"a": "\\\\u0000"}', "application/json", None, id="escaped-backslash"),
        pytest.param(b'{"a": "plain"}', "application/json", None, id="none"),
        pytest.param(b"not json \\u0000", "application/json", None, id="not-json"),
    ],
)
def test_a_body_holding_a_nul_is_refused_naming_the_field(
    body: bytes, kind: str, refused: str | None
) -> None:
    said = nul_refusal(body, kind)
    assert (said or "")[: len(refused or "")] == (refused or "")
    assert (said is None) == (refused is None)
