"""The durable inbox: signals posted to a run from any process, delivered exactly once.

``store.post(run_id, name, payload)`` writes a message to the store (with ``at=``, to
be delivered at or after that time: the store hands it out only once it is due). A live run
recorded to that store receives it within a poll interval (100 ms) and emits it, in
posting order; a run that is not running receives it when it is resumed. Delivery is
recorded with the signal it became, in one transaction, so a message is delivered once
whatever happens to the process: the signal and the mark are both written, or neither.

One :class:`InboxWatch` per store polls for every run watching it, so a thousand live
runs cost one query per interval, not a thousand.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Collection
from datetime import datetime
from typing import Any

import pydantic_core

from reactor._signals.diagnostics import log
from reactor._signals.door import check_payload
from reactor._signals.names import SESSION_ABORT, SESSION_REPLY, reserved_namespace
from reactor._signals.signal import json_fallback
from reactor.exceptions import SignalNameError

__all__ = [
    "ABORT",
    "REPLY",
    "InboxWatch",
    "Posted",
    "Wakeup",
    "check_posted",
    "decode_payload",
    "due_time",
    "encode_payload",
    "new_message_id",
]

REPLY = SESSION_REPLY
"""A runtime signal outside input may post: the durable form of ``reply()``."""
ABORT = SESSION_ABORT
"""The other one: the durable form of ``abort(reason)``, payload ``{reason}``."""


@dataclasses.dataclass(frozen=True)
class Posted:
    """A message posted to a run's inbox.

    Attributes:
        message_id: Its id (``msg_...``).
        run_id: The run it is for.
        name: The signal it becomes.
        payload: Its payload (JSON data).
        source: Who posted it (``"user"`` by default).
        posted_at: UNIX seconds.
        due_at: When it is to be delivered (UNIX seconds), if it was posted with
            ``at=``; ``None``: at once.
    """

    message_id: str
    run_id: str
    name: str
    payload: Any
    source: str
    posted_at: float
    due_at: float | None = None


@dataclasses.dataclass(frozen=True)
class Wakeup:
    """A run that has not ended, and when its next timer or scheduled message is due.

    Attributes:
        run_id: The run.
        due_at: The soonest time one of its timers fires or one of its messages is
            delivered (aware, UTC).
    """

    run_id: str
    due_at: datetime


def due_time(at: datetime | None) -> float | None:
    """``at`` (an aware datetime) in UNIX seconds, for ``post(..., at=)``.

    Raises:
        ValueError: ``at`` is not an aware datetime.
    """
    if at is None:
        return None
    if not isinstance(at, datetime) or at.tzinfo is None:
        raise ValueError(
            f"at= takes an aware datetime (with a time zone, e.g. datetime(..., tzinfo=UTC)), "
            f"got {at!r}."
        )
    return at.timestamp()


def new_message_id() -> str:
    """A fresh message id."""
    return f"msg_{uuid.uuid4().hex[:16]}"


def check_posted(name: str, payload: Any = None) -> None:
    """Refuse names only the runtime emits, and payloads the log cannot hold.

    ``session:reply`` and ``session:abort`` may be posted: they answer a prompt and stop
    a run.

    Raises:
        SignalNameError: ``name`` is reserved.
        PayloadError: The log cannot hold ``payload``.
    """
    namespace = reserved_namespace(name)
    if namespace is not None and name not in (REPLY, ABORT):
        raise SignalNameError(
            f"Cannot post {name!r}: '{namespace}:' signals come from the runtime only. Post "
            f"your own names, {REPLY!r} {{prompt_id, answer}} to answer a prompt, or "
            f"{ABORT!r} {{reason}} to stop the run.",
            name=name,
        )
    check_payload(payload, "payload")


def encode_payload(payload: Any) -> str | None:
    """A posted payload as every store keeps it: JSON text (``None``: no payload).

    The one encoding of the inbox: the SQL stores write this text, and the memory store
    keeps what :func:`decode_payload` makes of it, so a payload comes out of every
    store alike (a tuple as a list, a datetime as ISO text, what pydantic does not know
    as :func:`~reactor._signals.signal.json_fallback` makes it).
    """
    if payload is None:
        return None
    return pydantic_core.to_json(payload, fallback=json_fallback).decode()


def decode_payload(data: str | bytes | None) -> Any:
    """A payload kept by :func:`encode_payload`, as the message gives it."""
    return None if data is None else pydantic_core.from_json(data)


Deliver = Callable[[Posted], None]
_IDLE_POLLS = 20
"""Intervals the polling thread waits with no run watching before it ends (a service
whose reactions start and end all the time keeps one thread instead of one per run)."""


class InboxWatch:
    """Polls a store's inbox for the runs watching it; one thread per store.

    Args:
        fetch: Undelivered messages of the given runs, in posting order.
        interval: Seconds between polls.
    """

    def __init__(
        self, fetch: Callable[[Collection[str]], list[Posted]], interval: float = 0.1
    ) -> None:
        self._fetch = fetch
        self.interval = interval
        self._watchers: dict[str, tuple[asyncio.AbstractEventLoop, Deliver]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, run_id: str, deliver: Deliver) -> Callable[[], None]:
        """Call ``deliver(message)`` in this event loop for each message to ``run_id``.

        Returns a function that stops watching. Call from the run's event loop. The
        run gets what is posted to it from the next poll on (within :attr:`interval`):
        what was posted before it began, it read then (a run whose id was known), so a
        run starting does not wake the thread for a poll of its own (a thousand
        reactions a second would be a thousand polls).
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            self._watchers[run_id] = (loop, deliver)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._poll, name="reactor-inbox", daemon=True
                )
                self._thread.start()

        def unwatch() -> None:
            with self._lock:
                if self._watchers.get(run_id, (None, None))[1] is deliver:
                    del self._watchers[run_id]

        return unwatch

    def _poll(self) -> None:
        failing, idle = False, 0
        while True:
            with self._lock:
                watching = dict(self._watchers)
                idle = 0 if watching else idle + 1
                if idle > _IDLE_POLLS:
                    self._thread = None
                    return
            if not watching:  # runs come and go (reactions): the thread stays a while
                time.sleep(self.interval)
                continue
            try:
                messages = self._fetch(list(watching))
            except Exception as exc:  # a store being closed, or briefly unavailable
                if not failing:  # once per outage, not once per poll
                    log("reactor.inbox", "warning", "inbox poll failed", error=repr(exc))
                failing, messages = True, []
            else:
                if failing:
                    log("reactor.inbox", "info", "inbox poll resumed")
                failing = False
            for message in messages:
                target = watching.get(message.run_id)
                if target is not None:
                    loop, deliver = target
                    with contextlib.suppress(RuntimeError):  # the run's loop has closed
                        loop.call_soon_threadsafe(deliver, message)
            time.sleep(self.interval)
