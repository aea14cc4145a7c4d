"""The web UI's sign-in, sessions and cross-site checks, over HTTP against ``reactor serve``."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.service.server import ALICE, Server, serving, wait_for

PAGES = [
    "/runs",
    "/runs/rows",
    "/runs/run_x",
    "/graphs",
    "/graphs/count",
    "/suggestions",
    "/agents",
    "/processing-log",
    "/workers",
    "/workers/rows",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("web-http")
    with serving(f"sqlite:///{folder / 'app.db'}", folder / "server.log") as running:
        yield running


@pytest.fixture
def visitor(server: Server) -> Iterator[httpx2.Client]:
    """A client without an API token, like a visitor (it keeps cookies)."""
    with server.client(None) as client:
        yield client


def hidden(html: str, name: str = "csrf") -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, html
    return found.group(1)


def sign_in(client: httpx2.Client, token: str = ALICE) -> httpx2.Response:
    form = client.get("/")
    return client.post("/", data={"token": token, "csrf": hidden(form.text)})


def signed_in(client: httpx2.Client) -> str:
    """Sign in; the session's CSRF token."""
    assert sign_in(client).status_code == 303
    return hidden(client.get("/agents").text)


@pytest.mark.parametrize("path", PAGES)
def test_every_page_sends_a_browser_without_a_session_to_the_sign_in_form(
    visitor: httpx2.Client, path: str
) -> None:
    response = visitor.get(path)
    assert (response.status_code, response.headers["location"]) == (303, "/")
    form = visitor.get("/")
    assert form.status_code == 200
    assert '<label for="token">Token</label>' in form.text
    assert "/runs" not in form.text


@pytest.mark.parametrize(
    "path",
    [
        "/sign-out",
        "/runs/run_x/abort",
        "/suggestions/sug_x/approve",
        "/agents/helper",
        "/agents/helper/run",
        "/graphs/count/runs",
    ],
)
def test_every_form_needs_a_session(visitor: httpx2.Client, path: str) -> None:
    response = visitor.post(path, data={"csrf": "x"})
    assert (response.status_code, response.headers["location"]) == (303, "/")


def test_a_valid_token_opens_a_session_in_an_http_only_strict_cookie(
    visitor: httpx2.Client,
) -> None:
    response = sign_in(visitor)
    assert (response.status_code, response.headers["location"]) == (303, "/runs")
    cookie = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith("reactor_session=")
    )
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert ALICE not in cookie
    assert "Signed in as <strong>alice</strong>" in visitor.get("/runs").text


@pytest.mark.parametrize(
    "token", [pytest.param("", id="empty"), pytest.param("not-a-token", id="wrong")]
)
def test_a_wrong_token_opens_no_session(visitor: httpx2.Client, token: str) -> None:
    response = sign_in(visitor, token)
    assert response.status_code == 401
    assert "That token is not valid" in response.text
    assert "reactor_session" not in visitor.cookies
    assert visitor.get("/runs").status_code == 303


def test_a_sign_in_form_from_elsewhere_is_refused(visitor: httpx2.Client) -> None:
    without = visitor.post("/", data={"token": ALICE, "csrf": "made-up"})
    form = visitor.get("/")
    foreign = visitor.post(
        "/",
        data={"token": ALICE, "csrf": hidden(form.text)},
        headers={"Origin": "https://evil.example"},
    )
    assert (without.status_code, foreign.status_code) == (403, 403)
    assert "reactor_session" not in visitor.cookies


def test_signing_out_ends_the_session(visitor: httpx2.Client, server: Server) -> None:
    csrf = signed_in(visitor)
    old = visitor.cookies["reactor_session"]
    response = visitor.post("/sign-out", data={"csrf": csrf})
    assert (response.status_code, response.headers["location"]) == (303, "/")
    assert "reactor_session" not in visitor.cookies
    with server.client(None, cookies={"reactor_session": old}) as replay:
        assert replay.get("/runs").status_code == 303


def test_a_session_is_known_to_another_serving_process_and_after_a_restart(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'app.db'}"
    with serving(db, tmp_path / "first.log") as first, first.client(None) as browser:
        assert sign_in(browser).status_code == 303
        cookie = {"reactor_session": browser.cookies["reactor_session"]}
        with (
            serving(db, tmp_path / "second.log") as second,
            second.client(None, cookies=cookie) as elsewhere,
        ):
            assert elsewhere.get("/runs").status_code == 200
    with (
        serving(db, tmp_path / "again.log") as again,
        again.client(None, cookies=cookie) as restarted,
    ):
        assert restarted.get("/runs").status_code == 200


def agent(server: Server, name: str) -> Any:
    with server.client() as api:
        return api.get(f"/api/agents/{name}").json()


@pytest.mark.parametrize(
    ("csrf", "origin"),
    [
        pytest.param(None, None, id="no-token"),
        pytest.param("forged", None, id="wrong-token"),
        pytest.param("right", "https://evil.example", id="other-origin"),
    ],
)
def test_a_form_without_the_sessions_csrf_token_or_from_another_site_changes_nothing(
    visitor: httpx2.Client, server: Server, csrf: str | None, origin: str | None
) -> None:
    right = signed_in(visitor)
    data = {"cron_schedule": "", "csrf": right if csrf == "right" else csrf}
    headers = {"Origin": origin} if origin else {}
    response = visitor.post(
        "/agents/helper", data={k: v for k, v in data.items() if v is not None}, headers=headers
    )
    assert response.status_code == 403
    assert "CSRF" in response.text
    assert agent(server, "helper")["enabled"] is True
    done = visitor.post("/agents/helper", data={"csrf": right, "enabled": "on"})
    assert (done.status_code, done.headers["location"]) == (303, "/agents")
    assert "Agent helper was saved." in visitor.get("/agents").text


def test_pages_come_with_their_own_assets_only(visitor: httpx2.Client) -> None:
    signed_in(visitor)
    page = visitor.get("/runs")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for asset in re.findall(r'(?:src|href)="([^"]+)"', page.text):
        assert asset.startswith(("/", "#")), asset
    for path in ("/static/web.js", "/static/web.css"):
        assert visitor.get(path).status_code == 200


def test_a_runs_events_stream_to_a_signed_in_browser(
    visitor: httpx2.Client, server: Server
) -> None:
    with server.client() as api:
        run_id = api.post("/api/runs", json={"graph": "count", "input": 1}).json()["run_id"]
    assert visitor.get(f"/runs/{run_id}/events").status_code == 303
    signed_in(visitor)
    with visitor.sse(f"/runs/{run_id}/events") as source:
        names = [json.loads(event.data)["name"] for event in source]
    assert (names[0], names[-1]) == ("harness:start", "harness:end")
    assert visitor.get("/runs/run_nope").status_code == 404
    assert visitor.get("/runs/run_nope/events").status_code == 404


def runs_of(server: Server, graph: str) -> list[Any]:
    with server.client() as api:
        listed: list[Any] = api.get("/api/runs", params={"graph": graph}).json()
        return listed


def finished(server: Server, run_id: str) -> Any:
    """The run's info once it has ended."""
    with server.client() as api:

        def ended() -> Any:
            info = api.get(f"/api/runs/{run_id}").json()["info"]
            return info if info["complete"] else None

        return wait_for(ended)


def test_input_that_is_not_json_starts_nothing_and_is_shown_again_with_what_is_wrong(
    visitor: httpx2.Client, server: Server
) -> None:
    csrf = signed_in(visitor)
    before = len(runs_of(server, "count"))
    response = visitor.post("/graphs/count/runs", data={"csrf": csrf, "input": '{"n": <b>'})
    assert response.status_code == 422
    assert "The input is not JSON (Expecting value at line 1, column 7)" in response.text
    assert "{&#34;n&#34;: &lt;b&gt;</textarea>" in response.text
    assert len(runs_of(server, "count")) == before
    assert visitor.post("/graphs/nope/runs", data={"csrf": csrf}).status_code == 404
    assert visitor.get("/graphs/nope").status_code == 404


def test_the_start_form_starts_the_graph_as_the_signed_in_user(
    visitor: httpx2.Client, server: Server
) -> None:
    csrf = signed_in(visitor)
    response = visitor.post("/graphs/count/runs", data={"csrf": csrf, "input": "1"})
    assert response.status_code == 303
    run_id = response.headers["location"].removeprefix("/runs/")
    info = finished(server, run_id)
    assert (info["graph"], info["status"], info["tags"]["user"]) == ("count", "completed", "alice")


def test_a_reply_without_a_choice_is_refused_and_the_prompt_stays_pending(
    visitor: httpx2.Client, server: Server
) -> None:
    csrf = signed_in(visitor)
    with server.client() as api:
        run_id = api.post("/api/runs", json={"graph": "approval", "input": "v9"}).json()["run_id"]
        prompts = wait_for(lambda: api.get(f"/api/runs/{run_id}").json()["prompts"])
        data = {"csrf": csrf, "prompt_id": prompts[0]["prompt_id"]}
        for sent in (data, {**data, "answer": ""}):
            assert visitor.post(f"/runs/{run_id}/reply", data=sent).status_code == 303
            page = visitor.get(f"/runs/{run_id}").text
            assert "Choose an answer before replying; nothing was sent." in page
        assert api.get(f"/api/runs/{run_id}").json()["prompts"] == prompts
        assert 'name="answer" value="yes" required>' in page
        assert "checked" not in page.split('class="prompt')[1].split("</form>")[0]
        api.post(f"/api/runs/{run_id}/abort")


def test_without_a_job_queue_the_workers_page_says_runs_execute_here(
    visitor: httpx2.Client,
) -> None:
    signed_in(visitor)
    page = visitor.get("/workers").text
    assert "Runs execute in this process" in page
    assert "REACTOR_REDIS_URL" in page


def test_a_cost_is_a_price_or_unknown_never_a_dash(visitor: httpx2.Client, server: Server) -> None:
    signed_in(visitor)
    with server.client() as api:
        definition = {"name": "summariser", "prompt": "Sum up {{ input }}."}
        assert api.post("/api/agents", json=definition).status_code == 201
        priced = api.post("/api/agents/summariser/run", json={"input": "x"}).json()["run_id"]
        free = api.post("/api/runs", json={"graph": "count", "input": 1}).json()["run_id"]
    finished(server, priced)
    finished(server, free)
    rows = visitor.get("/runs/rows").text
    costs = dict(
        re.findall(r'href="/runs/(run_\w+)".*?data-label="Cost">([^<]*)</td>', rows, re.DOTALL)
    )
    assert (costs[priced], costs[free]) == ("unknown", "$0.0000")
    assert set(costs.values()) <= {"unknown"} | {c for c in costs.values() if c.startswith("$")}
    run = visitor.get(f"/runs/{priced}").text
    assert "<dt>Cost</dt><dd>unknown</dd>" in run
    assert '<td data-label="Cost">unknown</td>' in run


def test_what_a_run_was_given_is_escaped_wherever_it_is_shown(
    visitor: httpx2.Client, server: Server
) -> None:
    signed_in(visitor)
    attack = {"<img src=x onerror=alert(1)>": "<script>alert(2)</script>"}
    with server.client() as api:
        run_id = api.post("/api/runs", json={"graph": "nap", "input": attack}).json()["run_id"]
    finished(server, run_id)
    for path in ("/runs", "/runs/rows", f"/runs/{run_id}"):
        html = visitor.get(path).text
        assert "<script>alert" not in html
        assert "<img src=x" not in html
    label = "&lt;img src=x onerror=alert(1)&gt;=&lt;script&gt;alert(2)&lt;/script&gt;"
    assert label in visitor.get("/runs/rows").text


def test_a_schedule_given_to_a_manual_agent_makes_it_a_cron_agent_and_clearing_it_manual(
    visitor: httpx2.Client, server: Server
) -> None:
    csrf = signed_in(visitor)
    saved = visitor.post(
        "/agents/helper", data={"csrf": csrf, "cron_schedule": "0 4 * * *", "enabled": "on"}
    )
    assert saved.status_code == 303
    assert "Agent helper was saved." in visitor.get("/agents").text
    scheduled = agent(server, "helper")
    assert (scheduled["trigger_type"], scheduled["cron_schedule"]) == ("cron", "0 4 * * *")
    assert scheduled["next_run_at"].endswith("T04:00:00Z")
    visitor.post("/agents/helper", data={"csrf": csrf, "cron_schedule": "", "enabled": "on"})
    cleared = agent(server, "helper")
    assert (cleared["trigger_type"], cleared["cron_schedule"], cleared["next_run_at"]) == (
        "manual",
        None,
        None,
    )
