"""The signal vocabulary: every name the library emits (payload shapes: ``_payloads``).

Names are defined here once; the rest of the library spells them through
these constants and builders, so that a renamed signal or a changed payload is one
edit, and a reader finds what a signal carries in one place.

Names of the form ``agent:<name>:<event>`` and ``state:<key>:<event>`` are built by
functions that cache their results: runs reuse the same names over and over.
"""

from __future__ import annotations

import functools
from typing import Literal, TypedDict

from reactor._signals.door import storable_text

__all__ = [
    "AGENT_EVENTS",
    "AGENT_SIGNALS",
    "BUS_HANDLER_ERROR",
    "CAPABILITY_DENIED",
    "DELTAS",
    "HARNESS_END",
    "HARNESS_ENDING",
    "HARNESS_FORKED",
    "HARNESS_RESUMED",
    "HARNESS_SIGNALS",
    "HARNESS_SNAPSHOT",
    "HARNESS_START",
    "HARNESS_SUSPENDED",
    "INBOX_PREFIX",
    "MCP_CALL",
    "MCP_CONNECT",
    "MCP_ERROR",
    "MCP_RESULT",
    "OBJECT_SIGNALS",
    "PHASE_EVENTS",
    "PROMPT_END",
    "PROMPT_START",
    "PROVIDER_END",
    "PROVIDER_ERROR",
    "PROVIDER_EVENTS",
    "PROVIDER_RETRY",
    "PROVIDER_START",
    "REACTION_LOOP",
    "REFLECTION_END",
    "REFLECTION_START",
    "RESERVED_NAMESPACES",
    "SERVICE_SIGNALS",
    "SESSION_ABORT",
    "SESSION_PROMPT",
    "SESSION_REPLY",
    "SESSION_TIMEOUT",
    "SPAN_KINDS",
    "SPAWN_END",
    "SPAWN_START",
    "STATE_EVENTS",
    "STATE_PREFIX",
    "SUGGESTION_APPROVED",
    "SUGGESTION_CREATED",
    "SUGGESTION_DECIDED",
    "SUGGESTION_REJECTED",
    "SUGGESTION_SUPERSEDED",
    "SYSTEM_SIGNALS",
    "TASK_EVENTS",
    "TEXT_COMPLETE",
    "TEXT_DELTA",
    "THINKING_DELTA",
    "TIMER_FIRED",
    "TIMER_SET",
    "TOOL_CALL",
    "TOOL_RESULT",
    "ErrorInfo",
    "SpanEvent",
    "SpanKind",
    "agent_actor",
    "agent_event",
    "agent_names",
    "error_info",
    "inbox_agent",
    "inbox_signal",
    "object_signal",
    "parse_agent_event",
    "parse_state_event",
    "reserved_namespace",
    "span_event",
    "state_event",
]

# -- the run -------------------------------------------------------------------------

HARNESS_START = "harness:start"
"""First signal of every run: :class:`HarnessStart`."""
HARNESS_ENDING = "harness:ending"
"""``end_when`` held; no new activations: :class:`HarnessEnding`."""
HARNESS_END = "harness:end"
"""Last signal of every run, also on failure, timeout or abort: :class:`HarnessEnd`."""
HARNESS_RESUMED = "harness:resumed"
"""First signal a resumed run emits: :class:`HarnessResumed`."""
HARNESS_SNAPSHOT = "harness:snapshot"
"""What a resume needs, every ``snapshot_every`` signals: :class:`HarnessSnapshot`."""
HARNESS_FORKED = "harness:forked"
"""First signal a fork emits after the log it copied: :class:`HarnessForked`."""
HARNESS_SUSPENDED = "harness:suspended"
"""Last signal of a run stopped without ending, to resume: :class:`HarnessSuspended`."""
HARNESS_SIGNALS = "harness:*"
"""The pattern of the run's own milestones."""
BUS_HANDLER_ERROR = "bus:handler_error"
"""A subscriber raised while a signal was dispatched (payload: handler, signal, error)."""

# -- people --------------------------------------------------------------------------

SESSION_PROMPT = "session:prompt"
"""A run asks a person: ``{prompt_id, agent, question, choices, schema}``."""
SESSION_REPLY = "session:reply"
"""A person answered: ``{prompt_id, answer}``."""
SESSION_TIMEOUT = "session:timeout"
"""Nobody answered in time: ``{prompt_id}``."""
SESSION_ABORT = "session:abort"
"""Someone stopped the run through its inbox (from any process): ``{reason}``."""

# -- time ----------------------------------------------------------------------------

TIMER_SET = "timer:set"
"""``ctx.sleep`` / ``ctx.sleep_until`` began: ``{timer_id, agent, until}`` (ISO 8601, UTC)."""
TIMER_FIRED = "timer:fired"
"""Its time came (at once on resume, when it passed meanwhile): ``{timer_id, agent}``."""

INBOX_PREFIX = "inbox:"
"""``inbox:<agent>``: a message for one agent only (``handle.send_to(agent, payload)``)."""


def inbox_signal(agent: str) -> str:
    """``inbox:<agent>``, the name of messages to ``agent``."""
    return f"{INBOX_PREFIX}{agent}"


def inbox_agent(name: str) -> str | None:
    """The agent an ``inbox:<agent>`` name is addressed to, else ``None``."""
    if not name.startswith(INBOX_PREFIX):
        return None
    agent = name[len(INBOX_PREFIX) :]
    return agent if agent and ":" not in agent else None


# -- phases and tasks ------------------------------------------------------------------

SpanKind = Literal["phase", "task"]
SpanEvent = Literal["start", "complete", "failed"]
SPAN_KINDS: tuple[SpanKind, ...] = ("phase", "task")
PHASE_EVENTS = ("phase:start", "phase:complete", "phase:failed")
"""``async with ctx.phase(name)``: :class:`SpanPayload`; what runs inside hangs under the start."""
TASK_EVENTS = ("task:start", "task:complete", "task:failed")
"""``async with ctx.task(name)``: :class:`SpanPayload`; what runs inside hangs under the start."""


def span_event(kind: SpanKind, event: SpanEvent) -> str:
    """``phase:start``, ``task:failed``, ..."""
    return f"{kind}:{event}"


# -- objects and the service (reactor.service) -----------------------------------

OBJECT_SIGNALS = "object:**"
"""The pattern of every object change."""
SUGGESTION_CREATED = "suggestion:created"
SUGGESTION_APPROVED = "suggestion:approved"
SUGGESTION_REJECTED = "suggestion:rejected"
SUGGESTION_DECIDED = "suggestion:decided"
"""A person's decision on a suggestion, with its provenance: a line of the JSON log and
an entry of the processing log's history (not a signal on a bus)."""
SUGGESTION_SUPERSEDED = "suggestion:superseded"
"""A pending suggestion gave way to a newer one of its agent for its object: a signal on
the object store's bus (payload :class:`SuggestionPayload`, as every ``suggestion:*``),
and an entry of the processing log's history and a line of the JSON log (payload
:class:`SuggestionSuperseded`)."""
CAPABILITY_DENIED = "capability:denied"
REACTION_LOOP = "reaction:loop"
"""An object event caused by a chain of reactions deeper than the service allows: not
dispatched (payload: the event's id, object, type, version, and the ``chain``)."""
SERVICE_SIGNALS = (OBJECT_SIGNALS, "suggestion:*", CAPABILITY_DENIED, REACTION_LOOP)
"""Patterns of everything the object store and the service emit."""


@functools.lru_cache(maxsize=4096)
def object_signal(type: str, event: str) -> str:
    """``object:<type>:<event>``, e.g. ``object_signal("Person", "created")``."""
    return f"object:{type}:{event}"


# -- providers -----------------------------------------------------------------------

PROVIDER_START = "provider:start"
PROVIDER_END = "provider:end"
PROVIDER_ERROR = "provider:error"
PROVIDER_RETRY = "provider:retry"
TEXT_DELTA = "text:delta"
THINKING_DELTA = "thinking:delta"
TEXT_COMPLETE = "text:complete"
TOOL_CALL = "tool:call"
TOOL_RESULT = "tool:result"

# -- agents as objects ---------------------------------------------------------------

PROMPT_START = "prompt:start"
"""``agent.prompt()`` began: ``{agent, prompt}`` (what it asks of the model follows)."""
PROMPT_END = "prompt:end"
"""``agent.prompt()`` ended: ``{agent, output, error, usage, cost_usd, duration_ms}``."""
REFLECTION_START = "reflection:start"
"""The model is asked to check its answer: ``{agent, attempt}``."""
REFLECTION_END = "reflection:end"
"""The check is done: ``{agent, attempt, success, changed}``."""
MCP_CONNECT = "mcp:connect"
"""An MCP server connected: ``{server, transport, tools}``."""
MCP_CALL = "mcp:call"
"""A tool is called through its MCP server: ``{server, tool, input}``."""
MCP_RESULT = "mcp:result"
"""The MCP server answered: ``{server, tool, result, duration_ms}``."""
MCP_ERROR = "mcp:error"
"""The MCP server failed, or its tool did: ``{server, tool, error}``."""
SPAWN_START = "spawn:start"
"""``ctx.spawn`` started a child run: ``{run_id, graph}``."""
SPAWN_END = "spawn:end"
"""The child run ended: ``{run_id, graph, status}``."""

DELTAS = (TEXT_DELTA, THINKING_DELTA)
"""Streaming pieces: left out of trees and timelines unless asked for."""

PROVIDER_EVENTS = frozenset(
    {
        TEXT_DELTA,
        THINKING_DELTA,
        TEXT_COMPLETE,
        TOOL_CALL,
        TOOL_RESULT,
        PROVIDER_END,
        PROVIDER_ERROR,
        PROVIDER_RETRY,
    }
)
"""What a provider call emits after its ``provider:start``."""

SYSTEM_SIGNALS = (
    HARNESS_START,
    HARNESS_ENDING,
    HARNESS_END,
    HARNESS_RESUMED,
    HARNESS_SNAPSHOT,
    HARNESS_FORKED,
    HARNESS_SUSPENDED,
    BUS_HANDLER_ERROR,
    PROVIDER_START,
    PROVIDER_END,
    PROVIDER_ERROR,
    PROVIDER_RETRY,
    TEXT_DELTA,
    TEXT_COMPLETE,
    THINKING_DELTA,
    TOOL_CALL,
    TOOL_RESULT,
    PROMPT_START,
    PROMPT_END,
    REFLECTION_START,
    REFLECTION_END,
    MCP_CONNECT,
    MCP_CALL,
    MCP_RESULT,
    MCP_ERROR,
    SPAWN_START,
    SPAWN_END,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    SESSION_ABORT,
    TIMER_SET,
    TIMER_FIRED,
    *PHASE_EVENTS,
    *TASK_EVENTS,
)
"""Names the runtime emits on its own (agents may activate on them)."""

RESERVED_NAMESPACES = (
    "harness",
    "agent",
    "state",
    "provider",
    "text",
    "thinking",
    "tool",
    "session",
    "phase",
    "task",
    "bus",
    "prompt",
    "reflection",
    "mcp",
    "spawn",
    "timer",
)
"""First segments only the runtime emits: outside input may not forge them."""


def reserved_namespace(name: str) -> str | None:
    """The reserved namespace ``name`` is in (``"agent"`` for ``agent:x:completed``)."""
    first = name.partition(":")[0]
    return first if first in RESERVED_NAMESPACES else None


# -- agents and state ----------------------------------------------------------------

AGENT_SIGNALS = "agent:**"
"""The pattern of every agent lifecycle signal."""

AgentEvent = Literal["activated", "completed", "failed", "skipped", "cancelled"]
AGENT_EVENTS: tuple[AgentEvent, ...] = ("activated", "completed", "failed", "skipped", "cancelled")
"""The lifecycle of an activation: ``agent:<name>:<event>``."""

STATE_PREFIX = "state:"
"""Every store signal's name starts with it."""

StateEvent = Literal["changed", "added", "removed"]
STATE_EVENTS: tuple[StateEvent, ...] = ("changed", "added", "removed")
"""What a store emits for a key: ``state:<key>:<event>``."""


@functools.lru_cache(maxsize=8192)
def agent_event(agent: str, event: AgentEvent) -> str:
    """``agent:<agent>:<event>``, e.g. ``agent_event("trader", "completed")``."""
    return f"agent:{agent}:{event}"


@functools.lru_cache(maxsize=8192)
def agent_names(agent: str) -> tuple[str, str, str, str, str]:
    """An agent's lifecycle names, in :data:`AGENT_EVENTS` order."""
    return tuple(agent_event(agent, event) for event in AGENT_EVENTS)  # type: ignore[return-value]


@functools.lru_cache(maxsize=8192)
def agent_actor(agent: str) -> str:
    """The actor of an agent's store writes: ``agent:<agent>``."""
    return f"agent:{agent}"


@functools.lru_cache(maxsize=8192)
def state_event(key: str, event: StateEvent) -> str:
    """``state:<key>:<event>``, e.g. ``state_event("analysis", "changed")``."""
    return f"state:{key}:{event}"


def parse_agent_event(name: str) -> tuple[str, str] | None:
    """``(agent, event)`` for an ``agent:<agent>:<event>`` name, else ``None``."""
    if not name.startswith("agent:"):
        return None
    parts = name.split(":")
    if len(parts) != 3:
        return None
    return parts[1], parts[2]


def parse_state_event(name: str) -> tuple[str, str] | None:
    """``(key, event)`` for a ``state:<key>:<event>`` name, else ``None``."""
    if not name.startswith(STATE_PREFIX):
        return None
    parts = name.split(":")
    if len(parts) != 3:
        return None
    return parts[1], parts[2]


# -- payloads ------------------------------------------------------------------------


class ErrorInfo(TypedDict):
    """An exception as data: its class name and message."""

    type: str
    message: str


def error_info(exc: BaseException) -> ErrorInfo:
    """Describe ``exc`` as the ``error`` of a payload."""
    return {"type": type(exc).__name__, "message": storable_text(str(exc))}
