"""The desk against a real ``reactor serve``, on SQLite and PostgreSQL, over HTTP and in
Chromium: suggestions that supersede, staleness on what they depend on, pages of
suggestions and of the processing log, rejecting many, and the agents' lag at
``GET /api/agents/{name}`` and ``GET /metrics``.

The server serves :mod:`tests.service.desk`: quotes, and ``analyst`` (suggests on every
change of a quote), ``noter`` (a note, once) and ``hedger`` (depends on the price).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from playwright.sync_api import Browser, expect
from prometheus_client.parser import text_string_to_metric_families

from tests.service.browsing import signed_in
from tests.service.server import (
    ALICE,
    BOB,
    CAROL,
    DAN,
    DATABASES,
    Server,
    ok,
    serving,
    serving_on,
    wait_for,
)

APP = "tests.service.desk:make_service"
AGENTS = ("analyst", "noter", "hedger")


@pytest.fixture(scope="module", params=DATABASES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    with serving_on(request, app=APP) as running:
        yield running


def status(response: httpx2.Response, code: int) -> Any:
    assert response.status_code == code, response.text
    return response.json()


def settled(api: httpx2.Client, object_id: str, entries: int) -> list[dict[str, Any]]:
    """The object's ``entries`` processing-log entries, once each has ended."""

    def done() -> list[dict[str, Any]] | None:
        found: list[dict[str, Any]] = ok(
            api.get("/api/processing-log", params={"object_id": object_id})
        )
        ended = [e for e in found if e["status"] not in ("pending", "processing")]
        return found if len(ended) == len(found) == entries else None

    found: list[dict[str, Any]] = wait_for(done, timeout=90)
    return found


def quote(api: httpx2.Client, symbol: str, price: float) -> dict[str, Any]:
    """A new quote, written by dan (an operator: others approve what it causes), settled."""
    made: dict[str, Any] = status(
        api.post(
            "/api/objects", json={"type": "Quote", "data": {"symbol": symbol, "price": price}}
        ),
        201,
    )
    settled(api, made["id"], len(AGENTS))
    return made


def pending(api: httpx2.Client, object_id: str, agent: str) -> dict[str, Any]:
    (found,) = ok(
        api.get(
            "/api/suggestions",
            params={"status": "pending", "object_id": object_id, "agent": agent},
        )
    )
    return found  # type: ignore[no-any-return]


def every(api: httpx2.Client, path: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a listing, read page by page through its ``X-Next-Cursor``."""
    found: list[dict[str, Any]] = []
    after: str | None = None
    while True:
        answer = api.get(path, params={**params, **({"after": after} if after else {})})
        found += ok(answer)
        after = answer.headers.get("X-Next-Cursor")
        if after is None:
            return found


@pytest.fixture(scope="module")
def desk(server: Server) -> list[dict[str, Any]]:
    """Twenty quotes, each with its three suggestions and three entries."""
    with server.client(DAN) as dan:
        return [quote(dan, f"Q{n:02}", 10.0 + n) for n in range(20)]


# -- suggestions that keep up -----------------------------------------------------------


def test_a_newer_suggestion_supersedes_the_pending_one_and_approving_the_old_is_409(
    server: Server,
) -> None:
    with server.client(DAN) as dan, server.client(BOB) as bob:
        made = quote(dan, "ACME", 10.0)
        first = pending(dan, made["id"], "analyst")
        status(dan.patch(f"/api/objects/{made['id']}", json={"data": {"price": 11.0}}), 200)
        settled(dan, made["id"], len(AGENTS) + 1)
        second = pending(dan, made["id"], "analyst")
        refused = status(bob.post(f"/api/suggestions/{first['id']}/approve"), 409)
        old = ok(dan.get(f"/api/suggestions/{first['id']}"))
        history = ok(dan.get("/api/processing-log/history", params={"suggestion_id": first["id"]}))
        approved = status(bob.post(f"/api/suggestions/{second['id']}/approve"), 200)
    assert refused["detail"] == (
        f"Suggestion {first['id']!r} was superseded by suggestion {second['id']!r}, a newer "
        f"one of agent 'analyst' for object {made['id']!r}: decide on that one instead."
    )
    assert (old["status"], old["superseded_by"]) == ("superseded", second["id"])
    assert [(h["name"], h["payload"]["superseded_by"]) for h in history] == [
        ("suggestion:superseded", second["id"])
    ]
    assert approved["status"] == "completed"


def test_a_price_change_leaves_a_notes_suggestion_fresh_and_a_notes_change_makes_it_stale(
    server: Server,
) -> None:
    with server.client(DAN) as dan, server.client(BOB) as bob:
        fresh = quote(dan, "FRSH", 10.0)
        note = pending(dan, fresh["id"], "noter")
        status(dan.patch(f"/api/objects/{fresh['id']}", json={"data": {"price": 10.5}}), 200)
        approved = status(bob.post(f"/api/suggestions/{note['id']}/approve"), 200)
        stale = quote(dan, "STAL", 10.0)
        later = pending(dan, stale["id"], "noter")
        status(dan.patch(f"/api/objects/{stale['id']}", json={"data": {"notes": "mine"}}), 200)
        refused = status(bob.post(f"/api/suggestions/{later['id']}/approve"), 409)
        now = ok(dan.get(f"/api/objects/{fresh['id']}"))
    assert note["basis"] == {"notes": None}
    assert approved["status"] == "completed"
    assert (now["data"]["price"], now["data"]["notes"]) == (10.5, "watch the spread")
    assert refused["detail"].startswith(
        f"Suggestion {later['id']!r} is about object {stale['id']!r}, whose 'notes' changed "
        "since the agent saw version 1 (it is at version 2 now)"
    )


def test_depends_on_makes_a_hedge_stale_when_the_price_moves(server: Server) -> None:
    with server.client(DAN) as dan, server.client(BOB) as bob:
        made = quote(dan, "HEDG", 10.0)
        hedge = pending(dan, made["id"], "hedger")
        status(dan.patch(f"/api/objects/{made['id']}", json={"data": {"price": 9.5}}), 200)
        refused = status(bob.post(f"/api/suggestions/{hedge['id']}/approve"), 409)
        agent = ok(dan.get("/api/agents/hedger"))
    assert hedge["basis"] == {"hedge": False, "price": 10.0}
    assert "whose 'price' changed since the agent saw version 1" in refused["detail"]
    assert agent["reaction_config"]["depends_on"] == ["price"]


def test_depends_on_is_set_and_checked_over_http(server: Server) -> None:
    reacting = {"types": ["Quote"], "events": ["updated"], "depends_on": ["price"]}
    definition: dict[str, Any] = {
        "name": "watcher",
        "prompt": "Watch {{ object.id }}.",
        "trigger_type": "reaction",
        "reaction_config": reacting,
        "enabled": False,
    }
    with server.client(ALICE) as alice:
        made = status(alice.post("/api/agents", json=definition), 201)
        bad = {**definition, "name": "watcher2"}
        bad["reaction_config"] = {**reacting, "depends_on": ["no way"]}
        refused = status(alice.post("/api/agents", json=bad), 422)
        status(alice.delete("/api/agents/watcher"), 200)
    assert made["reaction_config"]["depends_on"] == ["price"]
    assert refused["detail"] == (
        "Agent 'watcher2': reaction_config: Invalid Reaction: Reaction(depends_on=...): "
        "'no way' is not a field name: name a top-level field of the object's data (a "
        "letter or '_', then letters, digits or '_', at most 64)."
    )


# -- pages -----------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/suggestions", "/api/processing-log"])
def test_listings_page_newest_first_with_a_cursor(
    server: Server, desk: list[dict[str, Any]], path: str
) -> None:
    with server.client(CAROL) as carol:
        first = carol.get(path)
        whole = ok(carol.get(path, params={"limit": 500}))
        paged = every(carol, path, limit=7)
        bad = status(carol.get(path, params={"after": "not-a-cursor"}), 422)
        too_many = status(carol.get(path, params={"limit": 501}), 422)
        last = carol.get(path, params={"limit": 500})
    assert len(ok(first)) == 50
    link, rel = first.headers["Link"].split("; ")
    following = httpx2.URL(link.removeprefix("<").removesuffix(">"))
    assert (rel, following.path) == ('rel="next"', path)
    assert following.params["after"] == first.headers["X-Next-Cursor"]
    assert [item["id"] for item in paged] == [item["id"] for item in whole]
    assert len(whole) >= len(desk) * len(AGENTS)
    assert "X-Next-Cursor" not in last.headers
    key = "created_at" if path == "/api/suggestions" else "id"
    assert [item[key] for item in whole] == sorted((item[key] for item in whole), reverse=True)
    assert bad["detail"].startswith("'not-a-cursor' is not the cursor of a page of ")
    assert too_many["error"] == "invalid"


def test_listings_keep_their_filters_across_pages(
    server: Server, desk: list[dict[str, Any]]
) -> None:
    with server.client(CAROL) as carol:
        noted = every(carol, "/api/suggestions", agent="noter", status="pending", limit=3)
        entries = every(carol, "/api/processing-log", agent="hedger", status="completed", limit=4)
    assert {s["agent"] for s in noted} == {"noter"}
    assert {s["status"] for s in noted} == {"pending"}
    assert {s["object_id"] for s in noted} >= {q["id"] for q in desk}
    assert {(e["agent"], e["status"]) for e in entries} == {("hedger", "completed")}
    assert len(entries) >= len(desk)


# -- rejecting many --------------------------------------------------------------------


def test_suggestions_are_rejected_in_bulk_by_ids_and_by_filter_each_recorded(
    server: Server,
) -> None:
    with server.client(DAN) as dan, server.client(BOB) as bob:
        one, two = quote(dan, "BLK1", 1.0), quote(dan, "BLK2", 2.0)
        ids = [pending(dan, one["id"], agent)["id"] for agent in ("noter", "hedger")]
        by_ids = status(
            bob.post(
                "/api/suggestions/reject",
                json={"ids": [*ids, ids[0], "sug_gone"], "justification": "stale desk"},
            ),
            200,
        )
        by_filter = status(
            bob.post("/api/suggestions/reject", json={"object_id": two["id"], "status": "pending"}),
            200,
        )
        again = status(bob.post("/api/suggestions/reject", json={"ids": ids}), 200)
        left = ok(dan.get("/api/suggestions", params={"status": "pending", "object_id": one["id"]}))
        history = every(dan, "/api/processing-log/history", object_id=two["id"])
        neither = status(bob.post("/api/suggestions/reject", json={}), 422)
        both = status(bob.post("/api/suggestions/reject", json={"ids": ids, "agent": "noter"}), 422)
        many = status(
            bob.post("/api/suggestions/reject", json={"ids": [f"s{n}" for n in range(1001)]}), 422
        )
    assert (by_ids["rejected"], by_ids["ids"], by_ids["more"]) == (2, ids, False)
    assert by_ids["refused"] == [{"id": "sug_gone", "reason": "No suggestion 'sug_gone'."}]
    assert (by_filter["rejected"], by_filter["refused"]) == (3, [])
    assert {r["reason"].split(" by ")[0] for r in again["refused"]} == {
        f"Suggestion {ids[0]!r} was already rejected",
        f"Suggestion {ids[1]!r} was already rejected",
    }
    assert [s["agent"] for s in left] == ["analyst"]
    decided = [h["payload"] for h in history if h["name"] == "suggestion:decided"]
    assert sorted(d["suggestion_id"] for d in decided) == sorted(by_filter["ids"])
    assert {(d["decision"], d["outcome"], d["principal"]["id"]) for d in decided} == {
        ("reject", "rejected", "bob")
    }
    assert neither["detail"].startswith("Name the suggestions to reject: either ids, or a filter")
    assert both["detail"] == neither["detail"]
    assert many["detail"] == (
        "At most 1,000 suggestions are rejected in one request, got 1,001 ids: send them in parts."
    )


@pytest.mark.parametrize(
    "token", [pytest.param(CAROL, id="viewer"), pytest.param(DAN, id="operator")]
)
def test_rejecting_many_needs_the_approver_role(server: Server, token: str) -> None:
    with server.client(token) as caller, server.client(DAN) as dan:
        made = quote(dan, "ROLE", 3.0)
        note = pending(dan, made["id"], "noter")
        refused = status(caller.post("/api/suggestions/reject", json={"ids": [note["id"]]}), 403)
        still = ok(dan.get(f"/api/suggestions/{note['id']}"))
    assert refused["detail"].startswith("POST /api/suggestions/reject needs the approver role")
    assert still["status"] == "pending"


# -- lag, and /metrics -----------------------------------------------------------------


def _metrics(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_metrics_give_each_agents_lag_and_count_requests_and_runs(
    server: Server, desk: list[dict[str, Any]]
) -> None:
    with server.client(CAROL) as carol, server.client(DAN) as dan:
        before = _metrics(status_text(carol.get("/metrics")))
        quote(dan, "MET1", 1.0)
        quote(dan, "MET2", 2.0)
        answer = carol.get("/metrics")
        after = _metrics(status_text(answer))
        lags = {name: ok(carol.get(f"/api/agents/{name}"))["lag"] for name in AGENTS}
    assert answer.headers["content-type"].startswith("text/plain")
    posted = (("method", "POST"), ("route", "/api/objects"), ("status", "201"))
    created = ("reactor_http_requests_total", posted)
    assert after[created] - before.get(created, 0) == 2
    completed = ("reactor_runs_total", (("status", "completed"),))
    assert after[completed] - before.get(completed, 0) >= 2 * len(AGENTS)
    for name in AGENTS:
        labels = (("agent", name),)
        assert after[("reactor_agent_waiting", labels)] == lags[name]["waiting"] == 0
        assert after[("reactor_agent_lag_seconds", labels)] == 0
        admitted = ("reactor_agent_admitted_total", (("agent", name), ("outcome", "admitted")))
        assert after[admitted] == lags[name]["outcomes"]["admitted"] >= len(desk) + 2
        assert lags[name]["statuses"]["completed"] == lags[name]["outcomes"]["admitted"]


def status_text(response: httpx2.Response) -> str:
    assert response.status_code == 200, response.text
    return response.text


def test_metrics_need_a_token_unless_they_are_public(
    server: Server, tmp_path_factory: pytest.TempPathFactory
) -> None:
    refused = httpx2.get(f"{server.url}/metrics", timeout=30)
    folder = tmp_path_factory.mktemp("public")
    public = {"REACTOR_METRICS_PUBLIC": "1"}
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "log", app=APP, env=public) as open_:
        scraped = httpx2.get(f"{open_.url}/metrics", timeout=30)
    assert refused.status_code == 401
    assert scraped.status_code == 200
    names = {family.name for family in text_string_to_metric_families(scraped.text)}
    assert {"reactor_agent_waiting", "reactor_agent_lag_seconds", "reactor_agent_admitted"} <= names


def test_an_agents_lag_is_in_its_answer(server: Server, desk: list[dict[str, Any]]) -> None:
    with server.client(CAROL) as carol:
        noter = ok(carol.get("/api/agents/noter"))
        manual = ok(carol.get("/api/agents"))
    assert set(noter["lag"]) == {
        "agent", "waiting", "oldest", "outcomes", "statuses", "held", "spent", "period"
    }  # fmt: skip
    assert noter["lag"]["agent"] == "noter"
    assert noter["lag"]["outcomes"]["admitted"] >= len(desk)
    assert all("lag" not in record for record in manual)


# -- the web pages ---------------------------------------------------------------------


def test_the_suggestions_page_shows_one_page_and_next_shows_the_rest(
    browser: Browser, server: Server, desk: list[dict[str, Any]]
) -> None:
    with server.client(CAROL) as carol:
        waiting = [s["id"] for s in ok(carol.get("/api/suggestions?status=pending&limit=500"))]
    with signed_in(browser, server, CAROL) as page:
        page.goto("/suggestions")
        cards = page.locator("article.suggestion")
        expect(cards).to_have_count(50)
        shown = [cards.nth(n).locator("h2").get_attribute("id") for n in range(50)]
        page.get_by_role("link", name="Next page").click()
        expect(page.get_by_role("link", name="First page")).to_be_visible()
        expect(cards).to_have_count(min(50, len(waiting) - 50))
        later = [cards.nth(n).locator("h2").get_attribute("id") for n in range(cards.count())]
        expect(page.get_by_role("button", name="Reject all shown")).to_have_count(0)  # a viewer
        page.goto("/processing-log")
        expect(page.locator("#entries tbody tr")).to_have_count(50)
        page.get_by_role("link", name="Next page").click()
        expect(page.locator("#entries tbody tr").first).to_be_visible()
    assert [f"s-{id}" for id in waiting[: 50 + len(later)]] == shown + later


def test_a_card_says_approve_anyway_only_when_a_field_it_depends_on_changed(
    browser: Browser, server: Server
) -> None:
    with server.client(DAN) as dan:
        made = quote(dan, "CARD", 10.0)
        note, hedge = (pending(dan, made["id"], agent) for agent in ("noter", "hedger"))
        status(dan.patch(f"/api/objects/{made['id']}", json={"data": {"price": 10.25}}), 200)
        settled(dan, made["id"], len(AGENTS) + 1)
    with signed_in(browser, server, BOB) as page:
        page.goto(f"/suggestions?object_id={made['id']}")
        fresh = page.locator("article", has=page.get_by_text(note["id"]))
        expect(fresh).to_contain_text("nothing it depends on changed")
        expect(fresh.get_by_role("button", name="Approve anyway")).to_have_count(0)
        expect(fresh.get_by_role("button", name="Approve", exact=True)).to_be_visible()
        stale = page.locator("article", has=page.get_by_text(hedge["id"]))
        expect(stale).to_contain_text("price changed since")
        expect(stale.get_by_role("button", name="Approve anyway")).to_be_visible()


def test_an_approver_rejects_all_shown_on_the_page(browser: Browser, server: Server) -> None:
    with server.client(DAN) as dan:
        made = quote(dan, "BULK", 4.0)
    with signed_in(browser, server, BOB) as page:
        page.goto(f"/suggestions?object_id={made['id']}")
        expect(page.locator("article.suggestion")).to_have_count(3)
        page.get_by_label("Why reject them").fill("the desk moved on")
        page.get_by_role("button", name="Reject all shown").click()
        expect(page.get_by_role("status")).to_contain_text("3 suggestions rejected.")
        expect(page.locator("article.suggestion")).to_have_count(0)
    with server.client(DAN) as dan:
        found = ok(dan.get("/api/suggestions", params={"object_id": made["id"]}))
    assert {s["status"] for s in found} == {"rejected"}


def test_an_approver_rejects_those_ticked(browser: Browser, server: Server) -> None:
    with server.client(DAN) as dan:
        made = quote(dan, "TICK", 5.0)
        note = pending(dan, made["id"], "noter")
    with signed_in(browser, server, BOB) as page:
        page.goto(f"/suggestions?object_id={made['id']}")
        page.get_by_label(f"Select {note['id']}").check()
        page.get_by_role("button", name="Reject selected").click()
        expect(page.get_by_role("status")).to_contain_text("1 suggestion rejected.")
        expect(page.locator("article.suggestion")).to_have_count(2)
    with server.client(DAN) as dan:
        assert ok(dan.get(f"/api/suggestions/{note['id']}"))["status"] == "rejected"


def test_the_agents_page_shows_each_reaction_agents_lag(
    browser: Browser, server: Server, desk: list[dict[str, Any]]
) -> None:
    with server.client(CAROL) as carol:
        lag = ok(carol.get("/api/agents/noter"))["lag"]
    with signed_in(browser, server, CAROL) as page:
        page.goto("/agents")
        row = page.locator("#agent-noter")
        expect(row.locator("dd.waiting")).to_have_text("0")
        expect(row.locator("dd.outcome-admitted")).to_have_text(str(lag["outcomes"]["admitted"]))
