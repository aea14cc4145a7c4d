"""Approving and rejecting a suggestion leaves an audit trail, on every backend.

``suggestion:decided`` (the suggestion, the run and agent that proposed it, the object
and its version, the SHA-256 of the changes decided on, the principal with its roles and
authenticator, the time, the decision, its outcome, the justification) goes into the
processing log's history (in the transaction that decides) and into the process's log
at ``info``; a decision that did not happen (a stale approval refused, changes that
could not apply) leaves neither.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import structlog

from reactor import AgentContext, agent
from reactor.service import (
    Changes,
    Create,
    ObjectNotFoundError,
    Reaction,
    ReactionService,
    Suggestion,
    SuggestionStaleError,
    Update,
    User,
)
from reactor.service._reactions.resolve import changes_digest
from tests.service.server import BOB, serving, wait_for
from tests.service.support import running


def _employer(ctx: AgentContext[Any]) -> Changes:
    return Changes(
        reasoning="Ada worked with Babbage.",
        operations=(
            Create("Company", {"name": "Analytical Engines"}),
            Update(ctx.object.id, {"employer": "Analytical Engines"}),
        ),
    )


AGENTS = {
    "enrich": agent(
        run=_employer,
        output=Changes,
        reaction=Reaction(types=["Person"], events=["created"]),
        execution_mode="suggest",
    )
}


def decided(
    suggestion: Suggestion,
    decision: str = "approve",
    outcome: str = "applied",
    *,
    force: bool = False,
    justification: str | None = None,
    who: str = "boss",
    principal: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The history's payload (and the log line's fields) of one decision, but its time."""
    return {
        "suggestion_id": suggestion.id,
        "proposed_by_run": {"run_id": suggestion.run_id, "agent": "enrich"},
        "object_id": suggestion.object_id,
        "object_version": 1,
        "changes_sha256": changes_digest(suggestion.operations),
        "principal": principal or {"id": who, "roles": [], "authenticator": "code"},
        "decision": decision,
        "outcome": outcome,
        "justification": justification,
        "force": force,
        "approvals": 1 if outcome != "rejected" else 0,
        "needed": 1,
        "diff": None,
        "actor": {"type": "user", "id": who},
    }


def timeless(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A decision without its time (checked to be an ISO 8601 time)."""
    kept = dict(payload)
    assert datetime.fromisoformat(kept.pop("decided_at")).tzinfo is not None
    return kept


def lines(logs: Sequence[Mapping[str, Any]], name: str) -> list[dict[str, Any]]:
    """The ``info`` lines logged as ``name``, without their event, level and time."""
    return [
        timeless({k: v for k, v in line.items() if k not in ("event", "log_level")})
        for line in logs
        if line["event"] == name and line["log_level"] == "info"
    ]


async def history(service: ReactionService) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, timeless(e.payload)) for e in await service.suggestion_store.history.list()]


async def test_approving_is_in_the_history_and_the_log(url: str) -> None:
    async with running(url, AGENTS) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        with structlog.testing.capture_logs() as logs:
            await service.approve(pending.id, actor=User("boss"))
        (entry,) = await service.suggestion_store.history.list(suggestion_id=pending.id)
        assert await service.suggestion_store.history.list(object_id=ada.id) == [entry]
        assert await service.suggestion_store.history.list(after=entry.id) == []
    expected = decided(pending)
    assert (entry.name, entry.suggestion_id, entry.object_id, timeless(entry.payload)) == (
        "suggestion:decided",
        pending.id,
        ada.id,
        expected,
    )
    assert lines(logs, "suggestion:decided") == [expected]


async def test_rejecting_is_in_the_history_and_the_log(url: str) -> None:
    async with running(url, AGENTS) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        with structlog.testing.capture_logs() as logs:
            await service.reject(pending.id, actor=User("boss"))
        recorded = await history(service)
    expected = decided(pending, "reject", "rejected")
    assert recorded == [("suggestion:decided", expected)]
    assert lines(logs, "suggestion:decided") == [expected]


async def test_a_stale_approval_refused_leaves_no_trail_and_a_forced_one_says_so(
    url: str,
) -> None:
    async with running(url, AGENTS) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        await objects.update(ada.id, {"employer": "Babbage & Co"})
        with structlog.testing.capture_logs() as logs:
            with pytest.raises(SuggestionStaleError):
                await service.approve(pending.id, actor=User("boss"))
            assert await history(service) == []
            assert lines(logs, "suggestion:decided") == []
            why = "Someone set Ada's employer meanwhile; ours holds."
            await service.approve(pending.id, actor=User("boss"), force=True, justification=why)
        recorded = await history(service)
    expected = decided(pending, "override", force=True, justification=why)
    assert recorded == [("suggestion:decided", expected)]
    assert lines(logs, "suggestion:decided") == [expected]


async def test_an_approval_whose_changes_cannot_apply_leaves_no_trail(url: str) -> None:
    async with running(url, AGENTS) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        await objects.delete(ada.id)
        with structlog.testing.capture_logs() as logs, pytest.raises(ObjectNotFoundError):
            await service.approve(pending.id, actor=User("boss"))
        assert await history(service) == []
        await service.reject(pending.id, actor=User("boss"))
        assert [p["outcome"] for _, p in await history(service)] == ["rejected"]
    assert lines(logs, "suggestion:decided") == []


def open_files() -> set[str]:
    """The files this process holds open."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # closed since it was listed
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
    return found


async def test_with_the_service_tables_elsewhere_approvals_are_recorded_there(
    url: str, tmp_path: Path
) -> None:
    elsewhere = f"sqlite:///{tmp_path / 'service.db'}"
    async with running(url, AGENTS, db=elsewhere) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        await service.approve(pending.id, actor=User("boss"))
        assert service.suggestion_store.db is not objects.db
        recorded = await history(service)
    assert str(tmp_path / "service.db") not in open_files()  # the service closed it
    assert recorded == [("suggestion:decided", decided(pending))]


def test_decisions_made_over_http_are_in_the_history(url: str, tmp_path: Path) -> None:
    with serving(url, tmp_path / "server.log") as server, server.client() as api:
        for _ in range(2):
            created = api.post("/api/objects", json={"type": "Person", "data": {"name": "Ada"}})
            assert created.status_code == 201, created.text

        def both() -> list[dict[str, Any]] | None:
            found: list[dict[str, Any]] = api.get("/api/suggestions?status=pending").json()
            return found if len(found) == 2 else None

        pending = wait_for(both, timeout=60)
        first, second = sorted(pending, key=lambda s: s["created_at"])
        with server.client(BOB) as bob:  # alice made the change: another must decide
            approved = bob.post(f"/api/suggestions/{first['id']}/approve")
            assert approved.status_code == 200, approved.text
            rejected = bob.post(f"/api/suggestions/{second['id']}/reject")
            assert rejected.status_code == 200, rejected.text
        found = api.get("/api/processing-log/history")
        assert found.status_code == 200, found.text
        only = api.get(f"/api/processing-log/history?suggestion_id={second['id']}").json()
    bob_principal = {"id": "bob", "roles": ["approver", "operator"], "authenticator": "token"}
    made = {s["id"]: Suggestion.model_validate(s) for s in (first, second)}
    assert [(e["name"], timeless(e["payload"])) for e in found.json()] == [
        (
            "suggestion:decided",
            decided(made[first["id"]], who="bob", principal=bob_principal),
        ),
        (
            "suggestion:decided",
            decided(made[second["id"]], "reject", "rejected", who="bob", principal=bob_principal),
        ),
    ]
    assert [e["suggestion_id"] for e in only] == [second["id"]]
