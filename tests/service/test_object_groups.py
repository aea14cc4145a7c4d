"""Object writes committed in groups: each caller's change is all or nothing, alone.

Changes submitted at once are written as one group (planned together, written with a
few statements for all of them). These tests pile many changes into one group, some
of which fail, and check that each caller gets exactly what one change at a time would
have given it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reactor.exceptions import ObjectNotFoundError, ObjectValidationError, SuggestionStaleError
from reactor.service import Create, Delete, ObjectStore, StoredObject, Update, User
from tests.service.support import TYPES


async def settle(*calls: Any) -> list[Any]:
    """Run the calls at once (one group), each one's result or error."""
    return list(await asyncio.gather(*calls, return_exceptions=True))


def stale(current: StoredObject | None) -> Exception:
    return SuggestionStaleError(f"the object is at {current!r}")


async def test_a_group_of_good_and_bad_changes_gives_each_caller_its_own(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        acme = await objects.create("Company", {"name": "Acme"})
        results = await settle(
            objects.update(ada.id, {"email": "ada@x.org"}),
            objects.update("obj_missing", {"name": "nobody"}),
            objects.update(ada.id, {"employer": "Acme"}),
            objects.update(acme.id, {"no_such_field": 1}),
            objects.apply(
                [Update(acme.id, {"domain": "acme.test"}), Update("obj_gone", {"name": "x"})]
            ),
            objects.update(acme.id, {"name": "Acme"}),  # changes nothing: no event
            objects.create("Person", {"name": "Grace"}),
            objects.apply([Update(acme.id, {"name": "ACME"})], expect={acme.id: 7}, stale=stale),
        )
        events = await objects.events(since=2)
        ada_now, acme_now = await objects.get(ada.id), await objects.get(acme.id)
    assert [type(r).__name__ for r in results] == [
        "StoredObject", "ObjectNotFoundError", "StoredObject", "ObjectValidationError",
        "ObjectNotFoundError", "StoredObject", "StoredObject", "SuggestionStaleError",
    ]  # fmt: skip
    assert (results[0].version, results[2].version, results[5].version) == (2, 3, 1)
    assert ada_now.version == 3
    assert ada_now.data == {"name": "Ada", "email": "ada@x.org", "employer": "Acme"}
    assert acme_now.version == 1  # its change in a failed change was undone with it
    assert [(e.id, e.version, e.event) for e in events] == [
        (ada.id, 2, "updated"),
        (ada.id, 3, "updated"),
        (results[6].id, 1, "created"),
    ]
    assert [e.event_id for e in events] == sorted(e.event_id for e in events)
    assert events[1].changes == {"employer": {"old": None, "new": "Acme"}}


async def test_an_update_that_changes_nothing_after_one_that_did_in_its_group(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        ada = await objects.create("Person", {"name": "Ada"})
        changed, same = await settle(
            objects.update(ada.id, {"email": "ada@x.org"}),
            objects.update(ada.id, {"email": "ada@x.org"}),
        )
        events = await objects.events(object_id=ada.id)
    assert (changed.version, same.version) == (2, 2)
    assert [e.version for e in events] == [1, 2]


async def test_an_object_made_changed_and_deleted_in_one_group(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        seed = await objects.create("Person", {"name": "Seed"})
        results = await settle(
            objects.apply(
                [
                    Create("Person", {"name": "Tmp"}, id="obj_tmp"),
                    Update("obj_tmp", {"name": "Tmp 2"}),
                ]
            ),
            objects.update("obj_tmp", {"email": "t@x.org"}),
            objects.delete("obj_tmp"),
            objects.delete(seed.id),
            objects.update(seed.id, {"name": "after its delete"}),
        )
        events = await objects.events(since=1)
        with pytest.raises(ObjectNotFoundError):
            await objects.get("obj_tmp")
        with pytest.raises(ObjectNotFoundError):
            await objects.get(seed.id)
    assert [type(r).__name__ for r in results] == [
        "list", "StoredObject", "StoredObject", "StoredObject", "ObjectNotFoundError"
    ]  # fmt: skip
    assert [(e.id, e.version, e.event) for e in events] == [
        ("obj_tmp", 1, "created"),
        ("obj_tmp", 2, "updated"),
        ("obj_tmp", 3, "updated"),
        ("obj_tmp", 3, "deleted"),
        (seed.id, 1, "deleted"),
    ]


async def test_a_group_that_makes_an_id_twice_refuses_the_second(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        first, second = await settle(
            objects.apply([Create("Person", {"name": "One"}, id="obj_same")]),
            objects.apply([Create("Person", {"name": "Two"}, id="obj_same")]),
        )
        stored = await objects.get("obj_same")
    assert isinstance(first, list)
    assert isinstance(second, ObjectValidationError)
    assert stored.data["name"] == "One"


async def test_a_made_again_id_after_its_delete_in_one_group_is_written_in_order(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        await objects.apply([Create("Person", {"name": "Old"}, id="obj_again")])
        results = await settle(
            objects.apply([Delete("obj_again")]),
            objects.apply([Create("Person", {"name": "New"}, id="obj_again")]),
        )
        again = await objects.get("obj_again")
    assert all(isinstance(r, list) for r in results), results
    assert (again.version, again.data["name"]) == (1, "New")


async def test_many_writers_on_few_objects_lose_no_update(url: str) -> None:
    async with ObjectStore(url, types=TYPES) as objects:
        people = [await objects.create("Person", {"name": f"p{n}"}) for n in range(5)]

        async def writer(index: int) -> None:
            for step in range(40):
                person = people[(index + step) % len(people)]
                await objects.update(person.id, {"email": f"{index}-{step}@x.org"})

        await asyncio.gather(*(writer(index) for index in range(20)))
        events = await objects.events(since=5, limit=10_000)
        final = [await objects.get(person.id) for person in people]
    assert len(events) == 800
    for person in final:
        versions = [e.version for e in events if e.id == person.id]
        assert versions == list(range(2, person.version + 1))  # no version twice, none lost
    assert {e.actor for e in events} == {User("system")} or len({e.actor for e in events}) == 1
