from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from reactor import Signal
from stores import ReadOnlyStateError, Store


class Position(BaseModel):
    symbol: str
    qty: int

    def notional(self, price: float) -> float:
        return self.qty * price

    @property
    def label(self) -> str:
        return f"{self.qty} {self.symbol}"

    def double(self) -> None:
        self.qty *= 2


class Book(BaseModel):
    owner: str = "ana"
    positions: list[Position] = []
    limits: dict[str, int] = {}
    best: Position | None = None


def book_store() -> Store[Book]:
    return Store(
        Book(
            positions=[Position(symbol="AAPL", qty=3)],
            limits={"AAPL": 10},
            best=Position(symbol="MSFT", qty=1),
        )
    )


MUTATIONS: list[Any] = [
    pytest.param(lambda s: setattr(s, "owner", "bo"), "set Book.owner", id="set-field"),
    pytest.param(lambda s: delattr(s, "owner"), "delete Book.owner", id="delete-field"),
    pytest.param(lambda s: s.positions.append(1), "append to a list", id="append"),
    pytest.param(lambda s: s.positions.extend([1]), "extend a list", id="extend"),
    pytest.param(lambda s: s.positions.pop(), "pop from a list", id="pop"),
    pytest.param(lambda s: s.positions.insert(0, 1), "insert into a list", id="insert"),
    pytest.param(lambda s: s.positions.remove(1), "remove from a list", id="remove"),
    pytest.param(lambda s: s.positions.clear(), "clear a list", id="clear-list"),
    pytest.param(lambda s: s.positions.sort(), "sort a list in place", id="sort"),
    pytest.param(lambda s: s.positions.reverse(), "reverse a list in place", id="reverse"),
    pytest.param(lambda s: s.positions.__setitem__(0, 1), "assign to a list item", id="setitem"),
    pytest.param(lambda s: s.positions.__delitem__(0), "delete a list item", id="delitem"),
    pytest.param(lambda s: s.positions.__iadd__([1]), "extend a list", id="iadd"),
    pytest.param(lambda s: setattr(s.positions[0], "qty", 0), "set Position.qty", id="nested"),
    pytest.param(lambda s: s.limits.__setitem__("X", 1), "set key 'X'", id="dict-set"),
    pytest.param(lambda s: s.limits.__delitem__("AAPL"), "delete key 'AAPL'", id="dict-del"),
    pytest.param(lambda s: s.limits.update(X=1), "update a mapping", id="dict-update"),
    pytest.param(lambda s: s.limits.pop("AAPL"), "pop from a mapping", id="dict-pop"),
    pytest.param(lambda s: s.limits.clear(), "clear a mapping", id="dict-clear"),
    pytest.param(lambda s: s.limits.setdefault("X", 1), "setdefault", id="dict-setdefault"),
    pytest.param(lambda s: s.best.double(), "set Position.qty", id="method-mutating-self"),
]


@pytest.mark.parametrize(("mutate", "what"), MUTATIONS)
def test_state_refuses_every_mutation(mutate: Callable[[Any], object], what: str) -> None:
    store = book_store()
    before = store.snapshot()
    with pytest.raises(ReadOnlyStateError, match=rf"^Cannot {what}.*: State read from a store"):
        mutate(store.state)
    assert store.snapshot() == before


def test_model_view_reads_like_the_model() -> None:
    state = book_store().state
    assert isinstance(state, Book)
    assert isinstance(state.positions[0], Position)
    assert state.owner == "ana"
    assert state.positions[0].notional(2.0) == 6.0
    assert state.positions[0].label == "3 AAPL"
    assert state.model_dump()["limits"] == {"AAPL": 10}
    assert state == Book(
        positions=[Position(symbol="AAPL", qty=3)],
        limits={"AAPL": 10},
        best=Position(symbol="MSFT", qty=1),
    )
    assert Position(symbol="MSFT", qty=1) == state.best
    assert dict(state)["owner"] == "ana"
    assert len(state.positions) == 1
    assert Position(symbol="AAPL", qty=3) in state.positions
    assert state.limits["AAPL"] == 10
    assert state.limits.get("nope") is None
    assert list(state.limits.items()) == [("AAPL", 10)]
    assert repr(state.best) == "Position(symbol='MSFT', qty=1)"


def test_model_copy_of_a_view_is_a_private_deep_copy() -> None:
    store = book_store()
    mine = store.state.model_copy()
    mine.positions.append(Position(symbol="X", qty=1))
    deep = copy.deepcopy(store.state)
    deep.positions[0].qty = 100
    assert store.state.positions == [Position(symbol="AAPL", qty=3)]
    assert type(deep) is Book


def test_views_pickle_as_their_values() -> None:
    store = book_store()
    assert pickle.loads(pickle.dumps(store.state)) == store.state
    assert pickle.loads(pickle.dumps(store.state.positions)) == [Position(symbol="AAPL", qty=3)]


def test_dict_view_attribute_access_names_missing_keys() -> None:
    state = Store[Any]({"balance": 5}).state
    assert state.balance == 5
    with pytest.raises(AttributeError, match=r"^The state has no key 'cash' \(keys: balance\)\.$"):
        _ = state.cash


def test_payload_values_are_read_only_and_serialize() -> None:
    store = book_store()
    signals: list[Signal] = []
    store.subscribe("state:positions:changed", signals.append)
    with store.transaction() as draft:
        draft.positions.append(Position(symbol="NVDA", qty=2))
    payload = signals[0].payload
    with pytest.raises(ReadOnlyStateError):
        payload["new"].append(1)
    assert signals[0].to_dict()["payload"]["new"] == [
        {"symbol": "AAPL", "qty": 3},
        {"symbol": "NVDA", "qty": 2},
    ]


def test_writing_a_view_back_stores_the_value_not_the_view() -> None:
    store = book_store()
    with store.transaction() as draft:
        best = store.state.best
        assert best is not None
        draft.positions = [best, *store.state.positions]
    assert type(store._state.positions[0]) is Position
    assert store.snapshot()["positions"][0] == {"symbol": "MSFT", "qty": 1}


def test_snapshot_refuses_mutation() -> None:
    snapshot = book_store().snapshot()
    with pytest.raises(
        ReadOnlyStateError,
        match=(
            r"^Store snapshots and signal payloads are read-only; copy\.deepcopy\(\) of one "
            r"gives a mutable copy\.$"
        ),
    ):
        snapshot["owner"] = "x"
    with pytest.raises(ReadOnlyStateError):
        snapshot["positions"].append({})


def test_signal_payloads_refuse_mutation() -> None:
    store = book_store()
    signals: list[Signal] = []
    store.subscribe("state:**", signals.append)
    with store.transaction() as draft:
        draft.positions.append(Position(symbol="NVDA", qty=2))
    changed, added = signals
    mutations: list[Callable[[], object]] = [
        lambda: changed.payload.__setitem__("actor", "mallory"),
        lambda: changed.payload.pop("old"),
        lambda: changed.payload["paths"].append("owner"),
        lambda: added.payload.update(items=[]),
        lambda: added.payload["items"].append(1),
    ]
    for mutate in mutations:
        with pytest.raises(ReadOnlyStateError):
            mutate()
    assert changed.payload["actor"] == "user"
    assert changed.payload["paths"] == ["positions"]
    assert added.payload == {
        "key": "positions",
        "items": [Position(symbol="NVDA", qty=2)],
        "actor": "user",
    }
    assert copy.deepcopy(changed.payload)["paths"] == ["positions"]


def _containers(value: Any, found: set[str]) -> set[str]:
    """The names of the container types at any depth of ``value``."""
    if isinstance(value, str | bytes | int | float | type(None) | BaseModel):
        return found
    found.add(type(value).__name__)
    items = value.values() if isinstance(value, Mapping) else value
    for item in items:
        _containers(item, found)
    return found


def test_every_list_in_a_payload_is_one_read_only_type() -> None:
    store = Store[Any]({"trades": [{"qty": 1, "tags": ["a"]}], "limits": {"caps": [1, 2]}})
    signals: list[Signal] = []
    store.subscribe("state:**", signals.append)
    with store.transaction() as draft:
        draft["trades"].append({"qty": 2, "tags": ["b"]})
        draft["limits"] = {"caps": [3]}
    kinds: set[str] = set()
    for signal in signals:
        _containers(dict(signal.payload), kinds)
    assert sorted(kinds) == ["DictView", "ListView", "dict"]


async def test_emitted_payloads_and_the_start_signal_follow_the_same_rule() -> None:
    from reactor import ScriptedProvider, agent, reactive

    def emit(ctx: Any) -> None:
        ctx.emit("order:placed", {"legs": [{"fills": [1, 2]}], "meta": {"ids": ["x"]}})

    graph = reactive(
        agents={"placer": agent(run=emit, activate_on=["harness:start"], emits=["order:placed"])},
        state={"book": [{"levels": [1]}]},
    )
    result = await graph.run(input={"symbols": ["AAPL"]}, provider=ScriptedProvider({}))
    for name in ("order:placed", "harness:start"):
        (signal,) = [s for s in result.signals if s.name == name]
        kinds = _containers(dict(signal.payload), set())
        assert kinds <= {"dict", "DictView", "ListView"}, (name, kinds)
        assert "ListView" in kinds
