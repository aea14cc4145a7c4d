"""A store made of its roles: one object per role, a whole :class:`SignalStore` to runs.

A wrapper that changes one role of a store (the service's fenced log changes what a
run records, nothing else) implements that role alone and is put together with the
store for the others: ``StoreRoles(store, log=fenced)``. Each member goes to the
object of its role, written here once for every wrapper.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping
from datetime import datetime, timedelta
from typing import Any

from reactor._recording.inbox import Posted, Wakeup
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._recording.store import PAGE, Inbox, RunLog, RunReader, SignalStore, StoreAdmin
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError

__all__ = ["StoreRoles"]


class StoreRoles:
    """A :class:`SignalStore` whose roles are played by the objects given.

    Args:
        store: The store each role not given is played by.
        log: What runs record to (:class:`RunLog`), instead of ``store``.
        reader: What reads runs and their logs (:class:`RunReader`).
        inbox: What keeps outside input (:class:`Inbox`).
        admin: What deletes, tags and prunes runs (:class:`StoreAdmin`).
    """

    def __init__(
        self,
        store: SignalStore,
        *,
        log: RunLog | None = None,
        reader: RunReader | None = None,
        inbox: Inbox | None = None,
        admin: StoreAdmin | None = None,
    ) -> None:
        self.store = store
        self.log: RunLog = log if log is not None else store
        self.reader: RunReader = reader if reader is not None else store
        self.inbox: Inbox = inbox if inbox is not None else store
        self.admin: StoreAdmin = admin if admin is not None else store

    # -- RunLog ----------------------------------------------------------------------

    @property
    def snapshot_every(self) -> int | None:
        """Signals between two snapshots of a run recorded here (the log's)."""
        return self.log.snapshot_every

    def start_run(self, info: RunInfo) -> None:
        """Register a run (see :class:`RunLog`)."""
        self.log.start_run(info)

    def append(self, signal: Signal) -> None:
        """Record one signal."""
        self.log.append(signal)

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record a posted message's delivery."""
        self.log.deliver(message_id, signal)

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider call was asked."""
        self.log.record_request(run_id, request_hash, fingerprint)

    def room(self) -> asyncio.Future[None] | None:
        """The log's backpressure."""
        return self.log.room()

    def flush(self) -> None:
        """Make everything recorded durable."""
        self.log.flush()

    def recording_error(self, run_id: str) -> RecordingError | None:
        """Why the run's recording is incomplete, after a flush."""
        return self.log.recording_error(run_id)

    def watch_recording(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Have ``failed()`` called if the run's recording fails."""
        return self.log.watch_recording(run_id, failed)

    def close(self) -> None:
        """Close the log (the store, when it plays that role)."""
        self.log.close()

    # -- RunReader -------------------------------------------------------------------

    def info(self, run_id: str) -> RunInfo:
        """What is known of a run, its counters included."""
        return self.reader.info(run_id)

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
        return self.reader.signals(run_id, after=after, before=before, limit=limit, names=names)

    def state(self, run_id: str) -> dict[str, Any]:
        """A run's latest state."""
        return self.reader.state(run_id)

    def load(self, run_id: str) -> Recording:
        """A recorded run."""
        return self.reader.load(run_id)

    def load_tail(self, run_id: str) -> Recording:
        """A run from its latest snapshot on."""
        return self.reader.load_tail(run_id)

    def runs(
        self,
        *,
        graph: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunInfo]:
        """Recorded runs, newest first."""
        return self.reader.runs(graph=graph, tag=tag, status=status, limit=limit)

    def resolve(self, ref: str) -> str:
        """A run id from a run id, a unique prefix of one, or ``last``."""
        return self.reader.resolve(ref)

    # -- Inbox -----------------------------------------------------------------------

    def post(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        source: str = "user",
        at: datetime | None = None,
    ) -> str:
        """Queue a signal for a run, due at ``at`` if given."""
        return self.inbox.post(run_id, name, payload, source=source, at=at)

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs, due and not yet delivered."""
        return self.inbox.undelivered(run_ids)

    def scheduled(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs with ``at=`` and not due yet."""
        return self.inbox.scheduled(run_ids)

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not."""
        return self.inbox.waiting_messages(run_ids)

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended with a timer or a scheduled message, and its time."""
        return self.inbox.wakeups(before=before)

    def watch_inbox(self, run_id: str, deliver: Callable[[Posted], None]) -> Callable[[], None]:
        """Have ``deliver`` called for each message posted to the run."""
        return self.inbox.watch_inbox(run_id, deliver)

    # -- StoreAdmin ------------------------------------------------------------------

    def delete(self, run_id: str) -> bool:
        """Delete a recorded run."""
        return self.admin.delete(run_id)

    def tag(
        self, run_id: str, tags: Mapping[str, str] | None = None, *, remove: Collection[str] = ()
    ) -> RunInfo:
        """Set and drop a run's tags."""
        return self.admin.tag(run_id, tags, remove=remove)

    def prune(
        self,
        *,
        older_than: timedelta,
        status: Collection[str] | None = ("completed",),
        keep_last: int = 0,
        dry_run: bool = False,
    ) -> int:
        """Delete ended runs."""
        return self.admin.prune(
            older_than=older_than, status=status, keep_last=keep_last, dry_run=dry_run
        )

    def __repr__(self) -> str:
        return repr(self.store)
