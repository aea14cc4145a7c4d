"""Per-run bookkeeping of agents and activations."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from reactor._agent import Agent
from reactor._signal import Signal

__all__ = ["Activation", "AgentRun"]


class AgentRun:
    """Per-run bookkeeping of one agent."""

    __slots__ = (
        "activated",
        "actor",
        "agent",
        "cancelled",
        "completed",
        "failed",
        "last_output",
        "launched",
        "name",
        "queue",
        "running",
        "skipped",
        "undeclared",
    )

    def __init__(self, agent: Agent) -> None:
        name = agent.name or "agent"
        self.agent = agent
        self.name = name
        (
            self.actor,
            self.activated,
            self.completed,
            self.failed,
            self.skipped,
            self.cancelled,
        ) = _names(name)
        self.launched = 0
        self.running = 0
        self.queue: deque[Signal] = deque()
        self.last_output: Any = None
        self.undeclared: set[str] = set()


_NAMES: dict[str, tuple[str, str, str, str, str, str]] = {}


def _names(agent: str) -> tuple[str, str, str, str, str, str]:
    """The actor and lifecycle signal names of an agent (cached: runs reuse them)."""
    names = _NAMES.get(agent)
    if names is None:
        prefix = f"agent:{agent}"
        names = _NAMES[agent] = (
            prefix,
            f"{prefix}:activated",
            f"{prefix}:completed",
            f"{prefix}:failed",
            f"{prefix}:skipped",
            f"{prefix}:cancelled",
        )
    return names


class Activation:
    """One activation in flight."""

    __slots__ = ("agent_run", "signal", "started", "task", "trigger")

    def __init__(self, agent_run: AgentRun, trigger: Signal, signal: Signal) -> None:
        self.agent_run = agent_run
        self.trigger = trigger
        self.signal = signal
        self.started = False
        self.task: asyncio.Task[None] | None = None
