"""The library's own log lines (warnings and errors about runs), which never raise."""

from __future__ import annotations

from typing import Any

import structlog

__all__ = ["log"]


def log(logger: str, level: str, event: str, **fields: Any) -> None:
    """Log a diagnostic through structlog.

    A log line that cannot be written (a closed pipe, a full disk, a broken handler)
    is dropped: reporting a problem must never become a new one in the middle of a
    signal's dispatch or an agent's activation.
    """
    try:
        getattr(structlog.get_logger(logger), level)(event, **fields)
    except Exception:  # the destination failed; the run must go on without this line
        return
