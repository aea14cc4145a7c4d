"""Static checks (run by mypy in `make test`): the store API keeps its types."""

from __future__ import annotations

from typing import assert_type

from pydantic import BaseModel

from stores import Store, action


class Counter(BaseModel):
    count: int = 0


class CounterStore(Store[Counter]):
    @action
    def add(self, draft: Counter, amount: int, *, note: str = "") -> int:
        draft.count += amount
        return draft.count

    @action
    async def add_later(self, draft: Counter, amount: int) -> None:
        draft.count += amount


async def check() -> None:
    store = CounterStore()
    assert_type(store.state, Counter)
    assert_type(store.add(2, note="x"), int)
    await store.add_later(1)
    store.add("2")  # type: ignore[arg-type]  # the draft is gone, `amount: int` remains
    with store.transaction() as draft:
        assert_type(draft, Counter)
        draft.count = 1
