"""The signal store the service's runs record to: the real one, less what fenced runs say.

:class:`ServiceRecord` passes everything to the store it wraps, except what a run
records after it was *held* (a worker that lost the run's lease: another one has it
now). It is a whole :class:`~reactor.SignalStore`: each member is the wrapped store's.

It also keeps the end of each run that ended while its store could not write it (a
full disk): :meth:`write_ends` writes it once the store records again, so the run's
row says ``failed`` (with the ``RecordingError``) instead of ``running`` forever.
Until then the service shows it so (:attr:`unended`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any

from reactor._recording.inbox import Posted, Wakeup
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._recording.store import PAGE, SignalStore
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["ServiceRecord"]


class ServiceRecord:
    """A signal store that drops what held runs record: see the module's docstring.

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
        """Register a run (see :class:`~reactor.SignalStore`)."""
        self.store.start_run(info)

    def append(self, signal: Signal) -> None:
        """Record a signal, unless its run is held (or fenced off: then it is held)."""
        if self._writes(signal.run_id):
            self.store.append(signal)

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record a posted message's delivery, unless the run is held (it comes again)."""
        if self._writes(signal.run_id):
            self.store.deliver(message_id, signal)

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

    # -- reading -------------------------------------------------------------------

    def info(self, run_id: str) -> RunInfo:
        """What the store knows of a run, its counters included."""
        return self.store.info(run_id)

    def signals(
        self,
        run_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = PAGE,
        names: Collection[Pattern] | None = None,
    ) -> list[Signal]:
        """One page of a run's log."""
        return self.store.signals(run_id, after=after, before=before, limit=limit, names=names)

    def state(self, run_id: str) -> dict[str, Any]:
        """A run's latest state."""
        return self.store.state(run_id)

    def load(self, run_id: str) -> Recording:
        """A recorded run."""
        return self.store.load(run_id)

    def load_tail(self, run_id: str) -> Recording:
        """A run from its latest snapshot on (what a resume reads)."""
        return self.store.load_tail(run_id)

    def runs(
        self,
        *,
        graph: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunInfo]:
        """Recorded runs, newest first."""
        return self.store.runs(graph=graph, tag=tag, status=status, limit=limit)

    def resolve(self, ref: str) -> str:
        """A run id from a prefix or ``last``."""
        return self.store.resolve(ref)

    # -- managing ------------------------------------------------------------------

    def delete(self, run_id: str) -> bool:
        """Delete a recorded run."""
        return self.store.delete(run_id)

    def tag(
        self, run_id: str, tags: Mapping[str, str] | None = None, *, remove: Collection[str] = ()
    ) -> RunInfo:
        """Set and drop a run's tags (see :meth:`reactor.SignalStoreBase.tag`)."""
        return self.store.tag(run_id, tags, remove=remove)

    def prune(
        self,
        *,
        older_than: timedelta,
        status: Collection[str] | None = ("completed",),
        keep_last: int = 0,
        dry_run: bool = False,
    ) -> int:
        """Delete ended runs (see :meth:`reactor.SignalStoreBase.prune`)."""
        return self.store.prune(
            older_than=older_than, status=status, keep_last=keep_last, dry_run=dry_run
        )

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    # -- the inbox -----------------------------------------------------------------

    def post(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        source: str = "user",
        at: datetime | None = None,
    ) -> str:
        """Queue a signal for a run (its durable inbox), due at ``at`` if given."""
        return self.store.post(run_id, name, payload, source=source, at=at)

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs, due and not yet delivered."""
        return self.store.undelivered(run_ids)

    def scheduled(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs with ``at=`` and not due yet."""
        return self.store.scheduled(run_ids)

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not."""
        return self.store.waiting_messages(run_ids)

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended with a timer or a scheduled message, and its time."""
        return self.store.wakeups(before=before)

    def watch_inbox(self, run_id: str, deliver: Callable[[Posted], None]) -> Callable[[], None]:
        """Have ``deliver`` called for each message posted to the run."""
        return self.store.watch_inbox(run_id, deliver)

    def __repr__(self) -> str:
        return repr(self.store)
