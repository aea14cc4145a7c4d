from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from typing import Any

import pydantic
import pytest
from pydantic import BaseModel, Field

from reactor import Signal, SignalBus
from stores import (
    StateKeyError,
    StateValidationError,
    Store,
    StoreError,
    TransactionError,
    action,
    create_store,
)


class Analysis(BaseModel):
    confidence: float = Field(ge=0, le=1)
    note: str = ""


class Trade(BaseModel):
    symbol: str
    qty: int


class TradeState(BaseModel):
    symbol: str = "AAPL"
    analysis: Analysis | None = None
    trades: list[Trade] = []
    count: int = 0


class TradeStore(Store[TradeState]):
    @action
    def record_analysis(self, draft: TradeState, analysis: Analysis) -> None:
        draft.analysis = analysis

    @action
    def add_trade(self, draft: TradeState, trade: Trade) -> None:
        draft.trades.append(trade)

    @action
    def close_last(self, draft: TradeState) -> Trade:
        return draft.trades.pop()

    @action
    def fail_halfway(self, draft: TradeState) -> None:
        draft.count = 99
        raise RuntimeError("broker unavailable")

    @action
    def record_both(self, draft: TradeState, analysis: Analysis, trade: Trade) -> None:
        self.record_analysis(analysis)
        self.add_trade(trade)
        draft.count += 1

    @action
    async def fetch_and_count(self, draft: TradeState) -> None:
        await asyncio.sleep(0)
        draft.count += 1


def collect(store: Store[Any], pattern: str = "state:**") -> list[Signal]:
    signals: list[Signal] = []
    store.subscribe(pattern, signals.append)
    return signals


def test_action_emits_changed_with_old_new_actor_and_paths() -> None:
    store = TradeStore()
    signals = collect(store)
    store.record_analysis(Analysis(confidence=0.7))
    assert [s.name for s in signals] == ["state:analysis:changed"]
    assert signals[0].payload == {
        "key": "analysis",
        "old": None,
        "new": Analysis(confidence=0.7),
        "actor": "user",
        "paths": ["analysis"],
    }
    assert signals[0].source == "store"


def test_nested_change_reports_dotted_paths() -> None:
    store = TradeStore()
    store.record_analysis(Analysis(confidence=0.5))
    store.add_trade(Trade(symbol="A", qty=1))
    store.add_trade(Trade(symbol="B", qty=2))
    signals = collect(store)
    with store.transaction() as draft:
        assert draft.analysis is not None
        draft.analysis.confidence = 0.9
        draft.trades[1].qty = 5
    assert [(s.name, s.payload.get("paths")) for s in signals] == [
        ("state:analysis:changed", ["analysis.confidence"]),
        ("state:trades:changed", ["trades.1.qty"]),
        # By value, the edited trade is a new item replacing the old one.
        ("state:trades:added", None),
        ("state:trades:removed", None),
    ]
    assert signals[2].payload["items"] == [Trade(symbol="B", qty=5)]
    assert signals[3].payload["items"] == [Trade(symbol="B", qty=2)]


def test_replacing_a_model_reports_the_fields_that_differ() -> None:
    store = TradeStore()
    store.record_analysis(Analysis(confidence=0.5, note="x"))
    signals = collect(store)
    store.record_analysis(Analysis(confidence=0.5, note="y"))
    assert signals[0].payload["paths"] == ["analysis.note"]


def test_append_emits_changed_then_added() -> None:
    store = TradeStore()
    signals = collect(store)
    trade = Trade(symbol="A", qty=1)
    store.add_trade(trade)
    assert [s.name for s in signals] == ["state:trades:changed", "state:trades:added"]
    assert signals[1].payload == {"key": "trades", "items": [trade], "actor": "user"}


def test_shrinking_a_list_emits_removed() -> None:
    store = TradeStore()
    store.add_trade(Trade(symbol="A", qty=1))
    store.add_trade(Trade(symbol="B", qty=2))
    signals = collect(store)
    closed = store.close_last()
    assert closed == Trade(symbol="B", qty=2)
    assert [s.name for s in signals] == ["state:trades:changed", "state:trades:removed"]
    assert signals[1].payload["items"] == [Trade(symbol="B", qty=2)]


def test_removing_from_the_middle_reports_the_removed_item() -> None:
    store = Store({"items": [1, 2, 3, 4]})
    signals = collect(store, "state:items:removed")
    with store.transaction() as draft:
        draft["items"].remove(2)
    assert signals[0].payload["items"] == [2]


def test_replacing_a_list_reports_what_was_added_and_what_was_removed() -> None:
    store = Store({"xs": [1]})
    signals = collect(store)
    store.set("xs", [2, 3])
    store.set("xs", [9])
    assert [(s.name, s.payload.get("items")) for s in signals] == [
        ("state:xs:changed", None),
        ("state:xs:added", [2, 3]),
        ("state:xs:removed", [1]),
        ("state:xs:changed", None),
        ("state:xs:added", [9]),
        ("state:xs:removed", [2, 3]),
    ]


def test_reordering_a_list_adds_and_removes_nothing() -> None:
    store = Store({"xs": [1, 2, 2, 3]})
    signals = collect(store)
    store.set("xs", [2, 3, 1, 2])
    assert [s.name for s in signals] == ["state:xs:changed"]


def test_list_items_are_matched_by_value() -> None:
    store = TradeStore()
    store.add_trade(Trade(symbol="A", qty=1))
    signals = collect(store)
    store.set("trades", [Trade(symbol="A", qty=1), Trade(symbol="B", qty=2)])
    assert [(s.name, s.payload.get("items")) for s in signals] == [
        ("state:trades:changed", None),
        ("state:trades:added", [Trade(symbol="B", qty=2)]),
    ]


def test_writing_an_equal_value_emits_nothing() -> None:
    store = TradeStore()
    store.set("symbol", "MSFT")
    signals = collect(store)
    store.set("symbol", "MSFT")
    store.update(symbol="MSFT", count=0)
    with store.transaction() as draft:
        draft.trades.append(Trade(symbol="X", qty=1))
        draft.trades.pop()
    assert signals == []
    assert store.version == 1


def test_signals_of_one_transaction_follow_the_model_field_order() -> None:
    store = TradeStore()
    signals = collect(store, "state:*:changed")
    with store.transaction() as draft:
        draft.count = 3
        draft.trades.append(Trade(symbol="A", qty=1))
        draft.symbol = "MSFT"
    assert [s.payload["key"] for s in signals] == ["symbol", "trades", "count"]


def test_old_is_the_value_before_this_transaction() -> None:
    store = TradeStore()
    store.set("count", 1)
    store.set("count", 2)
    signals = collect(store)
    store.set("count", 3)
    assert (signals[0].payload["old"], signals[0].payload["new"]) == (2, 3)


def test_validation_failure_rolls_back_and_emits_nothing() -> None:
    store = TradeStore()
    store.record_analysis(Analysis(confidence=0.5))
    before = store.snapshot()
    signals = collect(store)

    def write() -> None:
        with store.transaction() as draft:
            draft.count = 7
            assert draft.analysis is not None
            draft.analysis.confidence = 1.5

    with pytest.raises(
        StateValidationError,
        match=(
            r"^Invalid value for 'analysis\.confidence': Input should be less than or "
            r"equal to 1 \(got 1\.5\)\. The state was left unchanged\.$"
        ),
    ) as info:
        write()
    assert (info.value.key, info.value.path) == ("analysis", "analysis.confidence")
    assert isinstance(info.value.__cause__, pydantic.ValidationError)
    assert store.snapshot() == before
    assert signals == []


def test_wrong_type_for_a_key_names_the_key() -> None:
    store = TradeStore()
    with pytest.raises(StateValidationError, match=r"^Invalid value for 'count': .*\(got 'many'\)"):
        store.set("count", "many")


def test_unknown_key_on_a_model_store_is_a_validation_error() -> None:
    store = TradeStore()
    with pytest.raises(StateValidationError, match=r"'nope'.*has no attribute 'nope'"):
        store.set("nope", 1)


def test_list_items_are_validated_and_coerced() -> None:
    store = TradeStore()
    with store.transaction() as draft:
        draft.trades.append({"symbol": "A", "qty": "3"})  # type: ignore[arg-type]  # coerced
    assert store.state.trades == [Trade(symbol="A", qty=3)]

    def append_invalid() -> None:
        with store.transaction() as draft:
            draft.trades.append({"symbol": "B", "qty": "three"})  # type: ignore[arg-type]

    with pytest.raises(StateValidationError, match=r"'trades\.1\.qty'"):
        append_invalid()
    assert len(store.state.trades) == 1


def test_an_action_that_raises_leaves_state_unchanged() -> None:
    store = TradeStore()
    signals = collect(store)
    with pytest.raises(RuntimeError, match="broker unavailable"):
        store.fail_halfway()
    assert store.state.count == 0
    assert signals == []


def test_model_validators_run_on_writes() -> None:
    class Limits(BaseModel):
        low: int = 0
        high: int = 10

        @pydantic.model_validator(mode="after")
        def ordered(self) -> Limits:
            if self.low > self.high:
                raise ValueError("low must not exceed high")
            return self

    store = Store(Limits())
    with pytest.raises(StateValidationError, match="low must not exceed high"):
        store.set("low", 11)
    store.update(low=11, high=20)
    assert (store.state.low, store.state.high) == (11, 20)


def test_nested_actions_join_the_outer_transaction() -> None:
    store = TradeStore()
    signals = collect(store)
    store.record_both(Analysis(confidence=0.8), Trade(symbol="A", qty=1))
    # One signal per key, all after the outermost commit.
    assert [s.name for s in signals] == [
        "state:analysis:changed",
        "state:trades:changed",
        "state:trades:added",
        "state:count:changed",
    ]
    assert store.version == 1


def test_nested_failure_caught_inside_prevents_the_outer_commit() -> None:
    store = TradeStore()

    def swallow_inner_failure() -> None:
        with store.transaction() as draft:
            draft.symbol = "MSFT"
            with contextlib.suppress(RuntimeError):
                store.fail_halfway()

    with pytest.raises(TransactionError, match=r"nested write in it failed \(RuntimeError"):
        swallow_inner_failure()
    assert store.state.symbol == "AAPL"


def test_signals_emitted_during_commit_see_the_new_state() -> None:
    store = TradeStore()
    seen: list[int] = []
    store.subscribe("state:count:changed", lambda s: seen.append(store.state.count))
    store.set("count", 5)
    assert seen == [5]


def test_a_subscriber_may_write_again() -> None:
    store = TradeStore()
    store.subscribe(
        "state:count:changed",
        lambda s: store.set("symbol", f"S{s.payload['new']}") if s.payload["new"] < 3 else None,
    )
    store.set("count", 1)
    assert store.state.symbol == "S1"


async def test_async_actions_commit_after_their_awaits() -> None:
    store = TradeStore()
    signals = collect(store)
    await store.fetch_and_count()
    assert store.state.count == 1
    assert [s.name for s in signals] == ["state:count:changed"]


async def test_concurrent_async_transactions_do_not_lose_each_others_keys() -> None:
    store = TradeStore()

    async def write_count() -> None:
        with store.transaction() as draft:
            await asyncio.sleep(0.01)
            draft.count = 1

    async def write_symbol() -> None:
        with store.transaction() as draft:
            draft.symbol = "MSFT"

    await asyncio.gather(write_count(), write_symbol())
    assert (store.state.count, store.state.symbol) == (1, "MSFT")


def test_set_and_update() -> None:
    store = TradeStore()
    signals = collect(store, "state:*:changed")
    store.set("symbol", "MSFT")
    store.update({"count": 2}, symbol="NVDA")
    assert [s.payload["key"] for s in signals] == ["symbol", "symbol", "count"]
    assert (store.state.symbol, store.state.count) == ("NVDA", 2)


def test_get_returns_values_and_unknown_keys_raise() -> None:
    store = TradeStore()
    assert store.get("symbol") == "AAPL"
    assert store.get("missing", None) is None
    with pytest.raises(
        StateKeyError,
        match=r"^The state has no key 'missing' \(keys: symbol, analysis, trades, count\)\.$",
    ):
        store.get("missing")
    assert store.keys() == ("symbol", "analysis", "trades", "count")


def test_snapshot_is_plain_json_and_memoized_per_version() -> None:
    store = TradeStore()
    store.add_trade(Trade(symbol="A", qty=1))
    first = store.snapshot()
    assert first == {
        "symbol": "AAPL",
        "analysis": None,
        "trades": [{"symbol": "A", "qty": 1}],
        "count": 0,
    }
    assert isinstance(first, dict)
    assert json.loads(json.dumps(first)) == first
    assert store.snapshot() is first
    store.set("count", 1)
    assert store.snapshot() is not first
    assert first["count"] == 0
    mutable = copy.deepcopy(first)
    mutable["trades"].append({})
    assert type(mutable) is dict


def test_dict_backed_store_reads_by_key_and_attribute() -> None:
    store = Store[Any]({"balance": 100, "positions": {"AAPL": 3}})
    signals = collect(store)
    with store.transaction() as draft:
        draft.balance -= 10
        draft["positions"]["MSFT"] = 1
    assert store.state.balance == 90
    assert store.state["positions"] == {"AAPL": 3, "MSFT": 1}
    assert [(s.name, s.payload["paths"]) for s in signals] == [
        ("state:balance:changed", ["balance"]),
        ("state:positions:changed", ["positions.MSFT"]),
    ]


def test_dict_store_adds_keys_but_refuses_to_delete_them() -> None:
    store = Store({"a": 1})
    store.set("b", 2)
    assert store.keys() == ("a", "b")

    def delete_key() -> None:
        with store.transaction() as draft:
            del draft["a"]

    with pytest.raises(StoreError, match=r"^Cannot delete top-level key 'a'"):
        delete_key()
    assert store.snapshot() == {"a": 1, "b": 2}


def test_dict_store_keys_must_fit_in_a_signal_name() -> None:
    with pytest.raises(ValueError, match=r"State key 'a:b' cannot be part of a signal name"):
        Store({"a:b": 1})
    store = Store[Any]({})
    with pytest.raises(ValueError, match=r"State key 'x:y'"):
        store.set("x:y", 1)


def test_the_store_keeps_its_own_copy_of_the_initial_state() -> None:
    initial = {"items": [1]}
    store = Store(initial)
    initial["items"].append(2)
    assert store.state["items"] == [1]


def test_standalone_subscription_and_cancel() -> None:
    store = TradeStore()
    seen: list[str] = []
    with store.subscribe("state:count:changed", lambda s: seen.append(s.name)) as subscription:
        store.set("count", 1)
    store.set("count", 2)
    assert seen == ["state:count:changed"]
    assert not subscription.active


def test_bound_store_emits_on_the_run_bus_with_causality() -> None:
    store = TradeStore()
    bus = SignalBus(run_id="run_1")
    own: list[str] = []
    store.subscribe("state:*:changed", lambda s: own.append(s.name))
    bus.subscribe("trade:requested", lambda s: store.set("count", s.payload))
    with store.bind(bus):
        request = bus.emit("trade:requested", 3, source="user")
        changed = bus.history[-1]
        assert (changed.name, changed.caused_by, changed.run_id) == (
            "state:count:changed",
            request.id,
            "run_1",
        )
        assert store.bus is bus
    store.set("count", 4)
    assert [s.name for s in bus.history] == ["trade:requested", "state:count:changed"]
    assert own == ["state:count:changed", "state:count:changed"]


def test_a_store_serves_one_run_at_a_time() -> None:
    store = TradeStore()
    store.bind(SignalBus(run_id="a"))
    with pytest.raises(TransactionError, match=r"already bound to the bus of run 'a'"):
        store.bind(SignalBus(run_id="b"))


def test_store_without_initial_state_needs_a_model_parameter() -> None:
    with pytest.raises(TypeError, match=r"^Store\(\) needs an initial state"):
        Store()
    with pytest.raises(TypeError, match=r"holds a pydantic model instance or a dict"):
        Store(42)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(TradeStore, "AAPL", id="store-class"),
        pytest.param(TradeState, "AAPL", id="model-class"),
        pytest.param(TradeState(symbol="MSFT"), "MSFT", id="model-instance"),
        pytest.param({"symbol": "NVDA"}, "NVDA", id="dict"),
        pytest.param(lambda: TradeState(symbol="TSLA"), "TSLA", id="factory"),
    ],
)
def test_create_store_accepts_every_state_spec(spec: object, expected: str) -> None:
    first, second = create_store(spec), create_store(spec)
    assert first.state.symbol == expected
    assert first is not second  # a fresh store each time
    first.set("symbol", "X")
    assert second.state.symbol == expected


def test_create_store_uses_an_instance_as_is() -> None:
    store = TradeStore()
    assert create_store(store) is store
    assert create_store(None).snapshot() == {}
    with pytest.raises(TypeError, match=r"^Cannot make a store from 42"):
        create_store(42)


def test_draft_reads_like_the_model() -> None:
    store = TradeStore()
    store.add_trade(Trade(symbol="A", qty=1))
    with store.transaction() as draft:
        assert isinstance(draft, TradeState)
        assert isinstance(draft.trades[0], Trade)
        assert draft.trades == [Trade(symbol="A", qty=1)]
        assert draft.model_dump()["trades"] == [{"symbol": "A", "qty": 1}]
        assert [t.symbol for t in draft.trades] == ["A"]
        assert len(draft.trades) == 1


def test_writes_through_a_draft_never_touch_earlier_reads() -> None:
    store = TradeStore()
    store.add_trade(Trade(symbol="A", qty=1))
    before = store.state
    old_trades = before.trades
    with store.transaction() as draft:
        draft.trades[0].qty = 9
        draft.trades.append(Trade(symbol="B", qty=2))
    assert old_trades == [Trade(symbol="A", qty=1)]
    assert store.state.trades[0].qty == 9


def test_unchanged_parts_are_shared_between_versions() -> None:
    store = TradeStore()
    store.record_analysis(Analysis(confidence=0.5))
    analysis = store._state.analysis
    store.set("count", 1)
    assert store._state.analysis is analysis


def test_restore_replaces_the_state_without_a_signal() -> None:
    store = TradeStore()
    seen = collect(store)
    store.restore({"trades": [{"symbol": "A", "qty": 2}], "balance": 5})
    assert store.state.trades == [Trade(symbol="A", qty=2)]
    assert seen == []
    with pytest.raises(StateValidationError, match=r"^Invalid value for 'trades\.0\.qty'"):
        store.restore({"trades": [{"symbol": "A", "qty": "x"}]})
    assert store.state.trades == [Trade(symbol="A", qty=2)]
