"""The objects pages against a real ``reactor serve``: over HTTP, and in Chromium.

The server serves the desk of :mod:`tests.service.quotes`: quotes, ``flag`` (a
reaction whose guard lets only dear quotes run), ``review`` (suggests a note on very
dear ones), ``tidy`` (a manual agent) and the ``census`` graph.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Browser, expect

from tests.service.browsing import signed_in
from tests.service.server import ALICE, BOB, Server, ok, serving, wait_for

APP = "tests.service.quotes:make_service"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("objects")
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "server.log", app=APP) as running:
        yield running


@pytest.fixture
def visitor(server: Server) -> Iterator[httpx2.Client]:
    """A browser-like client, signed in to the web UI as alice."""
    with server.client(None) as client:
        form = client.get("/")
        csrf = re.search(r'name="csrf" value="([^"]*)"', form.text)
        assert csrf is not None, form.text
        signed = client.post("/", data={"token": ALICE, "csrf": csrf.group(1)})
        assert signed.status_code == 303, signed.text
        yield client


def quote(api: httpx2.Client, symbol: str, price: float) -> dict[str, Any]:
    """Create a quote as the API's user; it once its reactions have settled."""
    made: dict[str, Any] = ok(
        api.post(
            "/api/objects", json={"type": "Quote", "data": {"symbol": symbol, "price": price}}
        ),
        201,
    )
    settled(api, made["id"])
    return made


def settled(api: httpx2.Client, object_id: str, version: int = 1) -> list[dict[str, Any]]:
    """The object's processing-log entries, once ``version``'s are logged and none is busy.

    A change's entries are logged just after it is stored, not before its request returns.
    """

    def done() -> list[dict[str, Any]] | None:
        found = ok(api.get("/api/processing-log", params={"object_id": object_id}))
        busy = any(entry["status"] in ("pending", "processing") for entry in found)
        logged = any(entry["object_version"] >= version for entry in found)
        return None if busy or not logged else found

    entries: list[dict[str, Any]] = wait_for(done, timeout=60)
    return entries


def entry(entries: list[dict[str, Any]], agent: str, version: int) -> dict[str, Any]:
    (found,) = [e for e in entries if e["agent"] == agent and e["object_version"] == version]
    return found


def text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def rows(page: str, table_id: str) -> list[str]:
    """The text of each body row of the table ``table_id`` (or of the tbody of that id)."""
    found = re.search(rf'<(table|tbody)[^>]*id="{table_id}"[^>]*>(.*?)</\1>', page, re.DOTALL)
    assert found is not None, page
    body = found.group(2).split("<tbody>", 1)[-1]
    return [text(row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.DOTALL)]


def shown(client: httpx2.Client, path: str, code: int = 200, **params: Any) -> str:
    response = client.get(path, params=params or None)
    assert response.status_code == code, response.text
    return response.text


def runs_of(api: httpx2.Client, tag: str) -> list[dict[str, Any]]:
    found = ok(api.get("/api/runs", params={"tag": tag}))
    return list(found)


def test_a_reaction_its_guard_turns_down_is_skipped_and_records_no_run(
    api: httpx2.Client, visitor: httpx2.Client
) -> None:
    cheap = quote(api, "AAPL", 50)
    entries = settled(api, cheap["id"])
    skipped = entry(entries, "flag", 1)
    assert (skipped["status"], skipped["run_id"]) == ("skipped", None)
    assert "when='object.data.price > 100 and not object.data.flagged'" in skipped["error"]
    assert entry(entries, "review", 1)["status"] == "skipped"
    assert runs_of(api, f"object={cheap['id']}") == []
    page = shown(visitor, "/processing-log", object_id=cheap["id"])
    assert page.count('<span class="status skipped">skipped</span>') == 2
    assert "no run was started" in page
    filtered = shown(visitor, "/processing-log", status="skipped")
    assert cheap["id"] in filtered


def test_reaction_runs_are_labelled_with_their_objects_type_and_title(
    api: httpx2.Client, visitor: httpx2.Client
) -> None:
    made = quote(api, "MSFT", 150)
    run_id = entry(settled(api, made["id"]), "flag", 1)["run_id"]
    assert run_id is not None
    listed = rows(shown(visitor, "/runs", tag=f"object={made['id']}"), "run-rows")
    assert len(listed) == 1
    assert "Quote MSFT, created (v1)" in listed[0]
    assert "object=obj_" not in listed[0]
    page = shown(visitor, "/runs", tag=f"object={made['id']}")
    assert f'<a href="/objects/{made["id"]}">Quote MSFT, created (v1)</a>' in page
    run_page = shown(visitor, f"/runs/{run_id}")
    assert "A reaction of <strong>flag</strong> to" in run_page
    assert f'href="/objects/{made["id"]}">Quote MSFT, created (v1)</a>' in run_page


def test_an_objects_page_shows_its_data_history_and_what_each_change_caused(
    api: httpx2.Client, visitor: httpx2.Client
) -> None:
    made = quote(api, "NVDA", 120)  # flag runs, and makes v2 (flagged)
    object_id = made["id"]
    flag_run = entry(settled(api, object_id), "flag", 1)["run_id"]
    ok(api.patch(f"/api/objects/{object_id}", json={"data": {"price": 130}}))
    entries = settled(api, object_id, 3)  # flagged already, so flag's guard skips it
    assert entry(entries, "flag", 3)["status"] == "skipped"
    page = shown(visitor, f"/objects/Quote/{object_id}")
    assert "<h1>Quote NVDA</h1>" in page
    data = rows(page, "data")
    assert "symbol NVDA" in data[0] or '"NVDA"' in " ".join(data)
    assert any(row.startswith("price 130") for row in data)
    history = rows(page, "history")
    assert len(history) == 3
    v3, v2, v1 = history
    assert v3.startswith("v3 updated")
    assert "user: alice" in v3
    assert "price : 120.0 → 130.0" in v3
    assert "flag: skipped" in v3
    assert "its guard is false for this event" in v3
    assert v2.startswith("v2 updated")
    assert "agent: flag" in v2
    assert f"reaction of flag , run {flag_run}" in v2
    assert "flagged : false → true" in v2
    assert v1.startswith("v1 created")
    assert f"flag: completed {flag_run}" in v1
    assert "review: skipped" in v1
    assert f'href="/runs/{flag_run}"' in page
    caused = rows(page, "caused-runs")
    assert len(caused) == 1
    assert caused[0].startswith(f"{flag_run} flag object:Quote:created completed")


def test_an_approved_suggestion_is_in_the_history_with_a_link_to_it(
    api: httpx2.Client, visitor: httpx2.Client, server: Server
) -> None:
    made = quote(api, "BRK", 5000)
    (suggestion,) = [s for s in ok(api.get("/api/suggestions")) if s["object_id"] == made["id"]]
    with server.client(BOB) as bob:  # alice made the change: another approves
        approve = f"/api/suggestions/{suggestion['id']}/approve"
        ok(bob.post(approve, json={"justification": "seen it"}))  # flagged since: not its note
    page = shown(visitor, f"/objects/Quote/{made['id']}")
    latest = rows(page, "history")[0]
    assert "agent: review , approved by user: bob" in latest
    assert f"suggestion {suggestion['id']} of review" in latest
    assert f'href="/suggestions/{suggestion["id"]}"' in page
    decided = rows(page, "object-decisions")[0]
    assert "approve applied" in decided
    assert "seen it" in decided
    assert "user: bob" in decided


def test_a_manual_agent_and_a_graph_use_ctx_objects_and_the_history_names_their_runs(
    api: httpx2.Client, visitor: httpx2.Client
) -> None:
    made = quote(api, "TSLA", 20)
    tidy = ok(api.post("/api/agents/tidy/run", json={}), 202)["run_id"]
    wait_for(lambda: ok(api.get(f"/api/runs/{tidy}"))["info"]["status"] == "completed", 60)
    seen = ok(api.get(f"/api/objects/{made['id']}"))
    assert (seen["data"]["seen"], seen["actor"]) == (True, {"type": "agent", "id": "tidy"})
    latest = rows(shown(visitor, f"/objects/Quote/{made['id']}"), "history")[0]
    assert f"run {tidy} of tidy" in latest
    census = ok(api.post("/api/runs", json={"graph": "census", "input": "noon"}), 202)["run_id"]
    wait_for(lambda: ok(api.get(f"/api/runs/{census}"))["info"]["status"] == "completed", 60)
    listed = rows(shown(visitor, "/objects", type="Census"), "objects")
    assert len(listed) == 1
    assert listed[0].startswith("noon obj_")


def test_the_objects_list_filters_by_type_text_time_and_creator_a_page_at_a_time(
    server: Server, api: httpx2.Client, visitor: httpx2.Client
) -> None:
    for number in range(53):
        data = {"symbol": f"PG{number:02}", "price": 1}
        ok(api.post("/api/objects", json={"type": "Quote", "data": data}), 201)
    first = shown(visitor, "/objects", type="Quote", q="pg")
    listed = rows(first, "objects")
    assert len(listed) == 50
    assert listed[0].startswith("PG52 obj_")
    found = re.search(r'href="(/objects\?[^"]*after=[^"]+)" rel="next">Next page</a>', first)
    assert found is not None
    second = shown(visitor, html.unescape(found.group(1)))
    rest = rows(second, "objects")
    assert [row.split()[0] for row in rest] == ["PG02", "PG01", "PG00"]
    assert 'rel="next"' not in second
    assert ">First page</a>" in second
    assert rows(shown(visitor, "/objects", type="Census", q="pg"), "objects") == [
        "No objects match these filters."
    ]
    with server.client(BOB) as bob:
        data = {"symbol": "BOBS", "price": 1}
        ok(bob.post("/api/objects", json={"type": "Quote", "data": data}), 201)
    by_bob = rows(shown(visitor, "/objects", by="user:bob"), "objects")
    assert [row.split()[0] for row in by_bob] == ["BOBS"]
    assert rows(shown(visitor, "/objects", since="2999-01-01"), "objects") == [
        "No objects match these filters."
    ]
    late = shown(visitor, "/objects", since="yesterday")
    assert "Changed since: &#39;yesterday&#39; is not a date" in late
    lost = shown(visitor, "/objects", after="nope")
    assert "is not the cursor of a page of objects" in lost
    picker = shown(visitor, "/objects")
    assert '<option value="Census"' in picker
    assert '<option value="Quote"' in picker


def test_an_unknown_object_is_not_found_and_a_wrong_type_is_corrected(
    api: httpx2.Client, visitor: httpx2.Client
) -> None:
    shown(visitor, "/objects/obj_nope", 404)
    shown(visitor, "/objects/Quote/obj_nope", 404)
    made = quote(api, "AMZN", 10)
    moved = visitor.get(f"/objects/Census/{made['id']}")
    assert (moved.status_code, moved.headers["location"]) == (303, f"/objects/Quote/{made['id']}")
    by_id = visitor.get(f"/objects/{made['id']}")
    assert (by_id.status_code, by_id.headers["location"]) == (303, f"/objects/Quote/{made['id']}")


def test_in_a_browser_an_object_is_found_by_type_and_its_history_leads_to_its_run(
    browser: Browser, server: Server, api: httpx2.Client
) -> None:
    made = quote(api, "ORCL", 140)
    object_id = made["id"]
    flag_run = entry(settled(api, object_id), "flag", 1)["run_id"]
    with signed_in(browser, server) as page:
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Objects").click()
        expect(page.get_by_role("heading", name="Objects")).to_be_visible()
        page.get_by_label("Type").select_option("Quote")
        page.get_by_label("Id or title").fill("orcl")
        page.get_by_role("button", name="Filter").click()
        link = page.get_by_role("link", name="ORCL", exact=True)
        expect(link).to_be_visible()
        expect(page.locator("#objects tbody tr")).to_have_count(1)
        link.click()
        expect(page.get_by_role("heading", name="Quote ORCL")).to_be_visible()
        history = page.locator("#history tbody tr")
        expect(history).to_have_count(2)
        expect(history.nth(0)).to_contain_text("v2")
        expect(history.nth(0)).to_contain_text("reaction of flag")
        expect(history.nth(0)).to_contain_text("flagged")
        expect(history.nth(1)).to_contain_text("v1")
        expect(history.nth(1)).to_contain_text("flag: completed")
        history.nth(1).get_by_text("Data at v1").click()
        expect(history.nth(1).locator("pre")).to_contain_text('"symbol": "ORCL"')
        expect(page.locator("#caused-runs")).to_contain_text(flag_run)
        history.nth(0).get_by_role("link", name=flag_run).click()
        expect(page.get_by_role("heading", name=f"Run {flag_run}")).to_be_visible()
        expect(page.locator("#reaction")).to_contain_text("Quote ORCL, created (v1)")
        page.locator("#reaction").get_by_role("link").click()
        expect(page.get_by_role("heading", name="Quote ORCL")).to_be_visible()
        assert page.url.endswith(f"/objects/Quote/{object_id}")
