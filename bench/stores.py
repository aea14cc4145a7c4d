"""Store workloads: transactional actions against plain assignment, snapshots, view reads.

Targets are those of DESIGN.md section 22: an action with emission <= 3 µs, a read
through the read-only view <= 0.5 µs. The emission row measures what the action row
spends on the bus alone: the same signal, payload and subscriber, without the store.
"""

from __future__ import annotations

from pydantic import BaseModel

from bench._runner import Row, best_of_pair, micros, timed
from reactor import Signal
from reactor._signals.frozen import FrozenDict
from reactor._signals.views import ListView
from stores import Store, action

ACTIONS = 100_000
ACTION_TARGET = 3e-6
READ_TARGET = 0.5e-6


class Quote(BaseModel):
    symbol: str = "AAPL"
    bid: float = 0.0
    ask: float = 0.0


class Desk(BaseModel):
    price: int = 0
    symbol: str = "AAPL"
    quote: Quote = Quote()
    fills: list[int] = []
    notes: dict[str, str] = {}


class DeskStore(Store[Desk]):
    @action
    def set_price(self, draft: Desk, price: int) -> None:
        draft.price = price


def _plain(n: int) -> float:
    model = Desk()

    def work() -> None:
        for i in range(n):
            model.price = i

    return timed(work)


def _actions(n: int) -> float:
    store = DeskStore()
    seen: list[Signal] = []
    store.subscribe("state:price:changed", seen.append)
    set_price = store.set_price
    elapsed = timed(lambda: [set_price(i) for i in range(1, n + 1)])
    assert len(seen) == n
    return elapsed


def _emission(n: int) -> float:
    """The signals of ``_actions`` emitted on a store's bus directly: the bus's share."""
    store = DeskStore()
    seen: list[Signal] = []
    store.subscribe("state:price:changed", seen.append)
    emit = store.bus.emit
    paths = ListView(["price"])

    def work() -> None:
        for i in range(1, n + 1):
            payload = FrozenDict(key="price", old=i - 1, new=i, actor="user", paths=paths)
            emit("state:price:changed", payload, source="store")

    elapsed = timed(work)
    assert len(seen) == n
    return elapsed


def _snapshot_fresh(n: int) -> float:
    """A write then a snapshot: the cost a guard pays when the state just changed."""
    store = DeskStore()
    total = 0.0
    for i in range(1, n + 1):
        store.set_price(i)
        total += timed(store.snapshot)
    return total


def _snapshot_memoized(n: int) -> float:
    store = DeskStore()
    store.set_price(1)
    snapshot = store.snapshot
    return timed(lambda: [snapshot() for _ in range(n)])


def _plain_read(n: int) -> float:
    model = Desk()
    return timed(lambda: [model.quote.bid for _ in range(n)])


def _view_read(n: int) -> float:
    store = DeskStore()
    return timed(lambda: [store.state.quote.bid for _ in range(n)])


def run(runs: int, scale: float) -> list[Row]:
    n = max(1_000, int(ACTIONS * scale))
    plain, ours = best_of_pair(runs, lambda: _plain(n), lambda: _actions(n))
    emission = min(_emission(n) for _ in range(runs))
    fresh_n = max(100, n // 10)
    fresh, memo = best_of_pair(
        runs, lambda: _snapshot_fresh(fresh_n), lambda: _snapshot_memoized(n)
    )
    plain_read, view = best_of_pair(runs, lambda: _plain_read(n), lambda: _view_read(n))
    return [
        Row(
            workload=f"store: {n:,} single-key actions with emission",
            ours=f"{micros(ours / n)} per action",
            baseline=f"{micros(plain / n)} per plain model assignment",
            ratio=ours / plain,
            ratio_text=f"{ours / plain:.1f}x the baseline time",
            target=f"<= {micros(ACTION_TARGET)}",
            met=ours / n <= ACTION_TARGET,
        ),
        Row(
            workload="store: the same signals emitted on the store's bus, without the store",
            ours=f"{micros(emission / n)} per signal",
            baseline=f"{micros(ours / n)} per action (row above)",
            ratio=emission / ours,
            ratio_text=f"{emission / ours:.0%} of the action's time",
            target="report",
            met=None,
        ),
        Row(
            workload="store: snapshot() for a guard (5-key model)",
            ours=f"{micros(memo / n)} unchanged, {micros(fresh / fresh_n)} after a write",
            baseline="—",
            ratio=0.0,
            ratio_text="—",
            target="report",
            met=None,
        ),
        Row(
            workload="store: read `store.state.quote.bid` through the read-only view",
            ours=f"{micros(view / n)} per read",
            baseline=f"{micros(plain_read / n)} per plain model read",
            ratio=view / plain_read,
            ratio_text=f"{view / plain_read:.1f}x the baseline time",
            target=f"<= {micros(READ_TARGET)}",
            met=view / n <= READ_TARGET,
        ),
    ]
