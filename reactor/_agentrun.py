"""Per-run bookkeeping of agents and activations."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from reactor._agent import Agent
from reactor._names import agent_actor, agent_names
from reactor._signal import Signal

__all__ = ["Activation", "AgentRun"]


class AgentRun:
    """Per-run bookkeeping of one agent: its counters, queue and signal names."""

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
        self.actor = agent_actor(name)
        (
            self.activated,
            self.completed,
            self.failed,
            self.skipped,
            self.cancelled,
        ) = agent_names(name)
        self.launched = 0
        self.running = 0
        self.queue: deque[Signal] | None = None  # made when a trigger first waits
        self.last_output: Any = None
        self.undeclared: set[str] | None = None  # names emitted but not declared


class Activation:
    """One activation in flight: the agent, its trigger, and its ``activated`` signal."""

    __slots__ = ("agent_run", "answers", "index", "signal", "started", "task", "trigger")

    def __init__(
        self, agent_run: AgentRun, trigger: Signal, signal: Signal, answers: Any = None
    ) -> None:
        self.agent_run = agent_run
        self.index = agent_run.launched  # this agent's nth activation in the run, from 1
        self.answers = answers  # a resumed activation's recorded answers
        self.trigger = trigger
        self.signal = signal
        self.started = False
        self.task: asyncio.Task[None] | None = None
