"""Authority through a real ``reactor serve``: roles on every route, approvals with provenance.

Tokens (``tests.service.server``): alice is an admin, bob an approver and operator,
carol a viewer, dan an operator (a line without roles), erin an approver. Each route
class refuses the lesser role ``403`` naming the role it needs, and logs it; decisions
on suggestions follow the agent's ``Approval`` (``tests.service.authorized``) and are
recorded with their provenance in the JSON log, the history API and
``GET /api/suggestions/{id}``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx2
import pytest
from websockets.sync.client import connect

from tests.service.server import (
    ALICE,
    BOB,
    CAROL,
    DAN,
    DATABASES,
    ERIN,
    Server,
    serving_on,
    wait_for,
)

APP = "tests.service.authorized:make_service"
FLEETING = 3.0
"""Seconds a ``fleeting`` suggestion may be approved in (``REACTOR_TEST_FLEETING``)."""


@pytest.fixture(scope="module", params=DATABASES)
def server(
    request: pytest.FixtureRequest, monkeypatch_module: pytest.MonkeyPatch
) -> Iterator[Server]:
    monkeypatch_module.setenv("REACTOR_TEST_FLEETING", str(FLEETING))
    with serving_on(request, app=APP) as running:
        yield running


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def status(response: httpx2.Response, code: int) -> dict[str, Any]:
    assert response.status_code == code, response.text
    body: dict[str, Any] = response.json()
    return body


def suggestion_for(api: httpx2.Client, object_id: str) -> dict[str, Any]:
    """The pending suggestion its agent made after ``object_id`` was created."""

    def found() -> dict[str, Any] | None:
        pending: list[dict[str, Any]] = api.get("/api/suggestions?status=pending").json()
        return next((s for s in pending if s["object_id"] == object_id), None)

    made: dict[str, Any] = wait_for(found, timeout=60)
    return made


def created(api: httpx2.Client, type: str, data: dict[str, Any]) -> dict[str, Any]:
    return status(api.post("/api/objects", json={"type": type, "data": data}), 201)


def logged(server: Server, event: str) -> list[dict[str, Any]]:
    """The server's JSON log lines of ``event``."""
    lines = (json.loads(line) for line in server.output().splitlines() if line.startswith("{"))
    return [line for line in lines if line.get("event") == event]


def canonical_sha256(operations: list[dict[str, Any]]) -> str:
    text = json.dumps(operations, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


# -- roles on every route ------------------------------------------------------------

OPERATES = [
    ("POST", "/api/objects", {"type": "Person", "data": {"name": "Eve"}}),
    ("PATCH", "/api/objects/obj_x", {"data": {"name": "Eve"}}),
    ("DELETE", "/api/objects/obj_x", None),
    ("POST", "/api/runs", {"graph": "relay", "input": {"seconds": 1}}),
    ("POST", "/api/runs/run_x/signals", {"name": "go"}),
    ("POST", "/api/runs/run_x/prompts/p_x/reply", {"answer": "yes"}),
    ("POST", "/api/runs/run_x/abort", {"reason": "no"}),
    ("POST", "/api/runs/run_x/resume", None),
    ("POST", "/api/runs/run_x/fork", {"at": 1}),
    ("POST", "/api/agents/enrich/run", None),
]
ADMINISTERS = [
    ("POST", "/api/agents", {"name": "new", "prompt": "hi"}),
    ("PATCH", "/api/agents/enrich", {"enabled": False}),
    ("DELETE", "/api/agents/enrich", None),
    ("POST", "/api/processing-log/1/retry", None),
]
READS = [
    "/api/objects",
    "/api/suggestions",
    "/api/runs",
    "/api/agents",
    "/api/processing-log",
    "/api/processing-log/history",
]


@pytest.mark.parametrize(
    ("token", "who", "routes", "role"),
    [
        pytest.param(CAROL, "carol", OPERATES, "operator", id="viewer-operates"),
        pytest.param(ERIN, "erin", OPERATES, "operator", id="approver-operates"),
        pytest.param(BOB, "bob", ADMINISTERS, "admin", id="operator-administers"),
        pytest.param(DAN, "dan", ADMINISTERS, "admin", id="operator-alone-administers"),
        pytest.param(CAROL, "carol", ADMINISTERS, "admin", id="viewer-administers"),
    ],
)
def test_a_lesser_role_is_refused_naming_the_role_and_logged(
    server: Server, token: str, who: str, routes: list[tuple[str, str, Any]], role: str
) -> None:
    with server.client(token) as client:
        for method, path, body in routes:
            refused = client.request(method, path, json=body)
            assert refused.status_code == 403, (method, path, refused.text)
            detail = refused.json()["detail"]
            assert detail.startswith(f"{method} ")
            assert f"needs the {role} role, and user:{who} holds" in detail
    lines = [line for line in logged(server, "permission denied") if line["principal"] == who]
    assert {(line["route"], line["role_needed"]) for line in lines} >= {
        (f"{method} {path.replace('obj_x', '{object_id}')}", role)
        for method, path, _ in routes[:3]
        if path.startswith("/api/objects")
    }


def test_every_role_reads_and_none_is_refused_a_read(server: Server) -> None:
    for token in (CAROL, DAN, ERIN, BOB, ALICE):
        with server.client(token) as client:
            for path in READS:
                status(client.get(path), 200)


def test_without_a_token_or_with_a_wrong_one_nothing_is_answered(server: Server) -> None:
    with server.client(None) as anonymous:
        assert status(anonymous.get("/api/objects"), 401)["error"] == "unauthorized"
    with server.client("tok-nobody") as stranger:
        assert status(stranger.get("/api/objects"), 401)["detail"] == (
            "The API token is not valid; ask the operator for one."
        )


def test_each_role_does_what_it_may(server: Server) -> None:
    with server.client(DAN) as dan, server.client(ALICE) as alice:
        ada = created(dan, "Person", {"name": "Ada"})
        assert ada["actor"] == {"type": "user", "id": "dan"}  # the principal is the actor
        run = status(dan.post("/api/runs", json={"graph": "relay", "input": {"seconds": 30}}), 202)
        aborted = dan.post(f"/api/runs/{run['run_id']}/abort", json={"reason": "done"})
        assert aborted.status_code in (200, 409), aborted.text  # 409: it ended already
        changed = status(alice.patch("/api/agents/enrich", json={"enabled": True}), 200)
        assert changed["enabled"] is True


# -- the WebSocket channel -------------------------------------------------------------


def answer_of(ws: Any) -> dict[str, Any]:
    """The first message of the channel that is not a signal (the answer to a command)."""
    for text in ws:
        message: dict[str, Any] = json.loads(text)
        if message["type"] != "signal":
            return message
    raise AssertionError(f"closed with {ws.close_code} ({ws.close_reason}) before answering")


def test_a_viewer_follows_a_run_but_its_commands_are_refused(server: Server) -> None:
    with server.client(DAN) as dan:
        run_id = status(
            dan.post("/api/runs", json={"graph": "relay", "input": {"seconds": 60}}), 202
        )["run_id"]
        wait_for(lambda: dan.get(f"/api/runs/{run_id}").status_code == 200, timeout=60)
    uri = f"ws{server.url.removeprefix('http')}/api/runs/{run_id}/ws"
    with connect(uri, additional_headers={"Authorization": f"Bearer {CAROL}"}) as ws:
        ws.send(json.dumps({"type": "send", "name": "go", "payload": {}}))
        answer = answer_of(ws)
    assert answer["type"] == "error"
    assert answer["error"] == "forbidden"
    assert "needs the operator role, and user:carol holds viewer" in answer["detail"]
    with connect(uri, additional_headers={"Authorization": f"Bearer {DAN}"}) as ws:
        ws.send(json.dumps({"type": "send", "name": "go", "payload": {}}))
        answer = answer_of(ws)
    assert (answer["type"], answer["command"]) == ("ok", "send"), answer


# -- approvals with provenance -----------------------------------------------------------


def test_the_proposer_may_not_approve_an_operator_may_not_and_bob_approves_as_bob(
    server: Server,
) -> None:
    with server.client(ALICE) as alice, server.client(DAN) as dan, server.client(BOB) as bob:
        ada = created(alice, "Person", {"name": "Ada"})
        pending = suggestion_for(alice, ada["id"])
        assert pending["proposer"] == {"type": "user", "id": "alice"}
        path = f"/api/suggestions/{pending['id']}/approve"
        own = status(alice.post(path), 403)["detail"]
        assert own == (
            f"user:alice made the change agent 'enrich' reacted to, so they may not approve "
            f"suggestion {pending['id']!r} (Approval(distinct_from_proposer=True)): another "
            "principal must approve it."
        )
        operator = status(dan.post(path), 403)["detail"]
        assert operator == (
            "Deciding on the suggestions of agent 'enrich' needs the approver role (or the "
            "admin role), and user:dan holds operator; ask someone who may."
        )
        approved = status(bob.post(path), 200)
        assert approved["status"] == "completed"
        assert approved["resolved_by"] == {"type": "user", "id": "bob"}  # not alice
        person = status(alice.get(f"/api/objects/{ada['id']}"), 200)
        assert person["data"]["employer"] == "Acme"


def test_a_viewer_cannot_force_an_approval(server: Server) -> None:
    with server.client(ALICE) as alice, server.client(CAROL) as carol:
        ada = created(alice, "Person", {"name": "Grace"})
        pending = suggestion_for(alice, ada["id"])
        refused = carol.post(
            f"/api/suggestions/{pending['id']}/approve?force=true",
            json={"justification": "I say so"},
        )
        assert status(refused, 403)["error"] == "forbidden"
        still = status(alice.get(f"/api/suggestions/{pending['id']}"), 200)
        assert (still["status"], still["decisions"]) == ("pending", [])


def test_four_eyes_need_two_distinct_approvers_and_the_same_one_twice_is_a_conflict(
    server: Server,
) -> None:
    with server.client(ALICE) as alice, server.client(BOB) as bob, server.client(ERIN) as erin:
        deal = created(alice, "Deal", {"name": "big"})
        pending = suggestion_for(alice, deal["id"])
        path = f"/api/suggestions/{pending['id']}/approve"
        first = status(bob.post(path), 200)
        assert first["status"] == "pending"
        assert [a["principal"] for a in first["approvals"]] == ["bob"]
        again = status(bob.post(path), 409)["detail"]
        assert again.startswith(f"user:bob approved suggestion {pending['id']!r} already (at ")
        assert status(alice.get(f"/api/objects/{deal['id']}"), 200)["version"] == 1
        second = status(erin.post(path), 200)
        assert second["status"] == "completed"
        assert status(alice.get(f"/api/objects/{deal['id']}"), 200)["data"]["checked"] == "yes"
        detail = status(alice.get(f"/api/suggestions/{pending['id']}"), 200)
    outcomes = [(d["principal"]["id"], d["outcome"], d["approvals"]) for d in detail["decisions"]]
    assert outcomes == [("bob", "approved", 1), ("erin", "applied", 2)]
    assert {d["needed"] for d in detail["decisions"]} == {2}


def test_an_override_needs_a_justification_and_says_it_is_one(server: Server) -> None:
    with server.client(ALICE) as alice, server.client(BOB) as bob:
        ada = created(alice, "Person", {"name": "Hedy"})
        pending = suggestion_for(alice, ada["id"])
        changed = {"data": {"employer": "Other"}}
        status(alice.patch(f"/api/objects/{ada['id']}", json=changed), 200)
        path = f"/api/suggestions/{pending['id']}/approve"
        stale = status(bob.post(path), 409)["detail"]
        assert "whose 'employer' changed since the agent saw version 1 (it is at version 2" in stale
        unjustified = status(bob.post(f"{path}?force=true"), 422)["detail"]
        assert unjustified == (
            "A justification is required for an override on this agent's suggestions "
            "(Approval(justification='override')): say why, in justification."
        )
        long = status(bob.post(f"{path}?force=true", json={"justification": "é" * 3000}), 422)
        assert long["detail"] == (
            "The justification is 6,000 bytes long; at most 4,096 are taken "
            "(REACTOR_MAX_REASON). Shorten it; nothing was done."
        )
        why = "The employer was set meanwhile; ours holds."
        done = status(bob.post(f"{path}?force=true", json={"justification": why}), 200)
        assert done["status"] == "completed"
        (decision,) = status(alice.get(f"/api/suggestions/{pending['id']}"), 200)["decisions"]
    assert (decision["decision"], decision["force"], decision["justification"]) == (
        "override",
        True,
        why,
    )


def test_a_suggestion_older_than_expires_after_cannot_be_approved(server: Server) -> None:
    with server.client(ALICE) as alice, server.client(BOB) as bob:
        quote = created(alice, "Quote", {"symbol": "ACME"})
        pending = suggestion_for(alice, quote["id"])
        made = datetime.fromisoformat(pending["created_at"]).timestamp()
        wait_for(lambda: time.time() > made + FLEETING + 0.5, timeout=60)
        refused = status(bob.post(f"/api/suggestions/{pending['id']}/approve"), 409)["detail"]
        assert refused.startswith(f"Suggestion {pending['id']!r} expired: it is older than")
        expired = status(alice.get(f"/api/suggestions/{pending['id']}"), 200)
        assert status(alice.get(f"/api/objects/{quote['id']}"), 200)["version"] == 1
    assert expired["status"] == "expired"


def test_by_names_the_users_who_decide_and_an_admin_always_may(server: Server) -> None:
    with (
        server.client(ALICE) as alice,
        server.client(BOB) as bob,
        server.client(DAN) as dan,
    ):
        first = created(dan, "Note", {"text": "one"})
        second = created(dan, "Note", {"text": "two"})
        one, two = suggestion_for(dan, first["id"]), suggestion_for(dan, second["id"])
        refused = status(bob.post(f"/api/suggestions/{one['id']}/approve"), 403)["detail"]
        assert "needs user:dan (or the admin role), and user:bob holds approver, operator" in (
            refused
        )
        bare = status(dan.post(f"/api/suggestions/{one['id']}/reject"), 422)["detail"]
        assert bare.startswith("A justification is required for every decision")
        justified = {"justification": "I wrote it myself"}
        done = status(dan.post(f"/api/suggestions/{one['id']}/approve", json=justified), 200)
        assert done["status"] == "completed"  # distinct_from_proposer=False: his own
        admin = status(alice.post(f"/api/suggestions/{two['id']}/reject", json=justified), 200)
        assert admin["status"] == "rejected"


def test_a_decision_is_recorded_with_its_provenance_everywhere(server: Server) -> None:
    with server.client(ALICE) as alice, server.client(BOB) as bob:
        ada = created(alice, "Person", {"name": "Ada Provenance"})
        pending = suggestion_for(alice, ada["id"])
        edited = [{"op": "update", "id": ada["id"], "data": {"employer": "Initech"}}]
        body = {"operations": edited, "justification": "Initech, not Acme"}
        done = status(bob.post(f"/api/suggestions/{pending['id']}/modify", json=body), 200)
        assert done["status"] == "completed"
        person = status(alice.get(f"/api/objects/{ada['id']}"), 200)
        detail = status(alice.get(f"/api/suggestions/{pending['id']}"), 200)
        listed = alice.get(f"/api/processing-log/history?suggestion_id={pending['id']}")
        assert listed.status_code == 200, listed.text
        history: list[dict[str, Any]] = listed.json()
    assert person["data"]["employer"] == "Initech"
    (decision,) = detail["decisions"]
    assert detail["proposed_by_run"] == {"run_id": pending["run_id"], "agent": "enrich"}
    assert decision["suggestion_id"] == pending["id"]
    assert decision["proposed_by_run"] == {"run_id": pending["run_id"], "agent": "enrich"}
    assert (decision["object_id"], decision["object_version"]) == (ada["id"], 1)
    assert decision["changes_sha256"] == canonical_sha256(edited)
    assert decision["principal"] == {
        "id": "bob",
        "roles": ["approver", "operator"],
        "authenticator": "token",
    }
    assert datetime.fromisoformat(decision["decided_at"]).tzinfo is not None
    assert (decision["decision"], decision["outcome"]) == ("modify", "applied")
    assert decision["justification"] == "Initech, not Acme"
    assert decision["diff"] == [
        {
            "index": 0,
            "proposed": {"op": "update", "id": ada["id"], "data": {"employer": "Acme"}},
            "decided": edited[0],
        }
    ]
    assert [(e["name"], e["payload"]) for e in history] == [("suggestion:decided", decision)]
    lines = [
        line
        for line in logged(server, "suggestion:decided")
        if line.get("suggestion_id") == pending["id"]
    ]
    assert len(lines) == 1
    assert {key: lines[0][key] for key in decision} == decision


def test_an_edit_is_checked_like_the_agents_own_changes(server: Server) -> None:
    with server.client(ALICE) as alice, server.client(BOB) as bob:
        ada = created(alice, "Person", {"name": "Ada Checked"})
        pending = suggestion_for(alice, ada["id"])
        bad = [{"op": "update", "id": ada["id"], "data": {"salary": 1}}]
        refused = bob.post(f"/api/suggestions/{pending['id']}/modify", json={"operations": bad})
        assert refused.status_code == 422, refused.text
        still = status(alice.get(f"/api/suggestions/{pending['id']}"), 200)
    assert (still["status"], still["decisions"], still["operations"]) == (
        "pending",
        [],
        pending["operations"],
    )


def test_reasons_and_replies_are_capped(server: Server) -> None:
    with server.client(DAN) as dan:
        run_id = status(dan.post("/api/runs", json={"graph": "approval", "input": "v1"}), 202)[
            "run_id"
        ]

        def prompt() -> str | None:
            found = status(dan.get(f"/api/runs/{run_id}"), 200)["prompts"]
            return found[0]["prompt_id"] if found else None

        prompt_id = wait_for(prompt, timeout=60)
        long = "x" * 5000
        reply = dan.post(f"/api/runs/{run_id}/prompts/{prompt_id}/reply", json={"answer": long})
        assert status(reply, 422)["detail"].startswith("The answer is 5,000 bytes long")
        abort = dan.post(f"/api/runs/{run_id}/abort", json={"reason": long})
        assert status(abort, 422)["detail"].startswith("The reason is 5,000 bytes long")
        assert status(dan.get(f"/api/runs/{run_id}"), 200)["info"]["status"] == "waiting"
