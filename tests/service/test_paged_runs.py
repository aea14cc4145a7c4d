"""A run over HTTP is read in pages: ``GET /api/runs/{id}`` is its tail, ``/signals`` pages.

Against a real ``reactor serve`` (SQLite and PostgreSQL), each page is compared with
the store's own ``load`` of the run. The commands (replies, signals, aborts), the runs
lists and the run's pages never read a whole log: a service in this process, on a
store that counts the whole logs it is asked for, shows it.
"""

from __future__ import annotations

import contextlib
import html
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import expect
from starlette.websockets import WebSocketDisconnect

from reactor import MemorySignalStore, PostgresSignalStore, Signal, SQLiteSignalStore
from reactor._signals.patterns import compile_pattern
from reactor.service import ObjectStore, ReactionService, create_app
from tests.service.browsing import chromium, signed_in
from tests.service.paging import GRAPHS
from tests.service.server import DATABASES, Server, ok, serving, serving_on, wait_for

APP = "tests.service.paging:make_service"
LONG = 20_000
"""Ticks of the long run: some 20,000 signals."""


def problem(response: httpx2.Response, status: int) -> str:
    assert response.status_code == status, response.text
    detail: str = response.json()["detail"]
    return detail


def _recorded(db: str, run_id: str) -> list[dict[str, Any]]:
    """The run's whole log as the store loads it, each signal as the API writes it."""
    if db.startswith("sqlite:///"):
        store: SQLiteSignalStore | PostgresSignalStore = SQLiteSignalStore(
            db.removeprefix("sqlite:///"), readonly=True
        )
    else:
        store = PostgresSignalStore(db)
    try:
        return [json.loads(signal.to_json()) for signal in store.load(run_id).signals]
    finally:
        store.close()


def seqs(signals: list[dict[str, Any]]) -> list[int]:
    return [signal["seq"] for signal in signals]


@pytest.fixture(scope="module", params=DATABASES)
def long_run(request: pytest.FixtureRequest) -> Iterator[tuple[Server, str, list[dict[str, Any]]]]:
    """A server, a run of it with some 20,000 signals (ended), and its log as loaded."""
    with serving_on(request, APP) as server, server.client() as api:
        run_id = ok(api.post("/api/runs", json={"graph": "burst", "input": LONG}), 202)["run_id"]
        wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["info"]["complete"], timeout=300)
        yield server, run_id, _recorded(server.db, run_id)


@pytest.fixture
def api(long_run: tuple[Server, str, Any]) -> Iterator[httpx2.Client]:
    with long_run[0].client() as client:
        yield client


def test_a_long_runs_answer_is_small_and_ends_with_its_last_200_signals(
    long_run: tuple[Server, str, list[dict[str, Any]]], api: httpx2.Client
) -> None:
    _, run_id, recorded = long_run
    answer = api.get(f"/api/runs/{run_id}")
    assert len(answer.content) <= 200_000, len(answer.content)
    run = ok(answer)
    assert run["signals"] == recorded[-200:]
    assert run["before"] == recorded[-200]["seq"]
    assert (run["info"]["signals"], run["info"]["last_seq"]) == (len(recorded), recorded[-1]["seq"])
    assert run["state"] == {"emitted": LONG}
    assert (run["prompts"], run["timers"]) == ([], [])
    earlier = ok(api.get(f"/api/runs/{run_id}/signals", params={"before": run["before"]}))
    assert earlier["signals"] == recorded[-400:-200]
    assert (earlier["before"], earlier["after"]) == (recorded[-400]["seq"], recorded[-201]["seq"])


def test_paging_forward_and_back_gives_every_signal_once_in_order(
    long_run: tuple[Server, str, list[dict[str, Any]]], api: httpx2.Client
) -> None:
    _, run_id, recorded = long_run
    path = f"/api/runs/{run_id}/signals"
    forward: list[dict[str, Any]] = []
    after = 0
    while True:
        page = ok(api.get(path, params={"after": after, "limit": 1000}))
        forward += page["signals"]
        if len(page["signals"]) < 1000:
            break
        after = page["after"]
    assert seqs(forward) == seqs(recorded)
    assert forward == recorded
    backward = ok(api.get(f"/api/runs/{run_id}"))
    pages = [backward["signals"]]
    while backward["before"] is not None:
        backward = ok(api.get(path, params={"before": backward["before"], "limit": 777}))
        pages.append(backward["signals"])
    assert seqs([s for page in reversed(pages) for s in page]) == seqs(recorded)


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(["tick"], id="a-name"),
        pytest.param(["agent:*:completed,harness:**"], id="comma-separated-patterns"),
        pytest.param(["harness:start", "harness:end"], id="repeated"),
    ],
)
def test_names_choose_the_signals_of_a_page(
    long_run: tuple[Server, str, list[dict[str, Any]]], api: httpx2.Client, names: list[str]
) -> None:
    _, run_id, recorded = long_run
    patterns = [compile_pattern(p) for given in names for p in given.split(",")]
    wanted = [s for s in recorded if any(match(s["name"]) for match in patterns)]
    params = [("names", given) for given in names]
    first = ok(api.get(f"/api/runs/{run_id}/signals", params=[*params, ("limit", "500")]))
    assert first["signals"] == wanted[:500]
    last = ok(api.get(f"/api/runs/{run_id}/signals", params=[*params, ("before", "999999")]))
    assert last["signals"] == wanted[-200:]


MORE = "Input should be greater than or equal to"


@pytest.mark.parametrize(
    ("params", "said"),
    [
        pytest.param({"limit": 1001}, "limit: Input should be less than or equal to 1000",
                     id="1001"),
        pytest.param({"limit": 0}, f"limit: {MORE} 1", id="0"),
        pytest.param({"after": -1}, f"after: {MORE} 0", id="after"),
        pytest.param({"before": "x"}, "before: Input should be a valid integer", id="before"),
        pytest.param({"after": 9, "before": 9}, "before (9) must be greater than after (9)",
                     id="empty"),
        pytest.param({"names": "tick,a::b"}, "names: Invalid pattern 'a::b'", id="pattern"),
    ],
)  # fmt: skip
def test_a_page_that_cannot_be_read_is_a_422_that_says_why(
    long_run: tuple[Server, str, Any], api: httpx2.Client, params: dict[str, Any], said: str
) -> None:
    detail = problem(api.get(f"/api/runs/{long_run[1]}/signals", params=params), 422)
    assert said in detail


def test_an_unknown_run_has_no_pages(api: httpx2.Client) -> None:
    assert "run_nope" in problem(api.get("/api/runs/run_nope/signals"), 404)
    assert "run_nope" in problem(api.get("/api/runs/run_nope"), 404)


# -- in this process: what the service asks of its store --------------------------------

TOKEN = "tok-paged-0123456789"
API = {"Authorization": f"Bearer {TOKEN}"}


class Counting(SQLiteSignalStore):
    """The service's SQLite store, noting each whole log it is asked for."""

    def __init__(self, path: Path, **options: Any) -> None:
        super().__init__(path, **options)
        self.loads: list[str] = []

    def load(self, run_id: str) -> Any:
        self.loads.append(run_id)
        return super().load(run_id)


class Lagging(MemorySignalStore):
    """A store whose writer is behind: what a run appends is readable after a flush only."""

    def __init__(self) -> None:
        super().__init__()
        self._unwritten: list[Signal] = []
        self._writing = threading.Lock()

    def append(self, signal: Signal) -> None:
        with self._writing:
            self._unwritten.append(signal)

    def flush(self) -> None:
        with self._writing:
            written, self._unwritten = self._unwritten, []
            for signal in written:
                super().append(signal)


def _client(folder: Path, record: Any) -> TestClient:
    service = ReactionService(
        objects=ObjectStore(f"sqlite:///{folder / 'app.db'}"), graphs=GRAPHS, record=record
    )
    return TestClient(
        create_app(service, tokens={TOKEN: ("alice", "admin")}), base_url="http://localhost"
    )


def _start(client: TestClient, graph: str, given: Any) -> str:
    started = client.post("/api/runs", json={"graph": graph, "input": given}, headers=API)
    run_id: str = ok(started, 202)["run_id"]
    return run_id


def _run(client: TestClient, run_id: str) -> Any:
    return ok(client.get(f"/api/runs/{run_id}", headers=API))


def _csrf(text: str) -> str:
    found = re.search(r'name="csrf" value="([^"]*)"', text)
    assert found is not None, text
    return found.group(1)


def _sign_in(client: TestClient) -> str:
    """Sign the client in to the web UI; the session's CSRF token."""
    form = client.get("/")
    signed = client.post(
        "/", data={"token": TOKEN, "csrf": _csrf(form.text)}, follow_redirects=False
    )
    assert signed.status_code == 303, signed.text
    return _csrf(client.get("/runs").text)


def test_commands_lists_and_pages_never_read_a_whole_log(tmp_path: Path) -> None:
    store = Counting(tmp_path / "app.db")
    try:
        with _client(tmp_path, store) as client:
            asking = _start(client, "approval", "v1")
            other = _start(client, "approval", "v2")
            waiting = _start(client, "relay", {"seconds": 30})
            napping = _start(client, "nap", {"seconds": 60})
            long = _start(client, "burst", 900)
            wait_for(lambda: _run(client, long)["info"]["complete"])
            (prompt,) = wait_for(lambda: _run(client, asking)["prompts"])
            (second,) = wait_for(lambda: _run(client, other)["prompts"])
            csrf = _sign_in(client)
            store.loads.clear()
            reply = f"/api/runs/{asking}/prompts/{prompt['prompt_id']}/reply"
            assert ok(client.post(reply, json={"answer": "yes"}, headers=API))["answer"] == "yes"
            assert problem(client.post(reply, json={"answer": "no"}, headers=API), 409)
            ok(client.post(f"/api/runs/{waiting}/signals", json={"name": "go"}, headers=API), 202)
            ok(client.post(f"/api/runs/{napping}/abort", headers=API))
            fork = client.post(f"/api/runs/{long}/fork", json={"at": 10**6}, headers=API)
            assert "fork it at one of them" in problem(fork, 422)
            listed = ok(client.get("/api/runs", headers=API))
            assert {asking, waiting, napping, long} <= {info["run_id"] for info in listed}
            ok(client.get(f"/api/runs/{long}/signals", params={"after": 100}, headers=API))
            form = {"csrf": csrf, "prompt_id": second["prompt_id"], "answer": "no"}
            for path, data in (
                (f"/runs/{other}/reply", form),
                (f"/runs/{waiting}/signals", {"csrf": csrf, "name": "go"}),
                (f"/runs/{waiting}/abort", {"csrf": csrf}),
            ):
                sent = client.post(path, data=data, follow_redirects=False)
                assert sent.status_code == 303, sent.text
            for path in (
                "/runs",
                "/runs/rows",
                f"/runs/{long}",
                f"/runs/{long}/details?at=7",
                f"/runs/{long}/signals?before=400",
                f"/runs/{long}/fork?at=7",
                f"/runs/{asking}",
                "/graphs/burst",
            ):
                assert client.get(path).status_code == 200, path
            assert store.loads == []
    finally:
        store.close()


def test_a_question_just_asked_is_shown_and_answered_while_the_writer_is_behind(
    tmp_path: Path,
) -> None:
    with _client(tmp_path, Lagging()) as client:
        shown = _start(client, "approval", "v1")
        (prompt,) = wait_for(lambda: _run(client, shown)["prompts"])
        assert (prompt["question"], prompt["choices"]) == ("Ship v1?", ["yes", "no"])
        answered = _start(client, "approval", "v2")
        ws = f"/api/runs/{answered}/ws"
        with client.websocket_connect(ws, headers={**API, "host": "localhost"}) as channel:
            while (message := channel.receive_json())["signal"]["name"] != "session:prompt":
                pass
            asked = message["signal"]["payload"]["prompt_id"]
            reply = f"/api/runs/{answered}/prompts/{asked}/reply"
            assert ok(client.post(reply, json={"answer": "no"}, headers=API))["answer"] == "no"
            names = []
            with contextlib.suppress(WebSocketDisconnect):  # closed after harness:end
                while True:
                    names.append(channel.receive_json()["signal"]["name"])
        assert names[-1] == "harness:end"
        assert _run(client, answered)["info"]["status"] == "completed"


def _shown_state(text: str) -> Any:
    found = re.search(r'<pre class="json">(.*?)</pre>', text, re.DOTALL)
    assert found is not None, text
    return json.loads(html.unescape(found.group(1)))


def test_the_state_at_any_signal_is_the_one_the_log_says(tmp_path: Path) -> None:
    store = SQLiteSignalStore(tmp_path / "app.db", snapshot_every=25)
    try:
        with _client(tmp_path, store) as client:
            run_id = _start(client, "counter", 60)
            wait_for(lambda: _run(client, run_id)["info"]["complete"])
            _sign_in(client)
            recording = store.load(run_id)
            names = [signal.name for signal in recording.signals]
            assert names.count("harness:snapshot") >= 5
            for seq in range(1, recording.signals[-1].seq + 1, 7):
                page = client.get(f"/runs/{run_id}/details", params={"at": seq})
                assert _shown_state(page.text) == recording.state_at(seq), seq
            fork = client.post(
                f"/api/runs/{run_id}/fork", json={"at": 100, "state": {"n": -1}}, headers=API
            )
            forked = ok(fork, 202)["run_id"]
            wait_for(lambda: _run(client, forked)["info"]["complete"])
            assert _run(client, forked)["info"]["forked_from"] == run_id
    finally:
        store.close()


def test_the_run_page_shows_the_tail_and_brings_earlier_signals_on_demand(
    tmp_path: Path,
) -> None:
    with serving(f"sqlite:///{tmp_path / 'app.db'}", tmp_path / "serve.log", app=APP) as server:
        with server.client() as api:
            run_id = ok(api.post("/api/runs", json={"graph": "burst", "input": 450}), 202)["run_id"]
            wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["info"]["complete"])
            last = ok(api.get(f"/api/runs/{run_id}"))["info"]["last_seq"]
        with chromium() as browser, signed_in(browser, server) as page:
            page.goto(f"/runs/{run_id}")
            items = page.locator("#timeline li")
            expect(items).to_have_count(200)
            expect(items.first).to_have_attribute("data-seq", str(last - 199))
            expect(items.last).to_contain_text("harness:end")
            expect(page.locator("#window")).to_contain_text(f"the last 200 of {last} signals")
            earlier = page.get_by_role("button", name="Show earlier signals")
            earlier.click()
            expect(items).to_have_count(400)
            expect(items.first).to_have_attribute("data-seq", str(last - 399))
            earlier.click()
            expect(items).to_have_count(last)
            expect(items.first).to_contain_text("harness:start")
            expect(earlier).to_be_hidden()
            seen = page.eval_on_selector_all(
                "#timeline li", "items => items.map(i => i.dataset.seq)"
            )
            assert seen == [str(seq) for seq in range(1, last + 1)]
