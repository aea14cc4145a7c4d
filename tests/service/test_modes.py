"""Execution modes, suggestions and their resolution, capabilities."""

from __future__ import annotations

import re
from typing import Any

import pytest
import structlog

from reactor import AgentContext, ScriptedProvider, Signal, agent
from reactor.service import (
    AgentActor,
    Capabilities,
    CapabilityError,
    Changes,
    Create,
    Delete,
    ObjectNotFoundError,
    Reaction,
    SuggestionNotFoundError,
    SuggestionResolvedError,
    Update,
    User,
)
from tests.service.support import running

ON_PEOPLE = Reaction(types=["Person"], events=["created"])


def employer_of(ctx_id: str, name: str = "Analytical Engines") -> Changes:
    return Changes(
        reasoning="Ada worked with Babbage.",
        operations=(Create("Company", {"name": name}), Update(ctx_id, {"employer": name})),
    )


def enricher(mode: str, provider_answers: list[Any] | None = None) -> Any:
    """A handler agent whose output is the changes a model would propose."""

    def enrich(ctx: AgentContext[Any]) -> Changes:
        answer = employer_of(ctx.object.id)
        if provider_answers:
            return answer.model_copy(update={"mode": provider_answers.pop(0)})
        return answer

    return agent(run=enrich, output=Changes, reaction=ON_PEOPLE, execution_mode=mode)  # type: ignore[arg-type]


async def test_execute_applies_the_changes_at_once_as_the_agent(url: str) -> None:
    async with running(url, {"enrich": enricher("execute")}) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        await service.idle(timeout=60)
        person = await objects.get(ada.id)
        (company,) = await objects.list("Company")
        assert await service.suggestions() == []
    assert (person.version, person.data["employer"], person.actor) == (
        2,
        "Analytical Engines",
        AgentActor("enrich"),
    )
    assert company.actor == AgentActor("enrich")


async def test_suggest_stores_a_suggestion_and_changes_nothing(url: str) -> None:
    seen: list[Signal] = []
    async with running(url, {"enrich": enricher("suggest")}) as (objects, service):
        objects.bus.subscribe("suggestion:*", seen.append)
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        await service.idle(timeout=60)
        (suggestion,) = await service.suggestions(status="pending")
        (entry,) = await service.processing_log()
        assert await objects.get(ada.id) == ada
        assert await objects.list("Company") == []
    assert suggestion.id.startswith("sug_")
    assert (suggestion.agent, suggestion.object_id, suggestion.status) == (
        "enrich",
        ada.id,
        "pending",
    )
    assert suggestion.reasoning == "Ada worked with Babbage."
    assert suggestion.operations == employer_of(ada.id).operations
    assert suggestion.run_id == entry.run_id
    assert entry.status == "completed"
    assert [(s.name, s.payload["id"], s.payload["operations"]) for s in seen] == [
        ("suggestion:created", suggestion.id, 2)
    ]


@pytest.mark.parametrize(
    ("modes", "applied", "suggested"),
    [
        pytest.param(["execute"], True, 0, id="execute"),
        pytest.param(["suggest"], False, 1, id="suggest"),
    ],
)
async def test_hybrid_lets_each_output_choose(
    url: str, modes: list[str], applied: bool, suggested: int
) -> None:
    async with running(url, {"enrich": enricher("hybrid", list(modes))}) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        assert ((await objects.get(ada.id)).version == 2) is applied
        assert len(await service.suggestions()) == suggested


async def test_hybrid_suggests_unless_the_output_says_execute(url: str) -> None:
    provider = ScriptedProvider(
        {
            "enrich": lambda request: {
                "reasoning": "no mode given",
                "operations": [{"op": "delete", "id": request.prompt.split()[-1]}],
            }
        }
    )
    enrich = agent(
        prompt="Look at {{ object.id }}",
        output=Changes,
        reaction=ON_PEOPLE,
        execution_mode="hybrid",
    )
    async with running(url, {"enrich": enrich}, provider=provider) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (suggestion,) = await service.suggestions()
    assert suggestion.operations == (Delete(ada.id),)
    assert provider.requests[0].output_schema is not None


async def test_approving_applies_the_changes_as_the_agent_and_completes(url: str) -> None:
    seen: list[Signal] = []
    async with running(url, {"enrich": enricher("suggest")}) as (objects, service):
        objects.bus.subscribe("suggestion:*", seen.append)
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        approved = await service.approve(pending.id, actor=User("boss"))
        person = await objects.get(ada.id)
        events = await objects.events(since=1)
        (listed,) = await service.suggestions(status="completed")
    assert (approved.status, approved.resolved_by, approved.approved_by) == (
        "completed",
        User("boss"),
        User("boss"),
    )
    assert listed == approved
    assert person.data["employer"] == "Analytical Engines"
    assert [(e.type, e.event, e.actor, e.approved_by) for e in events] == [
        ("Company", "created", AgentActor("enrich"), User("boss")),
        ("Person", "updated", AgentActor("enrich"), User("boss")),
    ]
    assert [s.name for s in seen] == ["suggestion:created", "suggestion:approved"]
    assert seen[1].payload["actor"] == {"type": "user", "id": "boss"}


async def test_approving_twice_is_an_error(url: str) -> None:
    async with running(url, {"enrich": enricher("suggest")}) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        await service.approve(pending.id, actor=User("boss"))
        for again in (service.approve, service.reject):
            with pytest.raises(
                SuggestionResolvedError,
                match=rf"^Suggestion '{pending.id}' was already approved by user:boss at "
                r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC; a suggestion is resolved once\.$",
            ):
                await again(pending.id, actor=User("other"))
        assert len(await objects.list("Company")) == 1


async def test_rejecting_changes_nothing(url: str) -> None:
    seen: list[Signal] = []
    async with running(url, {"enrich": enricher("suggest")}) as (objects, service):
        objects.bus.subscribe("suggestion:rejected", seen.append)
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        rejected = await service.reject(pending.id, actor=User("boss"))
        assert (rejected.status, rejected.resolved_by, rejected.approved_by) == (
            "rejected",
            User("boss"),
            None,
        )
        assert await objects.get(ada.id) == ada
        assert await objects.list("Company") == []
        with pytest.raises(SuggestionResolvedError, match=r"^Suggestion '.*' was already rejected"):
            await service.approve(pending.id)
    assert [s.payload["status"] for s in seen] == ["rejected"]


async def test_an_unknown_suggestion_is_not_found(url: str) -> None:
    async with running(url, {}) as (_, service):
        with pytest.raises(
            SuggestionNotFoundError,
            match=r"^No suggestion 'sug_x'; list them with service\.suggestions\(\)\.$",
        ):
            await service.approve("sug_x")


async def test_a_suggestion_that_cannot_apply_any_more_stays_pending(url: str) -> None:
    async with running(url, {"enrich": enricher("suggest")}) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (pending,) = await service.suggestions()
        await objects.delete(ada.id)
        with pytest.raises(ObjectNotFoundError):
            await service.approve(pending.id, actor=User("boss"))
        assert [s.status for s in await service.suggestions()] == ["pending"]
        assert await objects.list("Company") == []
        await service.reject(pending.id, actor=User("boss"))


async def test_suggestions_are_listed_newest_first(url: str) -> None:
    async with running(url, {"enrich": enricher("suggest")}) as (objects, service):
        made = [await objects.create("Person", {"name": n}) for n in ("A", "B", "C")]
        await service.idle(timeout=60)
        listed = await service.suggestions()
    assert sorted(str(s.object_id) for s in listed) == sorted(o.id for o in made)
    times = [s.created_at for s in listed]
    assert times == sorted(times, reverse=True)


async def test_changes_made_through_ctx_objects_are_suggested_in_suggest_mode(url: str) -> None:
    shown: list[Any] = []

    async def link(ctx: AgentContext[Any]) -> None:
        company = await ctx.objects.create("Company", {"name": "Acme"})
        person = await ctx.objects.update(ctx.object.id, {"employer": "Acme"})
        shown.append((company, person))

    agents = {"link": agent(run=link, reaction=ON_PEOPLE, execution_mode="suggest")}
    async with running(url, agents) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        assert await objects.list("Company") == []
        (pending,) = await service.suggestions()
        await service.approve(pending.id, actor=User("boss"))
        (company,) = await objects.list("Company")
        person = await objects.get(ada.id)
    ((held_company, held_person),) = shown
    assert company.id == held_company.id
    assert (held_person.version, held_person.data["employer"]) == (2, "Acme")
    assert person.data == held_person.data
    assert pending.operations == (
        Create("Company", {"name": "Acme", "domain": None}, id=held_company.id),
        Update(ada.id, {"employer": "Acme"}),
    )


async def test_a_forbidden_delete_is_refused_logged_and_emitted(url: str) -> None:
    refused: list[CapabilityError] = []

    async def dedup(ctx: AgentContext[Any]) -> None:
        try:
            await ctx.objects.delete(ctx.object.id)
        except CapabilityError as exc:
            refused.append(exc)
            raise

    dedup_agent = agent(
        run=dedup,
        reaction=ON_PEOPLE,
        execution_mode="execute",
        capabilities=Capabilities(can_delete=False),
    )
    seen: list[Signal] = []
    async with running(url, {"dedup": dedup_agent}) as (objects, service):
        objects.bus.subscribe("capability:denied", seen.append)
        with structlog.testing.capture_logs() as logs:
            ada = await objects.create("Person", {"name": "Ada"})
            await service.idle(timeout=60)
        assert await objects.get(ada.id) == ada
        (entry,) = await service.processing_log()
    message = (
        f"Agent 'dedup' may not delete the Person object {ada.id}: it may not delete objects "
        "(can_delete=False). Nothing was changed; widen the agent's "
        "capabilities=Capabilities(...) if it should."
    )
    (error,) = refused
    assert str(error) == message
    assert (error.agent, error.operation, error.type) == ("dedup", "delete", "Person")
    assert isinstance(error, PermissionError)
    assert (entry.status, entry.error) == ("failed", f"CapabilityError: {message}")
    (denied,) = [line for line in logs if line["event"] == "capability denied"]
    assert denied["log_level"] == "error"
    assert (denied["agent"], denied["operation"], denied["type"]) == ("dedup", "delete", "Person")
    assert [s.payload for s in seen] == [
        {
            "agent": "dedup",
            "operation": "delete",
            "type": "Person",
            "object_id": ada.id,
            "reason": "it may not delete objects (can_delete=False)",
        }
    ]


async def test_an_agent_may_only_touch_its_allowed_types(url: str) -> None:
    def file_it(ctx: AgentContext[Any]) -> Changes:
        return Changes(operations=(Create("Document", {"title": "CV"}),))

    filer = agent(
        run=file_it,
        output=Changes,
        reaction=ON_PEOPLE,
        execution_mode="execute",
        capabilities=Capabilities(allowed_types=["Person", "Company"]),
    )
    async with running(url, {"filer": filer}) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (entry,) = await service.processing_log()
        assert await objects.list("Document") == []
    assert entry.status == "failed"
    assert entry.error == (
        "CapabilityError: Agent 'filer' may not create the Document object: it may not touch "
        "'Document' objects (allowed types: Person, Company). Nothing was changed; widen the "
        "agent's capabilities=Capabilities(...) if it should."
    )


@pytest.mark.parametrize("mode", ["execute", "suggest"])
async def test_changes_with_a_forbidden_operation_apply_none_of_them(url: str, mode: str) -> None:
    def merge(ctx: AgentContext[Any]) -> Changes:
        return Changes(
            reasoning="duplicates",
            operations=(
                Create("Company", {"name": "Acme"}),
                Update(ctx.object.id, {"employer": "Acme"}),
                Delete(ctx.object.id),
            ),
        )

    merger = agent(
        run=merge,
        output=Changes,
        reaction=ON_PEOPLE,
        execution_mode=mode,  # type: ignore[arg-type]
        capabilities=Capabilities(can_delete=False),
    )
    async with running(url, {"merge": merger}) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        assert await objects.get(ada.id) == ada
        assert await objects.list("Company") == []
        assert await service.suggestions() == []
        (entry,) = await service.processing_log()
    assert entry.status == "failed"
    assert entry.error is not None
    assert re.match(
        r"^CapabilityError: Agent 'merge' may not delete the Person object", entry.error
    )


def test_a_suggestions_operations_keep_their_old_name_as_a_deprecated_alias() -> None:
    from datetime import UTC, datetime

    from reactor.service import Suggestion

    made = Suggestion.model_validate(
        {
            "id": "sug_1",
            "agent": "enrich",
            "object_id": "obj_1",
            "changes": [{"op": "delete", "id": "obj_1"}],
            "reasoning": "",
            "created_at": datetime.now(UTC),
        }
    )
    assert made.operations == (Delete("obj_1"),)
    with pytest.warns(
        DeprecationWarning, match=r"^Suggestion\.changes is now Suggestion\.operations"
    ):
        assert made.changes == made.operations
    assert "changes" not in made.model_dump()
