"""ObjectStore: typed objects, versions, actors, validation, events and their signals."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from reactor import Signal
from reactor.service import (
    AgentActor,
    Create,
    Delete,
    ObjectNotFoundError,
    ObjectStore,
    ObjectValidationError,
    ServiceConfigError,
    ServiceStateError,
    Update,
    User,
)
from stores import acting_as
from tests.service.support import TYPES, Person


async def test_an_object_is_created_at_version_1_and_each_update_adds_one(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        assert (ada.type, ada.version, ada.data) == (
            "Person",
            1,
            {"name": "Ada", "email": None, "employer": None},
        )
        assert ada.id.startswith("obj_")
        assert ada.created_at == ada.updated_at
        assert ada.created_at.tzinfo is UTC
        first = await objects.update(ada.id, {"email": "ada@x.org"}, actor=User("u1"))
        second = await objects.update(ada.id, {"employer": "Babbage & Co"}, actor=User("u2"))
        assert (first.version, second.version) == (2, 3)
        assert second.data == {"name": "Ada", "email": "ada@x.org", "employer": "Babbage & Co"}
        assert second.created_at == ada.created_at < second.updated_at
        assert await objects.get(ada.id) == second


async def test_object_ids_sort_by_when_the_objects_were_made(url: str) -> None:
    """The time first (the indexes on ids take new objects at their end), then randomness."""
    async with ObjectStore(url, types=TYPES) as objects:
        first = await objects.create("Person", {"name": "Ada"})
        made = int(first.id[4:16], 16)  # milliseconds since the epoch
        while time.time_ns() // 1_000_000 <= made:  # the next millisecond
            pass
        second = await objects.create("Person", {"name": "Grace"})
        assert re.fullmatch(r"obj_[0-9a-f]{32}", first.id)
        assert first.id < second.id
        assert abs(made / 1000 - first.created_at.timestamp()) < 5


async def test_objects_carry_who_changed_them_last(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        assert ada.actor == User("u1")
        assert ada.actor.model_dump() == {"type": "user", "id": "u1"}
        changed = await objects.update(ada.id, {"email": "a@x.org"}, actor=AgentActor("enrich"))
        assert changed.actor == AgentActor("enrich")
        assert (await objects.get(ada.id)).actor.model_dump() == {"type": "agent", "id": "enrich"}


async def test_the_actor_defaults_to_whoever_runs_now(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        outside = await objects.create("Person", {"name": "Ada"})
        with acting_as("agent:dedup"):
            inside = await objects.create("Person", {"name": "Grace"})
        with acting_as("user:u7"):
            person = await objects.create("Person", {"name": "Edsger"})
    assert (outside.actor, inside.actor, person.actor) == (
        User("user"),
        AgentActor("dedup"),
        User("u7"),
    )


async def test_a_registered_type_is_validated_and_a_bad_write_changes_nothing(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        with pytest.raises(
            ObjectValidationError,
            match=r"^Person data is invalid: name: Input should be a valid string \(got 7\)\. "
            r"Nothing was stored; fix the data \(or the Person model\)\.$",
        ) as caught:
            await objects.update(ada.id, {"name": 7})
        assert caught.value.type == "Person"
        assert caught.value.errors[0]["loc"] == ("name",)
        with pytest.raises(ObjectValidationError, match=r"^Person data is invalid: name: Field"):
            await objects.create("Person", {"email": "nobody@x.org"})
        assert await objects.get(ada.id) == ada
        assert [o.id for o in await objects.list()] == [ada.id]
        assert len(await objects.events()) == 1


async def test_a_type_that_is_not_registered_is_stored_as_given(url: str) -> None:
    async with ObjectStore(url, types=[Person]) as objects:
        note = await objects.create(
            "Note", {"text": "hi", "tags": ["a"], "at": datetime(2026, 1, 2)}
        )
        assert note.data == {"text": "hi", "tags": ["a"], "at": "2026-01-02T00:00:00"}
        with pytest.raises(
            ObjectValidationError,
            match=r"^Note data must be a JSON object \(a dict of fields\), got list\.$",
        ):
            await objects.create("Note", ["not", "fields"])  # type: ignore[arg-type]
        with pytest.raises(ObjectValidationError, match=r"^Note data cannot be stored as JSON"):
            await objects.create("Note", {"what": object()})


@pytest.mark.parametrize("name", ["Per son", "a:b", "", "*"])
async def test_a_type_name_must_fit_in_a_signal_name(url: str, name: str) -> None:
    async with ObjectStore(url) as objects:
        with pytest.raises(
            ObjectValidationError,
            match=rf"^Cannot store the object: {re.escape(repr(name))} is not an object type "
            r"name: types appear in signal names \(object:<Type>:created\), so use a "
            r"non-empty name without ':', '\*' or whitespace\.$",
        ):
            await objects.create(name, {})


async def test_an_unknown_or_deleted_object_is_not_found(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        gone = await objects.delete(ada.id)
        assert gone == ada.model_copy(update={"updated_at": gone.updated_at})
        for attempt in (objects.get, objects.delete):
            with pytest.raises(ObjectNotFoundError, match=rf"^No object '{ada.id}' in ") as caught:
                await attempt(ada.id)
            assert caught.value.object_id == ada.id
            assert str(caught.value).endswith(
                "(it may have been deleted); list the objects with objects.list()."
            )
        with pytest.raises(ObjectNotFoundError, match=r"^No object 'obj_nope' in "):
            await objects.update("obj_nope", {"name": "x"})
        assert await objects.list() == []


async def test_an_object_reads_as_it_was_at_any_version(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        await objects.update(ada.id, {"name": "Ada Lovelace"}, actor=User("u2"))
        await objects.delete(ada.id)
        first = await objects.get(ada.id, version=1)
        assert (first.version, first.data["name"], first.actor) == (1, "Ada", User("u1"))
        second = await objects.get(ada.id, version=2)
        assert (second.data["name"], second.actor) == ("Ada Lovelace", User("u2"))
        with pytest.raises(ObjectNotFoundError, match=rf"^Object '{ada.id}' has no version 3 in "):
            await objects.get(ada.id, version=3)


async def test_every_change_is_an_event_with_what_changed(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        await objects.update(ada.id, {"email": "ada@x.org"}, actor=AgentActor("enrich"))
        await objects.delete(ada.id, actor=User("u2"))
        acme = await objects.create("Company", {"name": "Acme"})
        events = await objects.events()
        assert [(e.event_id, e.id, e.event, e.version) for e in events] == [
            (1, ada.id, "created", 1),
            (2, ada.id, "updated", 2),
            (3, ada.id, "deleted", 2),
            (4, acme.id, "created", 1),
        ]
        created, updated, deleted, _ = events
        assert created.changes == {
            "name": {"old": None, "new": "Ada"},
            "email": {"old": None, "new": None},
            "employer": {"old": None, "new": None},
        }
        assert updated.changes == {"email": {"old": None, "new": "ada@x.org"}}
        assert updated.actor == AgentActor("enrich")
        assert deleted.data == {"name": "Ada", "email": "ada@x.org", "employer": None}
        assert deleted.changes["name"] == {"old": "Ada", "new": None}
        assert deleted.name == "object:Person:deleted"
        assert [e.event_id for e in await objects.events(object_id=ada.id)] == [1, 2, 3]
        assert [e.event_id for e in await objects.events(since=2)] == [3, 4]
        assert [e.event_id for e in await objects.events(since=updated.timestamp)] == [3, 4]
        assert [e.event_id for e in await objects.events(ids=[4, 1])] == [1, 4]
        assert [e.event_id for e in await objects.events(limit=1)] == [1]
        assert await objects.last_event_id() == 4


async def test_each_change_is_emitted_once_committed(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        seen: list[Signal] = []
        objects.bus.subscribe("object:**", seen.append)
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        with pytest.raises(ObjectValidationError):
            await objects.update(ada.id, {"name": None})
        await objects.update(ada.id, {"email": "ada@x.org"}, actor=AgentActor("enrich"))
    assert [s.name for s in seen] == ["object:Person:created", "object:Person:updated"]
    assert seen[1].payload == {
        "id": ada.id,
        "type": "Person",
        "version": 2,
        "event": "updated",
        "data": {"name": "Ada", "email": "ada@x.org", "employer": None},
        "changes": {"email": {"old": None, "new": "ada@x.org"}},
        "actor": {"type": "agent", "id": "enrich"},
        "cause": None,
    }
    assert seen[1].source == "agent:enrich"
    with pytest.raises(TypeError):
        seen[1].payload["version"] = 3  # payloads are read-only


async def test_several_changes_apply_together_or_not_at_all(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        with pytest.raises(ObjectNotFoundError):
            await objects.apply(
                [Create("Company", {"name": "Acme"}), Update(ada.id, {"email": "a@x"}), Delete("x")]
            )
        assert [o.type for o in await objects.list()] == ["Person"]
        events = await objects.apply(
            [Create("Company", {"name": "Acme"}), Update(ada.id, {"employer": "Acme"})],
            actor=AgentActor("linker"),
            approved_by=User("boss"),
        )
        assert [(e.type, e.event, e.actor, e.approved_by) for e in events] == [
            ("Company", "created", AgentActor("linker"), User("boss")),
            ("Person", "updated", AgentActor("linker"), User("boss")),
        ]
        assert [e.approved_by for e in await objects.events()] == [None, User("boss"), User("boss")]


async def test_objects_are_listed_oldest_first_by_type(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        made = [await objects.create("Person", {"name": n}) for n in ("A", "B", "C")]
        acme = await objects.create("Company", {"name": "Acme"})
        assert [o.id for o in await objects.list("Person")] == [o.id for o in made]
        assert [o.id for o in await objects.list(limit=2)] == [o.id for o in made[:2]]
        assert [o.id for o in await objects.list("Company")] == [acme.id]


async def test_a_store_opens_on_first_use_and_can_reopen(url: str) -> None:
    objects = ObjectStore(url, types=TYPES)
    ada = await objects.create("Person", {"name": "Ada"})
    await objects.close()
    async with ObjectStore(url, types=TYPES) as again:
        assert (await again.get(ada.id)).data["name"] == "Ada"
        assert await objects.get(ada.id) == await again.get(ada.id)
    await objects.close()


@pytest.mark.parametrize(
    ("types", "message"),
    [
        pytest.param(
            [dict],
            "types must be pydantic models (or {name: model}), got <class 'dict'>",
            id="dict",
        ),
        pytest.param({"A B": Person}, "Cannot register the type: 'A B' is not", id="name"),
    ],
)
def test_types_must_be_named_pydantic_models(types: Any, message: str) -> None:
    with pytest.raises(ServiceConfigError, match=f"^{re.escape(message)}"):
        ObjectStore("sqlite://", types=types)


def test_values_take_their_main_fields_in_order() -> None:
    assert User("u1") == User(id="u1")
    agent_a: object = AgentActor("a")
    assert agent_a != User("a")
    assert str(AgentActor("a")) == "agent:a"
    assert Create("Company", {"name": "Acme"}).model_dump() == {
        "op": "create",
        "type": "Company",
        "data": {"name": "Acme"},
        "id": None,
    }
    assert Update("obj_1", {"x": 1}) == Update(id="obj_1", data={"x": 1})
    assert Delete("obj_1").model_dump() == {"op": "delete", "id": "obj_1"}


async def test_a_write_cut_off_by_the_store_going_away_is_unavailable_not_invalid(
    url: str,
) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        creating = asyncio.ensure_future(objects.create("Person", {"name": "Ada"}))
        writes = objects._writes
        for _ in range(100):  # until the group's writer has taken the change
            await asyncio.sleep(0)
            if writes._writer is not None and not writes._queue:
                break
        assert writes._writer is not None
        writes._writer.cancel()  # what stopping the loop mid-write does to it
        with pytest.raises(ServiceStateError, match="read the object again"):
            await creating


async def test_find_matches_top_level_fields_by_value_newest_first(url: str) -> None:
    async with ObjectStore(url) as objects:
        a = await objects.create("Quote", {"symbol": "ACME", "live": True, "size": 3, "note": None})
        b = await objects.create("Quote", {"symbol": "ACME", "live": False, "size": 3})
        await objects.create("Quote", {"symbol": "INIT", "live": True, "size": 1})
        await objects.create("Order", {"symbol": "ACME"})
        newest_first = [b.id, a.id]
        assert [o.id for o in await objects.find("Quote", {"symbol": "ACME"})] == newest_first
        assert [o.id for o in await objects.find("Quote", {"symbol": "ACME", "live": True})] == [
            a.id
        ]
        assert [o.id for o in await objects.find("Quote", {"size": 3, "live": False})] == [b.id]
        assert [o.id for o in await objects.find("Quote", {"symbol": "ACME"}, limit=1)] == [b.id]
        assert len(await objects.find("Quote")) == 3
        assert await objects.find("Quote", {"symbol": "NONE"}) == []
        assert [o.id for o in await objects.find("Quote", {"note": None})] == [a.id]
        with pytest.raises(ServiceConfigError, match=r"^Cannot find objects by 'data\.x'"):
            await objects.find("Quote", {"data.x": 1})
        with pytest.raises(ServiceConfigError, match=r"^Cannot find objects by size= a list"):
            await objects.find("Quote", {"size": [3]})
