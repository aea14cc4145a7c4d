"""The log the service's runs record to: the store's, less what fenced runs say.

:class:`ServiceRecord` is the :class:`~reactor._recording.store.RunLog` role of the
service's store: it passes what a run records to the store, except what a run records
after it was *held* (a worker that lost the run's lease: another one has it now). The
store's other roles are the store's own (:func:`service_store` puts them together).

It also keeps the end of each run that ended while its store could not write it (a
full disk): :meth:`write_ends` writes it once the store records again, so the run's
row says ``failed`` (with the ``RecordingError``) instead of ``running`` forever.
Until then the service shows it so (:attr:`unended`).

And it feeds the runs executing in this process to their watchers (:attr:`feeds`):
what a run records, its feed is given, as it is recorded. So followers see exactly
what the log holds, and a run pays for no subscription of its own on its bus (a
reaction's run is one of thousands a second).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from reactor._recording.info import RunInfo
from reactor._recording.roles import StoreRoles
from reactor._recording.store import SignalStore
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError
from reactor.service._hosting.live import RunFeed

__all__ = ["ServiceRecord", "service_store"]


def service_store(store: SignalStore) -> tuple[SignalStore, ServiceRecord]:
    """``store`` as the service's runs record to it (fenced), and its fenced log."""
    fenced = ServiceRecord(store)
    return StoreRoles(store, log=fenced), fenced


class ServiceRecord:
    """The log of the service's runs, which drops what held runs record (see the module).

    Args:
        store: The store everything else goes to.
    """

    def __init__(self, store: SignalStore) -> None:
        self.store = store
        self._held: set[str] = set()
        self.fence: Callable[[str], bool] | None = None
        """Whether this process may still write for a run (a worker's lease); a run it
        may not is held at once: nothing more of it is recorded here."""
        self.unended: dict[str, Signal] = {}
        """Runs that ended while their store could not write it: the end to write."""
        self.feeds: dict[str, RunFeed] = {}
        """The feeds of the runs executing in this process, by run id: each is given its
        run's start and every signal the run records (see the module)."""

    def unwritten(self, run_id: str, end: Signal, error: RecordingError) -> None:
        """Keep the end of a run whose recording failed, to write it once the store can.

        What is written is the run's own ``harness:end`` (its ``seq``, what its
        followers saw), saying ``failed`` with the error: the log has a hole before it,
        but no ``seq`` that means two things.
        """
        payload = {**end.payload, "status": "failed", "reason": f"RecordingError: {error}"}
        self.unended[run_id] = dataclasses.replace(end, payload=payload)

    def write_ends(self) -> list[str]:
        """Write the ends kept by :meth:`unwritten`; the runs now ended in the store.

        Blocking (call it off the loop). A run whose start was never written (it was
        refused with an error, not accepted) is forgotten.
        """
        written = []
        for run_id, end in list(self.unended.items()):
            try:
                self.store.info(run_id)
            except RunNotFoundError:
                del self.unended[run_id]
                continue
            self.store.append(end)
            self.store.flush()
            if self.store.recording_error(run_id) is None:
                del self.unended[run_id]
                written.append(run_id)
        return written

    @property
    def snapshot_every(self) -> int | None:
        """How often the runs recorded here take a snapshot (the store's setting)."""
        return self.store.snapshot_every

    def _writes(self, run_id: str | None) -> bool:
        if run_id is None:
            return True
        if run_id in self._held:
            return False
        if self.fence is not None and not self.fence(run_id):
            self._held.add(run_id)
            return False
        return True

    # -- writing -------------------------------------------------------------------

    def start_run(self, info: RunInfo) -> None:
        """Register a run (see :class:`~reactor.SignalStore`); its feed learns its id."""
        self.store.start_run(info)
        feed = self.feeds.get(info.run_id)
        if feed is not None:
            feed.start(info)

    def append(self, signal: Signal) -> None:
        """Record a signal, unless its run is held (or fenced off: then it is held)."""
        if self._writes(signal.run_id):
            self.store.append(signal)
            self._feed(signal)

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record a posted message's delivery, unless the run is held (it comes again)."""
        if self._writes(signal.run_id):
            self.store.deliver(message_id, signal)
            self._feed(signal)

    def _feed(self, signal: Signal) -> None:
        feeds = self.feeds
        if feeds and signal.run_id is not None:
            feed = feeds.get(signal.run_id)
            if feed is not None:
                feed.on_signal(signal)

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider call was asked, unless the run is held."""
        if run_id not in self._held:
            self.store.record_request(run_id, request_hash, fingerprint)

    def room(self) -> asyncio.Future[None] | None:
        """The store's backpressure (see :meth:`~reactor.SignalStore.room`)."""
        return self.store.room()

    # -- durability ----------------------------------------------------------------

    def flush(self) -> None:
        """Make everything recorded durable."""
        self.store.flush()

    def recording_error(self, run_id: str) -> RecordingError | None:
        """Why the run's recording is incomplete, after a flush."""
        return self.store.recording_error(run_id)

    def watch_recording(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Have ``failed()`` called if the run's recording fails."""
        return self.store.watch_recording(run_id, failed)

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    def __repr__(self) -> str:
        return repr(self.store)
