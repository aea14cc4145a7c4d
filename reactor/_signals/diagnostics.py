"""The library's own log lines (debug notes, warnings, errors about runs).

They go through structlog once it is configured (``reactor.logging.configure()``, an
application's own ``structlog.configure()``, or ``structlog.testing.capture_logs()``),
and through the standard ``logging`` module otherwise, which by default shows warnings
and errors on stderr and keeps debug notes quiet: a library must not print its
internals into an application that did not ask. They never raise. This module does not
import structlog (whoever configures it has), so importing reactor loads neither it
nor the rich it imports when installed.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

__all__ = ["log", "muted", "short_repr"]

_MUTED: ContextVar[frozenset[str]] = ContextVar("reactor_muted", default=frozenset())

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}


def log(logger: str, level: str, event: str, **fields: Any) -> None:
    """Log a diagnostic.

    A log line that cannot be written (a closed pipe, a full disk, a broken handler)
    is dropped: reporting a problem must never become a new one in the middle of a
    signal's dispatch or an agent's activation.
    """
    if event in _MUTED.get():
        return
    try:
        structlog = sys.modules.get("structlog")  # configured only by whoever imports it
        if structlog is not None and structlog.is_configured():
            getattr(structlog.get_logger(logger), level)(event, **fields)
            return
        stdlib = logging.getLogger(logger)
        number = _LEVELS.get(level, logging.ERROR)
        if stdlib.isEnabledFor(number):
            details = " ".join(f"{key}={value!r}" for key, value in fields.items())
            stdlib.log(number, "%s %s", event, details)
    except Exception:  # the destination failed; the run must go on without this line
        return


@contextlib.contextmanager
def muted(*events: str) -> Iterator[None]:
    """Drop the diagnostics named ``events`` in this context (and the tasks it starts).

    For a caller that reports them itself: an evaluation's report says which agents
    failed, so its runs do not also log ``agent failed``.
    """
    token = _MUTED.set(_MUTED.get() | frozenset(events))
    try:
        yield
    finally:
        _MUTED.reset(token)


def short_repr(value: Any, limit: int = 120) -> str:
    """``repr(value)``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
