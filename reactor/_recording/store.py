"""What a signal store is, and what reporters are: the protocols that watch a run.

A *signal store* keeps recordings (``graph.run(record=store)``); a *reporter* watches
a run's signals as they are dispatched (``graph.run(reporters=[...])``). Both are
protocols, so any object with the right methods plugs in; :class:`SignalStoreBase`
gives the optional methods no-op defaults and the query logic stores share.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import timedelta
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

from reactor._recording.inbox import InboxWatch, Posted
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._signals.diagnostics import log
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

    def post(self, run_id: str, name: str, payload: Any = None, *, source: str = "user") -> str:
        """Queue a signal for a run, from any process; return the message's id."""
        ...

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not yet delivered, in posting order."""
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

    def post(self, run_id: str, name: str, payload: Any = None, *, source: str = "user") -> str:
        """Queue a signal for a run, from any process; return the message's id.

        Raises:
            SignalNameError: ``name`` is one only the runtime emits (``session:reply``
                and ``session:abort`` excepted: they answer a prompt, stop the run).
            PayloadError: The log cannot hold ``payload`` (nothing is posted).
            NotImplementedError: This store keeps no inbox.
        """
        raise NotImplementedError(f"{type(self).__name__} keeps no inbox.")

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not yet delivered (none by default)."""
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
            watch = self.__dict__["_inbox_watch"] = InboxWatch(self.undelivered)
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


class WriteFailures:
    """Which runs' recordings failed, and how many of their signals were not written.

    Shared by a store and its writer thread. When a write fails (disk full, database
    gone, a value it cannot encode), the runs in the failed batch are marked: nothing
    more of theirs is written, so each stays a clean prefix of its run (resumable,
    never a log with a hole in it), and every later signal of theirs is counted. The
    store itself is never left broken: the next batch is tried afresh (the writer
    reopens its connection), so other runs are recorded as soon as the cause is gone.
    The run asks :meth:`error_for` when it ends, and fails with the error.

    One log line per failure: ``recording failed`` when writes start failing, and
    ``recording resumed`` (with how many signals were lost meanwhile) when one succeeds.

    Args:
        where: The store, as messages name it (a path, a database).
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self._lock = threading.Lock()
        self.failed: dict[str, list[Any]] = {}  # run id -> [signals not written, error]
        self._failing: BaseException | None = None
        self._lost_while_failing = 0
        self._watchers: dict[str, Callable[[], None]] = {}

    def watch(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Call ``failed()`` once ``run_id``'s recording fails; return the unwatch."""
        self._watchers[run_id] = failed

        def unwatch() -> None:
            if self._watchers.get(run_id) is failed:
                del self._watchers[run_id]

        return unwatch

    def lost(self, run_id: str) -> bool:
        """Whether ``run_id``'s recording has failed (its later signals are dropped)."""
        return run_id in self.failed

    def lose(self, counts: Mapping[str, int], error: BaseException, *, store: bool = True) -> None:
        """Count signals of these runs as not written because of ``error``; mark the runs.

        ``store`` is whether writing itself failed (until a write succeeds again),
        rather than one value that could not be encoded.
        """
        newly = []
        with self._lock:
            for run_id, count in counts.items():
                entry = self.failed.get(run_id)
                if entry is None:
                    self.failed[run_id] = [count, error]
                    newly.append(run_id)
                else:
                    entry[0] += count
            first = self._failing is None
            if store:
                self._lost_while_failing += sum(counts.values())
                if first:
                    self._failing = error
        for run_id in newly:
            watcher = self._watchers.pop(run_id, None)
            if watcher is not None:
                watcher()
        if first:
            log(
                "reactor.recording",
                "error",
                "recording failed",
                store=self.where,
                error=f"{type(error).__name__}: {error}",
                hint=_advice(error),
            )

    def drop(self, run_id: str) -> None:
        """Count one more signal of a failed run as not written (it is not written)."""
        with self._lock:
            entry = self.failed.get(run_id)
            if entry is not None:
                entry[0] += 1

    def wrote(self) -> None:
        """A write succeeded: the failure, if any, is over."""
        if self._failing is None:
            return
        with self._lock:
            lost, self._lost_while_failing = self._lost_while_failing, 0
            self._failing = None
        log("reactor.recording", "warning", "recording resumed", store=self.where, lost=lost)

    def error_for(self, run_id: str) -> RecordingError | None:
        """The error of ``run_id``'s recording, if it failed (asked once, when it ends)."""
        with self._lock:
            entry = self.failed.pop(run_id, None)
            self._watchers.pop(run_id, None)
        if entry is None:
            return None
        count, error = entry
        return RecordingError(
            f"Recording run {run_id} to {self.where} failed ({type(error).__name__}: "
            f"{error}); {count} of its signals were not written, so its log stops where "
            f"the failure began. {_advice(error)} The store retries by itself and records "
            "the next runs once it can; resume this one with graph.resume(run_id, "
            "record=store) or run it again.",
            unwritten=count,
        )


def _advice(error: BaseException) -> str:
    text = str(error).lower()
    if "full" in text or "no space" in text or "quota" in text:
        return "Free disk space where the store is."
    if "encode" in text or "surrogate" in text or "serializ" in text:
        return "Pass values the log can hold (JSON data, valid Unicode text)."
    return "Check that the store's database is reachable and writable."


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
