"""How a run's log begins (new, resumed after a stop, forked), and how it pauses.

A new run says ``harness:start`` (its input, initial state and its graph's
fingerprints). A resumed run goes on after its last recorded signal with
``harness:resumed``. A fork is a new run whose log begins with another run's signals up
to a point: they are written to the store under the fork's id, then ``harness:forked``
says where they came from, and the state the fork was given is written by the actor
``user``. Resumed and forked runs both record the fingerprints of the graph that goes
on, so that the next resume compares its graph with this one. A run suspended to
resume later (a shutdown) says ``harness:suspended`` last, and nothing after it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reactor._recording.info import RunInfo, normalize_tags
from reactor._signals.frozen import freeze_payload
from reactor._signals.names import (
    HARNESS_FORKED,
    HARNESS_RESUMED,
    HARNESS_START,
    HARNESS_SUSPENDED,
)

if TYPE_CHECKING:
    from reactor._activation.resume import ResumePlan
    from reactor._engine.options import RunOptions
    from reactor._signals.bus import Handler, SignalBus
    from stores import Store

__all__ = ["Forked", "announce", "first_signal", "last_signal"]


@dataclasses.dataclass(frozen=True)
class Forked:
    """Where a fork comes from: the run, the last of its signals it began with, its state.

    ``state`` (key -> value) is written by the actor ``user`` once the fork goes on.
    """

    from_run_id: str
    at: int
    state: Mapping[str, Any]


def announce(
    run_id: str,
    graph: str | None,
    options: RunOptions,
    origin: tuple[str | None, str | None],
    resumed: ResumePlan | None,
    forked: Forked | None,
) -> None:
    """Register the run with its store and reporters; a fork's copied log is written."""
    record, reporters = options.record, options.hooked
    if record is None and not reporters:
        return
    continued = resumed is not None and forked is None
    info = RunInfo(
        run_id=run_id,
        graph=graph,
        tags=normalize_tags(options.tags),
        started_at=resumed.recording.info.started_at if continued and resumed else time.time(),
        target=origin[0],
        target_hash=origin[1],
        parent_run_id=options.parent_run_id,
        forked_from=forked.from_run_id if forked is not None else None,
    )
    if record is not None:
        record.start_run(info)
        if forked is not None and resumed is not None:
            copied = resumed.recording
            for digest, fingerprint in copied.requests.items():
                record.record_request(run_id, digest, dict(fingerprint))
            for signal in copied.signals:
                record.append(signal)
    for reporter in reporters:
        reporter.start(info)


def first_signal(
    bus: SignalBus,
    store: Store[Any],
    options: RunOptions,
    fingerprints: Mapping[str, Mapping[str, str]],
    resumed: ResumePlan | None,
    forked: Forked | None,
) -> None:
    """Emit ``harness:start``, ``harness:resumed`` or ``harness:forked``."""
    if resumed is None:
        bus.emit(
            HARNESS_START, _start_payload(options.input, store, fingerprints), source="harness"
        )
    elif forked is None:
        payload = {"from_seq": resumed.last_seq, "fingerprints": fingerprints}
        bus.publish(HARNESS_RESUMED, freeze_payload(payload), "harness", None, 0)
    else:
        payload = {"from_run_id": forked.from_run_id, "at": forked.at, "fingerprints": fingerprints}
        bus.publish(HARNESS_FORKED, freeze_payload(payload), "harness", None, 0)


def _start_payload(
    input: Any, store: Store[Any], fingerprints: Mapping[str, Mapping[str, str]]
) -> Any:
    """The payload of ``harness:start``: the same object as the last run's, if equal.

    Thousands of runs of one graph often start alike: no input (or the same scalar
    object), the same shared snapshot of a flat state (see ``Store.snapshot``), the same
    fingerprints. A payload is read-only through and through, so they share one.
    """
    state = store.snapshot()
    last = _LAST_START[0]
    if (
        last is not None
        and last[0] is input
        and last[1] is state
        and last[2] is fingerprints
        and type(input) in _SCALAR_INPUTS
    ):
        return last[3]
    payload = freeze_payload({"input": input, "state": state, "fingerprints": fingerprints})
    _LAST_START[0] = (input, state, fingerprints, payload)
    return payload


_LAST_START: list[tuple[Any, Any, Any, Any] | None] = [None]
"""The last ``harness:start`` made: its input, state, fingerprints and payload."""
_SCALAR_INPUTS = frozenset({str, int, bool, type(None)})
"""Inputs that cannot change after the run is given them (others are copied per run)."""


def last_signal(bus: SignalBus, recorder: Handler | None, reason: str) -> None:
    """Emit ``harness:suspended {reason}``, recorded by ``recorder``, then seal the bus.

    It is recorded but not routed (no agent starts on it, nothing starts after it), and
    what the run says afterwards (its activations, cancelled) gets no ``seq`` and
    reaches nobody: a resume numbers its signals after this one, and no watcher ever
    saw a signal the log lacks.
    """
    bus.set_after_dispatch(None)
    bus.set_router(recorder)
    bus.publish(HARNESS_SUSPENDED, {"reason": reason}, "harness", None, 0)
    bus.seal()


def rebound(signals: Sequence[Any], run_id: str) -> list[Any]:
    """``signals`` as signals of run ``run_id`` (a fork's copy of its source's log)."""
    return [dataclasses.replace(signal, run_id=run_id) for signal in signals]
