"""A base for signal stores: every optional member of the contract, with a real default.

Subclass :class:`SignalStoreBase` and implement ``append``, ``load``, ``runs`` and
``delete``: the rest works from them (each default below says what it costs), and a
store that can do better (the stores reactor ships read one page, not a whole log)
overrides it.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Self

from reactor._recording.inbox import InboxWatch, Posted, Wakeup
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._recording.store import DEFAULT_SNAPSHOT_EVERY, PAGE
from reactor._signals.patterns import Pattern, compile_pattern, is_exact
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, RunNotFoundError

__all__ = ["SignalStoreBase", "check_page", "name_filter", "page_of"]


def check_page(after: int, before: int | None, limit: int) -> None:
    """Refuse a page that cannot be read.

    Raises:
        ValueError: ``after`` or ``before`` is not a whole number >= 0, or ``limit``
            not one >= 1.
    """
    for name, value in (("after", after), ("before", before)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ValueError(f"{name} must be a signal's seq (a whole number), got {value!r}.")
        if value is not None and value < 0:
            raise ValueError(f"{name} must be a seq >= 0, got {value!r}.")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"limit must be a whole number >= 1, got {limit!r}.")


def name_filter(names: Collection[Pattern] | None) -> Callable[[str], bool] | None:
    """A test of signal names for ``names`` (exact names or patterns); ``None``: any name."""
    if names is None:
        return None
    if isinstance(names, str):
        names = (names,)
    exact = {name for name in names if isinstance(name, str) and is_exact(name)}
    matchers = [compile_pattern(name) for name in names if name not in exact]
    if not matchers:
        return exact.__contains__
    return lambda name: name in exact or any(match(name) for match in matchers)


def page_of(
    signals: Sequence[Signal],
    *,
    after: int,
    before: int | None,
    limit: int,
    names: Collection[Pattern] | None,
) -> list[Signal]:
    """The page :meth:`SignalStoreBase.signals` returns, from signals in ``seq`` order."""
    check_page(after, before, limit)
    start = bisect.bisect_right(signals, after, key=_seq)
    end = len(signals) if before is None else bisect.bisect_left(signals, before, key=_seq)
    wanted = name_filter(names)
    if before is None:
        chosen: Iterable[Signal] = signals[start:end]
        found = [s for s in chosen if wanted is None or wanted(s.name)]
        return found[:limit]
    backwards = [s for s in reversed(signals[start:end]) if wanted is None or wanted(s.name)]
    return backwards[:limit][::-1]


def _seq(signal: Signal) -> int:
    return signal.seq


class SignalStoreBase:
    """A base for signal stores: the optional members of :class:`~reactor.SignalStore`.

    Subclasses implement ``append``, ``load``, ``runs`` and ``delete``, and override
    what they can do better. Used as a context manager, a store is closed on exit.

    Attributes:
        snapshot_every: A run recorded here writes ``harness:snapshot`` every this many
            signals (``None``: never); the stores reactor ships take it as an argument.
    """

    snapshot_every: int | None = DEFAULT_SNAPSHOT_EVERY

    # -- writing ---------------------------------------------------------------------

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded (nothing to do by default)."""

    def append(self, signal: Signal) -> None:
        """Record one signal (subclasses implement it; it must not block)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement append().")

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record a posted message's signal (by default, as any other signal)."""
        self.append(signal)

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider call was asked (dropped by default)."""

    def room(self) -> asyncio.Future[None] | None:
        """``None``: by default a store keeps up (its ``append`` writes, or buffers)."""
        return None

    # -- durability ------------------------------------------------------------------

    def flush(self) -> None:
        """Make everything appended durable (nothing to do by default)."""

    def recording_error(self, run_id: str) -> RecordingError | None:
        """``None`` by default: a store whose writes fail raises from ``append``.

        Stores that write elsewhere (a thread, a server) override it with what their
        writer saw; a run asks when it ends and, given an error, ends ``failed``.
        """
        return None

    def watch_recording(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Never calls ``failed`` by default (writes that fail raise); the unwatch.

        Stores that write elsewhere override it, so that a run stops at once rather
        than go on with effects its log would not show.
        """
        return _nothing

    # -- reading ---------------------------------------------------------------------

    def info(self, run_id: str) -> RunInfo:
        """What the store knows of the run; by default from its tail (:meth:`load_tail`).

        The stores reactor ships read one row (the counters are kept as the run is
        written).

        Raises:
            RunNotFoundError: No such run.
        """
        return self.load_tail(run_id).info

    def signals(
        self,
        run_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = PAGE,
        names: Collection[Pattern] | None = None,
    ) -> list[Signal]:
        """One page of a run's log, in ``seq`` order.

        The first ``limit`` signals with a ``seq`` greater than ``after``; with
        ``before``, the *last* ``limit`` of those with a ``seq`` less than ``before``
        (paging back from the end: the tail is ``before=info.last_seq + 1``).
        ``names``: only signals with these names (exact names or patterns). By
        default it reads the whole log (:meth:`load`); the stores reactor ships read
        one page through an index.

        Raises:
            RunNotFoundError: No such run.
            ValueError: A bound is not a seq, or ``limit`` < 1.
        """
        return page_of(
            self.load(run_id).signals, after=after, before=before, limit=limit, names=names
        )

    def state(self, run_id: str) -> dict[str, Any]:
        """The run's latest state; by default rebuilt from its tail (:meth:`load_tail`).

        Raises:
            RunNotFoundError: No such run.
        """
        return self.load_tail(run_id).state

    def load(self, run_id: str) -> Recording:
        """Return a recorded run (subclasses implement it)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement load().")

    def load_tail(self, run_id: str) -> Recording:
        """The run from its latest ``harness:snapshot`` on: what a resume reads.

        By default the whole run (a resume folds it from its latest snapshot all the
        same); the stores reactor ships read only the signals after the snapshot.
        """
        return self.load(run_id)

    def runs(
        self,
        *,
        graph: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunInfo]:
        """Recorded runs, newest first (subclasses implement it)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement runs().")

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

    # -- managing --------------------------------------------------------------------

    def delete(self, run_id: str) -> bool:
        """Delete a run; return whether it existed (subclasses implement it)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement delete().")

    def tag(
        self, run_id: str, tags: Mapping[str, str] | None = None, *, remove: Collection[str] = ()
    ) -> RunInfo:
        """Set ``tags`` on a recorded run and drop the keys in ``remove``; its info after.

        A key set again takes the new value; a key in ``remove`` that the run does not
        have is no error. A dataset is a tag: ``store.tag(run_id, {"dataset": "golden"})``,
        then ``store.runs(tag="dataset=golden")``.

        Raises:
            RunNotFoundError: No such run.
            ValueError: A key is empty, or a key or value holds a NUL character.
            NotImplementedError: This store cannot change a run's tags.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot change a run's tags.")

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

        By default a store cannot prune: it raises (the service's retention logs it).

        Raises:
            ValueError: A status is not one a run ends with, or a bound is negative.
            NotImplementedError: This store cannot prune.
        """
        raise NotImplementedError(f"{type(self).__name__} cannot prune runs.")

    def close(self) -> None:
        """Release what the store holds (nothing by default)."""

    # -- the inbox -------------------------------------------------------------------

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
        nothing else to do waits for it instead of ending. By default a store keeps no
        inbox: it raises.

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
        """Messages posted to these runs with ``at=`` and not due yet (none by default)."""
        return []

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not: what runs watch.

        By default :meth:`undelivered` and :meth:`scheduled` together.
        """
        return [*self.undelivered(run_ids), *self.scheduled(run_ids)]

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended that have a timer or a scheduled message, with its time, soonest first.

        ``before``: only those due before then. What the service resumes suspended runs
        by, when their time comes. None by default (a store that keeps no timers).
        """
        return []

    def watch_inbox(self, run_id: str, deliver: Callable[[Posted], None]) -> Callable[[], None]:
        """Have ``deliver`` called (in this event loop) for each message posted to the run.

        Returns a function that stops watching. One thread per store polls
        :meth:`waiting_messages` for all the runs watching it.
        """
        watch = self.__dict__.get("_inbox_watch")
        if watch is None:
            watch = self.__dict__["_inbox_watch"] = InboxWatch(self.waiting_messages)
        stop: Callable[[], None] = watch.watch(run_id, deliver)
        return stop

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _nothing() -> None:
    """Stop watching what was never watched."""
