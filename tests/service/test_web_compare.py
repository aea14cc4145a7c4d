"""Two runs side by side, and an evaluation's cases, against a real ``reactor serve``.

The server's SQLite file holds the desk's recorded runs and two evaluations of them
(:mod:`tests.service.evaluated`): one unchanged (every case the same), one with a
pessimist's prompt (AAPL's and NVDA's trends and decisions flip). The pages are read
over HTTP, and in Debian's Chromium through Playwright.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Page, expect

from reactor import SQLiteSignalStore
from tests.service.evaluated import Evaluated, evaluated
from tests.service.server import ALICE, Server, serving


@pytest.fixture(scope="module")
def runs_and_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Evaluated, Server]]:
    """The desk's runs and evaluations, recorded in the file a server then serves."""
    folder = tmp_path_factory.mktemp("compare")
    store = SQLiteSignalStore(folder / "app.db")
    try:
        runs = evaluated(store)
    finally:
        store.close()
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "server.log") as server:
        yield runs, server


@pytest.fixture(scope="module")
def runs(runs_and_server: tuple[Evaluated, Server]) -> Evaluated:
    return runs_and_server[0]


@pytest.fixture(scope="module")
def server(runs_and_server: tuple[Evaluated, Server]) -> Server:
    return runs_and_server[1]


@pytest.fixture
def visitor(server: Server) -> Iterator[httpx2.Client]:
    """A browser-like client, signed in to the web UI."""
    with server.client(None) as client:
        form = client.get("/")
        signed = client.post("/", data={"token": ALICE, "csrf": _csrf(form.text)})
        assert signed.status_code == 303, signed.text
        yield client


def _csrf(text: str) -> str:
    found = re.search(r'name="csrf" value="([^"]*)"', text)
    assert found is not None, text
    return found.group(1)


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def rows(page: str, table_id: str) -> list[list[str]]:
    """The text of each cell of each row of the table ``table_id`` (its header's too)."""
    found = re.search(rf'<table[^>]*id="{table_id}"[^>]*>(.*?)</table>', page, re.DOTALL)
    assert found is not None, page
    return [
        [_text(cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.DOTALL)]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.DOTALL)
    ]


def shown(client: httpx2.Client, path: str, status: int = 200) -> str:
    response = client.get(path)
    assert response.status_code == status, response.text
    return response.text


def info(api: httpx2.Client, run_id: str) -> Any:
    response = api.get(f"/api/runs/{run_id}")
    assert response.status_code == 200, response.text
    return response.json()["info"]


def test_a_comparison_shows_the_state_diff_the_divergence_and_what_each_run_spent(
    runs: Evaluated, visitor: httpx2.Client, api: httpx2.Client
) -> None:
    old, new = runs.recorded["AAPL"], runs.new_run(runs.changed, "AAPL")
    page = shown(visitor, f"/runs/{old}/compare/{new}")
    assert rows(page, "state-diff") == [
        ["Key", "Recorded run", "New run"],
        ["trend", '"up"', '"down"'],
        ["decision", '"buy"', '"hold"'],
    ]
    assert re.search(r'<details id="state-unchanged">\s*<summary>1 key unchanged</summary>', page)
    assert 'The logs part where agent <strong class="agent">analyst</strong> asks' in page
    verdict = _text(page.split('id="verdict"', 1)[1].split("</p>", 1)[0])
    assert "The first 2 signals are equal." in verdict
    signals = rows(page, "signals")
    assert [cell.split(" {")[0] for cell in signals[1]] == [
        "#3 provider:start from analyst",
        "#3 provider:start from analyst",
    ]
    table = {row[0]: row[1:] for row in rows(page, "runs")}
    for column, run_id in enumerate((old, new)):
        row = info(api, run_id)
        tokens = row["input_tokens"] + row["output_tokens"]
        assert table["Tokens"][column].startswith(f"{tokens:,} (")
        assert table["Cost"][column] == f"${row['cost_usd']:.4f}"
        assert table["Status"][column].startswith("completed")
        assert table["Input"][column] == '{ "symbol": "AAPL" }'
        assert f'href="/runs/{run_id}"' in page
    assert table["Cost"][0] != table["Cost"][1]  # the pessimist's prompt is longer
    assert f'href="/evals/{runs.changed.id}"' in page


def test_identical_runs_say_same(runs: Evaluated, visitor: httpx2.Client) -> None:
    old, new = runs.recorded["MSFT"], runs.new_run(runs.same, "MSFT")
    page = shown(visitor, f"/runs/{old}/compare/{new}")
    assert "Same: the two logs are equal, all 12 signals" in page
    assert '<p id="state-same">The final states are the same.</p>' in page
    assert 'id="state-diff"' not in page
    assert "3 keys unchanged" in page


def test_a_comparison_of_an_unknown_run_is_not_found(
    runs: Evaluated, visitor: httpx2.Client, api: httpx2.Client
) -> None:
    old = runs.recorded["AAPL"]
    for path in (f"/runs/{old}/compare/run_nope", f"/runs/run_nope/compare/{old}"):
        assert "There is no run run_nope." in _text(shown(visitor, path, 404))
        answer = api.get(f"/api/{path.lstrip('/')}")
        assert answer.status_code == 404, answer.text
    assert "There is no evaluation eval_nope." in _text(shown(visitor, "/evals/eval_nope", 404))


def test_the_api_answers_the_same_comparison(runs: Evaluated, api: httpx2.Client) -> None:
    old, new = runs.recorded["NVDA"], runs.new_run(runs.changed, "NVDA")
    answer = api.get(f"/api/runs/{old}/compare/{new}")
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["state_diff"] == {
        "trend": {"old": "up", "new": "down"},
        "decision": {"old": "buy", "new": "hold"},
    }
    assert data["unchanged"] == ["desk"]
    assert (data["same"], data["complete"], data["equal"]) == (False, True, 2)
    divergence = data["divergence"]
    assert (divergence["kind"], divergence["agent"], divergence["field"]) == (
        "prompt",
        "analyst",
        "payload.request_hash",
    )
    assert (divergence["left_seq"], divergence["right_seq"]) == (3, 3)
    assert divergence["path"] == ["harness:start", "agent:analyst:activated"]
    assert data["left"]["input"] == data["right"]["input"] == {"symbol": "NVDA"}
    assert data["right"]["info"]["tags"] == {"eval": runs.changed.id, "eval_of": old}
    same = api.get(f"/api/runs/{old}/compare/{runs.new_run(runs.same, 'NVDA')}").json()
    assert (same["same"], same["divergence"], same["state_diff"]) == (True, None, {})


def test_an_evaluation_lists_its_cases_each_with_its_comparison(
    runs: Evaluated, visitor: httpx2.Client
) -> None:
    page = shown(visitor, f"/evals/{runs.changed.id}")
    cases = rows(page, "cases")
    assert cases[0] == ["Recorded run", "New run", "Status", "Tokens", "Cost", "Compare"]
    expected = {(old, runs.new_run(runs.changed, symbol)) for symbol, old in runs.recorded.items()}
    assert {(row[0], row[1]) for row in cases[1:]} == expected
    assert {row[2] for row in cases[1:]} == {"completed"}
    for old, new in expected:
        assert f'href="/runs/{old}/compare/{new}"' in page
        assert f'href="/runs/{old}"' in page
        assert f'href="/runs/{new}"' in page


def test_a_case_links_to_its_comparison_and_the_runs_list_to_its_evaluation(
    runs: Evaluated, visitor: httpx2.Client
) -> None:
    old, new = runs.recorded["AAPL"], runs.new_run(runs.changed, "AAPL")
    page = shown(visitor, f"/runs/{new}")
    link = f'<a href="/runs/{old}/compare/{new}">Compare with the recorded run <code>{old}</code>'
    assert link in page
    assert "Compare with the recorded run" not in shown(visitor, f"/runs/{old}")
    listed = shown(visitor, "/runs/rows")
    assert f'case of evaluation <a href="/evals/{runs.changed.id}">' in listed
    assert f'case of evaluation <a href="/evals/{runs.same.id}">' in listed


def test_an_evaluation_s_case_opens_its_comparison_in_a_browser(
    runs: Evaluated, page: Page
) -> None:
    old, new = runs.recorded["AAPL"], runs.new_run(runs.changed, "AAPL")
    page.goto(f"/evals/{runs.changed.id}")
    expect(page.get_by_role("heading", name=f"Evaluation {runs.changed.id}")).to_be_visible()
    case = page.locator("#cases tr", has=page.get_by_role("link", name=old, exact=True))
    case.get_by_role("link", name=f"Compare {new} with the recorded run {old}").click()
    expect(page).to_have_url(re.compile(f"/runs/{old}/compare/{new}$"))
    diff = page.locator("#state-diff")
    expect(diff.get_by_role("row", name=re.compile("decision"))).to_contain_text('"hold"')
    expect(diff.get_by_role("row", name=re.compile("trend"))).to_contain_text('"down"')
    expect(page.locator("#verdict")).to_contain_text("agent analyst asks its model differently")
    unchanged = page.locator("#state-unchanged")
    expect(unchanged.get_by_role("row", name=re.compile("desk"))).to_be_hidden()
    unchanged.get_by_text("1 key unchanged").click()
    expect(unchanged.get_by_role("row", name=re.compile("desk"))).to_contain_text('"fx"')
    page.locator("#runs thead").get_by_role("link", name=new).click()
    expect(page.get_by_role("heading", name=f"Run {new}")).to_be_visible()
    page.get_by_role("link", name=f"Compare with the recorded run {old}").click()
    expect(page).to_have_url(re.compile(f"/runs/{old}/compare/{new}$"))
