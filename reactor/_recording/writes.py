"""For stores that write from a thread of their own: their queue, and which runs failed.

:class:`Backlog` is the queue between the event loop and the writer thread: appends
never wait, and a run awaits :meth:`Backlog.room` when the writer is behind
(backpressure on the run, not on the loop). :class:`WriteFailures` says which runs'
recordings failed, so that they fail and the store goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable, Mapping
from typing import Any

from reactor._signals.diagnostics import log
from reactor.exceptions import RecordingError

__all__ = ["Backlog", "WriteFailures"]


class Backlog:
    """What a store's writer thread has yet to write, and the runs waiting for room.

    ``put`` never blocks: the queue has no bound of its own. A run asks :meth:`room`
    between the steps of its activations; with ``limit`` items not written yet (those
    queued, and the batch the writer is writing) it gets a future, and waits until
    the writer has written it down to half of that. So a run that emits faster than
    the disk or the server takes its signals slows to their pace, the event loop never
    waits, and memory stays bounded (by ``limit``, and what each run emits in one
    step); outside input is refused at ``limit`` (``handle.send``), so a crash loses at
    most ``limit`` signals a producer was told were sent. A writer that cannot write (a
    locked database, a server away) leaves the runs waiting, and the rest of the
    process goes on.

    Args:
        limit: Items queued beyond which runs wait.
    """

    def __init__(self, limit: int) -> None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"max_backlog must be a whole number >= 1, got {limit!r}.")
        self.limit = limit
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.put = self.queue.put
        self.in_flight = 0
        """Items the writer has taken and not written yet (its batch)."""
        self._waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._lock = threading.Lock()

    def room(self) -> asyncio.Future[None] | None:
        """``None`` while fewer than ``limit`` items are unwritten; else a future done at room.

        Called on the event loop of the run that waits.
        """
        if self.queue.qsize() + self.in_flight < self.limit:
            return None
        loop = asyncio.get_running_loop()
        waiting = loop.create_future()
        with self._lock:
            self._waiting.append((loop, waiting))
        self._release_if_room()  # the writer may have written it down meanwhile
        return waiting

    def taken(self, count: int) -> None:
        """The writer took ``count`` items to write (they are unwritten until :meth:`written`)."""
        self.in_flight = count

    def written(self) -> None:
        """The writer wrote what it took: release the runs waiting, once half is written."""
        self.in_flight = 0
        self._release_if_room()

    def _release_if_room(self) -> None:
        if self._waiting and self.queue.qsize() + self.in_flight <= self.limit // 2:
            self.release()

    def release(self) -> None:
        """Let every waiting run go on (the queue has room, or the writer stopped)."""
        with self._lock:
            waiting, self._waiting = self._waiting, []
        for loop, future in waiting:
            with contextlib.suppress(RuntimeError):  # that run's loop has closed
                loop.call_soon_threadsafe(_resolve, future)

    def __len__(self) -> int:
        return self.queue.qsize()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


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
        """Call ``failed()`` once ``run_id``'s recording fails; return the unwatch.

        Called at once if it has failed already (its first writes can fail before the
        run starts watching).
        """
        with self._lock:
            already = run_id in self.failed
            if not already:
                self._watchers[run_id] = failed
        if already:
            failed()

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
            f"{_first_line(error)}); {count} of its signals were not written, so its log "
            f"stops where the failure began. {_advice(error)} The store retries by itself and "
            "records the next runs once it can; resume this one with graph.resume(run_id, "
            "record=store) or run it again.",
            unwritten=count,
        )


def _first_line(error: BaseException) -> str:
    """An error's text up to its first line's end (a database's error goes on with context)."""
    text = str(error).strip()
    return text.splitlines()[0].rstrip(".") if text else ""


def _advice(error: BaseException) -> str:
    text = str(error).lower()
    if "full" in text or "no space" in text or "quota" in text:
        return "Free disk space where the store is."
    if "encode" in text or "surrogate" in text or "serializ" in text:
        return "Pass values the log can hold (JSON data, valid Unicode text)."
    return "Check that the store's database is reachable and writable."
