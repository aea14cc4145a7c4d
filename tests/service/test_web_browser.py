"""The web UI in a real browser: Playwright driving Debian's Chromium against ``reactor serve``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.service.browser import CHROMIUM
from tests.service.server import ALICE, Server, serving, wait_for

WAIT_MS = 15_000
"""Every wait of the browser is bounded: a step that does not happen fails the test."""

expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("web")
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox"], timeout=WAIT_MS * 2
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def api(server: Server) -> Iterator[httpx2.Client]:
    with server.client() as client:
        yield client


def open_page(browser: Browser, server: Server, width: int = 1280) -> Page:
    context = browser.new_context(base_url=server.url, viewport={"width": width, "height": 900})
    context.set_default_timeout(WAIT_MS)
    return context.new_page()


def sign_in(page: Page, token: str = ALICE) -> None:
    page.goto("/")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()


@pytest.fixture
def page(browser: Browser, server: Server) -> Iterator[Page]:
    """A signed-in page of its own browser context (its own cookies)."""
    opened = open_page(browser, server)
    sign_in(opened)
    try:
        yield opened
    finally:
        opened.context.close()


def ok(response: httpx2.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def start(api: httpx2.Client, graph: str, given: Any = None) -> str:
    run_id: str = ok(api.post("/api/runs", json={"graph": graph, "input": given}), 202)["run_id"]
    return run_id


def test_pages_need_a_sign_in_and_a_token_signs_in_with_the_keyboard(
    browser: Browser, server: Server
) -> None:
    page = open_page(browser, server)
    try:
        page.goto("/runs")
        assert page.url == f"{server.url}/"
        expect(page.get_by_role("navigation")).to_have_count(0)
        page.get_by_label("Token").fill("not-a-token")
        page.keyboard.press("Enter")
        expect(page.get_by_role("alert")).to_contain_text("not valid")
        page.goto("/agents")
        assert page.url == f"{server.url}/"
        expect(page.get_by_label("Token")).to_be_focused()
        page.keyboard.type(ALICE)
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Runs")).to_be_visible()
        expect(page.get_by_text("Signed in as alice")).to_be_visible()
        cookie = next(c for c in page.context.cookies() if c["name"] == "reactor_session")
        assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
        assert ALICE not in cookie["value"]
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_label("Token")).to_be_visible()
        page.goto("/suggestions")
        assert page.url == f"{server.url}/"
    finally:
        page.context.close()


def test_a_run_started_through_the_api_is_listed_live_and_its_page_shows_its_signals(
    page: Page, api: httpx2.Client
) -> None:
    page.goto("/runs")
    run_id = start(api, "count", 41)
    link = page.get_by_role("link", name=run_id)
    expect(link).to_be_visible()  # the list refreshed itself: no reload
    row = page.locator("tr", has=link)
    expect(row).to_contain_text("completed")
    expect(row).to_contain_text("count")
    page.get_by_label("Status").select_option("completed")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("link", name=run_id)).to_be_visible()
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("link", name=run_id)).to_have_count(0)
    page.goto("/runs")
    page.get_by_role("link", name=run_id).click()
    assert page.url.endswith(f"/runs/{run_id}")
    timeline = page.locator("#timeline")
    expect(timeline.locator("li").first).to_contain_text("harness:start")
    expect(timeline.locator("li").last).to_contain_text("harness:end")
    expect(page.locator("#metrics")).to_contain_text("count")
    first = page.locator("#tree details").first
    expect(first).to_contain_text("harness:start")
    first.locator("summary").first.focus()
    page.keyboard.press("Enter")  # the causal tree folds with the keyboard
    expect(first).not_to_have_attribute("open", "")
    page.get_by_label("Signal number").fill("1")
    page.get_by_role("button", name="Show state").click()
    expect(page.get_by_role("heading", name="State after signal #1")).to_be_visible()
    expect(page.locator("#state pre")).to_have_text("{}")


def test_a_run_fills_in_while_its_page_is_open(page: Page, api: httpx2.Client) -> None:
    run_id = start(api, "relay", {"seconds": 4})
    page.goto(f"/runs/{run_id}")
    expect(page.locator("#run-status")).to_have_text("running")
    page.evaluate("window.stillTheSamePage = true")
    ok(api.post(f"/api/runs/{run_id}/signals", json={"name": "go", "payload": {"n": 7}}), 202)
    timeline = page.locator("#timeline")
    expect(timeline).to_contain_text("echoed")
    expect(timeline.locator("li").last).to_contain_text("harness:end", timeout=WAIT_MS * 2)
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("#metrics")).to_contain_text("echo")
    assert page.evaluate("window.stillTheSamePage") is True


def test_a_prompt_answered_through_the_form_lets_the_run_complete(
    page: Page, api: httpx2.Client
) -> None:
    run_id = start(api, "approval", "v3")
    page.goto(f"/runs/{run_id}")
    form = page.locator("form.prompt")
    expect(form).to_contain_text("Ship v3?")
    form.get_by_label("Answer").select_option("yes")
    form.get_by_role("button", name="Reply").click()
    expect(page.get_by_role("status")).to_contain_text("Your answer was sent")
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("form.prompt")).to_have_count(0)
    signals = ok(api.get(f"/api/runs/{run_id}"))["signals"]
    (answer,) = [s for s in signals if s["name"] == "session:reply"]
    assert (answer["payload"]["answer"], answer["source"]) == ("yes", "user:alice")


def test_a_suggestion_approved_with_the_button_changes_the_object(
    page: Page, api: httpx2.Client
) -> None:
    ada = ok(api.post("/api/objects", json={"type": "Person", "data": {"name": "Ada"}}), 201)

    def suggested() -> list[Any]:
        pending = ok(api.get("/api/suggestions", params={"status": "pending"}))
        return [s for s in pending if s["object_id"] == ada["id"]]

    (suggestion,) = wait_for(suggested)
    page.goto("/suggestions")
    card = page.locator("article", has=page.get_by_text(suggestion["id"]))
    expect(card).to_contain_text("Their email is at Acme.")
    expect(card.locator("ins")).to_contain_text(['name: "Acme"', 'employer: "Acme"'])
    card.get_by_role("button", name="Approve").click()
    expect(page.get_by_role("status")).to_contain_text("approved and applied")
    changed = ok(api.get(f"/api/objects/{ada['id']}"))
    assert (changed["version"], changed["data"]["employer"]) == (2, "Acme")
    assert changed["actor"] == {"type": "agent", "id": "enrich"}


def test_an_agents_schedule_edited_on_the_page_moves_its_next_run(
    page: Page, api: httpx2.Client
) -> None:
    definition = {
        "name": "nightly",
        "prompt": "Sum up the day.",
        "trigger_type": "cron",
        "cron_schedule": "0 3 * * *",
    }
    before = ok(api.post("/api/agents", json=definition), 201)["next_run_at"]
    assert datetime.fromisoformat(before).strftime("%H:%M") == "03:00"
    page.goto("/agents")
    page.locator("#agent-nightly").get_by_label("Schedule (cron)").fill("30 5 * * *")
    page.get_by_role("button", name="Save nightly").click()
    expect(page.get_by_role("status")).to_contain_text("Agent nightly was saved")
    after = ok(api.get("/api/agents/nightly"))["next_run_at"]
    assert datetime.fromisoformat(after).strftime("%H:%M") == "05:30"
    expect(page.locator("#agent-nightly .next-run")).to_contain_text("05:30:00")
    page.locator("#enabled-nightly").uncheck()
    page.get_by_role("button", name="Save nightly").click()
    expect(page.get_by_role("status")).to_contain_text("Agent nightly was saved")
    assert ok(api.get("/api/agents/nightly"))["next_run_at"] is None


def test_a_form_without_its_csrf_token_is_refused(page: Page, api: httpx2.Client) -> None:
    page.goto("/agents")
    page.locator("#agent-helper input[name=csrf]").evaluate("field => field.value = 'forged'")
    page.locator("#enabled-helper").uncheck()
    page.get_by_role("button", name="Save helper").click()
    expect(page.get_by_role("heading", name="Refused")).to_be_visible()
    assert ok(api.get("/api/agents/helper"))["enabled"] is True


@pytest.mark.parametrize("path", ["/runs", "/run", "/suggestions", "/agents", "/processing-log"])
def test_pages_fit_a_375_pixel_wide_screen(
    browser: Browser, server: Server, api: httpx2.Client, path: str
) -> None:
    if path == "/run":
        path = f"/runs/{start(api, 'count', 1)}"
        wait_for(lambda: ok(api.get(path.replace("/runs", "/api/runs")))["info"]["complete"])
    page = open_page(browser, server, width=375)
    try:
        sign_in(page)
        page.goto(path)
        expect(page.locator("h1")).to_be_visible()
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, f"{path} is {overflow} px wider than the screen"
    finally:
        page.context.close()
