"""Per-run bookkeeping of agents and activations."""

from __future__ import annotations

import asyncio
import functools
import inspect
import types
from collections import deque
from typing import Any

from reactor._agents.agent import Agent
from reactor._signals.names import agent_actor, agent_names
from reactor._signals.signal import Signal

__all__ = ["Activation", "AgentRun", "Mailbox"]


class Mailbox:
    """Messages sent to one agent (``inbox:<agent>``) for ``ctx.receive()``, in order."""

    __slots__ = ("_messages", "_waiters")

    def __init__(self) -> None:
        self._messages: deque[Any] = deque()
        self._waiters: deque[asyncio.Future[Any]] = deque()

    def put(self, message: Any) -> None:
        """Give ``message`` to the oldest waiting ``receive()``, else keep it."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(message)
                return
        self._messages.append(message)

    async def get(self, timeout: float | None) -> Any:  # noqa: ASYNC109 - ctx.receive's
        """The next message, waiting up to ``timeout`` seconds for one."""
        if self._messages:
            return self._messages.popleft()
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                return await waiter
        except TimeoutError:
            raise TimeoutError(
                f"No message came within {timeout} seconds; send one with "
                "handle.send_to(agent, payload), or receive with a longer timeout."
            ) from None


class AgentRun:
    """Per-run bookkeeping of one agent: its counters, queue and signal names.

    What is the same in every run (the agent's ``name``, ``actor`` and lifecycle
    signal names) is not kept by each run's object: ``AgentRun(agent)`` is an instance
    of a class of the agent's name, made once, whose attributes they are.
    """

    __slots__ = (
        "agent",
        "coroutine",
        "last_output",
        "launched",
        "messages",
        "queue",
        "running",
        "undeclared",
    )

    # Attributes of the class of the agent's name (see _named), shared by every run.
    name: str
    actor: str
    activated: str
    completed: str
    failed: str
    skipped: str
    cancelled: str

    def __new__(cls, agent: Agent) -> AgentRun:
        return object.__new__(_named(agent.name or "agent"))

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.launched = 0
        self.running = 0
        self.queue: deque[Signal] | None = None  # made when a trigger first waits
        self.last_output: Any = None
        self.undeclared: set[str] | None = None  # names emitted but not declared
        self.messages: Mailbox | None = None  # made when a first message comes
        self.coroutine: bool | None = None  # whether its run= is async: known at first call

    def run_is_async(self) -> bool:
        """Whether the agent's ``run=`` is a coroutine function (found once per run)."""
        if self.coroutine is None:
            fn = self.agent.run
            plain = type(fn) is types.FunctionType  # read off its code: no inspect calls
            flagged = plain and bool(fn.__code__.co_flags & inspect.CO_COROUTINE)  # type: ignore[union-attr]
            self.coroutine = flagged or inspect.iscoroutinefunction(fn)
        return self.coroutine

    def mailbox(self) -> Mailbox:
        """The agent's messages for ``ctx.receive()``."""
        if self.messages is None:
            self.messages = Mailbox()
        return self.messages


@functools.lru_cache(maxsize=4096)
def _named(name: str) -> type[AgentRun]:
    """The class of the runs of the agent called ``name``: its names as attributes."""
    activated, completed, failed, skipped, cancelled = agent_names(name)
    names = {
        "name": name,
        "actor": agent_actor(name),
        "activated": activated,
        "completed": completed,
        "failed": failed,
        "skipped": skipped,
        "cancelled": cancelled,
    }
    return type(
        f"AgentRun[{name}]", (AgentRun,), {"__slots__": (), "__module__": __name__, **names}
    )


class Activation:
    """One activation in flight: the agent, its trigger(s), and its ``activated`` signal."""

    __slots__ = ("agent_run", "answers", "batch", "index", "signal", "started", "task", "trigger")

    def __init__(
        self,
        agent_run: AgentRun,
        trigger: Signal,
        signal: Signal,
        answers: Any = None,
        batch: tuple[Signal, ...] | None = None,
    ) -> None:
        self.agent_run = agent_run
        self.index = agent_run.launched  # this agent's nth activation in the run, from 1
        self.answers = answers  # a resumed activation's recorded answers
        self.trigger = trigger
        self.batch = batch  # the triggers admission delivered at once (ctx.batch), if any
        self.signal = signal
        self.started = False
        self.task: asyncio.Task[None] | None = None
