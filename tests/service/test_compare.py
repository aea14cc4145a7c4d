"""Two runs compared a page at a time: the divergence ``Recording.diff`` finds, bounded.

``compare_logs`` reads pages of both logs and stops at the first that differs; what it
reports is checked against the store's ``load`` of both runs and ``Recording.diff``.
In-process, on a store that counts the whole logs it is asked for, the comparison page
and its API never ask for one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from reactor import (
    AgentContext,
    MemorySignalStore,
    Reactive,
    ScriptedProvider,
    SQLiteSignalStore,
    agent,
    reactive,
)
from reactor.service import ObjectStore, ReactionService, create_app
from reactor.service._api.compare import compare_logs
from tests.service.evaluated import evaluated

PAGE = 7
"""A small page, so that a short run spans many."""


def ticker(ticks: int, odd: int | None = None) -> Reactive:
    """A graph that emits ``ticks`` ticks; the one numbered ``odd`` says so."""

    async def tick(ctx: AgentContext[Any]) -> None:
        for i in range(ticks):
            ctx.emit("tick", {"i": i, "odd": i == odd})

    return reactive({"ticker": agent(run=tick, emits=["tick"])}, name="ticker")


def recorded(store: MemorySignalStore, graph: Reactive, **options: Any) -> str:
    result = graph.run_sync(record=store, **options)
    assert result.status == "completed", result.error
    return result.run_id


def compared(store: MemorySignalStore, a: str, b: str, **options: Any) -> Any:
    return compare_logs(store, store.info(a), store.info(b), **options)


def as_diff_says(found: Any) -> Any:
    """What is compared of a divergence: everything but the signals' own identity."""
    if found is None:
        return None
    left = found.left.seq if found.left is not None else None
    right = found.right.seq if found.right is not None else None
    return (found.step, found.path, found.field, found.kind, found.agent, left, right)


@pytest.fixture
def store() -> MemorySignalStore:
    return MemorySignalStore(snapshot_every=10)  # snapshots in the logs, as in a long run


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param(0, id="first-page"),
        pytest.param(2, id="end-of-first-page"),
        pytest.param(3, id="start-of-second-page"),
        pytest.param(20, id="middle"),
        pytest.param(39, id="last-tick"),
    ],
)
def test_the_divergence_is_the_one_recording_diff_finds_in_whichever_page(
    store: MemorySignalStore, odd: int
) -> None:
    a, b = recorded(store, ticker(40)), recorded(store, ticker(40, odd))
    found, equal, complete = compared(store, a, b, page=PAGE)
    expected = store.load(a).diff(store.load(b))
    assert expected is not None
    assert found is not None
    assert as_diff_says(found) == as_diff_says(expected)
    assert found.path == ("harness:start", "agent:ticker:activated")  # read back past the pages
    assert found.field == "payload.odd"
    assert (equal, complete) == (expected.step, True)


def test_equal_logs_are_compared_to_their_ends(store: MemorySignalStore) -> None:
    a, b = recorded(store, ticker(40)), recorded(store, ticker(40))
    assert store.load(a).diff(store.load(b)) is None
    assert compared(store, a, b, page=PAGE) == (None, store.info(a).last_seq, True)


def test_a_run_that_goes_on_longer_parts_where_the_other_ends(store: MemorySignalStore) -> None:
    a, b = recorded(store, ticker(40)), recorded(store, ticker(45))
    found, equal, complete = compared(store, a, b, page=PAGE)
    expected = store.load(a).diff(store.load(b))
    assert as_diff_says(found) == as_diff_says(expected)
    assert found is not None
    assert (equal, complete) == (found.step, True)


def test_past_the_cap_only_the_first_signals_are_said_equal(store: MemorySignalStore) -> None:
    a, b = recorded(store, ticker(40)), recorded(store, ticker(40, odd=30))
    assert compared(store, a, b, page=PAGE, cap=20) == (None, 20, False)
    same = recorded(store, ticker(40))
    end = store.info(a).last_seq
    assert compared(store, a, same, page=PAGE, cap=end) == (None, end, True)


def test_a_different_answer_shows_both_answers_and_the_agent(store: MemorySignalStore) -> None:
    graph = reactive({"writer": agent(prompt="Write about {{ input }}.")}, name="writer")
    a = recorded(store, graph, input="tea", provider=ScriptedProvider({"writer": ["Tea is calm."]}))
    b = recorded(store, graph, input="tea", provider=ScriptedProvider({"writer": ["Tea is loud."]}))
    found, _, _ = compared(store, a, b, page=3)
    expected = store.load(a).diff(store.load(b))
    assert found is not None
    assert expected is not None
    assert as_diff_says(found) == as_diff_says(expected)
    assert (found.kind, found.agent) == ("answer", "writer")
    assert (found.left_text, found.right_text) == ("Tea is calm.", "Tea is loud.")


def test_a_different_request_is_named_by_its_hash(store: MemorySignalStore) -> None:
    provider = ScriptedProvider(default=lambda request: "ok")
    graph = reactive({"writer": agent(prompt="Write about {{ input }}.")}, name="writer")
    a = recorded(store, graph, input="tea", provider=provider)
    changed = reactive({"writer": agent(prompt="Tell me about {{ input }}.")}, name="writer")
    c = recorded(store, changed, input="tea", provider=provider)
    found, _, _ = compared(store, a, c)
    expected = store.load(a).diff(store.load(c))
    assert found is not None
    assert expected is not None
    assert (found.kind, found.agent) == ("prompt", "writer")
    assert (found.step, found.field) == (expected.step, expected.field)
    digests = [signal.payload["request_hash"] for signal in (found.left, found.right)]
    assert (found.left_text, found.right_text) == tuple(f"request {d}" for d in digests)


class Counting(SQLiteSignalStore):
    """A SQLite store noting each whole log it is asked for."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.loads: list[str] = []

    def load(self, run_id: str) -> Any:
        self.loads.append(run_id)
        return super().load(run_id)

    def load_tail(self, run_id: str) -> Any:
        self.loads.append(run_id)
        return super().load_tail(run_id)


TOKEN = "tok-compare-0123456789"


def test_the_comparison_page_and_its_api_never_read_a_whole_log(tmp_path: Path) -> None:
    store = Counting(tmp_path / "runs.db")
    try:
        runs = evaluated(store)
        recorded_run, new_run = runs.recorded["AAPL"], runs.new_run(runs.changed, "AAPL")
        service = ReactionService(
            objects=ObjectStore(f"sqlite:///{tmp_path / 'app.db'}"), record=store
        )
        app = create_app(service, tokens={TOKEN: ("alice", "admin")})
        with TestClient(app, base_url="http://localhost") as client:
            form = client.get("/")
            csrf = re.search(r'name="csrf" value="([^"]*)"', form.text)
            assert csrf is not None
            client.post("/", data={"token": TOKEN, "csrf": csrf.group(1)})
            store.loads.clear()
            page = client.get(f"/runs/{recorded_run}/compare/{new_run}")
            assert page.status_code == 200
            assert "payload.request_hash" in page.text
            assert client.get(f"/evals/{runs.changed.id}").status_code == 200
            api = client.get(
                f"/api/runs/{recorded_run}/compare/{new_run}",
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
            assert api.status_code == 200
            assert api.json()["divergence"]["kind"] == "prompt"
            assert store.loads == []
    finally:
        store.close()
