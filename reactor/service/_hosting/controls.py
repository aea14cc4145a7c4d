"""The service's hands on a run it executes: the run's handle, and why it would stop it.

Whatever the service does to a run goes through the engine, so that the run's log says
who did it and why, and never shows an outcome nobody decided:

* an abort (over HTTP, from the web UI) records ``session:abort {reason}`` with the
  user as its source, and the run ends ``aborted`` with that reason;
* a stop that is not an outcome (SIGTERM, a worker that stops, a lease lost, the
  service's task group going away) suspends the run: ``harness:suspended {reason}`` is
  its last signal, nothing it says afterwards is seen by anyone, and the next start
  resumes it after that signal (no ``seq`` is ever given twice).
"""

from __future__ import annotations

import asyncio

from reactor._graph.handle import RunHandle

__all__ = ["STOPPED", "Controls"]

STOPPED = "its process stopped (a shutdown or a deploy); it resumes at the next start"
"""Why a run the service (or a worker) stops without ending is suspended, by default."""


class Controls:
    """The service's hands on one run it executes (``graph.astart(...)`` gave its handle).

    :attr:`reason` is what its ``harness:suspended`` says when the service stops it
    (whoever stops it sets it).
    """

    def __init__(self, handle: RunHandle) -> None:
        self.handle = handle
        self.reason = STOPPED

    def abort(self, reason: str, source: str) -> None:
        """Abort the run as ``source``: ``session:abort {reason}``, then it ends ``aborted``.

        Raises:
            PayloadError: The log cannot hold ``reason`` (the run goes on, unchanged).
        """
        self.handle.abort(reason, source=source)

    async def suspend(self) -> None:
        """Stop the run without ending it: ``harness:suspended`` with :attr:`reason` last.

        A run recorded nowhere has nothing to resume from: it is aborted with the
        reason instead. The suspension goes on to its end if the caller is cancelled
        meanwhile (a shutdown past its grace), so that the run's end is always heard.
        """
        if self.handle.recorded:
            await asyncio.shield(self.handle.suspend(self.reason))
        else:
            self.handle.abort(self.reason)
