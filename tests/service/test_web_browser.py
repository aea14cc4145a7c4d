"""The web UI in a real browser: Playwright driving Debian's Chromium against ``reactor serve``."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.service.browsing import WAIT_MS, open_page, sign_in, signed_in, start
from tests.service.server import ALICE, BOB, DAN, Server, ok, serving, wait_for


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("web")
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "server.log") as running:
        yield running


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
    run_id = start(api, "relay", {"seconds": 120})  # or until its go
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


def test_a_sleeping_run_shows_its_timer_until_it_fires(page: Page, api: httpx2.Client) -> None:
    run_id = start(api, "sleeper", {"seconds": 3})
    page.goto(f"/runs/{run_id}")
    timer = page.locator("#timers li.timer")
    expect(timer).to_contain_text("sleeper sleeps until")
    expect(page.locator("#run-status")).to_have_text("waiting")
    expect(page.locator("#run-status")).to_have_text("completed", timeout=WAIT_MS * 2)
    expect(timer).to_have_count(0)


def test_reply_waits_for_a_choice_and_the_page_then_shows_who_answered(
    browser: Browser, server: Server, api: httpx2.Client
) -> None:
    run_id = start(api, "approval", "v3")
    with signed_in(browser, server, BOB) as page:
        page.goto(f"/runs/{run_id}")
        form = page.locator("form.prompt")
        expect(form).to_contain_text("Ship v3?")
        reply = form.get_by_role("button", name="Reply")
        expect(reply).to_be_disabled()
        for choice in ("yes", "no"):
            expect(form.get_by_label(choice)).not_to_be_checked()
        form.get_by_label("yes").check()
        expect(reply).to_be_enabled()
        reply.click()
        expect(page.get_by_role("status")).to_contain_text("Your answer was sent")
        expect(page.locator("#run-status")).to_have_text("completed")
        expect(page.locator("form.prompt")).to_have_count(0)
        answered = page.locator("#answered li")
        expect(answered).to_contain_text("Ship v3?")
        expect(answered).to_contain_text("yes")
        expect(answered).to_contain_text("answered by user:bob")
        signals = ok(api.get(f"/api/runs/{run_id}"))["signals"]
        (asked,) = [s["id"] for s in signals if s["name"] == "session:prompt"]
        under = page.locator(f'#tree details[data-id="{asked}"] > ul > li')
        expect(under).to_contain_text(["session:reply"])
    (answer,) = [s for s in signals if s["name"] == "session:reply"]
    assert (answer["payload"]["answer"], answer["source"]) == ("yes", "user:bob")


def test_a_run_forked_from_its_timeline_opens_a_new_run_that_names_its_source(
    page: Page, api: httpx2.Client
) -> None:
    run_id = start(api, "count", 41)
    wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["info"]["status"] == "completed")
    page.goto(f"/runs/{run_id}")
    first = page.locator("#timeline li").first
    expect(first).to_contain_text("harness:start")
    first.get_by_role("link", name="Fork from here").click()
    expect(page.get_by_role("heading", name=f"Fork run {run_id} at signal #1")).to_be_visible()
    state = page.get_by_label("State (JSON; edit the values the fork should start from)")
    expect(state).to_have_value("{}")
    state.fill('{"note": ')
    expect(page.locator("#fork-state-problem")).to_contain_text("Not JSON yet")
    page.get_by_role("button", name="Start the fork").click()  # the browser keeps it back
    expect(page.get_by_role("heading", name=f"Fork run {run_id} at signal #1")).to_be_visible()
    state.fill("[1, 2]")
    page.get_by_role("button", name="Start the fork").click()
    expect(page.get_by_role("alert")).to_contain_text("The state must be a JSON object")
    state.fill('{"note": "again"}')
    page.get_by_role("button", name="Start the fork").click()
    expect(page.get_by_role("status")).to_contain_text(f"forked from {run_id} at signal #1")
    assert run_id not in page.url
    source = page.locator("#forked-from")
    expect(source).to_contain_text(f"{run_id} at signal #1")
    expect(page.locator("#run-status")).to_have_text("completed")
    new_id = page.url.rsplit("/", 1)[1]
    fork = ok(api.get(f"/api/runs/{new_id}"))
    assert fork["info"]["forked_from"] == run_id
    assert fork["state"]["note"] == "again"
    source.get_by_role("link", name=run_id).click()
    expect(page.get_by_role("heading", name=f"Run {run_id}")).to_be_visible()


def test_the_runs_filters_narrow_the_list_and_stay_in_the_address(
    page: Page, api: httpx2.Client, server: Server
) -> None:
    mine = start(api, "nap", {"ticker": "AAPL", "seconds": 0})
    with server.client(BOB) as bobs_api:
        bobs = start(bobs_api, "nap", {"ticker": "NVDA", "seconds": 0})
    for run_id in (mine, bobs):
        wait_for(lambda run_id=run_id: ok(api.get(f"/api/runs/{run_id}"))["info"]["complete"])
    page.goto("/runs")
    expect(page.locator("tr", has=page.get_by_role("link", name=bobs))).to_contain_text(
        "ticker=NVDA"
    )
    expect(page.locator("tr", has=page.get_by_role("link", name=mine))).to_contain_text(
        "ticker=AAPL, seconds=0 by alice"
    )
    page.get_by_label("Graph").select_option("nap")
    page.get_by_label("Tag").fill("user=bob")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_role("link", name=mine)).to_have_count(0)
    expect(page.get_by_role("link", name=bobs)).to_be_visible()
    assert "graph=nap" in page.url
    assert "tag=user%3Dbob" in page.url
    page.goto("/runs?graph=nap&status=completed&tag=user=alice")
    expect(page.get_by_role("link", name=mine)).to_be_visible()
    expect(page.get_by_role("link", name=bobs)).to_have_count(0)
    expect(page.get_by_label("Tag")).to_have_value("user=alice")
    expect(page.get_by_label("Status")).to_have_value("completed")
    page.goto("/runs?graph=count")
    expect(page.get_by_role("link", name=mine)).to_have_count(0)


def test_a_suggestion_approved_with_the_button_changes_the_object(
    page: Page, api: httpx2.Client, server: Server
) -> None:
    with server.client(DAN) as dan:  # alice may not approve what her own change caused
        ada = ok(dan.post("/api/objects", json={"type": "Person", "data": {"name": "Ada"}}), 201)

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


def test_a_reaction_agent_shows_what_it_reacts_to_and_no_schedule(page: Page) -> None:
    page.goto("/agents")
    enrich = page.locator("#agent-enrich")
    filters = enrich.get_by_label("What enrich reacts to")
    expect(filters).to_contain_text("Person")
    expect(filters).to_contain_text("created")
    expect(enrich.get_by_label("Schedule (cron)")).to_have_count(0)
    expect(enrich.get_by_role("button", name="Run enrich now")).to_have_count(0)
    expect(page.locator("#agent-helper").get_by_label("Schedule (cron)")).to_be_visible()


def test_a_manual_agent_runs_from_the_agents_page(page: Page, api: httpx2.Client) -> None:
    page.goto("/agents")
    helper = page.locator("#agent-helper")
    helper.get_by_label("Input (JSON, optional)").fill('{"ticket": 7}')
    helper.get_by_role("button", name="Run helper now").click()
    page.wait_for_url("**/runs/run_*")
    run_id = page.url.rsplit("/", 1)[1]
    expect(page.get_by_role("status")).to_contain_text(f"Run {run_id} of agent helper")
    expect(page.locator("#run-status")).to_have_text("completed")
    info = ok(api.get(f"/api/runs/{run_id}"))["info"]
    assert (info["graph"], info["tags"]["trigger"], info["tags"]["user"]) == (
        "helper",
        "manual",
        "alice",
    )


def test_a_form_without_its_csrf_token_is_refused(page: Page, api: httpx2.Client) -> None:
    page.goto("/agents")
    csrf = page.locator("#agent-helper form.agent-form input[name=csrf]")
    csrf.evaluate("field => field.value = 'forged'")
    page.locator("#enabled-helper").uncheck()
    page.get_by_role("button", name="Save helper").click()
    expect(page.get_by_role("heading", name="Refused")).to_be_visible()
    assert ok(api.get("/api/agents/helper"))["enabled"] is True


@pytest.mark.parametrize(
    "path",
    [
        "/runs",
        "/run",
        "/graphs",
        "/graphs/relay",
        "/suggestions",
        "/agents",
        "/processing-log",
        "/workers",
    ],
)
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
