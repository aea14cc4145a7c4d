"""A desk's suggestions keep up: superseded, judged on what they depend on, paged, rejected
in bulk; and each agent's lag is read from the processing log. In process, on SQLite and
PostgreSQL (``tests/service/test_desk_served.py`` serves the same over HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from reactor import agent
from reactor.exceptions import AgentConfigError
from reactor.service import (
    Approval,
    ObjectStore,
    Principal,
    Reaction,
    ReactionService,
    ServiceConfigError,
    Suggestion,
    SuggestionResolvedError,
    SuggestionStaleError,
    Update,
    User,
)
from reactor.service._objects.db import Database
from reactor.service._objects.schema import processing_log
from reactor.service._objects.suggestions import Suggestions
from reactor.service._objects.values import AgentActor
from tests.service.desk import AGENTS, Quote, noter

BOSS = User("boss")


@asynccontextmanager
async def desk(url: str, **agents: Any) -> AsyncIterator[tuple[ObjectStore, ReactionService]]:
    """The desk's quotes and a running service with ``agents`` (the desk's by default)."""
    async with (
        ObjectStore(url, types=[Quote]) as objects,
        ReactionService(objects=objects, agents=agents or AGENTS) as service,
    ):
        yield objects, service


async def pending_of(service: ReactionService, agent: str, object_id: str) -> Suggestion:
    (found,) = (
        await service.suggestion_page(status="pending", agent=agent, object_id=object_id)
    ).items
    return found


# -- a newer suggestion supersedes the pending one ---------------------------------------


async def test_a_newer_suggestion_supersedes_the_pending_one_and_is_recorded(url: str) -> None:
    async with desk(url, analyst=AGENTS["analyst"]) as (objects, service):
        heard: list[tuple[str, Any]] = []
        service.bus.subscribe("suggestion:*", lambda s: heard.append((s.name, s.payload["id"])))
        quote = await objects.create("Quote", {"symbol": "ACME", "price": 10.0})
        await service.idle(timeout=60)
        first = await pending_of(service, "analyst", quote.id)
        await objects.update(quote.id, {"price": 11.0})
        await service.idle(timeout=60)
        second = await pending_of(service, "analyst", quote.id)
        old = await service.suggestion_store.get(first.id)
        history = await service.suggestion_store.history.list(suggestion_id=first.id)
        with pytest.raises(SuggestionResolvedError) as refused:
            await service.approve(first.id, actor=BOSS)
        assert (await service.suggestion_store.get(first.id)).status == "superseded"
    assert second.operations == (Update(quote.id, {"notes": "ACME at 11.0"}),)
    assert (old.status, old.superseded_by, old.resolved_by) == (
        "superseded",
        second.id,
        AgentActor("analyst"),
    )
    (line,) = history
    assert (line.name, line.suggestion_id, line.object_id) == (
        "suggestion:superseded",
        first.id,
        quote.id,
    )
    assert {k: v for k, v in line.payload.items() if k != "superseded_at"} == {
        "suggestion_id": first.id,
        "proposed_by_run": {"run_id": first.run_id, "agent": "analyst"},
        "object_id": quote.id,
        "object_version": 1,
        "superseded_by": second.id,
        "superseded_by_run": second.run_id,
        "actor": {"type": "agent", "id": "analyst"},
    }
    assert str(refused.value) == (
        f"Suggestion {first.id!r} was superseded by suggestion {second.id!r}, a newer one of "
        f"agent 'analyst' for object {quote.id!r}: decide on that one instead."
    )
    assert ("suggestion:superseded", first.id) in heard
    assert heard.index(("suggestion:superseded", first.id)) < heard.index(
        ("suggestion:created", second.id)
    )


async def test_suggestions_of_other_agents_or_objects_are_not_superseded(url: str) -> None:
    async with desk(url, analyst=AGENTS["analyst"], noter=AGENTS["noter"]) as (objects, service):
        acme = await objects.create("Quote", {"symbol": "ACME", "price": 10.0})
        bolt = await objects.create("Quote", {"symbol": "BOLT", "price": 20.0})
        await service.idle(timeout=60)
        await objects.update(acme.id, {"price": 12.0})
        await service.idle(timeout=60)
        pending = (await service.suggestion_page(status="pending")).items
    assert sorted((s.agent, s.object_id) for s in pending) == sorted(
        [("analyst", acme.id), ("analyst", bolt.id), ("noter", acme.id), ("noter", bolt.id)]
    )


async def test_suggestions_made_at_once_by_many_processes_leave_one_pending(url: str) -> None:
    """Each store has its own database connections, as another process would."""
    databases = [Database(url) for _ in range(4)]
    try:
        for db in databases:
            await db.open()
        stores = [Suggestions(db) for db in databases]

        async def suggest(store: Suggestions, n: int) -> None:
            await store.add(
                agent="analyst",
                object_id="obj_1",
                object_version=n,
                operations=[Update("obj_1", {"notes": str(n)})],
                reasoning="",
                run_id=None,
                basis={"notes": None},
            )

        await asyncio.gather(*(suggest(stores[n % 4], n) for n in range(40)))
        everything = await stores[0].list()
        history = await stores[0].history.list(limit=None)
    finally:
        for db in databases:
            await db.close()
    pending = [s for s in everything if s.status == "pending"]
    superseded = [s for s in everything if s.status == "superseded"]
    assert (len(pending), len(superseded)) == (1, 39)
    ids = {s.id for s in everything}
    assert all(s.superseded_by in ids for s in superseded)
    assert sorted(e.suggestion_id or "" for e in history) == sorted(s.id for s in superseded)


# -- staleness on what a suggestion depends on --------------------------------------------


async def test_a_price_change_leaves_a_notes_suggestion_fresh(url: str) -> None:
    async with desk(url, noter=AGENTS["noter"]) as (objects, service):
        quote = await objects.create("Quote", {"symbol": "ACME", "price": 10.0})
        await service.idle(timeout=60)
        pending = await pending_of(service, "noter", quote.id)
        await objects.update(quote.id, {"price": 10.5})
        await objects.update(quote.id, {"price": 10.75})
        approved = await service.approve(pending.id, actor=BOSS)
        now = await objects.get(quote.id)
        (decision,) = await service.suggestion_store.history.list(suggestion_id=pending.id)
    assert pending.basis == {"notes": None}
    assert approved.status == "completed"
    assert (now.version, now.data["price"], now.data["notes"]) == (4, 10.75, "watch the spread")
    assert (decision.payload["decision"], decision.payload["force"]) == ("approve", False)


async def test_a_notes_change_makes_a_notes_suggestion_stale_naming_the_field(url: str) -> None:
    async with desk(url, noter=AGENTS["noter"]) as (objects, service):
        quote = await objects.create("Quote", {"symbol": "ACME", "price": 10.0})
        await service.idle(timeout=60)
        pending = await pending_of(service, "noter", quote.id)
        await objects.update(quote.id, {"notes": "someone wrote this"}, actor=User("carol"))
        with pytest.raises(SuggestionStaleError) as stale:
            await service.approve(pending.id, actor=BOSS)
        unchanged = await objects.get(quote.id)
        forced = await service.approve(pending.id, actor=BOSS, force=True, justification="ours")
    assert stale.value.changed == ("notes",)
    assert (stale.value.based_on, stale.value.current) == (1, 2)
    assert str(stale.value) == (
        f"Suggestion {pending.id!r} is about object {quote.id!r}, whose 'notes' changed since "
        "the agent saw version 1 (it is at version 2 now): look at the object again, then "
        "approve anyway (force=True, ?force=true, with a justification) or reject it."
    )
    assert unchanged.data["notes"] == "someone wrote this"
    assert forced.status == "completed"


async def test_depends_on_makes_a_suggestion_stale_when_that_field_changes(url: str) -> None:
    async with desk(url, hedger=AGENTS["hedger"]) as (objects, service):
        quote = await objects.create("Quote", {"symbol": "ACME", "price": 10.0})
        await service.idle(timeout=60)
        pending = await pending_of(service, "hedger", quote.id)
        await objects.update(quote.id, {"price": 9.0})
        with pytest.raises(SuggestionStaleError) as stale:
            await service.approve(pending.id, actor=BOSS)
    assert pending.basis == {"hedge": False, "price": 10.0}
    assert stale.value.changed == ("price",)


async def test_a_field_that_changes_between_the_check_and_the_write_is_still_refused(
    url: str,
) -> None:
    """The transaction that applies the changes checks the fields again."""
    async with desk(url, noter=AGENTS["noter"]) as (objects, service):
        quote = await objects.create("Quote", {"symbol": "ACME", "price": 10.0})
        await service.idle(timeout=60)
        pending = await pending_of(service, "noter", quote.id)
        written = await objects.update(quote.id, {"notes": "first"})
        with pytest.raises(SuggestionStaleError):
            await objects.apply(
                pending.operations,
                actor=AgentActor("noter"),
                expect={quote.id: pending.basis or {}},
                stale=lambda found: SuggestionStaleError(f"now {found and found.version}"),
            )
        assert (await objects.get(quote.id)).version == written.version


async def test_a_suggestion_made_before_bases_were_kept_is_judged_by_its_version(
    url: str,
) -> None:
    async with desk(url, noter=AGENTS["noter"]) as (objects, service):
        quote = await objects.create("Quote", {"symbol": "ACME", "price": 10.0})
        await service.idle(timeout=60)
        pending = await pending_of(service, "noter", quote.id)
        async with service.db.write() as conn:  # as revision 0011 left it: no basis
            await conn.execute(sa.text("UPDATE suggestions SET basis = NULL"))
        await objects.update(quote.id, {"price": 10.5})
        with pytest.raises(SuggestionStaleError) as stale:
            await service.approve(pending.id, actor=BOSS)
    assert stale.value.changed == ()
    assert "which is at version 2 now, not version 1 as the agent saw it" in str(stale.value)


@pytest.mark.parametrize(
    ("given", "message"),
    [
        pytest.param(
            ["price", "no such field!"],
            r"^Invalid Reaction: Reaction\(depends_on=\.\.\.\): 'no such field!' is not a "
            r"field name: name a top-level field of the object's data \(a letter or '_', then "
            r"letters, digits or '_', at most 64\)\.$",
            id="not-a-name",
        ),
        pytest.param(
            ["a.b"],
            r"^Invalid Reaction: Reaction\(depends_on=\.\.\.\): 'a\.b' is not a field name",
            id="dotted",
        ),
    ],
)
def test_depends_on_takes_field_names_only(given: list[str], message: str) -> None:
    with pytest.raises(AgentConfigError, match=message):
        Reaction(types=["Quote"], depends_on=given)


def test_depends_on_takes_one_name_and_keeps_each_once() -> None:
    assert Reaction(depends_on="price").depends_on == ("price",)
    config = {"types": ["Quote"], "depends_on": ["price", "bid", "price"]}
    assert Reaction.from_config(config).depends_on == ("price", "bid")


# -- pages ---------------------------------------------------------------------------


async def test_suggestions_and_the_log_are_read_in_pages_newest_first(url: str) -> None:
    async with desk(url, noter=AGENTS["noter"]) as (objects, service):
        for n in range(7):
            await objects.create("Quote", {"symbol": f"S{n}", "price": float(n)})
        await service.idle(timeout=60)
        everything = await service.suggestions()
        pages, after = [], None
        while True:
            page = await service.suggestion_page(after=after, limit=3)
            pages.append([s.id for s in page.items])
            if (after := page.next) is None:
                break
        entries, after = [], None
        while True:
            logged = await service.processing_page(agent="noter", after=after, limit=2)
            entries += [entry.id for entry in logged.items]
            if (after := logged.next) is None:
                break
        with pytest.raises(ServiceConfigError, match=r"^'nonsense' is not the cursor of a page"):
            await service.suggestion_page(after="nonsense")
        with pytest.raises(ServiceConfigError, match=r"^'-1' is not the cursor of a page of the"):
            await service.processing_page(after="-1")
    assert [len(ids) for ids in pages] == [3, 3, 1]
    assert [i for ids in pages for i in ids] == [s.id for s in everything]  # newest first
    assert entries == sorted(entries, reverse=True)
    assert len(set(entries)) == 7


# -- rejecting many --------------------------------------------------------------------


async def test_many_suggestions_are_rejected_at_once_each_recorded(url: str) -> None:
    bob, someone = Principal("bob", frozenset({"approver"})), Principal("someone", frozenset())
    strict = agent(
        run=noter,
        reaction=Reaction(types=["Quote"], events=["created"]),
        execution_mode="suggest",
        approval=Approval(by=["user:someone"], justification="always"),
    )
    async with desk(url, noter=AGENTS["noter"], strict=strict) as (objects, service):
        for n in range(3):
            await objects.create("Quote", {"symbol": f"S{n}", "price": float(n)})
        await service.idle(timeout=60)
        noted = [s.id for s in (await service.suggestion_page(agent="noter")).items]
        first_strict = (await service.suggestion_page(agent="strict")).items[0].id
        await service.reject(noted[0], actor=BOSS)
        done = await service.reject_many(
            [*noted, first_strict, "sug_missing"], principal=bob, justification="the desk moved"
        )
        lines = await service.suggestion_store.history.list(limit=None)
        unjustified = await service.reject_many(agent="strict", principal=someone)
        justified = await service.reject_many(
            agent="strict", principal=someone, justification="stale prices"
        )
        with pytest.raises(ServiceConfigError, match=r"^Name the suggestions to reject by ids"):
            await service.reject_many(["x"], agent="strict", actor=BOSS)
        with pytest.raises(ServiceConfigError, match=r"^At most 1,000 suggestions are rejected"):
            await service.reject_many([f"sug_{n}" for n in range(1001)], actor=BOSS)
    assert (done.rejected, done.ids) == (2, noted[1:])
    refused = [(r.id, r.reason) for r in done.refused]
    already = f"Suggestion {noted[0]!r} was already rejected by user:boss at "
    assert refused[0][1].startswith(already)
    assert refused[1:] == [
        (
            first_strict,
            "Deciding on the suggestions of agent 'strict' needs user:someone (or the admin "
            "role), and user:bob holds approver; ask someone who may.",
        ),
        ("sug_missing", "No suggestion 'sug_missing'."),
    ]
    decided = [line for line in lines if line.name == "suggestion:decided"][1:]
    said = [
        (d.suggestion_id, d.payload["principal"]["id"], d.payload["justification"]) for d in decided
    ]
    assert said == [(noted[1], "bob", "the desk moved"), (noted[2], "bob", "the desk moved")]
    assert {d.payload["decision"] for d in decided} == {"reject"}
    assert (unjustified.rejected, {r.reason for r in unjustified.refused}) == (
        0,
        {
            "A justification is required for every decision on this agent's suggestions "
            "(Approval(justification='always')): say why, in justification."
        },
    )
    assert (justified.rejected, justified.refused, justified.more) == (3, [], False)


# -- lag -----------------------------------------------------------------------------


async def test_each_agents_lag_counts_its_entries_by_outcome(url: str) -> None:
    agents = {"noter": AGENTS["noter"], "hedger": AGENTS["hedger"]}
    async with ObjectStore(url, types=[Quote]) as objects:
        service = ReactionService(objects=objects, agents=agents)
        async with service:
            quote = await objects.create("Quote", {"symbol": "ACME", "price": 10.0})
            await service.idle(timeout=60)
            before = await service.lag()
        waited = datetime.now(UTC) - timedelta(seconds=90)
        backlog = [
            {
                "agent": "noter",
                "object_id": quote.id,
                "object_version": n,
                "event_type": "updated",
                "event_id": 1000 + n,
                "status": status,
                "created_at": waited + timedelta(seconds=n),
                "updated_at": waited,
            }
            for n, status in enumerate(["pending", "pending", "skipped", "failed"], 2)
        ]
        async with service.db.write() as conn:  # dispatched; the service stopped: none taken
            await conn.execute(processing_log.insert(), backlog)
        lag = await service.lag()
        one = await service.lag("noter")
    assert before["noter"].model_dump() == {
        "agent": "noter",
        "waiting": 0,
        "oldest": None,
        "outcomes": {"admitted": 1},
        "statuses": {"completed": 1},
        "held": 0,
        "spent": 0.0,
        "period": 3600.0,
    }
    noter = lag["noter"]
    assert (noter.waiting, noter.outcomes, noter.statuses) == (
        2,
        {"admitted": 2, "skipped": 1},
        {"completed": 1, "failed": 1, "pending": 2, "skipped": 1},
    )
    assert noter.oldest is not None
    assert 88 <= noter.oldest <= 88 + 60
    assert lag["hedger"].outcomes == {"admitted": 1}
    assert one == {"noter": noter.model_copy(update={"oldest": one["noter"].oldest})}
