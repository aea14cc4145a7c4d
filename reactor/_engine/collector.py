"""Fewer full garbage collections while many runs are in flight, when asked for.

A run in flight holds about a hundred small objects for as long as it waits on its
model calls. Python's collector starts a full collection each time the long-lived
objects have grown by a quarter, and a full collection walks every one of them, so
thousands of runs started at once are walked again and again while they wait: from a
few thousand runs in flight on, that is most of what a run costs (BENCHMARKS.md, the
many-small-runs rows). Runs are freed by reference counting when they end, whatever
the collector does, so making full collections rarer while the process is busy costs
little: only garbage cycles that outlive the young generations wait longer.

The collector belongs to the application: importing reactor and running graphs never
change it. :func:`tune_gc` installs a tuning (``reactor serve`` and ``reactor worker``
install one as they start, unless told ``--no-tune-gc``); :func:`untune_gc` removes
it. reactor counts the runs in flight in this process (``Run.execute`` reports each
start and end); the thresholds change only while a tuning is installed and only while
the process is busy, never when the application collects less already, and the
application's own settings come back when it is not busy. ``tune_collector`` and
``untune_collector`` are their earlier names, kept as aliases for one release.
"""

from __future__ import annotations

import gc
import threading
from types import TracebackType
from typing import Self

__all__ = [
    "CollectorTuning",
    "run_finished",
    "run_started",
    "tune_collector",
    "tune_gc",
    "untune_collector",
    "untune_gc",
]

BUSY_AT = 100  # runs in flight
FULL_THRESHOLD = 1_000  # Python's is 10

_lock = threading.Lock()
_in_flight = 0
_frozen = False  # freeze_long_lived() was done
_tuning: CollectorTuning | None = None  # the installed one: none until tune_gc()


def tune_gc(*, busy_at: int = BUSY_AT, full_threshold: int = FULL_THRESHOLD) -> CollectorTuning:
    """Make full garbage collections rarer while at least ``busy_at`` runs are in flight.

    Process-wide, and only when called: importing reactor and running graphs leave the
    collector as the application set it. ``reactor serve`` and ``reactor worker`` call
    this with the defaults as they start (``--no-tune-gc`` leaves the collector alone
    there); an application that runs thousands of graphs at once may call it too, once
    at start or around a block. While this process has ``busy_at`` or more runs in
    flight (on any event loop), the collector's third
    threshold (the number of collections of the middle generation before a full one is
    considered; Python's default is 10) is raised to ``full_threshold``; the young
    generations are left as they are. When the runs in flight drop below ``busy_at``
    the application's thresholds come back, unless it changed them in the meantime
    (then its new ones stay). A process that keeps thousands of small runs in flight
    pays about half as much per run with it as with Python's settings (see the
    many-small-runs rows of BENCHMARKS.md)::

        import reactor

        reactor.tune_gc()                   # for the life of the process
        with reactor.tune_gc(busy_at=10):   # or for a block
            await asyncio.gather(*(graph.run() for _ in range(10_000)))

    ``tune_collector`` is the same function under its earlier name (an alias kept for
    one release).

    Installing a tuning replaces the one installed before (undoing it first); undoing
    it, or leaving its ``with`` block, puts the one before back.

    Args:
        busy_at: How many runs in flight make the process busy (at least 1).
        full_threshold: The third threshold while busy (at least 1). With the default
            young thresholds a full collection is then considered at most once every
            ``700 * 10 * full_threshold`` allocations, instead of every 70,000.

    Raises:
        ValueError: ``busy_at`` or ``full_threshold`` is below 1.
    """
    for name, value in (("busy_at", busy_at), ("full_threshold", full_threshold)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"tune_gc({name}=...) takes a whole number >= 1, got {value!r}.")
    tuning = CollectorTuning(busy_at, full_threshold)
    _install(tuning)
    return tuning


def untune_gc() -> None:
    """Leave the garbage collector to the application: uninstall the tuning.

    Removes the tuning installed by :func:`tune_gc`; if it had changed the thresholds
    (the process was busy), the application's come back now. Does nothing when no
    tuning is installed (the default). ``untune_collector`` is the same function under
    its earlier name (an alias kept for one release).
    """
    _install(None)


tune_collector = tune_gc
"""Alias of :func:`tune_gc` (its earlier name), kept for one release."""
untune_collector = untune_gc
"""Alias of :func:`untune_gc` (its earlier name), kept for one release."""


def freeze_long_lived() -> bool:
    """Once per process: collect, then keep what is alive out of later collections, if tuned.

    A service calls it as it starts: its modules, tables, routes and models (some
    170,000 objects in ``reactor serve``) live as long as the process, yet each full
    collection would walk them all again (a sixth of the time of 10,000 reactions).
    ``gc.freeze()`` moves them where the collector does not look. Does nothing (returns
    False) after the first call, or when the collector is left to the application (no
    :func:`tune_gc`: the default, and ``--no-tune-gc``).
    """
    global _frozen
    with _lock:
        if _tuning is None or _frozen:
            return False
        _frozen = True
    gc.collect()
    gc.freeze()
    return True


def _install(tuning: CollectorTuning | None) -> None:
    """Replace the installed tuning (undoing it first) with ``tuning``."""
    global _tuning
    with _lock:
        if _tuning is not None:
            _tuning._release()
        if tuning is not None:
            tuning._replaced = _tuning
            tuning._follow(_in_flight)
        _tuning = tuning


class CollectorTuning:
    """An installed :func:`tune_gc`: undo it, or use it as a context manager.

    Attributes:
        busy_at: How many runs in flight make the process busy.
        full_threshold: The collector's third threshold while busy.
    """

    __slots__ = ("_replaced", "_saved", "_undone", "busy_at", "full_threshold")

    def __init__(self, busy_at: int, full_threshold: int) -> None:
        self.busy_at = busy_at
        self.full_threshold = full_threshold
        self._saved: tuple[int, int, int] | None = None  # the application's, while busy
        self._replaced: CollectorTuning | None = None  # comes back on undo
        self._undone = False

    @property
    def busy(self) -> bool:
        """Whether the process has ``busy_at`` runs in flight and this tuning is active."""
        with _lock:
            return _tuning is self and _in_flight >= self.busy_at

    @property
    def runs_in_flight(self) -> int:
        """How many runs this process has in flight now (on every event loop)."""
        return _in_flight

    def undo(self) -> None:
        """Uninstall, if installed: the tuning it replaced comes back.

        If this tuning had changed the thresholds, the application's come back now
        (then the tuning it replaced applies its own, if the process is busy). A
        replaced tuning that was undone in the meantime does not come back: the one it
        had replaced does (if any). Undoing a tuning that is not installed only keeps
        it from coming back.
        """
        global _tuning
        with _lock:
            self._release()
            self._undone = True
            if _tuning is self:
                previous = self._replaced
                while previous is not None and previous._undone:
                    previous = previous._replaced
                _tuning = previous
                if previous is not None:
                    previous._follow(_in_flight)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.undo()

    def __repr__(self) -> str:
        state = "busy" if self.busy else "idle"
        return (
            f"<CollectorTuning busy_at={self.busy_at} full_threshold={self.full_threshold} "
            f"({state}, {_in_flight} runs in flight)>"
        )

    # -- under the lock ------------------------------------------------------------

    def _follow(self, in_flight: int) -> None:
        if in_flight >= self.busy_at:
            if self._saved is None:
                self._apply()
        elif self._saved is not None:
            self._release()

    def _apply(self) -> None:
        saved = gc.get_threshold()
        if saved[2] >= self.full_threshold:  # full collections are already as rare
            return
        self._saved = saved
        gc.set_threshold(*self._tuned(saved))

    def _release(self) -> None:
        saved = self._saved
        if saved is not None and gc.get_threshold() == self._tuned(saved):
            gc.set_threshold(*saved)
        self._saved = None

    def _tuned(self, saved: tuple[int, int, int]) -> tuple[int, int, int]:
        """The thresholds this tuning sets over the application's ``saved`` ones."""
        return (saved[0], saved[1], self.full_threshold)


def run_started() -> None:
    """Count a run in flight (``Run.execute`` calls it when a run starts)."""
    _count(1)


def run_finished() -> None:
    """Count a run out of flight (``Run.execute`` calls it when a run ends)."""
    _count(-1)


def _count(step: int) -> None:
    global _in_flight
    with _lock:
        _in_flight += step
        if _tuning is not None:
            _tuning._follow(_in_flight)
