"""Which events activate reaction agents, what they see, and the processing log."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from reactor import AgentContext, MemorySignalStore, ScriptedProvider, agent
from reactor.service import (
    AgentActor,
    ObjectStore,
    ProcessingEntry,
    Reaction,
    ReactionService,
    User,
)
from reactor.service._objects.db import Database
from reactor.service._objects.processing import Claim, ProcessingLog, Taken
from reactor.service._reactions import dispatcher
from reactor.service._reactions.reaction import ReactionRun, run_of
from tests.service.support import TYPES, Gate, Recorder, running


async def test_only_events_of_the_agent_types_activate_it(url: str) -> None:
    seen = Recorder()
    agents = {"people": agent(run=seen, reaction=Reaction(types=["Person"]))}
    async with running(url, agents) as (objects, service):
        await objects.create("Company", {"name": "Acme"})
        await service.idle(timeout=60)
        assert seen.calls == []
        ada = await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
    assert [(c["id"], c["event"]) for c in seen.calls] == [(ada.id, "created")]


async def test_only_the_agent_events_activate_it(url: str) -> None:
    seen = Recorder()
    agents = {"welcome": agent(run=seen, reaction=Reaction(events=["created"]))}
    async with running(url, agents) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await objects.update(ada.id, {"email": "ada@x.org"})
        await objects.delete(ada.id)
        await service.idle(timeout=60)
    assert [(c["event"], c["version"]) for c in seen.calls] == [("created", 1)]


async def test_an_empty_types_list_reacts_to_every_type(url: str) -> None:
    seen = Recorder()
    async with running(url, {"all": agent(run=seen, reaction=Reaction())}) as (objects, service):
        await objects.create("Company", {"name": "Acme"})
        await objects.create("Note", {"text": "hi"})
        await service.idle(timeout=60)
    assert sorted(c["type"] for c in seen.calls) == ["Company", "Note"]


async def test_the_agent_sees_the_object_at_the_version_of_its_event(url: str) -> None:
    gate = Gate()
    seen: list[Any] = []

    async def look(ctx: AgentContext[Any]) -> None:
        seen.append((ctx.object, ctx.scope["event"], ctx.input))
        await gate(ctx)

    agents = {"look": agent(run=look, reaction=Reaction(events=["created"]))}
    async with running(url, agents) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        await gate.waiting.wait()
        await objects.update(ada.id, {"name": "Ada Lovelace"}, actor=User("u2"))
        gate.open()
        await service.idle(timeout=60)
    ((obj, event, given),) = seen
    assert (obj.id, obj.version, obj.data["name"], obj.actor) == (ada.id, 1, "Ada", User("u1"))
    assert (event.event, event.version) == ("created", 1)
    assert given == event.payload()


async def test_templates_see_the_object(url: str) -> None:
    provider = ScriptedProvider({"greet": ["Hello"]})
    greet = agent(
        prompt="Greet {{ object.data.name }} ({{ object.type }} v{{ object.version }}).",
        reaction=Reaction(types=["Person"]),
    )
    async with running(url, {"greet": greet}, provider=provider) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
    assert [r.prompt for r in provider.requests] == ["Greet Ada (Person v1)."]


async def test_changes_by_users_and_by_agents_carry_their_actor(url: str) -> None:
    async def lower(ctx: AgentContext[Any]) -> None:
        email = ctx.object.data["email"]
        if email != email.lower():
            await ctx.objects.update(ctx.object.id, {"email": email.lower()})

    seen = Recorder()
    agents = {
        "lower": agent(run=lower, reaction=Reaction(types=["Person"]), execution_mode="execute"),
        "audit": agent(run=seen, reaction=Reaction(types=["Person"])),
    }
    async with running(url, agents) as (objects, service):
        ada = await objects.create(
            "Person", {"name": "Ada", "email": "ADA@X.ORG"}, actor=User("u1")
        )
        await service.idle(timeout=60)
        events = await objects.events(object_id=ada.id)
    assert [(e.event, e.actor.model_dump()) for e in events] == [
        ("created", {"type": "user", "id": "u1"}),
        ("updated", {"type": "agent", "id": "lower"}),
    ]
    assert [(c["version"], c["actor"]) for c in seen.calls] == [
        (1, User("u1")),
        (2, AgentActor("lower")),
    ]


@pytest.mark.parametrize("ignore_self", [True, False])
async def test_an_agent_is_not_triggered_by_its_own_changes(url: str, ignore_self: bool) -> None:
    async def tidy(ctx: AgentContext[Any]) -> None:
        name = ctx.object.data["name"]
        if name != name.strip():
            await ctx.objects.update(ctx.object.id, {"name": name.strip()})

    tidy_agent = agent(
        run=tidy,
        reaction=Reaction(types=["Person"], ignore_self=ignore_self),
        execution_mode="execute",
    )
    async with running(url, {"tidy": tidy_agent}) as (objects, service):
        ada = await objects.create("Person", {"name": "  Ada "})
        await service.idle(timeout=60)
        log = await service.processing_log(agent="tidy")
        assert (await objects.get(ada.id)).data["name"] == "Ada"
    versions = [(e.object_version, e.event_type, e.status) for e in log]
    if ignore_self:
        assert versions == [(1, "created", "completed")]
    else:
        assert versions == [(1, "created", "completed"), (2, "updated", "completed")]


async def _entries(service: ReactionService, statuses: list[str]) -> list[ProcessingEntry]:
    """The processing log once its entries have these statuses (60 s bound a hang)."""
    for _ in range(600):
        log = await service.processing_log()
        if [entry.status for entry in log] == statuses:
            return log
        await asyncio.sleep(0.1)
    raise AssertionError(f"the processing log never went {statuses}: {log}")


async def test_a_processing_entry_goes_pending_processing_completed(url: str) -> None:
    gate = Gate()
    agents = {"slow": agent(run=gate, reaction=Reaction(types=["Person"]))}
    async with running(url, agents, max_running=1) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await gate.waiting.wait()
        grace = await objects.create("Person", {"name": "Grace"})
        first, second = await _entries(service, ["processing", "pending"])
        assert (first.object_id, first.status) == (ada.id, "processing")
        assert (second.object_id, second.status) == (grace.id, "pending")
        gate.open()
        await service.idle(timeout=60)
        log = await service.processing_log(agent="slow")
        events = await objects.events()
    assert [e.status for e in log] == ["completed", "completed"]
    entry = log[0]
    assert (entry.agent, entry.object_id, entry.object_version, entry.event_type) == (
        "slow",
        ada.id,
        1,
        "created",
    )
    assert entry.event_id == events[0].event_id
    assert entry.error is None
    assert entry.run_id is not None
    assert entry.run_id.startswith("run_")
    assert entry.created_at <= entry.updated_at


async def test_events_past_what_the_dispatcher_keeps_are_read_again_and_processed(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dispatch runs ahead of processing: it keeps the oldest events, reads the rest."""
    monkeypatch.setattr(dispatcher, "KEEP_READ", 4)
    gate, recorder = Gate(), Recorder()

    async def held(ctx: AgentContext[Any]) -> None:
        recorder(ctx)
        await gate(ctx)

    agents = {name: agent(run=held, reaction=Reaction()) for name in ("a", "b")}
    async with running(url, agents, max_running=2) as (objects, service):
        made = [await objects.create("Person", {"name": f"p{n}"}) for n in range(30)]
        await gate.waiting.wait()  # two held: the other 29 events wait, 4 of them kept
        gate.open()
        await service.idle(timeout=60)
        log = await service.processing_log()
    assert sorted(e.status for e in log) == ["completed"] * 60
    seen = sorted((call["agent"], call["id"], call["data"]["name"]) for call in recorder.calls)
    expected = [(name, p.id, p.data["name"]) for name in ("a", "b") for p in made]
    assert seen == sorted(expected)


async def test_a_claimed_entry_is_the_entry_the_log_holds(url: str) -> None:
    """What claiming returns is built from what it wrote: equal to the row read back."""
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        (event,) = await objects.events(object_id=ada.id)
        log = ProcessingLog(objects.db)
        claimed = await log.claim([Claim("audit", event), Claim("score", event)])
        again = await log.claim([Claim("audit", event)])
        stored = await log.entries(ids=[entry.id for entry in claimed + again])
    assert [e.status for e in claimed] == ["pending", "pending"]
    assert [e.status for e in again] == ["skipped"]
    assert claimed + again == stored


async def test_a_failing_reaction_is_logged_failed_with_its_error(url: str) -> None:
    def boom(ctx: AgentContext[Any]) -> None:
        raise ValueError(f"cannot handle {ctx.object.data['name']}")

    agents = {"boom": agent(run=boom, reaction=Reaction())}
    async with running(url, agents) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (entry,) = await service.processing_log(status="failed")
    assert entry.error == "ValueError: cannot handle Ada"
    assert entry.run_id is not None


async def test_an_error_no_database_holds_is_spelled_out_and_harms_no_other_entry(
    url: str,
) -> None:
    def boom(ctx: AgentContext[Any]) -> None:
        if ctx.object.data["name"] == "Ada":
            raise ValueError("bad\x00byte \ud800 here")

    agents = {"boom": agent(run=boom, reaction=Reaction())}
    async with running(url, agents) as (objects, service):
        for name in ("Ada", "Grace", "Linus"):
            await objects.create("Person", {"name": name})
        await service.idle(timeout=60)
        log = await service.processing_log()
    assert sorted(e.status for e in log) == ["completed", "completed", "failed"]
    (failed,) = [e for e in log if e.status == "failed"]
    assert failed.error == "ValueError: bad\\x00byte \\ud800 here"


async def test_a_duplicate_is_skipped_while_processing_and_after_completion(url: str) -> None:
    gate = Gate()
    agents = {"slow": agent(run=gate, reaction=Reaction())}
    async with running(url, agents) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await gate.waiting.wait()
        (event,) = await objects.events()
        (while_processing,) = await service.dispatch(event)
        gate.open()
        await service.idle(timeout=60)
        (after_completion,) = await service.dispatch(event)
        await service.idle(timeout=60)
        log = await service.processing_log(object_id=ada.id)
    reason = "the same event for this object version is pending, processing or completed"
    assert (while_processing.status, while_processing.error) == ("skipped", reason)
    assert (after_completion.status, after_completion.error) == ("skipped", reason)
    assert [e.status for e in log] == ["completed", "skipped", "skipped"]
    assert gate.seen == [(ada.id, 1)]


async def test_a_failed_event_is_processed_again_when_dispatched_again(url: str) -> None:
    attempts: list[int] = []

    def flaky(ctx: AgentContext[Any]) -> None:
        attempts.append(ctx.object.version)
        if len(attempts) == 1:
            raise RuntimeError("the network blinked")

    async with running(url, {"flaky": agent(run=flaky, reaction=Reaction())}) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await service.idle(timeout=60)
        (event,) = await objects.events()
        (again,) = await service.dispatch(event)
        await service.idle(timeout=60)
        log = await service.processing_log()
    assert again.status == "pending"
    assert [e.status for e in log] == ["failed", "completed"]
    assert attempts == [1, 1]


async def test_skip_drops_other_events_of_a_version_in_flight(url: str) -> None:
    gate = Gate()
    agents = {"slow": agent(run=gate, reaction=Reaction(concurrency="skip"))}
    async with running(url, agents) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await gate.waiting.wait()
        await objects.delete(ada.id)  # the deletion carries version 1 too
        await _entries(service, ["processing", "skipped"])  # while the first is held
        gate.open()
        await service.idle(timeout=60)
        log = await service.processing_log()
    assert [(e.event_type, e.status) for e in log] == [
        ("created", "completed"),
        ("deleted", "skipped"),
    ]
    assert log[1].error == "the agent is processing this object version (concurrency='skip')"


async def test_parallel_processes_an_object_versions_at_once(url: str) -> None:
    gate = Gate()
    agents = {"wide": agent(run=gate, reaction=Reaction(concurrency="parallel"))}
    async with running(url, agents) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        await gate.waiting.wait()
        await objects.update(ada.id, {"email": "ada@x.org"})
        await objects.delete(ada.id)
        for _ in range(100):
            if len(gate.seen) == 3:
                break
            await asyncio.sleep(0.02)
        statuses = [e.status for e in await service.processing_log()]
        gate.open()
        await service.idle(timeout=60)
    assert sorted(gate.seen) == [(ada.id, 1), (ada.id, 2), (ada.id, 2)]
    assert statuses == ["processing", "processing", "processing"]


async def test_queue_processes_one_objects_events_in_order_one_at_a_time(url: str) -> None:
    running_now: list[str] = []
    order: list[tuple[str, int]] = []
    overlaps: list[int] = []

    async def careful(ctx: AgentContext[Any]) -> None:
        running_now.append(ctx.object.id)
        overlaps.append(running_now.count(ctx.object.id))
        order.append((ctx.object.id, ctx.object.version))
        await asyncio.sleep(0.01)
        running_now.remove(ctx.object.id)

    agents = {"careful": agent(run=careful, reaction=Reaction(concurrency="queue"))}
    async with running(url, agents) as (objects, service):
        ada = await objects.create("Person", {"name": "Ada"})
        grace = await objects.create("Person", {"name": "Grace"})
        for n in range(4):
            await objects.update(ada.id, {"email": f"ada{n}@x.org"})
            await objects.update(grace.id, {"email": f"grace{n}@x.org"})
        await service.idle(timeout=60)
    assert [v for o, v in order if o == ada.id] == [1, 2, 3, 4, 5]
    assert [v for o, v in order if o == grace.id] == [1, 2, 3, 4, 5]
    assert max(overlaps) == 1


async def test_a_stuck_entry_is_abandoned_and_its_reaction_cancelled(url: str) -> None:
    gate = Gate()
    cancelled: list[bool] = []

    async def hang(ctx: AgentContext[Any]) -> None:
        try:
            await gate(ctx)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    agents = {"hang": agent(run=hang, reaction=Reaction())}
    # Long enough for the retry to finish within it on a loaded machine.
    async with running(url, agents, stuck_after=3, stuck_check_every=0.1) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await gate.waiting.wait()
        for _ in range(1200):  # 60 s at most
            if (await service.processing_log())[0].status == "abandoned":
                break
            await asyncio.sleep(0.05)
        await service.idle(timeout=60)
        (entry,) = await service.processing_log()
        (event,) = await objects.events()
        gate.open()
        (retry,) = await service.dispatch(event)
        await service.idle(timeout=60)
        log = await service.processing_log()
    assert entry.status == "abandoned"
    assert entry.error == (
        "processing for more than 3 s (stuck_after): the process may have died; dispatch "
        "the event again to retry"
    )
    assert cancelled == [True]
    assert retry.status == "pending"
    assert [e.status for e in log] == ["abandoned", "completed"]


async def test_the_detector_leaves_recent_entries_alone(url: str) -> None:
    gate = Gate()
    async with running(url, {"slow": agent(run=gate, reaction=Reaction())}) as (objects, service):
        await objects.create("Person", {"name": "Ada"})
        await gate.waiting.wait()
        assert await service.detect_stuck() == []
        gate.open()
        await service.idle(timeout=60)
        assert [e.status for e in await service.processing_log()] == ["completed"]


async def test_events_stored_before_the_service_started_are_dispatched(url: str) -> None:
    seen = Recorder()
    agents = {"seen": agent(run=seen, reaction=Reaction())}
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        async with ReactionService(objects=objects, agents=agents) as service:
            await service.idle(timeout=60)
        grace = await objects.create("Person", {"name": "Grace"})  # while it is stopped
        async with ReactionService(objects=objects, agents=agents) as service:
            await service.idle(timeout=60)
            log = await service.processing_log()
    assert [c["id"] for c in seen.calls] == [ada.id, grace.id]
    assert [(e.object_id, e.status) for e in log] == [
        (ada.id, "completed"),
        (grace.id, "completed"),
    ]


async def test_two_services_on_one_database_process_each_event_once(url: str) -> None:
    seen = Recorder()
    agents = {"once": agent(run=seen, reaction=Reaction())}
    async with (
        running(url, agents) as (objects, first),
        running(url, agents) as (_, second),
    ):
        made = [await objects.create("Person", {"name": f"P{n}"}) for n in range(20)]
        for event in await objects.events():  # as a queue that delivers twice would
            await second.dispatch(event)
        await first.idle(timeout=60)
        await second.idle(timeout=60)
        log = await first.processing_log()
    completed = sorted(e.object_id for e in log if e.status == "completed")
    assert completed == sorted(o.id for o in made)
    assert sorted(c["id"] for c in seen.calls) == completed
    assert {e.status for e in log} <= {"completed", "skipped"}


async def test_a_reaction_run_reads_its_inbox_at_its_start_only_if_its_id_was_known() -> None:
    now = datetime.now(UTC)
    entry = ProcessingEntry(
        id=1, agent="audit", object_id="obj_1", object_version=2, event_type="updated",
        event_id=1, status="processing", run_id="run_taken", created_at=now, updated_at=now,
    )  # fmt: skip
    log, store = ProcessingLog(Database("sqlite://")), MemorySignalStore()
    # A first take made its id just now: nobody can have posted to it.
    first = await run_of(log, store, Taken(entry, earlier=False))
    assert first == ReactionRun("run_taken", fresh=True)
    # A retry of a run the store never got: its id was in the log, maybe posted to.
    again = await run_of(log, store, Taken(entry, earlier=True))
    assert again == ReactionRun("run_taken")
