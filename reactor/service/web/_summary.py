"""What the pages show of a run's log: per-agent metrics, the causal tree, labels, diffs.

Everything here is computed from recorded signals (the log is the truth), so a page
of a finished run and of one still executing are built the same way: the agents
active now, the prompts answered and by whom, a label that tells one run from another.
The signals are those a page has (a window of a long log: see :mod:`._window`); a
run's totals of tokens and cost are counters of its row, not sums over its log.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reactor._signals.names import (
    DELTAS,
    HARNESS_END,
    PROVIDER_END,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    parse_agent_event,
)
from reactor._signals.payloads import input_tokens
from reactor._signals.signal import Signal
from reactor.service._objects.changes import Create, Delete, Operation, Update
from reactor.service._objects.values import title_of

__all__ = [
    "ROUTINE_TAGS",
    "AgentMetrics",
    "Answer",
    "DiffLine",
    "Node",
    "active_agents",
    "agent_metrics",
    "answered_prompts",
    "causal_tree",
    "label",
    "operation_diff",
    "shown",
]

ROUTINE_TAGS = frozenset({"service", "trigger", "user", "reaction", "eval", "eval_of"})
"""Tags a service gives its runs that the list shows already (the graph or agent, who,
the evaluation a run is a case of, as links)."""
LABEL_LENGTH = 80
"""Characters of a run's label at most."""


def shown(signal: Signal) -> bool:
    """Whether the timeline shows a signal (streamed text deltas are left out)."""
    return signal.name not in DELTAS


def _usage(signal: Signal) -> tuple[str, int, int, float | None]:
    payload: Mapping[str, Any] = signal.payload if isinstance(signal.payload, Mapping) else {}
    given = payload.get("usage")
    usage: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    cost = payload.get("cost_usd")
    return (
        str(payload.get("agent", "")),
        input_tokens(usage),
        int(usage.get("output_tokens", 0) or 0),
        float(cost) if isinstance(cost, int | float) else None,
    )


@dataclasses.dataclass
class AgentMetrics:
    """One agent's counters in a run."""

    agent: str
    activated: int = 0
    completed: int = 0
    failed: int = 0
    skipped: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0


def agent_metrics(signals: Iterable[Signal]) -> list[AgentMetrics]:
    """Each agent's activations, outcomes, tokens and cost, by name."""
    found: dict[str, AgentMetrics] = {}
    for signal in signals:
        parsed = parse_agent_event(signal.name)
        if parsed is not None:
            name, event = parsed
            metrics = found.setdefault(name, AgentMetrics(name))
            if event in ("activated", "completed", "failed", "skipped"):
                setattr(metrics, event, getattr(metrics, event) + 1)
        elif signal.name == PROVIDER_END:
            name, tokens_in, tokens_out, price = _usage(signal)
            metrics = found.setdefault(name, AgentMetrics(name))
            metrics.input_tokens += tokens_in
            metrics.output_tokens += tokens_out
            if price is None or metrics.cost_usd is None:
                metrics.cost_usd = None
            else:
                metrics.cost_usd += price
    return sorted(found.values(), key=lambda metrics: metrics.agent)


@dataclasses.dataclass
class Node:
    """A signal of the causal tree, and the signals it caused."""

    signal: Signal
    children: list[Node] = dataclasses.field(default_factory=list)


def _payload(signal: Signal) -> Mapping[str, Any]:
    return signal.payload if isinstance(signal.payload, Mapping) else {}


def causal_tree(signals: Sequence[Signal]) -> list[Node]:
    """The run's signals as a forest: each under the signal that caused it (deltas left out).

    A reply comes from outside the run (nothing in it caused the answer), so it hangs
    under the ``session:prompt`` it answers, where a reader looks for it.
    """
    nodes = {signal.id: Node(signal) for signal in signals if shown(signal)}
    prompts: dict[Any, Node] = {}
    roots: list[Node] = []
    for node in nodes.values():
        signal = node.signal
        parent = nodes.get(signal.caused_by or "")
        if signal.name == SESSION_PROMPT:
            prompts[_payload(signal).get("prompt_id")] = node
        elif parent is None and signal.name in (SESSION_REPLY, SESSION_TIMEOUT):
            parent = prompts.get(_payload(signal).get("prompt_id"))
        (parent.children if parent is not None else roots).append(node)
    return roots


def active_agents(signals: Iterable[Signal]) -> set[str]:
    """The agents activated and not finished yet (none once the run has ended).

    An agent is active from its ``agent:<name>:activated`` until as many
    ``completed``, ``failed`` or ``cancelled`` signals of its own have followed.
    """
    running: dict[str, int] = {}
    for signal in signals:
        if signal.name == HARNESS_END:
            return set()
        parsed = parse_agent_event(signal.name)
        if parsed is None:
            continue
        name, event = parsed
        if event == "activated":
            running[name] = running.get(name, 0) + 1
        elif event in ("completed", "failed", "cancelled"):
            running[name] = running.get(name, 0) - 1
    return {name for name, count in running.items() if count > 0}


@dataclasses.dataclass(frozen=True)
class Answer:
    """A prompt that is settled: answered (by whom, with what) or timed out.

    Attributes:
        prompt_id: The prompt.
        question: What was asked.
        agent: The agent that asked.
        answer: The answer (``None`` when nobody answered in time).
        by: Who answered: the reply's source (``user:bob``); ``None`` on a timeout.
        seq: The reply's (or the timeout's) number in the log.
    """

    prompt_id: str
    question: str
    agent: str
    answer: Any
    by: str | None
    seq: int


def answered_prompts(signals: Iterable[Signal]) -> list[Answer]:
    """The prompts answered or timed out, in the order they were settled."""
    asked: dict[Any, Mapping[str, Any]] = {}
    settled: list[Answer] = []
    for signal in signals:
        payload = _payload(signal)
        prompt_id = payload.get("prompt_id")
        if signal.name == SESSION_PROMPT:
            asked[prompt_id] = payload
        elif signal.name in (SESSION_REPLY, SESSION_TIMEOUT) and prompt_id in asked:
            prompt = asked.pop(prompt_id)
            reply = signal.name == SESSION_REPLY
            settled.append(
                Answer(
                    prompt_id=str(prompt_id),
                    question=str(prompt.get("question") or ""),
                    agent=str(prompt.get("agent") or ""),
                    answer=payload.get("answer") if reply else None,
                    by=signal.source if reply else None,
                    seq=signal.seq,
                )
            )
    return settled


def _brief(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _inner(value: Any) -> str:
    """A value inside an input object: a list or an object is only counted."""
    if isinstance(value, Mapping):
        return "{…}"
    if isinstance(value, list | tuple):
        return f"[{len(value)} item{'' if len(value) == 1 else 's'}]"
    return _brief(value)


def _reaction(tags: Mapping[str, str], input: Any) -> str | None:
    """A reaction's run: its object's type and title, and the change (``None`` otherwise).

    ``Quote NVDA, updated (v3)``: the title is the object's ``title`` field, else its
    first short text field (from the event the run was given, its input); else its id.
    """
    object_id, event = tags.get("object"), tags.get("event", "")
    if "reaction" not in tags or not object_id:
        return None
    _, type, kind = [*event.split(":"), "", "", ""][:3]  # object:<Type>:<event>
    given: Mapping[str, Any] = input if isinstance(input, Mapping) else {}
    data, version = given.get("data"), given.get("version")
    title = title_of(data) if isinstance(data, Mapping) else None
    text = f"{given.get('type') or type or 'object'} {title or object_id}"
    if kind:
        text += f", {kind}" + (f" (v{version})" if isinstance(version, int) else "")
    return text


def label(tags: Mapping[str, str], input: Any) -> str:
    """What tells a run from another: its own tags, else a short summary of its input.

    A reaction's run is named by its object (see :func:`_reaction`). The tags the list
    shows otherwise (:data:`ROUTINE_TAGS`) are left out. An input object reads
    ``key=value, ...`` (lists and objects in it only counted: ``prices=[8 items]``);
    ``""`` when the run has neither.
    """
    own = [
        f"{key}={value}" if value else key for key, value in tags.items() if key not in ROUTINE_TAGS
    ]
    reacted = _reaction(tags, input)
    if reacted is not None:
        text = reacted
    elif own:
        text = " ".join(own)
    elif isinstance(input, Mapping):
        text = ", ".join(f"{key}={_inner(value)}" for key, value in input.items())
    elif input is None:
        text = ""
    else:
        text = _brief(input)
    return text if len(text) <= LABEL_LENGTH else text[: LABEL_LENGTH - 1] + "…"


@dataclasses.dataclass(frozen=True)
class DiffLine:
    """A line of a proposed change: ``-`` what goes, ``+`` what comes, `` `` context."""

    sign: str
    text: str


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def operation_diff(operation: Operation, current: Mapping[str, Any] | None) -> list[DiffLine]:
    """How one operation changes an object's fields (``current``: its data now, if known)."""
    if isinstance(operation, Create):
        return [DiffLine("+", f"{key}: {_value(value)}") for key, value in operation.data.items()]
    if isinstance(operation, Delete):
        return [DiffLine("-", f"{key}: {_value(value)}") for key, value in (current or {}).items()]
    assert isinstance(operation, Update)
    lines: list[DiffLine] = []
    for key, value in operation.data.items():
        if current is not None and key in current:
            if current[key] == value:
                lines.append(DiffLine(" ", f"{key}: {_value(value)}"))
                continue
            lines.append(DiffLine("-", f"{key}: {_value(current[key])}"))
        lines.append(DiffLine("+", f"{key}: {_value(value)}"))
    return lines
