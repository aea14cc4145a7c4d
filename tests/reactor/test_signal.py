from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reactor import Signal
from reactor._signals.signal import new_signal


class Trade(pydantic.BaseModel):
    symbol: str
    qty: int
    placed: datetime


def test_signal_is_immutable() -> None:
    signal = Signal("trade:proposed", {"qty": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        signal.name = "other"  # type: ignore[misc]


def test_signal_changes_by_copy() -> None:
    signal = Signal("a", 1, seq=3)
    changed = dataclasses.replace(signal, payload=2)
    assert (signal.payload, changed.payload, changed.seq) == (1, 2, 3)


def test_a_signal_the_bus_builds_is_a_frozen_signal_like_one_made_by_hand() -> None:
    built = new_signal("trade:proposed", {"qty": 1}, "sig_3", 3, 1.5, "trader", "sig_2", 1, "r")
    made = Signal(
        "trade:proposed",
        {"qty": 1},
        id="sig_3",
        seq=3,
        timestamp=1.5,
        source="trader",
        caused_by="sig_2",
        depth=1,
        run_id="r",
    )
    assert type(built) is Signal
    assert built == made
    assert dataclasses.replace(built, seq=4).seq == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.seq = 5  # type: ignore[misc]


def test_constructed_signal_has_sensible_defaults() -> None:
    signal = Signal("a")
    assert signal.id.startswith("sig_")
    assert (signal.payload, signal.seq, signal.source, signal.caused_by, signal.depth) == (
        None,
        0,
        None,
        None,
        0,
    )
    assert signal.run_id is None
    assert abs(signal.timestamp - datetime.now(tz=UTC).timestamp()) < 5


def test_json_round_trip_with_a_model_payload() -> None:
    trade = Trade(symbol="AAPL", qty=3, placed=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    signal = Signal(
        "trade:proposed",
        {"trade": trade},
        id="sig_7",
        seq=7,
        timestamp=1_700_000_000.25,
        source="trader",
        caused_by="sig_6",
        depth=2,
        run_id="run_1",
    )
    data = json.loads(signal.to_json())
    assert data == {
        "id": "sig_7",
        "seq": 7,
        "name": "trade:proposed",
        "payload": {"trade": {"symbol": "AAPL", "qty": 3, "placed": "2026-01-02T03:04:05Z"}},
        "timestamp": "2023-11-14T22:13:20.250000Z",
        "source": "trader",
        "caused_by": "sig_6",
        "depth": 2,
        "run_id": "run_1",
    }
    back = Signal.from_json(signal.to_json())
    assert back == dataclasses.replace(signal, payload=data["payload"])
    assert back.to_dict() == signal.to_dict()


def test_payload_type_rebuilds_the_model() -> None:
    trade = Trade(symbol="MSFT", qty=1, placed=datetime(2026, 5, 5, tzinfo=UTC))
    back = Signal.from_json(Signal("t", trade).to_json(), payload_type=Trade)
    assert back.payload == trade


def test_unknown_payload_values_serialize_as_their_repr() -> None:
    error = ValueError("boom")
    assert json.loads(Signal("x", {"error": error}).to_json())["payload"] == {
        "error": "ValueError('boom')"
    }


def test_from_json_rejects_what_is_not_a_signal() -> None:
    with pytest.raises(pydantic.ValidationError, match="seq"):
        Signal.from_json('{"id": "sig_1", "name": "x", "timestamp": 0}')


def test_from_json_accepts_a_unix_timestamp() -> None:
    signal = Signal.from_json('{"id": "s", "seq": 1, "name": "x", "timestamp": 12.5}')
    assert signal.timestamp == 12.5


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.floats(allow_nan=False),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=10,
)


@given(
    payload=JSON_VALUES,
    seq=st.integers(min_value=0, max_value=2**40),
    timestamp=st.floats(min_value=0, max_value=4e9),
    source=st.none() | st.text(max_size=8),
    depth=st.integers(min_value=0, max_value=1000),
)
def test_json_round_trip_is_stable(
    payload: object, seq: int, timestamp: float, source: str | None, depth: int
) -> None:
    signal = Signal("a:b", payload, seq=seq, timestamp=timestamp, source=source, depth=depth)
    once = Signal.from_json(signal.to_json())
    assert once.to_json() == signal.to_json()
    assert once.payload == json.loads(json.dumps(payload))
    assert abs(once.timestamp - timestamp) <= 1e-6
    assert (once.name, once.seq, once.source, once.depth) == ("a:b", seq, source, depth)
