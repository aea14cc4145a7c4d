"""What the service keeps of the runs executing in its process: their feeds and their log.

* :class:`RunFeed` is a reporter of one run that keeps its signals, serialized once,
  and hands them to any number of watchers (Server-Sent Events, WebSockets): history
  first, then each new signal, until ``harness:end``.
* :class:`ServiceRecord` is the signal store the service's runs record to: it passes
  everything to the real store, except what a run records after it was *held* (the
  service stopping): such a run stops without a ``harness:end`` in its log, so it is
  still unfinished there and is resumed at the next start.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from datetime import datetime
from typing import Any

from reactor._recording.inbox import Posted, Wakeup
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._recording.store import SignalStore
from reactor._signals.names import (
    HARNESS_END,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    TIMER_FIRED,
    TIMER_SET,
)
from reactor._signals.signal import Signal

__all__ = ["FeedItem", "RunFeed", "ServiceRecord"]

_WAITS = frozenset((SESSION_PROMPT, SESSION_REPLY, SESSION_TIMEOUT, TIMER_SET, TIMER_FIRED))
_OPENS = {SESSION_PROMPT: "prompt_id", TIMER_SET: "timer_id"}

FeedItem = tuple[int, str, str]
"""One signal of a feed: its ``seq``, its name, and its JSON text."""

BACKLOG = 100_000
"""Signals a watcher may fall behind by before it is dropped (its stream ends)."""


class RunFeed:
    """One live run's signals for its watchers (a reporter: give it to ``run(reporters=)``)."""

    patterns = ("**",)

    def __init__(self) -> None:
        self.items: list[FeedItem] = []
        self.started: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.ended = False
        self.asking: set[Any] = set()  # prompts asked and not answered, timers not fired
        self._watchers: set[asyncio.Queue[FeedItem | None]] = set()

    @property
    def first_seq(self) -> int:
        """The first ``seq`` this feed saw (a resumed run's earlier signals are in the store)."""
        return self.items[0][0] if self.items else 0

    def start(self, info: RunInfo) -> None:
        """Learn the run's id as it begins."""
        if not self.started.done():
            self.started.set_result(info.run_id)

    def on_signal(self, signal: Signal) -> None:
        """Keep the signal and pass it to every watcher (this runs during dispatch)."""
        if self.ended:
            return
        if signal.name in _WAITS and isinstance(signal.payload, dict | Mapping):
            key = _OPENS.get(signal.name)
            if key is not None:
                self.asking.add(signal.payload.get(key))
            else:
                self.asking.discard(signal.payload.get("timer_id", signal.payload.get("prompt_id")))
        item = (signal.seq, signal.name, signal.to_json())
        self.items.append(item)
        for queue in list(self._watchers):
            if queue.qsize() >= BACKLOG:
                self._drop(queue)
            else:
                queue.put_nowait(item)
        if signal.name == HARNESS_END:
            self.end()

    def end(self) -> None:
        """No more signals: every watcher's stream ends after what it was given."""
        self.ended = True
        for queue in list(self._watchers):
            self._drop(queue)

    def _drop(self, queue: asyncio.Queue[FeedItem | None]) -> None:
        self._watchers.discard(queue)
        queue.put_nowait(None)

    async def watch(self, after: int = 0) -> AsyncIterator[FeedItem]:
        """The signals after ``seq`` ``after``: those so far, then new ones until the end."""
        queue: asyncio.Queue[FeedItem | None] = asyncio.Queue()
        history = [item for item in self.items if item[0] > after]
        if not self.ended:
            self._watchers.add(queue)
        try:
            for past in history:
                yield past
            if self.ended:
                return
            while True:
                item = await queue.get()
                if item is None:
                    return
                yield item
        finally:
            self._watchers.discard(queue)

    @property
    def waiting(self) -> bool:
        """Whether the run waits for a person or a timer: it can be held at once."""
        return bool(self.asking)

    @property
    def watchers(self) -> int:
        """How many watchers are attached."""
        return len(self._watchers)


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

    def hold(self, run_id: str) -> None:
        """Record nothing more of ``run_id`` (it is being stopped, to resume later)."""
        self._held.add(run_id)

    def start_run(self, info: RunInfo) -> None:
        """Register a run (see :class:`~reactor.SignalStore`)."""
        self.store.start_run(info)

    def append(self, signal: Signal) -> None:
        """Record a signal, unless its run is held (or fenced off: then it is held)."""
        if self._writes(signal.run_id):
            self.store.append(signal)

    def _writes(self, run_id: str | None) -> bool:
        if run_id is None:
            return True
        if run_id in self._held:
            return False
        if self.fence is not None and not self.fence(run_id):
            self._held.add(run_id)
            return False
        return True

    def record_request(self, run_id: str, request_hash: str, fingerprint: dict[str, Any]) -> None:
        """Keep what a provider call was asked, unless the run is held."""
        if run_id not in self._held:
            self.store.record_request(run_id, request_hash, fingerprint)

    def flush(self) -> None:
        """Make everything recorded durable."""
        self.store.flush()

    def load(self, run_id: str) -> Recording:
        """A recorded run."""
        return self.store.load(run_id)

    @property
    def snapshot_every(self) -> int | None:
        """How often the runs recorded here take a snapshot (the store's setting)."""
        every = getattr(self.store, "snapshot_every", None)
        return every if isinstance(every, int) else None

    def load_tail(self, run_id: str) -> Recording:
        """A run from its latest snapshot on (what a resume reads)."""
        load = getattr(self.store, "load_tail", None) or self.store.load
        recording: Recording = load(run_id)
        return recording

    def prune(self, **bounds: Any) -> int:
        """Delete ended runs (see :meth:`reactor.SignalStoreBase.prune`)."""
        count: int = getattr(self.store, "prune")(**bounds)  # noqa: B009 (the stores it wraps have one)
        return count

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

    def delete(self, run_id: str) -> bool:
        """Delete a recorded run."""
        return self.store.delete(run_id)

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
        if at is None:
            return self.store.post(run_id, name, payload, source=source)
        return self.store.post(run_id, name, payload, source=source, at=at)

    def undelivered(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs, due and not yet delivered."""
        return self.store.undelivered(run_ids)

    def waiting_messages(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs and not delivered, due or not."""
        waiting = getattr(self.store, "waiting_messages", None)
        return list(waiting(run_ids) if waiting is not None else self.store.undelivered(run_ids))

    def scheduled(self, run_ids: Collection[str]) -> list[Posted]:
        """Messages posted to these runs with ``at=`` and not due yet."""
        scheduled = getattr(self.store, "scheduled", None)
        return [] if scheduled is None else list(scheduled(run_ids))

    def wakeups(self, *, before: datetime | None = None) -> list[Wakeup]:
        """Runs not ended with a timer or a scheduled message, and its time."""
        wakeups = getattr(self.store, "wakeups", None)
        return [] if wakeups is None else list(wakeups(before=before))

    def deliver(self, message_id: str, signal: Signal) -> None:
        """Record a posted message's delivery, unless the run is held (it comes again)."""
        if self._writes(signal.run_id):
            self.store.deliver(message_id, signal)

    def watch_inbox(self, run_id: str, deliver: Callable[[Posted], None]) -> Callable[[], None]:
        """Have ``deliver`` called for each message posted to the run."""
        return self.store.watch_inbox(run_id, deliver)

    def __repr__(self) -> str:
        return repr(self.store)
