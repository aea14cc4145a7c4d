"""A run's tail from its latest sound snapshot on, whatever its latest snapshot holds.

A store reads a run's tail (``load_tail``: what a resume reads) from its latest
``harness:snapshot``, found through an index, in a query that does not check what the
snapshot holds. When that snapshot fails its check (``reactor._recording.seals``:
changed after it was taken, not a snapshot's shape), the tail cannot be folded from it,
and the signals before it are not in the tail. :func:`sound_tail` then reads on
through the store's own pages (:meth:`~reactor.SignalStore.signals`, no other
contract): back through the run's snapshots to the latest sound one, then the signals
after it and the earlier ones it names as still needed; the whole run when none is
sound. A sound latest snapshot costs nothing more than its check.

A store that keeps its runs' logs hash-chained (``reactor._recording.chain``) also
checks each snapshot's link in its run's chain (``sealed``): a snapshot refused there
(its seal removed or recomputed in the database) is skipped like one that fails its
own check, and marked in the tail returned (its payload gone), so that whoever folds
the tail skips it too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from reactor._recording.log import needed_seqs
from reactor._recording.seals import skip, sound
from reactor._recording.store import PAGE
from reactor._signals.names import HARNESS_SNAPSHOT

if TYPE_CHECKING:
    from reactor._recording.recording import Recording
    from reactor._recording.store import SignalStore
    from reactor._signals.signal import Signal

__all__ = ["sound_tail"]

_BACK = 8
"""Snapshots read per page when looking back for a sound one."""
_NEEDED = 256
"""Signals read per page from a needed one on (needed signals come in runs)."""


def sound_tail(
    store: SignalStore, tail: Recording, sealed: Callable[[Signal], str | None] | None = None
) -> Recording:
    """``tail`` (``store``'s tail of a run) if it starts from a sound snapshot; else a sound tail.

    ``sealed(snapshot)``: what is wrong with the snapshot's link in its run's chain
    (``None``: nothing), for a store that chains its logs. Blocking: it may read pages
    of the store.

    Raises:
        RunNotFoundError: The run is gone from the store meanwhile.
    """
    signals = tail.signals
    trusted = _Trust(sealed)
    latest = next((s for s in reversed(signals) if s.name == HARNESS_SNAPSHOT), None)
    if latest is None:  # no snapshot at all, or one that claims a point after itself
        end = max(signals[-1].seq if signals else 0, tail.info.last_seq or 0)
        found = store.signals(tail.run_id, before=end + 1, limit=1, names=(HARNESS_SNAPSHOT,))
        if not found:
            return tail  # the whole run
        latest = found[0]
    if trusted(latest):
        return tail
    good = _sound_before(store, tail.run_id, latest.seq, trusted)
    if good is None:
        return trusted.marked(store.load(tail.run_id))  # folded from the start
    covered = int(good.payload["seq"])
    early = _signals_at(store, tail.run_id, needed_seqs(good.payload["needs"]), covered)
    after = _signals_after(store, tail.run_id, covered)
    return trusted.marked(dataclasses.replace(tail, signals=(*early, *after)))


class _Trust:
    """Whether a snapshot may be folded from: sound, and sealed in its chain if chained."""

    def __init__(self, sealed: Callable[[Signal], str | None] | None) -> None:
        self.sealed = sealed
        self.refused: set[int] = set()

    def __call__(self, snapshot: Signal) -> bool:
        if not sound(snapshot):
            return False
        problem = None if self.sealed is None else self.sealed(snapshot)
        if problem is None:
            return True
        skip(snapshot, problem)
        self.refused.add(snapshot.seq)
        return False

    def marked(self, recording: Recording) -> Recording:
        """``recording`` with the snapshots refused in their chain emptied (folds skip them)."""
        if not self.refused:
            return recording
        signals = tuple(
            dataclasses.replace(signal, payload=None)
            if signal.seq in self.refused and signal.name == HARNESS_SNAPSHOT
            else signal
            for signal in recording.signals
        )
        return dataclasses.replace(recording, signals=signals)


def _sound_before(store: SignalStore, run_id: str, before: int, trusted: _Trust) -> Signal | None:
    """The latest snapshot of the run before signal ``before`` that may be trusted, if any."""
    while True:
        page = store.signals(run_id, before=before, limit=_BACK, names=(HARNESS_SNAPSHOT,))
        for snapshot in reversed(page):
            if trusted(snapshot):
                return snapshot
        if len(page) < _BACK:
            return None
        before = page[0].seq


def _signals_after(store: SignalStore, run_id: str, after: int) -> list[Signal]:
    """Every signal of the run after signal ``after``, page by page."""
    found: list[Signal] = []
    while True:
        page = store.signals(run_id, after=after, limit=PAGE)
        found += page
        if len(page) < PAGE:
            return found
        after = page[-1].seq


def _signals_at(store: SignalStore, run_id: str, seqs: list[int], upto: int) -> list[Signal]:
    """The signals numbered ``seqs`` (those up to ``upto``), in ``seq`` order."""
    wanted = sorted({seq for seq in seqs if seq <= upto})
    found: list[Signal] = []
    index = 0
    while index < len(wanted):
        page = store.signals(run_id, after=wanted[index] - 1, limit=_NEEDED)
        by_seq = {signal.seq: signal for signal in page}
        last = page[-1].seq if page else wanted[index]
        while index < len(wanted) and wanted[index] <= last:
            signal = by_seq.get(wanted[index])
            if signal is not None:
                found.append(signal)
            index += 1
    return found
