"""Small things users hit (DESIGN section 33), each through the app in this process.

A run's page shows its input and tags first; the start form is prefilled with the
graph's own default input; ``?status=any`` lists every status; every time the API and
the web UI write in ISO form ends in ``Z``; a job queue (Redis) that went away is a
503 that names it, logged in one line.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from fastapi.testclient import TestClient
from pydantic import BaseModel

from reactor import AgentContext, agent, reactive
from reactor.service import ObjectStore, ReactionService, create_app
from tests.redis_server import RedisServer
from tests.service.queued import make_service as queued_service
from tests.service.server import ok, wait_for

TOKEN = "tok-small-0123456789"
API = {"Authorization": f"Bearer {TOKEN}"}
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


class Order(BaseModel):
    symbol: str
    quantity: int


async def _quote(ctx: AgentContext[Any]) -> Any:
    return ctx.input


async def _nap(ctx: AgentContext[Any]) -> None:
    await ctx.sleep(600)


GRAPHS = {
    "quote": reactive(
        {"quote": agent(run=_quote, updates="quoted")},
        state={"quoted": None},
        name="quote",
        input={"symbol": "AAPL", "quantity": 3},
    ),
    "ordered": reactive(
        {"quote": agent(run=_quote, updates="quoted")},
        state={"quoted": None},
        name="ordered",
        input=Order(symbol="MSFT", quantity=7),
    ),
    "plain": reactive(
        {"quote": agent(run=_quote, updates="quoted")}, state={"quoted": None}, name="plain"
    ),
    "nap": reactive({"nap": agent(run=_nap)}, name="nap"),
}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    service = ReactionService(
        objects=ObjectStore(f"sqlite:///{tmp_path / 'app.db'}"), graphs=GRAPHS
    )
    app = create_app(service, tokens={TOKEN: "alice"})
    with TestClient(app, base_url="http://localhost") as test_client:
        yield test_client


def signed_in(client: TestClient) -> None:
    form = client.get("/").text
    csrf = re.search(r'name="csrf" value="([^"]*)"', form)
    assert csrf is not None, form
    signed = client.post("/", data={"token": TOKEN, "csrf": csrf.group(1)}, follow_redirects=False)
    assert signed.status_code == 303, signed.text


def started(client: TestClient, graph: str, given: Any = None) -> str:
    """A run of ``graph`` started over the API, once it has ended."""
    run_id: str = ok(
        client.post("/api/runs", json={"graph": graph, "input": given}, headers=API), 202
    )["run_id"]
    wait_for(lambda: ok(client.get(f"/api/runs/{run_id}", headers=API))["info"]["complete"], 60)
    return run_id


def test_a_runs_page_shows_its_input_and_tags_first(client: TestClient) -> None:
    given = {"symbol": "<b>NVDA</b>", "note": "Tom & Jerry's"}
    run_id = started(client, "quote", given)
    signed_in(client)
    page = client.get(f"/runs/{run_id}").text
    shown = re.search(r'<pre class="json" id="run-input">(.*?)</pre>', page, re.S)
    assert shown is not None, page
    assert html.unescape(shown.group(1)) == json.dumps(given, indent=2, sort_keys=True)
    assert "&lt;b&gt;NVDA&lt;/b&gt;" in shown.group(1)  # escaped, never markup
    assert "<b>NVDA</b>" not in page
    tags = re.search(r'<dl class="summary" id="run-tags"[^>]*>(.*?)</dl>', page, re.S)
    assert tags is not None, page
    found = re.findall(r"<dt>([^<]*)</dt><dd><a href=\"[^\"]*\">([^<]*)</a></dd>", tags.group(1))
    assert dict(found) == {"service": "graph:quote", "trigger": "api", "user": "alice"}
    assert page.index('id="run-input"') < page.index('id="details"')  # at the top


def test_the_start_form_is_prefilled_with_the_graphs_own_default_input(
    client: TestClient,
) -> None:
    signed_in(client)

    def form(name: str) -> tuple[str, str]:
        page = client.get(f"/graphs/{name}").text
        found = re.search(
            r'<textarea id="run-input"[^>]*placeholder="([^"]*)"[^>]*>(.*?)</textarea>', page, re.S
        )
        assert found is not None, page
        assert "NVDA" not in page
        return html.unescape(found.group(1)), html.unescape(found.group(2))

    quote = json.dumps({"quantity": 3, "symbol": "AAPL"}, indent=2)
    assert form("quote") == (quote, quote)
    order = json.dumps({"quantity": 7, "symbol": "MSFT"}, indent=2)
    assert form("ordered") == (order, order)  # a model as its JSON data
    assert form("plain") == ("{}", "")  # left empty: the run has no input


def test_status_any_lists_runs_of_every_status(client: TestClient) -> None:
    run_id = started(client, "plain")
    listed = ok(client.get("/api/runs", params={"status": "any"}, headers=API))
    assert [run["run_id"] for run in listed] == [run_id]
    assert listed == ok(client.get("/api/runs", headers=API))
    signed_in(client)
    for path in ("/runs", "/runs/rows"):
        page = client.get(path, params={"status": "any"})
        assert page.status_code == 200, page.text
        assert f"/runs/{run_id}" in page.text


def _times(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in ``value`` that is an ISO 8601 time, with its path."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _times(item, f"{path}.{key}")
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _times(item, f"{path}[{n}]")
    elif isinstance(value, str) and ISO_TIME.match(value.partition("|")[0]):
        yield path, value.partition("|")[0]


def test_every_time_the_api_and_the_pages_write_ends_in_z(client: TestClient) -> None:
    ended = started(client, "quote")
    napping = ok(client.post("/api/runs", json={"graph": "nap"}, headers=API), 202)["run_id"]
    wait_for(lambda: ok(client.get(f"/api/runs/{napping}", headers=API))["timers"], 60)
    for n in range(3):
        ok(client.post("/api/objects", json={"type": "Person", "data": {"n": n}}, headers=API), 201)
    answers = [
        client.get("/api/runs", headers=API),
        client.get(f"/api/runs/{ended}", headers=API),
        client.get(f"/api/runs/{napping}", headers=API),
        client.get(f"/api/runs/{ended}/signals", headers=API),
        client.get("/api/objects", params={"limit": 2}, headers=API),
    ]
    times = [found for answer in answers for found in _times(ok(answer))]
    paths = {path.split("[")[0] for path, _ in times}
    assert {".timers", ".info.started_at", ".signals", ""} <= paths, paths  # all were seen
    assert [(path, text) for path, text in times if not text.endswith("Z")] == []
    signed_in(client)
    page = client.get(f"/runs/{napping}").text
    shown = re.findall(r'<time datetime="([^"]+)"', page)
    assert shown
    assert all(text.endswith("Z") for text in shown), shown
    ok(client.post(f"/api/runs/{napping}/abort", headers=API))


@pytest.fixture
def redis_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RedisServer]:
    """A redis-server of the test's own (the job queue of the service below), stopped at the end."""
    server = RedisServer(tmp_path)
    monkeypatch.setenv("REACTOR_REDIS_URL", server.url)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def test_a_job_queue_that_went_away_is_a_503_naming_redis_in_one_log_line(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    service = queued_service(f"sqlite:///{tmp_path / 'app.db'}")
    app = create_app(service, tokens={TOKEN: "alice"})
    with TestClient(app, base_url="http://localhost") as client:  # a raised error fails here
        ok(client.post("/api/runs", json={"graph": "steps"}, headers=API), 202)
        redis_server.stop()
        with structlog.testing.capture_logs() as logs:
            refused = client.post("/api/runs", json={"graph": "steps"}, headers=API)
            listed = client.get("/api/runs", headers=API)
    for answer in (refused, listed):
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == "5"
        detail = answer.json()["detail"]
        assert detail.startswith("The job queue (Redis, REACTOR_REDIS_URL) cannot be reached"), (
            detail
        )
        assert "database" not in detail
    said = [entry for entry in logs if entry["event"] == "redis unreachable"]
    assert [entry["path"] for entry in said] == ["/api/runs", "/api/runs"]
    assert all(entry["log_level"] == "warning" and "exc_info" not in entry for entry in said)
    assert all("\n" not in str(entry["error"]) for entry in said)
