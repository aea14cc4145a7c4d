"""Decisions on suggestions in Python: the agent's ``Approval``, with and without a principal."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from reactor import AgentContext, PayloadError, agent
from reactor.service import (
    Approval,
    Changes,
    ObjectValidationError,
    PermissionDeniedError,
    Principal,
    Reaction,
    Suggestion,
    SuggestionResolvedError,
    Update,
    User,
)
from reactor.service._reactions.resolve import changes_digest
from tests.service.support import running

ALICE = Principal("alice", frozenset({"operator"}))
BOB = Principal("bob", frozenset({"approver"}))
ERIN = Principal("erin", frozenset({"approver"}))
ROOT = Principal("root", frozenset({"admin"}))


def _employer(ctx: AgentContext[Any]) -> Changes:
    return Changes(reasoning="Acme", operations=(Update(ctx.object.id, {"employer": "Acme"}),))


def _agents(approval: Approval) -> dict[str, Any]:
    return {
        "enrich": agent(
            run=_employer,
            output=Changes,
            reaction=Reaction(types=["Person"], events=["created"]),
            execution_mode="suggest",
            approval=approval,
        )
    }


async def _pending(objects: Any, service: Any) -> Suggestion:
    await objects.create("Person", {"name": "Ada"}, actor=User("alice"))
    await service.idle(timeout=60)
    (pending,) = await service.suggestions("pending")
    return pending  # type: ignore[no-any-return]


async def test_a_principal_is_held_to_the_approval_and_the_code_is_not(url: str) -> None:
    async with running(url, _agents(Approval())) as (objects, service):
        pending = await _pending(objects, service)
        assert pending.proposer == User("alice")
        with pytest.raises(PermissionDeniedError) as refused:
            await service.approve(pending.id, principal=ALICE)
        assert (refused.value.principal, refused.value.role) == ("alice", "approver")
        with pytest.raises(PermissionDeniedError, match="made the change agent 'enrich'"):
            await service.approve(pending.id, principal=Principal("alice", frozenset({"admin"})))
        done = await service.approve(pending.id, actor=User("alice"))  # the code's own call
    assert done.status == "completed"


async def test_two_approvals_of_distinct_principals_apply_the_changes(url: str) -> None:
    async with running(url, _agents(Approval(count=2))) as (objects, service):
        pending = await _pending(objects, service)
        first = await service.approve(pending.id, principal=BOB)
        assert (first.status, [a.principal for a in first.approvals]) == ("pending", ["bob"])
        assert first.approvals[0].changes_sha256 == changes_digest(pending.operations)
        with pytest.raises(SuggestionResolvedError, match=r"^user:bob approved suggestion"):
            await service.approve(pending.id, principal=BOB)
        listed = await service.suggestions("pending")
        assert [a.principal for a in listed[0].approvals] == ["bob"]
        done = await service.approve(pending.id, principal=ERIN)
        person = await objects.get(pending.object_id or "")
    assert done.status == "completed"
    assert person.data["employer"] == "Acme"


async def test_an_edit_starts_the_count_anew_and_is_checked_like_the_agents_own(
    url: str,
) -> None:
    async with running(url, _agents(Approval(count=2))) as (objects, service):
        pending = await _pending(objects, service)
        await service.approve(pending.id, principal=BOB)
        object_id = pending.object_id or ""
        with pytest.raises(ObjectValidationError):
            await service.modify(pending.id, [Update(object_id, {"salary": 1})], principal=ERIN)
        edited = [Update(object_id, {"employer": "Initech"})]
        counted = await service.modify(pending.id, edited, principal=ERIN)
        assert (counted.status, [a.principal for a in counted.approvals]) == (
            "pending",
            ["bob", "erin"],  # bob approved other changes: only erin's count
        )
        done = await service.approve(pending.id, principal=BOB)
        history = await service.suggestion_store.history.list(suggestion_id=pending.id)
        person = await objects.get(object_id)
    assert done.status == "completed"
    assert person.data["employer"] == "Initech"
    assert [(e.payload["decision"], e.payload["approvals"]) for e in history] == [
        ("approve", 1),
        ("modify", 1),
        ("approve", 2),
    ]
    assert history[1].payload["diff"] == [
        {
            "index": 0,
            "proposed": {"op": "update", "id": object_id, "data": {"employer": "Acme"}},
            "decided": {"op": "update", "id": object_id, "data": {"employer": "Initech"}},
        }
    ]


async def test_an_expired_suggestion_cannot_be_approved_but_an_admin_rejects_anything(
    url: str,
) -> None:
    approval = Approval(expires_after=timedelta(microseconds=1), justification="always")
    async with running(url, _agents(approval)) as (objects, service):
        pending = await _pending(objects, service)
        with pytest.raises(SuggestionResolvedError, match=r"expired: it is older than"):
            await service.approve(pending.id, principal=BOB, justification="late")
        (expired,) = await service.suggestions("expired")
        assert expired.id == pending.id
        second = await objects.create("Person", {"name": "Bea"}, actor=User("alice"))
        await service.idle(timeout=60)
        (other,) = [s for s in await service.suggestions("pending") if s.object_id == second.id]
        with pytest.raises(PayloadError, match="A justification is required for every decision"):
            await service.reject(other.id, principal=ROOT)
        rejected = await service.reject(other.id, principal=ROOT, justification="not now")
    assert rejected.status == "rejected"


async def test_a_retry_needs_an_admin_when_a_principal_asks(url: str) -> None:
    async with running(url, _agents(Approval())) as (_, service):
        with pytest.raises(PermissionDeniedError, match=r"needs the admin role"):
            await service.retry(1, principal=BOB)
