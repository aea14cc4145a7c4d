"""The graphs in the web UI, in a real browser: drawn, started, and followed while they run."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from playwright.sync_api import Page, expect

from tests.service.browsing import WAIT_MS, start
from tests.service.server import Server, ok, serving


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("web-graphs")
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "server.log") as running:
        yield running


def test_the_graph_page_draws_a_node_per_agent_and_the_signals_between_them(page: Page) -> None:
    page.goto("/graphs")
    row = page.locator("tr", has=page.get_by_role("link", name="relay", exact=True))
    expect(row).to_contain_text("pause, echo")
    row.get_by_role("link", name="relay", exact=True).click()
    expect(page.get_by_role("heading", name="Graph relay")).to_be_visible()
    drawing = page.locator("svg.graph")
    expect(drawing).to_have_attribute("role", "img")
    agents = drawing.locator("g.box.agent")
    expect(agents).to_have_count(2)
    assert sorted(agents.evaluate_all("boxes => boxes.map(b => b.dataset.agent)")) == [
        "echo",
        "pause",
    ]
    expect(drawing.locator('g.arrow[data-source="outside"][data-target="echo"]')).to_contain_text(
        "go"
    )
    expect(drawing.locator('g.arrow[data-source="start"][data-target="pause"]')).to_contain_text(
        "harness:start"
    )
    page.get_by_text("The graph as text").click()
    expect(page.locator(".graph-text")).to_contain_text("outside → echo: go")


def test_a_run_started_from_its_graphs_page_opens_and_completes(
    page: Page, api: httpx2.Client
) -> None:
    page.goto("/graphs/count")
    field = page.get_by_label("Input (JSON)")
    field.fill('{"n": ')
    expect(page.locator("#run-input-problem")).to_contain_text("Not JSON yet")
    page.get_by_role("button", name="Start a run").click()
    assert page.url.endswith("/graphs/count")  # the browser keeps the form: nothing starts
    field.fill("41")
    expect(page.locator("#run-input-problem")).to_be_empty()
    page.get_by_role("button", name="Start a run").click()
    page.wait_for_url("**/runs/run_*")
    run_id = page.url.rsplit("/", 1)[1]
    expect(page.get_by_role("status")).to_contain_text(f"Run {run_id} of count was started.")
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("#timeline li").last).to_contain_text("harness:end")
    recorded = ok(api.get(f"/api/runs/{run_id}"))
    assert recorded["state"] == {}
    (begin,) = [s for s in recorded["signals"] if s["name"] == "harness:start"]
    assert begin["payload"]["input"] == 41
    assert recorded["info"]["tags"]["user"] == "alice"


def test_the_run_page_highlights_the_agents_active_now(page: Page, api: httpx2.Client) -> None:
    run_id = start(api, "relay", {"seconds": 3})
    page.goto(f"/runs/{run_id}")
    drawing = page.locator("#graph svg.graph")
    expect(drawing.locator('g.box.active[data-agent="pause"]')).to_be_visible()
    expect(drawing.locator('g.box.active[data-agent="echo"]')).to_have_count(0)
    expect(page.locator("#graph h2")).to_contain_text("active now: pause")
    expect(page.locator("#run-status")).to_have_text("completed", timeout=WAIT_MS * 2)
    expect(drawing.locator("g.box")).to_have_count(4)
    expect(drawing.locator("g.box.active")).to_have_count(0)
