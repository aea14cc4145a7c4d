"""The contract of signal stores and reporters: everything the engine and the service ask.

A *signal store* keeps recordings (``graph.run(record=store)``); a *reporter* watches a
run's signals as they are dispatched (``graph.run(reporters=[...])``). Both are
protocols, and everything reactor ever calls on them is declared here, with what a
call may cost: the writing half runs on the event loop and must never block, the
reading half blocks (it is called off the loop, in a thread). :class:`SignalStoreBase`
(in :mod:`reactor._recording.storebase`) gives each optional member a real,
documented default. Nothing in reactor probes a store or a reporter for a method:
:func:`check_store` and :func:`as_reporter` take them at the door (``record=``,
``reporters=``), and a store that lacks something fails there, naming what.
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from reactor._recording.inbox import Posted, Wakeup
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._signals.patterns import Pattern
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError

if TYPE_CHECKING:
    from reactor._providers.base import ProviderRequest

__all__ = [
    "DEFAULT_SNAPSHOT_EVERY",
    "INBOX_MEMBERS",
    "PAGE",
    "RUN_LOG_MEMBERS",
    "RUN_READER_MEMBERS",
    "STORE_ADMIN_MEMBERS",
    "Inbox",
    "Reporter",
    "RunLog",
    "RunReader",
    "RunReporter",
    "SignalStore",
    "StoreAdmin",
    "as_reporter",
    "check_snapshot_every",
    "check_store",
    "flush_run",
    "flushed",
]

DEFAULT_SNAPSHOT_EVERY = 10_000
"""Signals between two ``harness:snapshot`` of a recorded run, unless a store says."""

PAGE = 1_000
"""Signals :meth:`SignalStore.signals` returns at most by default (and the most a page
of the HTTP API holds)."""


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
    """Watches runs: ``on_signal`` is called for each signal matching ``patterns``.

    Pass reporters with ``graph.run(..., reporters=[...])``. Any object with
    ``patterns`` and ``on_signal(signal)`` is one. Two hooks are called too when the
    object has them (:class:`RunReporter` declares them): ``start(info)``, with the
    :class:`RunInfo` before a run's first signal, and ``on_request(run_id, request)``,
    with each distinct :class:`~reactor.ProviderRequest` a model is sent (once per
    request hash, before its ``provider:start``). ``reporters=`` takes each reporter at
    the door (:func:`as_reporter`): a hook it lacks does nothing. ``on_signal`` runs
    synchronously during dispatch, so keep it fast (buffer, don't block).
    """

    @property
    def patterns(self) -> Sequence[Pattern]:
        """The signals to receive."""
        ...

    def on_signal(self, signal: Signal) -> None:
        """Receive one signal."""
        ...


@runtime_checkable
class RunReporter(Reporter, Protocol):
    """A reporter with both hooks: what a run holds once ``reporters=`` took it."""

    def start(self, info: RunInfo) -> None:
        """A run begins (called with its :class:`RunInfo` before its first signal)."""
        ...

    def on_request(self, run_id: str, request: ProviderRequest) -> None:
        """A model is sent ``request`` (once per request hash, before ``provider:start``)."""
        ...


@runtime_checkable
class RunLog(Protocol):
    """The writing half of a store: what a run records as it goes, and its durability.

    ``start_run``, ``append``, ``deliver``, ``record_request`` and ``room`` are called
    on the run's event loop, during dispatch: they must never block. A store that
    writes elsewhere queues, and says through :meth:`room` when its writer is behind:
    the run then *awaits* (backpressure), while other runs and requests go on.
    ``flush``, ``recording_error``, ``watch_recording`` and ``close`` may block (reactor
    calls them off the loop).
    """

    @property
    def snapshot_every(self) -> int | None:
        """Signals between two ``harness:snapshot`` of a run recorded here (``None``: never).

        So that a resume reads only the log's tail.
        """
        ...

    def start_run(self, info: RunInfo) -> None:
        """Register a run about to be recorded (its graph, tags, target)."""
        ...

    def append(self, signal: Signal) -> None:
        """Record one signal (queue it: this runs during dispatch)."""
        ...

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record ``signal``, the delivery of posted message ``message_id`` (marked delivered)."""
        ...

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider call was asked (replay names the first field that changed)."""
        ...

    def room(self) -> asyncio.Future[None] | None:
        """``None`` while the store keeps up; else a future done once it has room.

        The future is of the running loop. A run awaits it between the steps of its
        activations: backpressure that stalls the run, never the event loop.
        """
        ...

    def flush(self) -> None:
        """Make everything appended so far durable (or failed: see :meth:`recording_error`)."""
        ...

    def recording_error(self, run_id: str) -> RecordingError | None:
        """Why ``run_id``'s recording is incomplete, after a :meth:`flush` (asked once)."""
        ...

    def watch_recording(self, run_id: str, failed: Callable[[], None]) -> Callable[[], None]:
        """Have ``failed()`` called (from any thread) if the run's recording fails; the unwatch."""
        ...

    def close(self) -> None:
        """Write what is queued and release what the store holds."""
        ...


@runtime_checkable
class RunReader(Protocol):
    """The reading half of a store: runs, their logs in pages, their state. Blocking."""

    def info(self, run_id: str) -> RunInfo:
        """What the store knows of one run, its counters included, without reading its log."""
        ...

    def signals(
        self,
        run_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        limit: int = PAGE,
        names: Collection[Pattern] | None = None,
    ) -> list[Signal]:
        """One page of a run's log, in ``seq`` order (see :class:`~reactor.SignalStoreBase`)."""
        ...

    def state(self, run_id: str) -> dict[str, Any]:
        """The run's latest state, as JSON data."""
        ...

    def load(self, run_id: str) -> Recording:
        """The whole recorded run (``RunNotFoundError`` if unknown)."""
        ...

    def load_tail(self, run_id: str) -> Recording:
        """The run from its latest ``harness:snapshot`` on: what a resume reads."""
        ...

    def runs(
        self,
        *,
        graph: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
    ) -> list[RunInfo]:
        """Recorded runs, newest first (ties broken by run id, newest first too)."""
        ...

    def resolve(self, ref: str) -> str:
        """A run id from ``ref``: a run id, a unique prefix of one, or ``last``."""
        ...


@runtime_checkable
class Inbox(Protocol):
    """Outside input to runs, live or later: posted messages and timers.

    Blocking, but for ``watch_inbox``.
    """

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

    def scheduled(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs with ``at=`` and not due yet, soonest first."""
        ...

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not: what a run watches."""
        ...

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended with a timer or a scheduled message, with its time, soonest first."""
        ...

    def watch_inbox(self, run_id: str, deliver: Callable[[Posted], None]) -> Callable[[], None]:
        """Have ``deliver`` called (in this event loop) for each message posted to the run."""
        ...


@runtime_checkable
class StoreAdmin(Protocol):
    """Managing what a store keeps: deleting, tagging and pruning runs. Blocking."""

    def delete(self, run_id: str) -> bool:
        """Delete a run; return whether it existed."""
        ...

    def tag(
        self, run_id: str, tags: Mapping[str, str] | None = None, *, remove: Collection[str] = ()
    ) -> RunInfo:
        """Set ``tags`` on a recorded run and drop the keys in ``remove``; its info after."""
        ...

    def prune(
        self,
        *,
        older_than: timedelta,
        status: Collection[str] | None = ("completed",),
        keep_last: int = 0,
        dry_run: bool = False,
    ) -> int:
        """Delete ended runs that ended longer than ``older_than`` ago; return how many."""
        ...


@runtime_checkable
class SignalStore(RunLog, RunReader, Inbox, StoreAdmin, Protocol):
    """Keeps recordings: ``graph.run(..., record=store)`` writes a run to it.

    It is the union of four roles, each a small protocol a caller may need alone:
    :class:`RunLog` (what a run records, and its durability), :class:`RunReader` (runs
    and their logs, in pages), :class:`Inbox` (outside input, live or later) and
    :class:`StoreAdmin` (delete, tag, prune). A wrapper changes the role it is about
    and takes the others as they are (:class:`~reactor._recording.roles.StoreRoles`).

    Subclass :class:`~reactor.SignalStoreBase`, which gives every optional member a
    default (each documented there), and implement ``append``, ``load``, ``runs``
    and ``delete``; ``reactor.testing.check_store_contract`` is the conformance suite
    a store runs in its own tests. A store given to ``record=`` is checked there: one
    that lacks a member is refused with a message naming it.
    """


def _members(*protocols: type) -> tuple[str, ...]:
    """The public members the protocols declare (methods, properties and attributes)."""
    names: set[str] = set()
    for protocol in protocols:
        names |= {name for name in vars(protocol) if not name.startswith("_")}
        names |= {
            name for name in getattr(protocol, "__annotations__", {}) if not name.startswith("_")
        }
    return tuple(sorted(names))


RUN_LOG_MEMBERS = _members(RunLog)
"""What :class:`RunLog` declares."""
RUN_READER_MEMBERS = _members(RunReader)
"""What :class:`RunReader` declares."""
INBOX_MEMBERS = _members(Inbox)
"""What :class:`Inbox` declares."""
STORE_ADMIN_MEMBERS = _members(StoreAdmin)
"""What :class:`StoreAdmin` declares."""


STORE_MEMBERS = _members(RunLog, RunReader, Inbox, StoreAdmin)
"""Every member of :class:`SignalStore`, checked by :func:`check_store`."""


_WHOLE: set[type] = set()
"""Classes whose instances were found whole (a run checks its store once per class)."""


def check_store(store: object, where: str = "record=") -> SignalStore:
    """``store`` if it has every member of :class:`SignalStore`.

    Raises:
        TypeError: It lacks some: one line naming them, and how to get them.
    """
    kind = type(store)
    lacking = [] if kind in _WHOLE else [n for n in STORE_MEMBERS if not hasattr(store, n)]
    if not lacking:
        _WHOLE.add(kind)
        return cast("SignalStore", store)
    raise TypeError(
        f"{where} takes a signal store, and {store!r} lacks {', '.join(lacking)}; subclass "
        "reactor.SignalStoreBase, which gives every optional member a default."
    )


REPORTER_MEMBERS = _members(Reporter)
"""What every reporter has (``patterns``, ``on_signal``): checked by :func:`as_reporter`."""

HOOKS = tuple(name for name in _members(RunReporter) if name not in REPORTER_MEMBERS)
"""The hooks :class:`RunReporter` adds (``on_request``, ``start``): doing nothing when absent."""

_WHOLE_REPORTERS: set[type] = set()
"""Reporter classes found with every hook (checked once per class)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Hooked:
    """A reporter lacking some of :data:`HOOKS`: those it lacks do nothing."""

    reporter: Any
    patterns: Sequence[Pattern]
    on_signal: Callable[[Signal], None]
    start: Callable[[RunInfo], None]
    on_request: Callable[[str, Any], None]


def as_reporter(reporter: object) -> RunReporter:
    """``reporter`` as a :class:`RunReporter`: the hooks it lacks do nothing.

    The members checked are those the protocols declare (:data:`REPORTER_MEMBERS`,
    :data:`HOOKS`), as :func:`check_store` checks a store's.

    Raises:
        TypeError: It has no ``patterns`` or no ``on_signal``.
    """
    kind = type(reporter)
    if kind in _WHOLE_REPORTERS:
        return cast("RunReporter", reporter)
    missing = [name for name in REPORTER_MEMBERS if not hasattr(reporter, name)]
    given: Any = reporter
    if not missing and not isinstance(given.patterns, str | tuple | list):
        missing.append("patterns")
    if not missing and not callable(given.on_signal):
        missing.append("on_signal")
    if missing:
        shown = ["on_signal(signal)" if name == "on_signal" else name for name in missing]
        raise TypeError(
            f"{reporter!r} is not a reporter: it has no {' and no '.join(shown)}. A reporter "
            "has patterns (the signals it wants, e.g. patterns = ('**',)) and "
            "on_signal(signal)."
        )
    lacking = {name for name in HOOKS if not hasattr(given, name)}
    if not lacking:
        _WHOLE_REPORTERS.add(kind)
        return cast("RunReporter", reporter)
    return _Hooked(
        reporter,
        given.patterns,
        given.on_signal,
        _ignore if "start" in lacking else given.start,
        _ignore if "on_request" in lacking else given.on_request,
    )


def _ignore(*_: object) -> None:
    """A hook a reporter does not have."""


async def flush_run(record: SignalStore, run_id: str) -> RecordingError | None:
    """Wait until ``record`` has written what ``run_id`` appended; say what failed, if any.

    Off the event loop (the flush waits on a disk or a server), and one flush for every
    run of this loop that waits on the same store at once (:func:`flushed`).
    """
    try:
        await flushed(record)
    except RecordingError as exc:
        return exc
    return record.recording_error(run_id)


async def flushed(record: RunLog) -> None:
    """Return once everything appended to ``record`` before the call is written.

    Every coroutine of this event loop that waits on the same store at once shares
    one ``record.flush()`` in a thread; one that comes while a flush is under way
    waits for the next. (A flush each would hold a thread of the loop's small default
    pool each, and a store with a writer thread writes every flush waiting at once in
    one transaction anyway.) What the flush raises, each of them raises.
    """
    loop = asyncio.get_running_loop()
    try:
        groups = _FLUSHES.get(loop)
        if groups is None:
            groups = _FLUSHES[loop] = weakref.WeakKeyDictionary()
        group = groups.get(record)
        if group is None:
            group = groups[record] = _GroupFlush(record)
    except TypeError:  # a store that takes no weak reference: a flush of its own
        await asyncio.to_thread(record.flush)
        return
    await group.wait(loop)


class _GroupFlush:
    """The flushes of one store on one event loop (see :func:`flushed`)."""

    __slots__ = ("_flushing", "_record", "_waiting")

    def __init__(self, record: RunLog) -> None:
        self._record = weakref.ref(record)
        self._waiting: list[asyncio.Future[None]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def wait(self, loop: asyncio.AbstractEventLoop) -> None:
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append(waiter)
        if self._flushing is None or self._flushing.done():
            self._flushing = loop.create_task(self._flush())
        await waiter

    async def _flush(self) -> None:
        while self._waiting:
            waiters, self._waiting = self._waiting, []
            record = self._record()
            try:
                if record is not None:
                    await asyncio.to_thread(record.flush)
            except asyncio.CancelledError:  # the loop is going away: so are the waiters
                for waiter in (*waiters, *self._waiting):
                    waiter.cancel()
                raise
            except Exception as exc:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_exception(exc)
            else:
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(None)


_FLUSHES: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, weakref.WeakKeyDictionary[RunLog, _GroupFlush]
] = weakref.WeakKeyDictionary()
"""Each event loop's flushes, by store (see :func:`flushed`)."""
