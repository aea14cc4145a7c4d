from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from reactor import Signal
from stores import Store, acting_as, action, current_actor


class Book(BaseModel):
    count: int = 0
    note: str = ""


class BookStore(Store[Book]):
    @action
    def bump(self, draft: Book) -> None:
        draft.count += 1

    @action
    async def bump_later(self, draft: Book, gate: asyncio.Event) -> None:
        await gate.wait()
        draft.count += 1


def actors(store: Store[Any]) -> list[tuple[str, str]]:
    """Collect (key, actor) of every change the store signals from now on."""
    seen: list[tuple[str, str]] = []

    def record(signal: Signal) -> None:
        seen.append((signal.payload["key"], signal.payload["actor"]))

    store.subscribe("state:*:changed", record)
    return seen


def test_actor_defaults_to_user_and_can_be_given_or_set_by_context() -> None:
    store = BookStore()
    seen = actors(store)
    store.set("count", 1)
    store.set("count", 2, actor="system")
    with acting_as("agent:trader"):
        assert current_actor() == "agent:trader"
        store.set("count", 3)
        store.bump()
        store.set("count", 5, actor="scheduler")
    assert current_actor() == "user"
    assert [actor for _, actor in seen] == [
        "user",
        "system",
        "agent:trader",
        "agent:trader",
        "scheduler",
    ]


def test_nested_acting_as_restores_the_outer_actor() -> None:
    with acting_as("agent:outer"):
        with acting_as("agent:inner"):
            assert current_actor() == "agent:inner"
        assert current_actor() == "agent:outer"
    assert current_actor() == "user"


def test_the_actor_is_restored_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError, match=r"^boom$"), acting_as("agent:a"):
        raise RuntimeError("boom")
    assert current_actor() == "user"


async def test_concurrent_activations_keep_their_own_actor_across_awaits() -> None:
    # Each activation sets its actor, then waits while the other one runs and writes:
    # after the await, each must still write as itself.
    store = Store({"a": 0, "b": 0})
    seen = actors(store)
    a_waits, b_wrote = asyncio.Event(), asyncio.Event()

    async def activation_a() -> None:
        with acting_as("agent:a"):
            a_waits.set()
            await b_wrote.wait()
            assert current_actor() == "agent:a"
            store.set("a", 1)

    async def activation_b() -> None:
        await a_waits.wait()
        with acting_as("agent:b"):
            store.set("b", 1)
            b_wrote.set()
            await asyncio.sleep(0)
            store.set("b", 2)

    await asyncio.gather(activation_a(), activation_b())
    assert seen == [("b", "agent:b"), ("a", "agent:a"), ("b", "agent:b")]
    assert current_actor() == "user"


async def test_an_async_action_commits_as_the_actor_of_its_activation() -> None:
    store = BookStore()
    seen = actors(store)
    gate = asyncio.Event()

    async def activation() -> None:
        with acting_as("agent:slow"):
            await store.bump_later(gate)

    async def meanwhile() -> None:
        with acting_as("agent:fast"):
            store.set("note", "x")
            gate.set()

    await asyncio.gather(activation(), meanwhile())
    assert seen == [("note", "agent:fast"), ("count", "agent:slow")]


async def test_tasks_started_inside_the_block_inherit_the_actor() -> None:
    store = BookStore()
    seen = actors(store)

    async def write() -> None:
        store.bump()

    with acting_as("agent:parent"):
        child = asyncio.create_task(write())
    await child  # runs after the block has ended, as the actor it was started by
    store.bump()
    assert seen == [("count", "agent:parent"), ("count", "user")]


async def test_the_actor_is_restored_when_the_activation_is_cancelled() -> None:
    started = asyncio.Event()
    observed: list[str] = []

    async def activation() -> None:
        try:
            with acting_as("agent:cancelled"):
                started.set()
                await asyncio.sleep(3600)
        finally:
            observed.append(current_actor())

    task = asyncio.create_task(activation())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert observed == ["user"]
    assert current_actor() == "user"


def test_one_acting_as_serves_one_block_at_a_time() -> None:
    scope = acting_as("agent:a")
    with scope:
        pass
    with scope:  # used again once the first block has ended: fine
        assert current_actor() == "agent:a"
    with (
        pytest.raises(
            RuntimeError,
            match=(
                r"^acting_as\('agent:a'\) is already in use; call acting_as\(\) again "
                r"for each `with` block\.$"
            ),
        ),
        scope,
        scope,
    ):
        pass
    assert current_actor() == "user"


@pytest.mark.parametrize("actor", [pytest.param("", id="empty"), pytest.param(7, id="not-str")])
def test_acting_as_rejects_what_is_not_an_actor(actor: Any) -> None:
    with pytest.raises(ValueError, match=r"^An actor is a non-empty string, got .+\.$"):
        acting_as(actor)
