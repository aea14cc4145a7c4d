"""What a signal store is, and what reporters are: the protocols that watch a run.

A *signal store* keeps recordings (``graph.run(record=store)``); a *reporter* watches
a run's signals as they are dispatched (``graph.run(reporters=[...])``). Both are
protocols, so any object with the right methods plugs in; :class:`SignalStoreBase`
gives the optional methods no-op defaults and the query logic stores share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from reactor._recording.inbox import InboxWatch, Posted, Wakeup
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._recording.writes import WriteFailures
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = [
    "DEFAULT_SNAPSHOT_EVERY",
    "Reporter",
    "SignalStore",
    "SignalStoreBase",
    "WriteFailures",
    "check_snapshot_every",
    "flush_run",
]

DEFAULT_SNAPSHOT_EVERY = 10_000
"""Signals between two ``harness:snapshot`` of a recorded run, unless a store says."""


def check_snapshot_every(every: int | None) -> int | None:
    """``snapshot_every`` as given, if it is ``None`` or a whole number >= 1.

    Raises:
        ValueError: It is not.
    """
    if every is not None and (not isinstance(every, int) or isinstance(every, bool) or every < 1):
        raise ValueError(
            f"snapshot_every must be a whole number of signals >= 1 (or None for no "
            f"snapshots), got {every!r}."
        )
    return every


@runtime_checkable
class Reporter(Protocol):
    """Watches a run: ``on_signal`` is called for each signal matching ``patterns``.

    Pass reporters with ``graph.run(..., reporters=[...])``. ``on_signal`` runs
    synchronously during dispatch, so keep it fast (buffer, don't block). A reporter
    may also have ``start(info)``, called with the :class:`RunInfo` before the first
    signal, and ``on_request(run_id, request)``, called with each distinct
    :class:`ProviderRequest` a model is sent (once per request hash), before its
    ``provider:start``.
    """

    @property
    def patterns(self) -> Sequence[Pattern]:
        """The signals to receive."""
        ...

    def on_signal(self, signal: Signal) -> None:
        """Receive one signal."""
        ...


@runtime_checkable
class SignalStore(Protocol):
    """Keeps recordings: ``graph.run(..., record=store)`` writes a run to it.

    ``start_run`` registers a run (graph, tags), ``append`` receives every signal as
    it is dispatched (it must not block: queue and write elsewhere),
    ``record_request`` keeps what each provider call was asked (replay names the first
    field that changed), ``flush`` makes everything appended durable, and
    ``load``/``runs``/``delete`` read and manage recordings. Subclass
    :class:`SignalStoreBase` to get the optional methods as no-ops.
    """

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded."""
        ...

    def append(self, signal: Signal) -> None:
        """Record one signal (quickly: this runs during dispatch)."""
        ...

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider call was asked."""
        ...

    def flush(self) -> None:
        """Make everything appended so far durable."""
        ...

    def load(self, run_id: str) -> Recording:
        """Return a recorded run (raise ``RunNotFoundError`` if unknown)."""
        ...

    def runs(
        self,
        *,
        graph: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunInfo]:
        """Recorded runs, newest first."""
        ...

    def delete(self, run_id: str) -> bool:
        """Delete a run; return whether it existed."""
        ...

    def post(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        source: str = "user",
        at: datetime | None = None,
    ) -> str:
        """Queue a signal for a run (due at ``at``, if given), from any process; its id."""
        ...

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs, due and not yet delivered, in order."""
        ...

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record ``signal``, the delivery of a posted message, marking it delivered."""
        ...

    def watch_inbox(self, run_id: str, deliver: Callable[[Posted], None]) -> Callable[[], None]:
        """Have ``deliver`` called (in this event loop) for each message posted to the run."""
        ...


class SignalStoreBase:
    """A base for signal stores: no-op optional methods and shared run lookup.

    Subclasses implement ``append``, ``load``, ``runs`` and ``delete``; they may
    override the rest. Used as a context manager, a store is closed on exit.

    Attributes:
        snapshot_every: A run recorded here writes ``harness:snapshot`` every this many
            signals (``None``: never); the stores reactor ships take it as an argument.
    """

    snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY

    def load_tail(self, run_id: str) -> Recording:
        """The run from its latest ``harness:snapshot`` on: what a resume reads.

        By default the whole run (a resume folds it from its latest snapshot all the
        same); the stores reactor ships read only the signals after the snapshot.
        """
        return self.load(run_id)

    def prune(
        self,
        *,
        older_than: timedelta,
        status: Collection[str] | None = ("completed",),
        keep_last: int = 0,
        dry_run: bool = False,
    ) -> int:
        """Delete ended runs that ended longer than ``older_than`` ago; return how many.

        Only runs that ended (a ``harness:end`` is recorded) with a status in
        ``status`` (``None``: any) are deleted, whole (signals, inbox, info, requests),
        in one transaction; a run still running or waiting never is. The
        ``keep_last`` newest runs of each graph among them are kept whatever their
        age. With ``dry_run`` nothing is deleted: the count is what would be.

        Raises:
            ValueError: A status is not one a run ends with, or a bound is negative.
            NotImplementedError: This store cannot prune.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot prune runs.")

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded (nothing to do by default)."""

    def append(self, signal: Signal) -> None:
        """Record one signal."""
        raise NotImplementedError

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider call was asked (dropped by default)."""

    def flush(self) -> None:
        """Make everything appended durable (nothing to do by default)."""

    def recording_error(self, run_id: str) -> RecordingError | None:
        """Why ``run_id``'s recording is incomplete, after a :meth:`flush` (asked once).

        ``None`` when every signal of the run was written. A run asks when it ends and,
        given an error, ends ``failed`` with it. Stores that write elsewhere (a
        thread, a server) override this with what their writer saw.
        """
        return None

    def watch_recording(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Have ``failed()`` called (from the writer's thread) if ``run_id``'s recording fails.

        The run stops at once rather than going on with effects its log would not
        show. Returns a function that stops watching. A store whose writes cannot
        fail behind the caller's back (they raise) never calls it.
        """
        failures = getattr(self, "_failures", None)
        if isinstance(failures, WriteFailures):
            return failures.watch(run_id, failed)
        return _nothing

    def load(self, run_id: str) -> Recording:
        """Return a recorded run."""
        raise NotImplementedError

    def runs(
        self,
        *,
        graph: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunInfo]:
        """Recorded runs, newest first."""
        raise NotImplementedError

    def delete(self, run_id: str) -> bool:
        """Delete a run; return whether it existed."""
        raise NotImplementedError

    def post(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        source: str = "user",
        at: datetime | None = None,
    ) -> str:
        """Queue a signal for a run, from any process; return the message's id.

        With ``at`` (an aware datetime) the message is delivered at or after that time,
        once: it waits in the store meanwhile (across restarts), and a run that has
        nothing else to do waits for it instead of ending.

        Raises:
            SignalNameError: ``name`` is one only the runtime emits (``session:reply``
                and ``session:abort`` excepted: they answer a prompt, stop the run).
            PayloadError: The log cannot hold ``payload`` (nothing is posted).
            ValueError: ``at`` is not an aware datetime.
            NotImplementedError: This store keeps no inbox.
        """
        raise NotImplementedError(f"{type(self).__name__} keeps no inbox.")

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs, due and not delivered yet (none by default)."""
        return []

    def scheduled(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs with ``at=`` and not due yet, soonest first."""
        return []

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not: what runs watch.

        A run keeps those not due yet, and waits for them rather than end.
        """
        return [*self.undelivered(run_ids), *self.scheduled(run_ids)]

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended that have a timer or a scheduled message, with its time, soonest first.

        ``before``: only those due before then. What the service resumes suspended runs
        by, when their time comes. None by default (a store that keeps no timers).
        """
        return []

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record a posted message's signal (by default, as any other signal)."""
        self.append(signal)

    def watch_inbox(self, run_id: str, deliver: Callable[[Posted], None]) -> Callable[[], None]:
        """Have ``deliver`` called (in this event loop) for each message posted to the run.

        Returns a function that stops watching. One thread per store polls for all
        the runs watching it.
        """
        watch = self.__dict__.get("_inbox_watch")
        if watch is None:
            watch = self.__dict__["_inbox_watch"] = InboxWatch(self.waiting_messages)
        stop: Callable[[], None] = watch.watch(run_id, deliver)
        return stop

    def close(self) -> None:
        """Release what the store holds (nothing by default)."""

    def resolve(self, ref: str) -> str:
        """Turn ``ref`` (a run id, a unique prefix of one, or ``last``) into a run id.

        Raises:
            RunNotFoundError: No run matches, or the prefix is ambiguous.
        """
        ids = [info.run_id for info in self.runs()]
        if ref == "last":
            found = ids[:1]
        else:
            found = [ref] if ref in ids else [run_id for run_id in ids if run_id.startswith(ref)]
        return self._one(ref, found)

    def _one(self, ref: str, found: Sequence[str]) -> str:
        if not found:
            raise RunNotFoundError(f"No run {ref!r} in {self} (see `reactor runs`).")
        if len(found) > 1:
            raise RunNotFoundError(
                f"Run id prefix {ref!r} is ambiguous: {', '.join(found[:5])}. Give more of it."
            )
        return found[0]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


async def flush_run(record: SignalStore, run_id: str) -> RecordingError | None:
    """Wait until ``record`` has written what ``run_id`` appended; say what failed, if any.

    Off the event loop (the flush waits on a disk or a server). A store without
    ``recording_error`` (a protocol-only store) can only fail by raising.
    """
    try:
        await asyncio.to_thread(record.flush)
    except RecordingError as exc:
        return exc
    asked = getattr(record, "recording_error", None)
    error = asked(run_id) if asked is not None else None
    return error if isinstance(error, RecordingError) else None


def _nothing() -> None:
    """Stop watching what was never watched."""
