"""The HTTP API of ``reactor serve``, driven over HTTP against a real server process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.service.server import ALICE, BOB, DATABASES, Server, ok, serving_on, wait_for


@pytest.fixture(scope="module", params=DATABASES)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """One server per database kind for the whole module."""
    with serving_on(request) as running:
        yield running


def error(response: httpx2.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"}
    assert isinstance(body["detail"], str)
    return str(body["detail"])


@pytest.mark.parametrize(
    "token",
    [pytest.param(None, id="no-token"), pytest.param("not-a-token", id="wrong-token")],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("GET", "/api/objects", id="objects"),
        pytest.param("POST", "/api/agents", id="agents"),
        pytest.param("GET", "/api/runs/run_x/events", id="events"),
        pytest.param("GET", "/api/processing-log", id="log"),
    ],
)
def test_every_api_route_needs_a_valid_token(
    server: Server, token: str | None, method: str, path: str
) -> None:
    with server.client(token) as client:
        response = client.request(method, path, json={})
    detail = error(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"] == "unauthorized"
    assert ("needs an API token" if token is None else "is not valid") in detail


def test_health_and_the_api_description_need_no_token(server: Server) -> None:
    with server.client(None) as client:
        assert ok(client.get("/healthz")) == {"status": "ok"}
        paths = ok(client.get("/openapi.json"))["paths"]
        docs = client.get("/docs")
        script = client.get("/docs/assets/swagger-ui-bundle.js")
    assert "/api/runs/{run_id}/events" in paths
    assert "/api/suggestions/{suggestion_id}/approve" in paths
    assert docs.status_code == 200
    assert "/docs/assets/swagger-ui-bundle.js" in docs.text
    assert "cdn" not in docs.text
    assert script.status_code == 200


def test_an_object_created_over_the_api_is_the_users_and_triggers_its_reaction(
    api: httpx2.Client,
) -> None:
    ada = ok(api.post("/api/objects", json={"type": "Person", "data": {"name": "Ada"}}), 201)
    assert (ada["version"], ada["actor"]) == (1, {"type": "user", "id": "alice"})

    def done() -> list[Any]:
        entries = ok(api.get("/api/processing-log", params={"object_id": ada["id"]}))
        return [e for e in entries if e["status"] == "completed"]

    (entry,) = wait_for(done)
    assert (entry["agent"], entry["object_version"], entry["event_type"]) == (
        "enrich",
        1,
        "created",
    )
    run = ok(api.get(f"/api/runs/{entry['run_id']}"))
    assert run["info"]["status"] == "completed"
    (pending,) = [
        s
        for s in ok(api.get("/api/suggestions", params={"status": "pending"}))
        if s["object_id"] == ada["id"]
    ]
    assert pending["agent"] == "enrich"
    assert ok(api.get(f"/api/objects/{ada['id']}"))["version"] == 1


def test_an_approved_suggestion_applies_as_the_agent_and_a_second_approval_is_a_conflict(
    server: Server, api: httpx2.Client
) -> None:
    grace = ok(api.post("/api/objects", json={"type": "Person", "data": {"name": "Grace"}}), 201)

    def suggested() -> list[Any]:
        found = ok(api.get("/api/suggestions", params={"status": "pending"}))
        return [s for s in found if s["object_id"] == grace["id"]]

    (suggestion,) = wait_for(suggested)
    with server.client(BOB) as bob:
        approved = ok(bob.post(f"/api/suggestions/{suggestion['id']}/approve"))
    assert approved["status"] == "completed"
    assert approved["resolved_by"] == {"type": "user", "id": "bob"}
    person = ok(api.get(f"/api/objects/{grace['id']}"))
    assert (person["data"]["employer"], person["actor"]) == (
        "Acme",
        {"type": "agent", "id": "enrich"},
    )
    detail = error(api.post(f"/api/suggestions/{suggestion['id']}/approve"), 409)
    assert detail.startswith(f"Suggestion {suggestion['id']!r} was already approved by user:bob")
    error(api.post(f"/api/suggestions/{suggestion['id']}/reject"), 409)
    error(api.post("/api/suggestions/sug_nope/approve"), 404)


def test_objects_are_read_changed_and_deleted_by_the_calling_user(server: Server) -> None:
    with server.client(BOB) as bob:
        acme = ok(bob.post("/api/objects", json={"type": "Company", "data": {"name": "Acme"}}), 201)
        changed = ok(bob.patch(f"/api/objects/{acme['id']}", json={"data": {"domain": "acme.io"}}))
        assert (changed["version"], changed["data"]["domain"]) == (2, "acme.io")
        assert ok(bob.get(f"/api/objects/{acme['id']}", params={"version": 1}))["data"] == {
            "name": "Acme",
            "domain": None,
        }
        listed = ok(bob.get("/api/objects", params={"type": "Company"}))
        assert acme["id"] in [o["id"] for o in listed]
        gone = ok(bob.delete(f"/api/objects/{acme['id']}"))
        assert gone["actor"] == {"type": "user", "id": "bob"}
        detail = error(bob.get(f"/api/objects/{acme['id']}"), 404)
        assert detail.startswith(f"No object {acme['id']!r}")
        invalid = error(bob.post("/api/objects", json={"type": "Person", "data": {}}), 422)
        assert invalid.startswith("Person data is invalid: name: Field required")
        shapeless = error(bob.post("/api/objects", json={"type": "Person"}), 422)
        assert shapeless == "The request is invalid: data: Field required."


def test_a_reaction_agent_without_its_config_or_a_bad_schedule_is_refused(
    api: httpx2.Client,
) -> None:
    detail = error(
        api.post(
            "/api/agents",
            json={"name": "watcher", "prompt": "Look at {{ object }}", "trigger_type": "reaction"},
        ),
        422,
    )
    assert detail.startswith(
        "Agent 'watcher': reaction_config: a reaction agent needs reaction_config"
    )
    detail = error(
        api.post(
            "/api/agents",
            json={
                "name": "watcher",
                "prompt": "Look",
                "trigger_type": "reaction",
                "reaction_config": {"events": ["renamed"]},
            },
        ),
        422,
    )
    assert detail.startswith("Agent 'watcher': reaction_config: Invalid Reaction: unknown event")
    detail = error(
        api.post(
            "/api/agents",
            json={
                "name": "clock",
                "prompt": "Tick",
                "trigger_type": "cron",
                "cron_schedule": "61 * * * *",
            },
        ),
        422,
    )
    assert detail.startswith(
        "Agent 'clock': cron_schedule: cron_schedule '61 * * * *' is not a valid"
    )
    error(api.get("/api/agents/watcher"), 404)


def test_a_cron_agent_is_scheduled_rescheduled_and_disabled_at_once(api: httpx2.Client) -> None:
    created = ok(
        api.post(
            "/api/agents",
            json={
                "name": "digest",
                "prompt": "Summarise the day.",
                "trigger_type": "cron",
                "cron_schedule": "0 9 * * 1-5",
            },
        ),
        201,
    )
    first = created["next_run_at"]
    assert (created["defined_in"], created["enabled"]) == ("database", True)
    assert first.endswith(("Z", "+00:00"))
    assert first[11:16] == "09:00"
    moved = ok(api.patch("/api/agents/digest", json={"cron_schedule": "30 18 * * *"}))
    assert moved["next_run_at"][11:16] == "18:30"
    assert ok(api.get("/api/agents/digest"))["next_run_at"] == moved["next_run_at"]
    off = ok(api.patch("/api/agents/digest", json={"enabled": False}))
    assert (off["enabled"], off["next_run_at"]) == (False, None)
    on = ok(api.patch("/api/agents/digest", json={"enabled": True}))
    assert on["next_run_at"] == moved["next_run_at"]
    detail = error(api.patch("/api/agents/digest", json={"cron_schedule": "every day"}), 422)
    assert detail.startswith(
        "Agent 'digest': cron_schedule: cron_schedule 'every day' is not a valid"
    )
    assert ok(api.delete("/api/agents/digest"))["name"] == "digest"
    assert "digest" not in [a["name"] for a in ok(api.get("/api/agents"))]


def test_agents_defined_in_code_change_only_their_schedule(api: httpx2.Client) -> None:
    names = {a["name"]: a for a in ok(api.get("/api/agents"))}
    assert (names["enrich"]["defined_in"], names["enrich"]["trigger_type"]) == ("code", "reaction")
    detail = error(api.patch("/api/agents/enrich", json={"prompt": "Other"}), 409)
    assert detail.startswith("Agent 'enrich' is defined in code: change its prompt there.")
    error(api.delete("/api/agents/helper"), 409)
    error(api.post("/api/agents/enrich/run"), 409)


def test_a_prompt_agent_defined_over_the_api_runs_on_demand(api: httpx2.Client) -> None:
    ok(api.post("/api/agents", json={"name": "greeter", "prompt": "Hello {{ input }}"}), 201)
    started = ok(api.post("/api/agents/greeter/run", json={"input": "world"}), 202)

    def finished() -> Any:
        run = ok(api.get(f"/api/runs/{started['run_id']}"))
        return run if run["info"]["status"] == "completed" else None

    run = wait_for(finished)
    completed = [s for s in run["signals"] if s["name"] == "agent:greeter:completed"]
    assert completed[0]["payload"]["output"] == "done: Hello world"
    assert run["info"]["tags"] == {"service": "agent:greeter", "trigger": "manual", "user": "alice"}


def test_events_stream_a_run_from_harness_start_to_harness_end(api: httpx2.Client) -> None:
    run_id = ok(api.post("/api/runs", json={"graph": "count", "input": 41}), 202)["run_id"]
    with api.sse(f"/api/runs/{run_id}/events") as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        signals = [json.loads(event.data) for event in source]
    names = [s["name"] for s in signals]
    assert names[0] == "harness:start"
    assert names[-1] == "harness:end"
    assert "agent:count:completed" in names
    assert [s["seq"] for s in signals] == sorted(s["seq"] for s in signals)
    with api.sse(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "2"}) as source:
        again = [json.loads(event.data)["seq"] for event in source]
    assert again == [s["seq"] for s in signals if s["seq"] > 2]
    error(api.get("/api/runs/run_nope/events"), 404)
    detail = error(api.post("/api/runs", json={"graph": "nope"}), 404)
    assert detail == "No graph named 'nope'; the service has: approval, count, nap, relay, sleeper."


def test_signals_reach_a_live_run_and_ended_runs_take_no_more(api: httpx2.Client) -> None:
    run_id = ok(api.post("/api/runs", json={"graph": "relay", "input": {"seconds": 120}}), 202)[
        "run_id"
    ]
    ok(api.post(f"/api/runs/{run_id}/signals", json={"name": "go", "payload": {"n": 7}}), 202)
    detail = error(api.post(f"/api/runs/{run_id}/signals", json={"name": "agent:x:completed"}), 422)
    assert detail.startswith("Cannot post 'agent:x:completed'") or "agent:" in detail
    with api.sse(f"/api/runs/{run_id}/events") as source:
        signals = [json.loads(event.data) for event in source]
    (echoed,) = [s for s in signals if s["name"] == "echoed"]
    assert echoed["payload"] == {"n": 7}
    (go,) = [s for s in signals if s["name"] == "go"]
    assert go["source"] == "user:alice"
    error(api.post(f"/api/runs/{run_id}/signals", json={"name": "go"}), 409)
    detail = error(api.post(f"/api/runs/{run_id}/prompts/p_1/reply", json={"answer": "yes"}), 409)
    assert detail.startswith(f"Run {run_id} has ended (completed)")


def test_a_signal_name_the_run_cannot_take_is_refused_at_once(api: httpx2.Client) -> None:
    run_id = ok(api.post("/api/runs", json={"graph": "relay", "input": {"seconds": 120}}), 202)[
        "run_id"
    ]
    for name in ("Trade Approved!", "a::b", "trade:*"):
        detail = error(api.post(f"/api/runs/{run_id}/signals", json={"name": name}), 422)
        assert detail.startswith(f"Invalid signal name {name!r}")
    ok(api.post(f"/api/runs/{run_id}/signals", json={"name": "go"}), 202)
    wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["info"]["status"] == "completed")
    run = ok(api.get(f"/api/runs/{run_id}"))
    assert [s["name"] for s in run["signals"] if s["name"] == "echoed"] == ["echoed"]


def test_of_replies_sent_at_once_the_first_is_taken_and_the_others_told_who(
    server: Server, api: httpx2.Client
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    run_id = ok(api.post("/api/runs", json={"graph": "approval", "input": "v3"}), 202)["run_id"]
    (prompt,) = wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["prompts"])
    reply = f"/api/runs/{run_id}/prompts/{prompt['prompt_id']}/reply"

    def send(index: int) -> httpx2.Response:
        with server.client(ALICE if index % 2 else BOB) as client:
            return client.post(reply, json={"answer": "yes" if index % 3 else "no"})

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(send, range(20)))
    assert sorted(r.status_code for r in answers) == [200] + [409] * 19
    (first,) = [r.json() for r in answers if r.status_code == 200]
    for refused in (r.json() for r in answers if r.status_code == 409):
        assert f"was answered by {first['answered_by']} at" in refused["detail"]
    assert ok(api.get(f"/api/runs/{run_id}"))["prompts"] == []  # decided: no longer open
    wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["info"]["status"] == "completed")
    signals = ok(api.get(f"/api/runs/{run_id}"))["signals"]
    (done,) = [s for s in signals if s["name"] == "agent:approve:completed"]
    assert done["payload"]["output"] == first["answer"]


def test_a_live_run_is_aborted_and_listed(api: httpx2.Client) -> None:
    run_id = ok(api.post("/api/runs", json={"graph": "nap", "input": {"seconds": 60}}), 202)[
        "run_id"
    ]
    assert run_id in [r["run_id"] for r in ok(api.get("/api/runs", params={"graph": "nap"}))]
    assert ok(api.post(f"/api/runs/{run_id}/abort", json={"reason": "enough"})) == {
        "run_id": run_id,
        "reason": "enough",
        "status": "aborted",  # it executes here: aborted before the answer, not posted
        "message_id": None,
    }

    def ended() -> Any:
        info = ok(api.get(f"/api/runs/{run_id}"))["info"]
        return info if info["status"] == "aborted" else None

    assert wait_for(ended)["live"] is False
    error(api.post(f"/api/runs/{run_id}/abort"), 409)
    error(api.post("/api/runs/run_nope/abort"), 404)


def test_a_prompt_is_answered_over_the_api_by_the_calling_user(
    server: Server, api: httpx2.Client
) -> None:
    run_id = ok(api.post("/api/runs", json={"graph": "approval", "input": "v2"}), 202)["run_id"]

    def asked() -> list[Any]:
        run = ok(api.get(f"/api/runs/{run_id}"))
        return list(run["prompts"]) if run["info"]["status"] == "waiting" else []

    (prompt,) = wait_for(asked)
    assert (prompt["question"], prompt["choices"]) == ("Ship v2?", ["yes", "no"])
    reply = f"/api/runs/{run_id}/prompts/{prompt['prompt_id']}/reply"
    detail = error(api.post(reply, json={"answer": "maybe"}), 422)
    assert detail == "The answer 'maybe' is not one of the choices: 'yes', 'no'."
    error(api.post(f"/api/runs/{run_id}/prompts/p_nope/reply", json={"answer": "yes"}), 404)
    with server.client(BOB) as bob:
        taken = ok(bob.post(reply, json={"answer": "yes"}))
    assert (taken["answer"], taken["answered_by"]) == ("yes", "bob")
    detail = error(api.post(reply, json={"answer": "no"}), 409)
    assert detail.startswith(f"Prompt {prompt['prompt_id']!r} of run {run_id} was answered by bob")
    with api.sse(f"/api/runs/{run_id}/events") as source:
        signals = [json.loads(event.data) for event in source]
    (answered,) = [s for s in signals if s["name"] == "session:reply"]
    assert (answered["payload"]["answer"], answered["source"]) == ("yes", "user:bob")
    (done,) = [s for s in signals if s["name"] == "agent:approve:completed"]
    assert done["payload"]["output"] == "yes"
    assert signals[-1]["payload"]["status"] == "completed"


def _times(value: Any, path: str = "") -> list[tuple[str, Any]]:
    """Every ``*_at`` and ``timestamp`` value in a JSON document, with its path."""
    found: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if (key.endswith("_at") or key == "timestamp") and item is not None:
                found.append((f"{path}.{key}", item))
            found.extend(_times(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_times(item, f"{path}[{index}]"))
    return found


def test_every_time_the_api_answers_is_iso_8601_utc(server: Server, api: httpx2.Client) -> None:
    from datetime import datetime, timedelta

    lin = ok(api.post("/api/objects", json={"type": "Person", "data": {"name": "Lin"}}), 201)
    run_id = ok(api.post("/api/runs", json={"graph": "approval", "input": "v9"}), 202)["run_id"]
    wait_for(lambda: ok(api.get(f"/api/runs/{run_id}"))["prompts"])
    wait_for(lambda: [s for s in ok(api.get("/api/suggestions")) if s["object_id"] == lin["id"]])
    documents = {
        path: ok(api.get(path))
        for path in (
            "/api/runs",
            f"/api/runs/{run_id}",
            "/api/agents",
            "/api/objects",
            "/api/suggestions",
            "/api/processing-log",
        )
    }
    times = [found for path, body in documents.items() for found in _times(body, path)]
    assert {path.rsplit(".", 1)[1] for path, _ in times} >= {
        "started_at",
        "asked_at",
        "timestamp",
        "created_at",
        "updated_at",
    }
    for path, value in times:
        assert isinstance(value, str), f"{path} is {value!r}, not ISO 8601"
        assert datetime.fromisoformat(value).utcoffset() == timedelta(0), path
    suggestion = documents["/api/suggestions"][0]
    assert "operations" in suggestion
    assert "changes" not in suggestion


@pytest.mark.parametrize(
    ("body", "where"),
    [
        pytest.param('{"type": "Person", "data": {"score": NaN}}', "score", id="nan"),
        pytest.param('{"type": "Person", "data": {"name": "\\ud800"}}', "name", id="surrogate"),
    ],
)
def test_values_the_log_cannot_hold_are_422_and_nothing_is_stored(
    api: httpx2.Client, body: str, where: str
) -> None:
    before = len(ok(api.get("/api/objects")))
    response = api.post("/api/objects", content=body, headers={"Content-Type": "application/json"})
    detail = error(response, 422)
    assert where in detail
    assert len(ok(api.get("/api/objects"))) == before


def test_strings_longer_than_their_column_are_422_naming_the_field(api: httpx2.Client) -> None:
    """Checked before the database, so SQLite (which keeps any length) and PostgreSQL
    (which refuses) answer alike; nothing is stored."""
    long_type = error(api.post("/api/objects", json={"type": "T" * 300, "data": {}}), 422)
    assert "type" in long_type
    assert "200 characters" in long_type
    schedule = {"name": "long_cron", "prompt": "Hi", "trigger_type": "cron"}
    refused = api.post("/api/agents", json={**schedule, "cron_schedule": "* " * 2500})
    assert "cron_schedule" in error(refused, 422)
    named = api.post("/api/agents", json={"name": "n" * 300, "prompt": "Hi"})
    assert "name" in error(named, 422)
    assert all(o["type"] != "T" * 300 for o in ok(api.get("/api/objects")))
    assert "long_cron" not in [a["name"] for a in ok(api.get("/api/agents"))]
