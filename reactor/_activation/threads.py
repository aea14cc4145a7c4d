"""Handlers in their turn: a replayed activation finishes where the recording did.

The threads synchronous handlers run in, and the rules that bound them, are
:mod:`reactor._signals.threads`'s (tools run there too).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from reactor._signals.threads import Share, call_code

if TYPE_CHECKING:
    from reactor._agents.context import AgentContext

__all__ = ["Turn", "handled"]


class Turn(Protocol):
    """An activation's place in a recorded order, during a replay."""

    async def wait(self) -> None:
        """Wait until what was recorded before the activation finished is replayed."""
        ...


async def handled(
    run: Callable[[AgentContext[Any]], Any],
    ctx: AgentContext[Any],
    turn: Turn | None,
    share: Share,
) -> Any:
    """Run a handler (a sync one in a worker thread); in a replay, finish in its turn."""
    try:
        output = await call_code(run, ctx, agent=ctx.agent, what="handler", share=share)
    except asyncio.CancelledError:
        raise
    except Exception:
        if turn is not None:
            await turn.wait()
        raise
    if turn is not None:
        await turn.wait()
    return output
