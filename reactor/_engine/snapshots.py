"""Snapshots as a run goes: ``harness:snapshot`` every ``snapshot_every`` signals.

A run recorded to a store with ``snapshot_every`` keeps the signals it routes since the
last snapshot; when there are that many, it folds them into what a resume needs (a
:class:`~reactor._activation.fold.LogFold`, carried over from the resume plan when the
run was resumed) and emits the fold as ``harness:snapshot``, sealed with the hash of
its content (``reactor._recording.seals``: a reader skips a snapshot changed since it
was taken). Folding a batch at a time
keeps the cost off the path of each signal: one list append per signal, and the fold
of the batch when a snapshot is due.

A replay emits its snapshots where the recording has them (after the same signals), so
that the replayed log is the recorded one, signal for signal, snapshots included.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from reactor._activation.fold import LogFold
from reactor._activation.snapshot import snapshot_of
from reactor._signals.names import HARNESS_SNAPSHOT

if TYPE_CHECKING:
    from reactor._recording.recording import Recording
    from reactor._recording.store import SignalStore
    from reactor._signals.bus import SignalBus
    from reactor._signals.signal import Signal

__all__ = ["Snapshots", "snapshot_every", "snapshot_points", "snapshots_for"]


def snapshot_every(record: SignalStore | None) -> int | None:
    """How often a run recorded to ``record`` takes a snapshot (``None``: never)."""
    every = None if record is None else record.snapshot_every
    return every if isinstance(every, int) and every > 0 else None


def snapshot_points(recording: Recording) -> frozenset[int]:
    """The signals after which ``recording`` took its snapshots (what a replay repeats)."""
    points = set()
    for signal in recording.signals:
        if signal.name == HARNESS_SNAPSHOT and isinstance(signal.payload, dict):
            covered = signal.payload.get("seq")
            if isinstance(covered, int):
                points.add(covered)
    return frozenset(points)


class Snapshots:
    """Folds a run's signals a batch at a time and emits ``harness:snapshot``.

    Args:
        bus: The run's bus.
        fold: Makes the fold: what the log said before this run (a resumed run's plan),
            or a new fold. Called at the first snapshot: most runs end before one is
            due and never make it.
        every: Signals between two snapshots (``None``: only at ``points``).
        points: The signals after which to take one (a replay's recorded points).
    """

    __slots__ = ("_make", "batch", "bus", "every", "fold", "points")

    def __init__(
        self,
        bus: SignalBus,
        fold: Callable[[], LogFold],
        every: int | None,
        points: Collection[int] = (),
    ) -> None:
        self.bus = bus
        self._make = fold
        self.fold: LogFold | None = None
        self.every = every
        self.points = frozenset(points)
        self.batch: list[Signal] = []

    def recorder(self, record: Callable[[Signal], None] | None) -> Callable[[Signal], None]:
        """``record`` (if any), then keep the signal; a snapshot when one is due."""
        batch, every, points = self.batch, self.every or 0, self.points
        keep, take = batch.append, self.take

        def note(signal: Signal) -> None:
            if record is not None:
                record(signal)
            keep(signal)
            if (every and len(batch) >= every) or (points and signal.seq in points):
                take()

        return note

    def take(self) -> None:
        """Fold what was kept and emit the snapshot (it follows what is queued)."""
        fold = self.fold
        if fold is None:
            fold = self.fold = self._make()
        fold.add(self.batch)
        self.batch.clear()
        payload: dict[str, Any] = snapshot_of(fold)
        self.bus.publish(HARNESS_SNAPSHOT, payload, "harness", None, 0)


def snapshots_for(
    bus: SignalBus,
    replayed: Recording | None,
    record: SignalStore | None,
    fold: Callable[[], LogFold],
) -> Snapshots | None:
    """A run's snapshots: every ``snapshot_every`` signals of ``record``, or as a replay's.

    A replay takes them where ``replayed`` took its own. ``None``: the run takes none.
    ``fold`` (what makes the run's fold) is called at the first snapshot only: a run
    that ends before one is due pays one list append per signal for them.
    """
    if replayed is not None:
        points = snapshot_points(replayed)
        return Snapshots(bus, fold, None, points) if points else None
    every = snapshot_every(record)
    return Snapshots(bus, fold, every) if every else None
