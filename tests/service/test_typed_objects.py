"""Typed objects stay typed: what a model does not take is refused and changes nothing.

An update (or a create) whose fields the registered model lacks, or whose values it
refuses, is an ``ObjectValidationError``: no event, no version, no reaction. A model
that sets ``extra`` itself decides (``allow`` keeps the field, ``ignore`` drops it),
and an update that changes nothing stores nothing. A type no model is registered for
is stored only when the store takes untyped objects.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import pydantic
import pytest

from reactor import agent
from reactor.service import (
    ObjectStore,
    ObjectValidationError,
    Reaction,
    ReactionService,
    StoredObject,
    Update,
    User,
)
from tests.service.support import TYPES, Person, Recorder


class Loose(pydantic.BaseModel):
    """Keeps fields it does not declare."""

    model_config = pydantic.ConfigDict(extra="allow")

    name: str


class Lenient(pydantic.BaseModel):
    """Drops fields it does not declare."""

    model_config = pydantic.ConfigDict(extra="ignore")

    name: str
    email: str | None = None


class Strict(pydantic.BaseModel):
    """Says itself that it takes no other fields."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str


MODELS = (*TYPES, Loose, Lenient, Strict)


@asynccontextmanager
async def reacting(
    url: str, types: Iterable[str]
) -> AsyncIterator[tuple[ObjectStore, ReactionService, Recorder]]:
    """A store of :data:`MODELS` and a service whose agent notes every change of ``types``."""
    seen = Recorder()
    agents = {"watch": agent(run=seen, reaction=Reaction(types=list(types)))}
    async with (
        ObjectStore(url, types=MODELS) as objects,
        ReactionService(objects=objects, agents=agents) as service,
    ):
        yield objects, service, seen


async def changed(
    objects: ObjectStore, service: ReactionService, seen: Recorder, obj: StoredObject
) -> list[tuple[str, int]]:
    """The events stored for ``obj`` once every reaction is done (each was reacted to)."""
    await service.idle(timeout=60)
    events = await objects.events(object_id=obj.id)
    reacted = [c["version"] for c in seen.calls if c["id"] == obj.id]
    assert reacted == [e.version for e in events]
    return [(e.event, e.version) for e in events]


async def test_an_update_of_a_field_the_model_lacks_is_refused_and_changes_nothing(
    url: str,
) -> None:
    async with reacting(url, ["Person"]) as (objects, service, seen):
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        with pytest.raises(
            ObjectValidationError,
            match=r"^Person data is invalid: nickname: Person has no such field\. Nothing was "
            r"stored; fix the data \(or the Person model\)\. A Person that takes other fields "
            r"says so: model_config = ConfigDict\(extra='allow'\) keeps them, "
            r"extra='ignore' drops them\.$",
        ) as caught:
            await objects.update(ada.id, {"nickname": "Countess"}, actor=User("u1"))
        assert caught.value.errors[0]["type"] == "extra_forbidden"
        assert caught.value.errors[0]["loc"] == ("nickname",)
        assert await objects.get(ada.id) == ada
        assert await changed(objects, service, seen, ada) == [("created", 1)]
        later = await objects.update(ada.id, {"email": "ada@x.org"}, actor=User("u1"))
        assert later.version == 2  # the refused update took no version
        assert await changed(objects, service, seen, ada) == [("created", 1), ("updated", 2)]


async def test_an_update_with_a_known_and_an_unknown_field_stores_neither(url: str) -> None:
    async with ObjectStore(url, types=MODELS) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        with pytest.raises(ObjectValidationError, match=r"emial: Person has no such field"):
            await objects.update(ada.id, {"email": "ada@x.org", "emial": "typo"})
        assert await objects.get(ada.id) == ada


async def test_a_create_with_a_field_the_model_lacks_is_refused(url: str) -> None:
    async with ObjectStore(url, types=MODELS) as objects:
        with pytest.raises(ObjectValidationError, match=r"^Person data is invalid: age: Person"):
            await objects.create("Person", {"name": "Ada", "age": 36})
        assert await objects.list() == []
        assert await objects.events() == []


async def test_a_model_that_forbids_other_fields_itself_needs_no_hint(url: str) -> None:
    async with ObjectStore(url, types=MODELS) as objects:
        with pytest.raises(
            ObjectValidationError,
            match=r"^Strict data is invalid: age: Strict has no such field\. Nothing was stored; "
            r"fix the data \(or the Strict model\)\.$",
        ):
            await objects.create("Strict", {"name": "Ada", "age": 36})


async def test_a_model_that_allows_other_fields_keeps_them(url: str) -> None:
    async with ObjectStore(url, types=MODELS) as objects:
        ada = await objects.create("Loose", {"name": "Ada", "age": 36})
        older = await objects.update(ada.id, {"age": 37})
    assert (older.version, older.data) == (2, {"name": "Ada", "age": 37})


async def test_a_model_that_ignores_other_fields_drops_them_and_records_no_change(
    url: str,
) -> None:
    async with reacting(url, ["Lenient"]) as (objects, service, seen):
        ada = await objects.create("Lenient", {"name": "Ada", "age": 36}, actor=User("u1"))
        assert ada.data == {"name": "Ada", "email": None}
        same = await objects.update(ada.id, {"age": 37}, actor=User("u2"))
        assert same == ada  # nothing else changed: no event, the version stays
        assert await changed(objects, service, seen, ada) == [("created", 1)]
        mixed = await objects.update(ada.id, {"age": 37, "email": "ada@x.org"}, actor=User("u2"))
        assert (mixed.version, mixed.data) == (2, {"name": "Ada", "email": "ada@x.org"})
        assert await changed(objects, service, seen, ada) == [("created", 1), ("updated", 2)]


async def test_an_update_that_changes_nothing_records_nothing(url: str) -> None:
    async with reacting(url, ["Note", "Person"]) as (objects, service, seen):
        note = await objects.create("Note", {"text": "hi", "tags": ["a"]}, actor=User("u1"))
        ada = await objects.create("Person", {"name": "Ada"}, actor=User("u1"))
        assert await objects.update(note.id, {"tags": ["a"]}, actor=User("u2")) == note
        assert await objects.update(ada.id, {"email": None}, actor=User("u2")) == ada
        assert await objects.apply([], actor=User("u2")) == []
        assert await changed(objects, service, seen, note) == [("created", 1)]
        assert await changed(objects, service, seen, ada) == [("created", 1)]


async def test_an_update_that_changes_nothing_among_others_returns_only_the_others(
    url: str,
) -> None:
    async with ObjectStore(url, types=MODELS) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        grace = await objects.create("Person", {"name": "Grace"})
        stored = await objects.apply(
            [Update(ada.id, {"name": "Ada"}), Update(grace.id, {"email": "g@x.org"})]
        )
    assert [(e.id, e.version) for e in stored] == [(grace.id, 2)]


async def test_a_store_without_untyped_objects_refuses_a_type_no_model_is_registered_for(
    url: str,
) -> None:
    async with ObjectStore(url, types=[Person], untyped=False) as objects:
        assert objects.untyped is False
        with pytest.raises(
            ObjectValidationError,
            match=r"^Cannot store a 'Persn' object: no type of that name is registered "
            r"\(Person\), and this object store takes no untyped objects \(untyped=False\)\. "
            r"Check the spelling of the type, or register a model for it "
            r"\(ObjectStore\(types=\[\.\.\.\]\)\)\.$",
        ) as caught:
            await objects.create("Persn", {"name": "Ada"})
        assert caught.value.type == "Persn"
        assert await objects.list() == []
        assert (await objects.create("Person", {"name": "Ada"})).version == 1


async def test_a_store_takes_untyped_objects_unless_told_not_to(url: str) -> None:
    async with ObjectStore(url, types=[Person]) as objects:
        assert objects.untyped is True
        assert (await objects.create("Persn", {"name": "Ada"})).data == {"name": "Ada"}
