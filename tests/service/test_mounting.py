"""A service mounted in a user's own FastAPI app, under ``/reactor`` (FastAPI's TestClient).

The API, the Server-Sent Events, and every link, form, redirect and asset of the web
UI live under the prefix; the user's own routes stay theirs. Runs started without an
input (the web form, ``POST /api/runs``) take the graph's default input.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastapi
import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from reactor import agent, reactive
from reactor.service import ObjectStore, ReactionService, ServiceConfigError, create_app

TOKEN = "s3cret"
API = {"Authorization": f"Bearer {TOKEN}"}
URL_ATTRIBUTES = re.compile(r'(?:href|action|src|data-refresh|data-events)="([^"#]*)')
LINKS = re.compile(r'(?:href|src|data-refresh)="([^"#]*)')


def _service(folder: Path) -> ReactionService:
    doubled = agent(run=lambda ctx: ctx.input * 2)
    return ReactionService(
        objects=ObjectStore(f"sqlite:///{folder / 'app.db'}"),
        graphs={"double": reactive({"double": doubled}, name="double", input=21)},
    )


def _user_app(folder: Path) -> fastapi.FastAPI:
    reactor_app = create_app(
        _service(folder), tokens={TOKEN: ("alice", "admin")}, prefix="/reactor"
    )
    app = fastapi.FastAPI(lifespan=reactor_app.router.lifespan_context)

    @app.get("/hello")
    async def hello() -> dict[str, str]:
        return {"hello": "world"}

    app.mount("/reactor", reactor_app)
    return app


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(_user_app(tmp_path), base_url="http://localhost") as running:
        yield running


def _hidden(html: str, name: str = "csrf") -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, html
    return found.group(1)


def _sign_in(client: TestClient) -> None:
    form = client.get("/reactor/")
    assert form.status_code == 200
    signed = client.post(
        "/reactor/",
        data={"token": TOKEN, "csrf": _hidden(form.text)},
        follow_redirects=False,
    )
    assert signed.status_code == 303, signed.text
    assert signed.headers["location"] == "/reactor/runs"
    assert "Path=/reactor;" in signed.headers["set-cookie"]  # the user's app never gets it


def _finished(client: TestClient, run_id: str) -> dict[str, Any]:
    for _ in range(200):
        run = client.get(f"/reactor/api/runs/{run_id}", headers=API).json()
        if run["info"]["status"] not in (None, "running"):
            return dict(run)
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")


def _input(run: dict[str, Any]) -> Any:
    start = run["signals"][0]
    assert start["name"] == "harness:start"
    return start["payload"]["input"]


def _until_closed(channel: Any) -> list[str]:
    names: list[str] = []
    try:
        while True:
            names.append(channel.receive_json()["signal"]["name"])
    except WebSocketDisconnect:
        return names


def _urls(html: str) -> list[str]:
    return [url for url in URL_ATTRIBUTES.findall(html) if url]


def test_the_users_route_and_the_mounted_api_live_side_by_side(client: TestClient) -> None:
    assert client.get("/hello").json() == {"hello": "world"}
    assert client.get("/reactor/healthz").json() == {"status": "ok"}
    assert client.get("/reactor/api/runs").status_code == 401
    started = client.post("/reactor/api/runs", json={"graph": "double", "input": 5}, headers=API)
    assert started.status_code == 202, started.text
    run = _finished(client, started.json()["run_id"])
    assert (run["info"]["status"], _input(run)) == ("completed", 5)
    assert client.get("/runs").status_code == 404  # the user's app has no such route


def test_a_run_without_input_takes_the_graphs_default(client: TestClient) -> None:
    started = client.post("/reactor/api/runs", json={"graph": "double"}, headers=API)
    assert started.status_code == 202, started.text
    run = _finished(client, started.json()["run_id"])
    assert _input(run) == 21
    ends = [s for s in run["signals"] if s["name"] == "agent:double:completed"]
    assert [s["payload"]["output"] for s in ends] == [42]
    _sign_in(client)
    page = client.get("/reactor/graphs/double")
    form = client.post(
        "/reactor/graphs/double/runs",
        data={"csrf": _hidden(page.text), "input": ""},
        follow_redirects=False,
    )
    assert form.status_code == 303, form.text
    run_id = form.headers["location"].removeprefix("/reactor/runs/")
    assert _input(_finished(client, run_id)) == 21


def test_every_web_url_is_under_the_prefix(client: TestClient) -> None:
    _sign_in(client)
    runs = client.get("/reactor/runs")
    assert runs.status_code == 200
    started = client.post("/reactor/api/runs", json={"graph": "double"}, headers=API)
    run_id = started.json()["run_id"]
    _finished(client, run_id)
    listed = client.get("/reactor/runs/rows").text
    assert f'href="/reactor/runs/{run_id}"' in listed
    seen: set[str] = set()
    for path in ("/reactor/runs", f"/reactor/runs/{run_id}", "/reactor/graphs/double",
                 "/reactor/agents", "/reactor/suggestions", "/reactor/processing-log",
                 "/reactor/workers", f"/reactor/runs/{run_id}/details"):  # fmt: skip
        response = client.get(path)
        assert response.status_code == 200, (path, response.text)
        urls = _urls(response.text)
        assert urls, path
        assert all(url.startswith("/reactor/") for url in urls), (path, urls)
        seen.update(url for url in LINKS.findall(response.text) if url)
    assert "/reactor/static/web.css" in seen
    for url in sorted(seen):  # every link and asset answers
        assert client.get(url.replace("&amp;", "&")).status_code == 200, url
    run_page = client.get(f"/reactor/runs/{run_id}").text
    assert 'data-root="/reactor"' in run_page
    assert f'data-events="/reactor/runs/{run_id}/events"' in run_page
    csrf = _hidden(run_page)
    signed_out = client.post("/reactor/sign-out", data={"csrf": csrf}, follow_redirects=False)
    assert (signed_out.status_code, signed_out.headers["location"]) == (303, "/reactor/")
    gone = client.get("/reactor/runs", follow_redirects=False)
    assert (gone.status_code, gone.headers["location"]) == (303, "/reactor/")


def test_streams_the_channel_and_the_api_docs_are_under_the_prefix(client: TestClient) -> None:
    started = client.post("/reactor/api/runs", json={"graph": "double"}, headers=API)
    run_id = started.json()["run_id"]
    _finished(client, run_id)
    with client.stream("GET", f"/reactor/api/runs/{run_id}/events", headers=API) as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        data = [json.loads(line[5:]) for line in events.iter_lines() if line.startswith("data:")]
    assert data[-1]["name"] == "harness:end"
    _sign_in(client)
    with client.stream("GET", f"/reactor/runs/{run_id}/events") as events:
        names = [
            json.loads(line[5:])["name"] for line in events.iter_lines() if line.startswith("data:")
        ]
    assert (names[0], names[-1]) == ("harness:start", "harness:end")
    path = f"/reactor/api/runs/{run_id}/ws"
    with client.websocket_connect(path, headers={**API, "host": "localhost"}) as channel:
        sent = _until_closed(channel)  # closed after harness:end
    assert (sent[0], sent[-1]) == ("harness:start", "harness:end")
    docs = client.get("/reactor/docs").text
    assert "'/reactor/openapi.json'" in docs or '"/reactor/openapi.json"' in docs
    assert "/reactor/docs/assets/swagger-ui-bundle.js" in docs
    assert client.get("/reactor/docs/assets/swagger-ui-bundle.js").status_code == 200
    assert "/api/runs" in client.get("/reactor/openapi.json").json()["paths"]


def test_a_json_body_under_the_prefix_must_say_it_is_json(client: TestClient) -> None:
    sent = client.post(
        "/reactor/api/runs",
        content=b'{"graph": "double"}',
        headers={**API, "Content-Type": "text/plain"},
    )
    assert sent.status_code == 415


@pytest.mark.parametrize("prefix", ["reactor", "/reactor/", "//x"])
def test_a_prefix_that_is_not_a_path_is_refused(tmp_path: Path, prefix: str) -> None:
    with pytest.raises(ServiceConfigError, match="prefix must be the path"):
        create_app(_service(tmp_path), prefix=prefix)


def test_the_prefix_alone_serves_behind_a_proxy_that_strips_it(tmp_path: Path) -> None:
    app = create_app(_service(tmp_path), tokens={TOKEN: ("alice", "admin")}, prefix="/reactor")
    with TestClient(app, base_url="http://localhost") as client:
        form = client.get("/")
        assert 'action="/reactor/"' in form.text
        assert 'href="/reactor/static/web.css"' in form.text
