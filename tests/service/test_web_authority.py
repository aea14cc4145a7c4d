"""The web UI and authority, in Chromium: pages show a principal only the controls it may
use, refuse the forms it may not send (a 403 page), and show each decision's provenance
on the suggestion's page and its object's page.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.service.browsing import signed_in
from tests.service.server import ALICE, BOB, CAROL, DAN, Server, ok, serving, wait_for

APP = "tests.service.authorized:make_service"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("web-authority")
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "server.log", app=APP) as running:
        yield running


def _suggested(api: httpx2.Client, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Person made by dan, and the suggestion ``enrich`` makes about it."""
    person = ok(api.post("/api/objects", json={"type": "Person", "data": {"name": name}}), 201)

    def made() -> dict[str, Any] | None:
        pending = ok(api.get("/api/suggestions", params={"status": "pending"}))
        return next((s for s in pending if s["object_id"] == person["id"]), None)

    return person, wait_for(made, timeout=60)


def _csrf(page: Page) -> str:
    token = page.locator("input[name=csrf]").first.get_attribute("value")
    assert token
    return token


def test_a_viewer_sees_no_controls_and_its_forms_are_refused(
    browser: Browser, server: Server
) -> None:
    with server.client(DAN) as dan:
        _, suggestion = _suggested(dan, "Vera Viewer")
        run_id = ok(dan.post("/api/runs", json={"graph": "approval", "input": "v2"}), 202)["run_id"]
        wait_for(lambda: ok(dan.get(f"/api/runs/{run_id}"))["prompts"], timeout=60)
    with signed_in(browser, server, CAROL) as page:
        expect(page.locator("header")).to_contain_text("Signed in as carol (viewer)")
        page.goto(f"/suggestions/{suggestion['id']}")
        expect(page.get_by_role("heading", name=re.compile("enrich suggests"))).to_be_visible()
        expect(page.get_by_role("button", name="Approve")).to_have_count(0)
        expect(page.get_by_role("button", name="Reject")).to_have_count(0)
        expect(page.get_by_text("You may not decide on this suggestion")).to_be_visible()
        page.goto(f"/runs/{run_id}")
        expect(page.get_by_role("heading", name=re.compile(run_id))).to_be_visible()
        expect(page.get_by_role("button", name="Abort the run")).to_have_count(0)
        expect(page.get_by_role("button", name="Reply")).to_have_count(0)
        page.goto("/agents")
        expect(page.get_by_role("button", name=re.compile("^Save"))).to_have_count(0)
        csrf = _csrf(page)
        refused = page.request.post(f"/runs/{run_id}/abort", form={"csrf": csrf, "reason": "x"})
        assert refused.status == 403
        assert "needs the operator role, and user:carol holds viewer" in refused.text()
        approve = page.request.post(f"/suggestions/{suggestion['id']}/approve", form={"csrf": csrf})
        assert approve.status == 403
        assert "needs the approver role (or the admin role)" in approve.text()
    with server.client(ALICE) as alice:
        still = ok(alice.get(f"/api/suggestions/{suggestion['id']}"))
        assert (still["status"], still["decisions"]) == ("pending", [])
        assert ok(alice.get(f"/api/runs/{run_id}"))["info"]["status"] == "waiting"


def test_an_operator_drives_runs_but_does_not_decide(browser: Browser, server: Server) -> None:
    with server.client(ALICE) as alice:
        _, suggestion = _suggested(alice, "Otto Operator")
    with signed_in(browser, server, DAN) as page:
        page.goto("/suggestions")
        card = page.locator("article", has=page.get_by_text(suggestion["id"]))
        expect(card).to_contain_text("set employer")
        expect(card.get_by_role("button", name="Approve")).to_have_count(0)
        page.goto("/graphs/relay")
        expect(page.get_by_role("button", name="Start a run")).to_be_visible()


def test_a_decision_and_its_provenance_are_on_the_suggestion_and_object_pages(
    browser: Browser, server: Server
) -> None:
    with server.client(DAN) as dan:
        person, suggestion = _suggested(dan, "Ada Pages")
    with signed_in(browser, server, BOB) as page:
        page.goto(f"/suggestions/{suggestion['id']}")
        summary = page.locator("#suggestion-summary")
        expect(summary).to_contain_text("agent enrich, run")
        expect(summary).to_contain_text(suggestion["run_id"])
        expect(summary).to_contain_text("user:dan")
        edit = page.get_by_label(re.compile("Approve with these changes instead"))
        edited = f'[{{"op": "update", "id": "{person["id"]}", "data": {{"employer": "Initech"}}}}]'
        edit.fill(edited)
        page.get_by_label("Why change them").fill("Initech, as she told us")
        page.get_by_role("button", name="Approve with these changes").click()
        expect(page.get_by_role("status")).to_contain_text("approved and applied")
        decisions = page.locator("#decisions")
        expect(decisions).to_contain_text("modify")
        expect(decisions).to_contain_text("applied")
        expect(decisions).to_contain_text("user:bob")
        expect(decisions).to_contain_text("approver+operator, token")
        expect(decisions).to_contain_text("Initech, as she told us")
        detail = ok(httpx2.get(f"{server.url}/api/suggestions/{suggestion['id']}",
                               headers={"Authorization": f"Bearer {BOB}"}))  # fmt: skip
        (decision,) = detail["decisions"]
        expect(decisions.locator("code.digest")).to_have_attribute(
            "title", decision["changes_sha256"]
        )
        page.get_by_role("link", name=person["id"]).first.click()
        on_object = page.locator("#object-decisions")
        expect(on_object).to_contain_text("modify")
        expect(on_object).to_contain_text("user:bob")
        expect(on_object).to_contain_text(suggestion["id"])
        expect(on_object.locator("code.digest")).to_have_attribute(
            "title", decision["changes_sha256"]
        )
        expect(page.locator("#data")).to_contain_text("Initech")
