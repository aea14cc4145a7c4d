from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from reactor import HandlerError, Signal, SignalBus, SignalNameError, current_signal


def recorder(into: list[str], label: str = "") -> Callable[[Signal], None]:
    def handle(signal: Signal) -> None:
        into.append(f"{label}{signal.name}")

    return handle


def test_emit_returns_the_signal_with_order_and_source() -> None:
    bus = SignalBus(run_id="run_1")
    first = bus.emit("a", 1, source="user")
    second = bus.emit("b")
    assert (first.name, first.payload, first.seq, first.source, first.run_id) == (
        "a",
        1,
        1,
        "user",
        "run_1",
    )
    assert second.seq == 2
    assert first.id != second.id
    assert bus.history == (first, second)
    assert bus.last_seq == 2


def test_exact_and_pattern_subscribers_receive_matching_signals() -> None:
    bus = SignalBus()
    seen: list[str] = []
    bus.emit("trade:proposed")  # the name exists before the pattern subscription
    bus.subscribe("trade:proposed", recorder(seen, "exact:"))
    bus.subscribe("trade:*", recorder(seen, "glob:"))
    bus.emit("trade:proposed")
    bus.emit("trade:rejected")  # a name seen for the first time after subscribing
    bus.emit("other")
    assert seen == [
        "exact:trade:proposed",
        "glob:trade:proposed",
        "glob:trade:rejected",
    ]


def test_subscribers_are_called_in_subscription_order() -> None:
    bus = SignalBus()
    seen: list[str] = []
    bus.subscribe("**", recorder(seen, "1:"))
    bus.subscribe("x:y", recorder(seen, "2:"))
    bus.subscribe("x:*", recorder(seen, "3:"))
    bus.subscribe("x:y", recorder(seen, "4:"))
    bus.emit("x:y")
    assert seen == ["1:x:y", "2:x:y", "3:x:y", "4:x:y"]


def test_a_first_subscription_made_during_dispatch_gets_what_is_still_queued() -> None:
    bus = SignalBus()
    seen: list[str] = []

    def first(signal: Signal) -> None:
        bus.emit("b:one")  # queued behind this dispatch
        bus.subscribe(["b:one", "b:two"], recorder(seen))  # the bus's first subscription

    bus.set_router(lambda signal: first(signal) if signal.name == "a:start" else None)
    bus.emit("a:start")
    bus.emit("b:two")
    assert seen == ["b:one", "b:two"]


def test_overlapping_patterns_of_one_subscription_deliver_once() -> None:
    bus = SignalBus()
    seen: list[str] = []
    bus.subscribe(["a:b", "a:*", "**"], recorder(seen))
    bus.emit("a:b")
    assert seen == ["a:b"]


def test_the_same_handler_in_two_subscriptions_is_called_twice() -> None:
    bus = SignalBus()
    seen: list[str] = []
    handler = recorder(seen)
    first = bus.subscribe("a", handler)
    bus.subscribe("a", handler)
    bus.emit("a")
    first.cancel()
    bus.emit("a")
    assert seen == ["a", "a", "a"]


def test_nested_emits_are_dispatched_fifo() -> None:
    bus = SignalBus()
    order: list[str] = []

    def on_a(signal: Signal) -> None:
        order.append("h1:a")
        bus.emit("b")
        bus.emit("c")
        order.append("h1:a:done")

    bus.subscribe("a", on_a)
    bus.subscribe("a", recorder(order, "h2:"))

    def on_b(signal: Signal) -> None:
        order.append("h:b")
        bus.emit("d")

    bus.subscribe("b", on_b)
    bus.subscribe(["c", "d"], recorder(order, "h:"))
    bus.emit("a")
    # Every subscriber of `a` sees it before anything it caused is dispatched.
    assert order == ["h1:a", "h1:a:done", "h2:a", "h:b", "h:c", "h:d"]
    assert [s.name for s in bus.history] == ["a", "b", "c", "d"]


def test_emit_returns_only_after_everything_it_caused_is_dispatched() -> None:
    bus = SignalBus()
    seen: list[str] = []
    bus.subscribe("a", lambda s: bus.emit("b"))
    bus.subscribe("b", recorder(seen))
    bus.emit("a")
    assert seen == ["b"]


def test_causality_chain_is_filled_from_the_signal_being_handled() -> None:
    bus = SignalBus()
    bus.subscribe("a", lambda s: bus.emit("b"))
    bus.subscribe("b", lambda s: bus.emit("c"))
    a = bus.emit("a")
    _, b, c = bus.history
    assert (a.caused_by, b.caused_by, c.caused_by) == (None, a.id, b.id)
    assert bus.emit("later").caused_by is None


def test_depth_and_cause_are_inherited_from_an_explicit_cause() -> None:
    bus = SignalBus()
    parent = Signal("elsewhere", id="sig_x", depth=3)
    bus.subscribe("child", lambda s: bus.emit("grandchild"))
    child = bus.emit("child", cause=parent)
    grandchild = bus.history[-1]
    assert (child.caused_by, child.depth) == ("sig_x", 3)
    assert (grandchild.caused_by, grandchild.depth) == (child.id, 3)


def test_current_signal_is_visible_to_handlers_only() -> None:
    bus = SignalBus()
    seen: list[Signal | None] = []
    bus.subscribe("a", lambda s: seen.append(current_signal()))
    signal = bus.emit("a")
    assert seen == [signal]
    assert current_signal() is None


def test_a_raising_handler_does_not_stop_the_others() -> None:
    bus = SignalBus()
    seen: list[str] = []

    def explode(signal: Signal) -> None:
        raise RuntimeError("kaboom")

    bus.subscribe("a", explode)
    bus.subscribe("a", recorder(seen))
    bus.subscribe("bus:handler_error", lambda s: seen.append(s.name))
    with structlog.testing.capture_logs() as logs:
        a = bus.emit("a")
    assert seen == ["a", "bus:handler_error"]
    error = bus.history[-1]
    assert error.caused_by == a.id
    assert error.source == "bus"
    assert error.payload == {
        "handler": f"{__name__}.test_a_raising_handler_does_not_stop_the_others.<locals>.explode",
        "signal": "a",
        "signal_id": a.id,
        "error": {"type": "RuntimeError", "message": "kaboom"},
    }
    assert [(log["event"], log["log_level"], log["signal"]) for log in logs] == [
        ("signal handler raised", "error", "a")
    ]


def test_a_raising_runtime_hook_is_reported_under_the_signal_it_was_handling() -> None:
    bus = SignalBus()

    def explode(signal: Signal) -> None:
        if signal.name == "a":
            raise RuntimeError("kaboom")

    bus.set_router(explode)
    bus.set_after_dispatch(explode)
    with structlog.testing.capture_logs():
        a = bus.emit("a")
    errors = [s for s in bus.history if s.name == "bus:handler_error"]
    assert [(e.caused_by, e.depth) for e in errors] == [(a.id, 0), (a.id, 0)]


def test_a_raising_error_handler_is_logged_but_not_re_emitted() -> None:
    bus = SignalBus()

    def explode(signal: Signal) -> None:
        raise RuntimeError(signal.name)

    bus.subscribe(["a", "bus:handler_error"], explode)
    with structlog.testing.capture_logs() as logs:
        bus.emit("a")
    assert [s.name for s in bus.history] == ["a", "bus:handler_error"]
    assert len(logs) == 2


def test_async_handlers_are_rejected_with_advice() -> None:
    async def handler(signal: Signal) -> None:
        pass

    with pytest.raises(HandlerError, match=r"is async.*bus\.signals"):
        SignalBus().subscribe("a", handler)


def test_non_callable_handlers_are_rejected() -> None:
    with pytest.raises(HandlerError, match=r"^A handler must be callable, got 3\.$"):
        SignalBus().subscribe("a", 3)  # type: ignore[arg-type]


def test_cancelled_subscription_receives_nothing_more() -> None:
    bus = SignalBus()
    seen: list[str] = []
    subscription = bus.subscribe(["a", "b:*"], recorder(seen))
    bus.emit("a")
    subscription.cancel()
    subscription.cancel()
    bus.emit("a")
    bus.emit("b:new")
    assert seen == ["a"]
    assert not subscription.active


def test_subscription_is_a_context_manager() -> None:
    bus = SignalBus()
    seen: list[str] = []
    with bus.subscribe("a", recorder(seen)) as subscription:
        bus.emit("a")
    bus.emit("a")
    assert seen == ["a"]
    assert not subscription.active


def test_handler_may_cancel_itself_during_dispatch() -> None:
    bus = SignalBus()
    seen: list[str] = []

    def once(signal: Signal) -> None:
        seen.append(signal.name)
        subscription.cancel()

    subscription = bus.subscribe("a", once)
    bus.emit("a")
    bus.emit("a")
    assert seen == ["a"]


def test_invalid_name_is_rejected_before_anything_is_recorded() -> None:
    bus = SignalBus()
    with pytest.raises(SignalNameError, match=r"^Invalid signal name 'a::b'"):
        bus.emit("a::b")
    assert bus.history == ()
    assert bus.emit("ok").seq == 1


def test_history_limit_keeps_the_most_recent_signals() -> None:
    bus = SignalBus(history_limit=3)
    for i in range(10):
        bus.emit("tick", i)
    assert [s.payload for s in bus.history] == [7, 8, 9]
    assert bus.last_seq == 10


def test_history_is_unbounded_by_default() -> None:
    bus = SignalBus()
    for i in range(2_000):
        bus.emit("tick", i)
    assert len(bus.history) == 2_000


def test_negative_history_limit_is_rejected() -> None:
    with pytest.raises(ValueError, match="history_limit"):
        SignalBus(history_limit=-1)


async def test_signals_streams_matching_signals_until_the_end_pattern() -> None:
    bus = SignalBus()
    stream = bus.signals("job:*", until="job:done")
    bus.emit("job:start")  # emitted before iteration starts: not missed

    async def produce() -> None:
        for name in ("other", "job:step", "job:done", "job:after"):
            await asyncio.sleep(0)
            bus.emit(name)

    received: list[str] = []

    async def consume() -> None:
        async for signal in stream:
            received.append(signal.name)

    async with asyncio.TaskGroup() as tg:
        tg.create_task(consume())
        tg.create_task(produce())
    assert received == ["job:start", "job:step", "job:done"]


async def test_signals_with_history_replays_then_follows_without_duplicates() -> None:
    bus = SignalBus()
    received: list[str] = []
    streams = []

    def start_stream(signal: Signal) -> None:
        # Subscribing mid-dispatch, while `late` is already queued behind `early`.
        bus.emit("late")
        streams.append(bus.signals("**", history=True, until="end"))

    bus.subscribe("early", start_stream)
    bus.emit("early")
    bus.emit("end")
    async for signal in streams[0]:
        received.append(signal.name)
    assert received == ["early", "late", "end"]


async def test_closing_a_stream_wakes_its_consumer() -> None:
    bus = SignalBus()
    async with bus.signals("never") as stream:

        async def consume() -> list[Signal]:
            return [s async for s in stream]

        task = asyncio.create_task(consume())
        await asyncio.sleep(0)
        await stream.aclose()
        assert await asyncio.wait_for(task, 1) == []
    bus.emit("never")


@st.composite
def reaction_rules(draw: st.DrawFn) -> dict[str, list[str]]:
    """A random forest of reactions: handling signal `n{i}` emits some later signals."""
    size = draw(st.integers(min_value=1, max_value=12))
    rules: dict[str, list[str]] = {}
    for i in range(size):
        later = [f"n{j}" for j in range(i + 1, size)]
        rules[f"n{i}"] = draw(st.lists(st.sampled_from(later), max_size=3)) if later else []
    return rules


@given(rules=reaction_rules())
def test_dispatch_order_is_breadth_first_over_the_causal_tree(
    rules: dict[str, list[str]],
) -> None:
    bus = SignalBus()
    dispatched: list[str] = []

    def react(signal: Signal) -> None:
        dispatched.append(signal.id)
        for child in rules[signal.name]:
            bus.emit(child)

    bus.subscribe("**", react)
    root = bus.emit("n0")

    expected: list[str] = []
    frontier = [root]
    by_parent: dict[str | None, list[Signal]] = {}
    for signal in bus.history:
        by_parent.setdefault(signal.caused_by, []).append(signal)
    while frontier:
        expected.extend(s.id for s in frontier)
        frontier = [child for s in frontier for child in by_parent.get(s.id, [])]
    assert dispatched == expected == [s.id for s in bus.history]
    for signal in bus.history[1:]:
        assert signal.caused_by is not None
