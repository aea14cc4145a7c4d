"""Following a run, bounded: its signals from the store page by page, then from its feed.

Server memory must not grow with (clients x history): a client of a run's stream holds
at most one page of it at a time, however long the run, and the live signals every
client of a run shares are the feed's ring (``REACTOR_STREAM_BUFFER`` signals).

* :class:`Follow` gives a run's signals after a ``seq``, in batches. The part before
  the feed's ring (a catch-up: a client that reconnects with ``Last-Event-ID``, or one
  that starts a long run from its beginning) is read from the store with
  ``store.signals(after=last)``, one page at a time, each written before the next is
  read; then the client joins the feed. The store's writer may be a little behind the
  feed: pages are read until the store has reached the ring. A run executing
  elsewhere (a worker) is followed by reading its new pages every :data:`POLL`
  seconds; ``store.info`` says when it ends. The whole log is never loaded.
* A client more than the ring behind the feed (it stopped reading) is *behind*: its
  stream ends (:func:`deliver` says so) and it reconnects from where it was.
* A client whose write has been stuck for ``REACTOR_STREAM_WRITE_TIMEOUT`` seconds (it
  does not read, and the connection's buffers are full) is *stuck*: its write is
  cancelled and its connection closed.
* :class:`Streams` is the cap: at most ``REACTOR_MAX_STREAMS`` streams at once in the
  process, and at most ``REACTOR_MAX_STREAMS_PER_USER`` of one principal (never all of
  them: one principal never holds every slot); each takes a :class:`Slot` and gives it
  back when it ends or its client goes.

| variable | meaning | default |
|---|---|---|
| ``REACTOR_STREAM_BUFFER`` | signals a feed keeps; a client that far behind is dropped | ``1000`` |
| ``REACTOR_MAX_STREAMS`` | Server-Sent Event and WebSocket streams at once | ``256`` |
| ``REACTOR_MAX_STREAMS_PER_USER`` | streams of one principal at once | ``16`` |
| ``REACTOR_STREAM_WRITE_TIMEOUT`` | seconds a write may be stuck (then: closed) | ``30`` |
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Literal

from reactor._recording.info import RunInfo
from reactor._recording.store import SignalStore
from reactor._signals.settings import settings_from
from reactor.exceptions import RunNotFoundError
from reactor.service._api.base import ApiError
from reactor.service._hosting.live import (
    COALESCE,
    DEFAULT_BUFFER,
    FeedBehind,
    FeedItem,
    RunFeed,
    Watcher,
)
from reactor.service._hosting.service import ReactionService

__all__ = [
    "BUFFER_ENV",
    "HEARTBEAT",
    "MAX_STREAMS_ENV",
    "PAGE",
    "PER_USER_ENV",
    "POLL",
    "Batch",
    "Delivered",
    "Follow",
    "Slot",
    "StreamSettings",
    "Streams",
    "deliver",
    "known_run",
]

BUFFER_ENV = "REACTOR_STREAM_BUFFER"
MAX_STREAMS_ENV = "REACTOR_MAX_STREAMS"
PER_USER_ENV = "REACTOR_MAX_STREAMS_PER_USER"
DEFAULT_MAX_STREAMS = 256
DEFAULT_PER_USER = 16
DEFAULT_WRITE_TIMEOUT = 30.0
HEARTBEAT = 15.0
"""Seconds of silence after which a comment keeps the connection open through proxies."""
POLL = 0.25
"""Seconds between two looks at the store for a run that executes elsewhere."""
PAGE = 200
"""Signals read from the store at a time (a catch-up holds one page per client)."""

Batch = Sequence[FeedItem]
"""Signals of a run as (``seq``, name, JSON text), in order."""

Delivered = Literal["end", "behind", "stuck"]
"""How a delivery ended: at the run's end (or its feed's), with the client too far
behind the live run, or with a write stuck for longer than the write timeout."""


@dataclasses.dataclass(frozen=True)
class StreamSettings:
    """How much following a run may hold: read once, when the app is made.

    Attributes:
        buffer: Signals a run's feed keeps, and how far behind it a client may fall.
        max_streams: Streams (SSE and WebSocket) at once in the process.
        per_user: Streams of one principal at once (fewer than ``max_streams``).
        write_timeout: Seconds one write to a client may be stuck.
    """

    buffer: int = DEFAULT_BUFFER
    max_streams: int = DEFAULT_MAX_STREAMS
    per_user: int = DEFAULT_PER_USER
    write_timeout: float = DEFAULT_WRITE_TIMEOUT

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> StreamSettings:
        """The settings from the ``REACTOR_*`` variables of the module's table.

        ``env``: read these variables instead of the process's (checked alike).

        Raises:
            ServiceConfigError: A ``REACTOR_*`` value is bad (one line per bad variable).
        """
        config = settings_from(env)
        return cls(
            config.stream_buffer,
            config.max_streams,
            config.max_streams_per_user,
            config.stream_write_timeout,
        )


class Slot:
    """One stream's place under the cap; :meth:`release` it once or more."""

    def __init__(self, streams: Streams, who: str) -> None:
        self._streams: Streams | None = streams
        self.who = who

    def release(self) -> None:
        """Give the place back (the stream ended, its client went or fell behind)."""
        streams, self._streams = self._streams, None
        if streams is not None:
            streams.active -= 1
            held = streams.held.pop(self.who, 1) - 1
            if held:
                streams.held[self.who] = held
            if not streams.active:
                streams.gone()


class Streams:
    """The streams open in the process, at most ``settings.max_streams`` at once.

    When the last one ends, what the streams held is handed back to the operating system
    (``malloc_trim``, where the C library has it): the pages and writes of many clients
    are freed by Python, but the allocator would otherwise keep their memory for the
    process, and the server's memory would stay at its peak after they go.
    """

    def __init__(self, settings: StreamSettings) -> None:
        self.settings = settings
        self.active = 0
        self.held: dict[str, int] = {}
        """The streams each principal holds (by id)."""
        self._trimming: asyncio.Future[None] | None = None

    def gone(self) -> None:
        """No stream is open any more: give their memory back (once at a time, off the loop)."""
        if self._trimming is None or self._trimming.done():
            loop = asyncio.get_running_loop()
            self._trimming = loop.run_in_executor(None, give_back_memory)

    @property
    def per_user(self) -> int:
        """Streams one principal may hold: never every place of the cap (unless it is 1)."""
        return min(self.settings.per_user, max(1, self.settings.max_streams - 1))

    def take(self, who: str = "") -> Slot | None:
        """A place for one more stream of principal ``who``, or None (see :meth:`refusal`)."""
        if self.active >= self.settings.max_streams or self._full(who):
            return None
        self.active += 1
        self.held[who] = self.held.get(who, 0) + 1
        return Slot(self, who)

    def _full(self, who: str) -> bool:
        return self.held.get(who, 0) >= self.per_user

    def refusal(self, who: str = "") -> tuple[int, str]:
        """Why a stream of ``who`` was refused: its status, and what the client should do.

        ``429`` when the principal holds as many as one may, ``503`` when the process
        streams as many as it may.
        """
        if self._full(who):
            return 429, (
                f"user:{who} follows {self.held.get(who, 0)} streams already, as many as one "
                f"principal may ({PER_USER_ENV}); close one, or try again when one ends."
            )
        return 503, (
            f"The service streams {self.settings.max_streams} runs at once already "
            f"({MAX_STREAMS_ENV}); try again in a few seconds."
        )


def give_back_memory() -> None:
    """Return the free memory of the C allocator to the operating system (glibc only)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim`` (glibc), or None where it has none (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


async def _info(service: ReactionService, run_id: str) -> RunInfo | None:
    """The run's info, ``queued`` for a run in the job queue; None when there is none."""
    if service.record is None:
        raise ApiError(503, "The service is not running; start it first.")
    try:
        return await asyncio.to_thread(service.record.info, run_id)
    except RunNotFoundError:
        return await service.host.queued(run_id)


async def known_run(service: ReactionService, run_id: str) -> bool:
    """Whether there is such a run: executing here, in the store, or queued for a worker."""
    return run_id in service.live or await _info(service, run_id) is not None


def _read(store: SignalStore, run_id: str, after: int, limit: int) -> list[FeedItem]:
    """A page of the store, serialized (in a thread: neither is done on the loop)."""
    try:
        page = store.signals(run_id, after=after, limit=limit)
    except RunNotFoundError:  # queued, or its first signals not written yet
        return []
    return [(signal.seq, signal.name, signal.to_json()) for signal in page]


class Follow:
    """A run's signals after ``seq`` ``after``, in batches, until its end (see the module).

    Iterate it: each batch is a list of signals, ``None`` after each quiet
    ``heartbeat`` seconds. It ends after ``harness:end``, when the run's feed ends
    (the run was held: it resumes later), or once ``stopping`` is set.

    Raises (while iterated):
        FeedBehind: The client is more than the feed's ring behind the live run.
    """

    def __init__(
        self,
        service: ReactionService,
        run_id: str,
        after: int = 0,
        *,
        buffer: int = DEFAULT_BUFFER,
        stopping: asyncio.Event | None = None,
        heartbeat: float | None = HEARTBEAT,
        page: int = PAGE,
    ) -> None:
        self.service, self.run_id, self.last = service, run_id, after
        self.buffer, self.stopping, self.heartbeat, self.page = buffer, stopping, heartbeat, page
        self.watcher: Watcher | None = None
        """The feed's watcher, while the client follows the live run."""

    @property
    def behind(self) -> asyncio.Future[None] | None:
        """Resolved once the client is behind the live run (None while it is not on it)."""
        return None if self.watcher is None else self.watcher.behind

    def __aiter__(self) -> AsyncIterator[Batch | None]:
        return self._batches()

    def _stopped(self) -> bool:
        return self.stopping is not None and self.stopping.is_set()

    async def _page(self) -> list[FeedItem]:
        """The next page from the store (empty while its writer has not reached it)."""
        record = self.service.record
        if record is None:
            raise ApiError(503, "The service is not running; start it first.")
        items = await asyncio.to_thread(_read, record, self.run_id, self.last, self.page)
        if items:
            self.last = items[-1][0]
        return items

    async def _batches(self) -> AsyncIterator[Batch | None]:
        quiet = asyncio.get_running_loop().time()
        while not self._stopped():
            live = self.service.live.get(self.run_id)
            if live is not None:
                items = await self._catch_up(live.feed)
                if items is None:
                    async for batch in self._live(live.feed.watch(self.last)):
                        yield batch
                    return
                if items:
                    yield items
                continue
            items = await self._page()
            if items:
                quiet = asyncio.get_running_loop().time()
                yield items
                continue
            info = await _info(self.service, self.run_id)
            if info is None or info.complete:
                items = await self._page()  # written between the page and the info
                if not items:
                    return
                yield items
                continue
            if self._heartbeat_due(quiet):
                quiet = asyncio.get_running_loop().time()
                yield None
            await self._pause(POLL)

    async def _catch_up(self, feed: RunFeed) -> list[FeedItem] | None:
        """The next page from the store before the feed's ring; ``None``: watch the feed.

        Empty, after a short pause, while the store's writer has not reached the ring
        yet (a burst).
        """
        feed.resize(self.buffer)
        if feed.covers(self.last):
            return None
        empty = not feed
        items = await self._page()
        if items:
            return items
        if empty and (not feed or feed.covers(self.last)):
            return None  # nothing since the feed began: the store had it all
        await self._pause(COALESCE)
        return []

    def _heartbeat_due(self, quiet: float) -> bool:
        """Whether the client, sent nothing since ``quiet``, is owed a heartbeat."""
        now = asyncio.get_running_loop().time()
        return self.heartbeat is not None and now - quiet >= self.heartbeat

    async def _live(self, watcher: Watcher) -> AsyncIterator[Batch | None]:
        """The live run from its feed, until the feed ends (or ``stopping``)."""
        watcher.heartbeat = self.heartbeat
        stop = None if self.stopping is None else asyncio.ensure_future(self.stopping.wait())
        watcher.stop = stop
        self.watcher = watcher
        try:
            async for batch in watcher:
                if batch:
                    self.last = batch[-1][0]
                yield batch or None
        finally:
            self.watcher = None
            if stop is not None:
                stop.cancel()

    async def _pause(self, seconds: float) -> None:
        if self.stopping is None:
            await asyncio.sleep(seconds)
        else:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(seconds):
                    await self.stopping.wait()


async def deliver(
    follow: Follow,
    write: Callable[[Batch | None], Awaitable[None]],
    stuck_after: float | None = None,
) -> Delivered:
    """Write ``follow``'s batches with ``write`` until the run's end; how it ended.

    ``behind`` when the client fell behind the live run: it held a batch (its writes
    stuck, it does not read) while the feed's ring moved past it. ``stuck`` when one
    write took longer than ``stuck_after`` seconds. The write in progress is cancelled
    then, so the stream holds nothing of the run any more.
    """
    try:
        async for batch in follow:
            behind = follow.behind
            writing = asyncio.ensure_future(write(batch))
            waiting = {writing} if behind is None else {writing, behind}
            try:
                await asyncio.wait(
                    waiting, timeout=stuck_after, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                if not writing.done():
                    writing.cancel()
                    await asyncio.wait({writing})
            if writing.cancelled():
                return "behind" if behind is not None and behind.done() else "stuck"
            writing.result()
    except FeedBehind:
        return "behind"
    return "end"
