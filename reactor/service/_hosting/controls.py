"""The service's hands on a run it executes: a channel attached to the run, with its handle.

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
    """Attached to one run the service executes: ``graph.run(channels=[controls])``.

    :attr:`handle` is the run's handle once it has begun; :attr:`reason` is what its
    ``harness:suspended`` says when the service stops it (whoever stops it sets it).
    """

    def __init__(self) -> None:
        self.handle: asyncio.Future[RunHandle] = asyncio.get_running_loop().create_future()
        self.reason = STOPPED

    async def attach(self, handle: RunHandle) -> None:
        """Keep the run's handle, and return at once: the service acts on it when asked."""
        if not self.handle.done():
            self.handle.set_result(handle)

    async def abort(self, reason: str, source: str) -> None:
        """Abort the run as ``source``: ``session:abort {reason}``, then it ends ``aborted``.

        Raises:
            PayloadError: The log cannot hold ``reason`` (the run goes on, unchanged).
        """
        handle = await asyncio.shield(self.handle)  # the run has begun: it comes at once
        handle.abort(reason, source=source)

    async def suspend(self) -> None:
        """Stop the run without ending it: ``harness:suspended`` with :attr:`reason` last.

        A run that has not begun has nothing to suspend; one recorded nowhere has
        nothing to resume from, so it is aborted with the reason instead.
        """
        if not self.handle.done():
            return
        handle = self.handle.result()
        if handle.recorded:
            await handle.suspend(self.reason)
        else:
            handle.abort(self.reason)
