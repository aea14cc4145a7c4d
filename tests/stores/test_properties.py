"""Properties of stores over random sequences of writes."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from reactor import Signal
from stores import StateValidationError, Store


class Inner(BaseModel):
    level: int = Field(default=0, ge=0)
    tags: list[str] = []


class State(BaseModel):
    count: int = Field(default=0, ge=0)
    name: str = ""
    items: list[int] = []
    inner: Inner = Inner()


KEYS = ("count", "name", "items", "inner")

# One write: (operation, argument). Negative counts/levels are invalid on purpose.
WRITES = st.one_of(
    st.tuples(st.just("set_count"), st.integers(min_value=-2, max_value=5)),
    st.tuples(st.just("set_name"), st.sampled_from(["", "a", "b"])),
    st.tuples(st.just("append"), st.integers(min_value=0, max_value=3)),
    st.tuples(st.just("pop"), st.none()),
    st.tuples(st.just("remove_first"), st.none()),
    st.tuples(st.just("set_level"), st.integers(min_value=-1, max_value=3)),
    st.tuples(st.just("tag"), st.sampled_from(["x", "y"])),
    st.tuples(st.just("update"), st.integers(min_value=-1, max_value=3)),
)


def apply_to_model(draft: Any, op: str, arg: Any) -> None:
    """Apply a write through whatever draft the store hands out."""
    if op == "set_count":
        draft.count = arg
    elif op == "set_name":
        draft.name = arg
    elif op == "append":
        draft.items.append(arg)
    elif op == "pop":
        if draft.items:
            draft.items.pop()
    elif op == "remove_first":
        if draft.items:
            del draft.items[0]
    elif op == "set_level":
        draft.inner.level = arg
    elif op == "tag":
        draft.inner.tags.append(arg)
    elif op == "update":
        draft.count = arg
        draft.name = str(arg)


def expected_after(state: dict[str, Any], op: str, arg: Any) -> dict[str, Any]:
    """The same write on plain data, with the model's constraints: the oracle."""
    new = copy.deepcopy(state)
    apply_to_model(_Attr(new), op, arg)
    if new["count"] < 0 or new["inner"]["level"] < 0:
        return state  # invalid: the store must refuse it and stay unchanged
    return new


class _Attr:
    """Attribute access over nested dicts, so the oracle reuses `apply_to_model`."""

    def __init__(self, data: dict[str, Any]) -> None:
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        value = self._data[name]
        return _Attr(value) if isinstance(value, dict) else value

    def __setattr__(self, name: str, value: Any) -> None:
        self._data[name] = value


@settings(max_examples=150, deadline=None)
@given(writes=st.lists(WRITES, max_size=25))
def test_final_state_is_the_initial_state_plus_the_valid_writes(
    writes: list[tuple[str, Any]],
) -> None:
    store = Store(State())
    expected = store.snapshot()
    for op, arg in writes:
        expected = expected_after(dict(expected), op, arg)
        try:
            with store.transaction() as draft:
                apply_to_model(draft, op, arg)
        except StateValidationError:
            pass
        assert store.snapshot() == expected


@settings(max_examples=150, deadline=None)
@given(writes=st.lists(WRITES, max_size=25))
def test_replaying_changed_payloads_reproduces_the_final_state(
    writes: list[tuple[str, Any]],
) -> None:
    store = Store(State())
    initial = copy.deepcopy(store.snapshot())
    signals: list[Signal] = []
    store.subscribe("state:**", signals.append)
    for op, arg in writes:
        try:
            with store.transaction() as draft:
                apply_to_model(draft, op, arg)
        except StateValidationError:
            pass
    replayed = initial
    for signal in signals:
        if signal.name.endswith(":changed"):
            data = signal.to_dict()["payload"]
            assert replayed[data["key"]] == data["old"]
            replayed[data["key"]] = data["new"]
    assert replayed == store.snapshot()


@settings(max_examples=100, deadline=None)
@given(writes=st.lists(WRITES, max_size=15))
def test_each_changed_key_gets_exactly_one_signal_per_commit(
    writes: list[tuple[str, Any]],
) -> None:
    store = Store(State())
    for op, arg in writes:
        signals: list[Signal] = []
        before = store.snapshot()
        with store.subscribe("state:*:changed", signals.append):
            try:
                with store.transaction() as draft:
                    apply_to_model(draft, op, arg)
            except StateValidationError:
                pass
        after = store.snapshot()
        changed = [key for key in KEYS if before[key] != after[key]]
        assert [s.payload["key"] for s in signals] == changed


def _multiset(items: list[Any]) -> Counter[str]:
    """Count items by value; dicts are unhashable, so count their JSON form."""
    return Counter(json.dumps(item, sort_keys=True) for item in items)


# Small pools of values so lists share items; dicts exercise unhashable items.
ITEMS = st.one_of(st.integers(0, 3), st.sampled_from([{"a": 1}, {"a": 2}]))


@settings(max_examples=200, deadline=None)
@given(before=st.lists(ITEMS, max_size=8), after=st.lists(ITEMS, max_size=8))
def test_added_and_removed_items_are_the_multiset_differences(
    before: list[Any], after: list[Any]
) -> None:
    store = Store({"items": before})
    signals: list[Signal] = []
    store.subscribe("state:items:*", signals.append)
    store.set("items", after)
    by_name = {s.name: s.to_dict()["payload"] for s in signals}
    added = by_name.get("state:items:added", {"items": []})["items"]
    removed = by_name.get("state:items:removed", {"items": []})["items"]
    assert _multiset(added) == _multiset(after) - _multiset(before)
    assert _multiset(removed) == _multiset(before) - _multiset(after)
    # What is added minus what is removed is the change of the list as a multiset.
    assert _multiset([*before, *added]) - _multiset(removed) == _multiset(after)
    expected = ["state:items:changed"] if before != after else []
    expected += ["state:items:added"] if added else []
    expected += ["state:items:removed"] if removed else []
    assert [s.name for s in signals] == expected


@pytest.mark.parametrize("op", ["set_count", "append", "set_level"])
def test_oracle_and_store_agree_on_a_single_write(op: str) -> None:
    store = Store(State())
    with store.transaction() as draft:
        apply_to_model(draft, op, 2)
    assert store.snapshot() == expected_after(copy.deepcopy(Store(State()).snapshot()), op, 2)
