"""Views of recordings for a terminal: run lists, agents, timeline, causal tree.

Each view is data (a :class:`Table`, a tree of :class:`Node`) with a plain-text
form; the CLI draws the same data with rich on a terminal. Everything taken from a
database is passed through :func:`clean` first: a recording may come from anyone,
and its names must not drive the terminal.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from reactor._recording.info import RunInfo
from reactor._recording.log import describe
from reactor._recording.recording import Recording
from reactor._reporting.terminal import clean, rich_console
from reactor._signals.names import (
    DELTAS,
    HARNESS_END,
    PROVIDER_END,
    PROVIDER_ERROR,
    SESSION_ABORT,
    SESSION_PROMPT,
    SESSION_REPLY,
    TOOL_CALL,
    TOOL_RESULT,
    parse_agent_event,
    parse_state_event,
)
from reactor._signals.patterns import Pattern, compile_pattern
from reactor._signals.payloads import input_tokens
from reactor._signals.signal import Signal

__all__ = [
    "Node",
    "ShowView",
    "Table",
    "clean",
    "cost_of",
    "money",
    "plain_show",
    "plain_tree",
    "rich_console",
    "runs_table",
    "show_view",
    "status_text",
    "tree_nodes",
    "when",
]


@dataclasses.dataclass(frozen=True)
class Table:
    """Rows of cells under column headings; ``right`` holds the numeric columns."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    right: frozenset[int] = frozenset()

    def plain(self) -> str:
        """The table as aligned text, one row a line, headings first."""
        rows = [self.columns, *self.rows]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self.columns))]
        return "\n".join(
            "  ".join(
                cell.rjust(width) if index in self.right else cell.ljust(width)
                for index, (cell, width) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
            for row in rows
        )


@dataclasses.dataclass
class Node:
    """One line of a tree (a signal in the causal tree), and what it caused."""

    label: str
    kind: str = ""
    children: list[Node] = dataclasses.field(default_factory=list)


def when(timestamp: float | None) -> str:
    """A UNIX time as the local date and time (to the second) and its zone, for tables."""
    if not timestamp:
        return "-"
    return datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def money(cost: float | None) -> str:
    """Dollars, or ``unknown`` when a price is: an unknown price is not a zero."""
    return "unknown" if cost is None else f"${cost:.4f}"


def status_text(status: str | None, failures: int = 0) -> str:
    """A run's status, with how many activations failed when any did."""
    text = clean(status) if status else "incomplete"
    return f"{text} ({failures} failed)" if failures else text


def cost_of(signals: Iterable[Signal]) -> float | None:
    """What the provider calls cost in total; ``None`` if any call's price is unknown."""
    total = 0.0
    for signal in signals:
        if signal.name == PROVIDER_END and isinstance(signal.payload, Mapping):
            cost = signal.payload.get("cost_usd")
            if not isinstance(cost, int | float):
                return None
            total += cost
    return total


def _tags(tags: Mapping[str, str]) -> str:
    return ", ".join(clean(f"{key}={value}" if value else key) for key, value in tags.items())


def runs_table(infos: Sequence[RunInfo]) -> Table:
    """A table of runs: id, graph, status, start, duration, signals, tags."""
    rows = []
    for info in infos:
        duration = f"{info.ended_at - info.started_at:.2f}s" if info.ended_at else "-"
        rows.append(
            (
                clean(info.run_id),
                clean(info.graph or "-"),
                status_text(info.status, info.failures),
                when(info.started_at),
                duration,
                str(info.signals),
                _tags(info.tags) or "-",
            )
        )
    return Table(
        ("RUN", "GRAPH", "STATUS", "STARTED", "DURATION", "SIGNALS", "TAGS"),
        tuple(rows),
        right=frozenset({4, 5}),
    )


@dataclasses.dataclass(frozen=True)
class ShowView:
    """What ``reactor show`` prints: a header, the agents, the timeline, the tree."""

    title: str
    header: tuple[tuple[str, str], ...]
    agents: Table
    timeline: tuple[tuple[str, str, str, str, str], ...]
    tree: list[Node]


def show_view(recording: Recording, *, payloads: bool = False, deltas: bool = False) -> ShowView:
    """Everything ``reactor show`` prints about a recording."""
    info = recording.info
    signals = recording.signals
    duration = (signals[-1].timestamp - signals[0].timestamp) if signals else 0.0
    status = (
        status_text(recording.status, info.failures)
        if recording.complete
        else "incomplete (the run was cut off before harness:end)"
    )
    header = [
        ("status", status),
        (
            "started",
            f"{when(info.started_at or (signals[0].timestamp if signals else 0))}"
            f"   duration: {duration:.3f}s   signals: {len(signals)}",
        ),
    ]
    if info.tags:
        header.append(("tags", _tags(info.tags)))
    end = signals[-1].payload if recording.complete else None
    if isinstance(end, Mapping):
        header.append(("reason", clean(end.get("reason"))))
    title = f"Run {clean(info.run_id)}" + (f" of {clean(info.graph)}" if info.graph else "")
    return ShowView(
        title=title,
        header=tuple(header),
        agents=agents_table(signals),
        timeline=tuple(_timeline(signals, deltas=deltas)),
        tree=tree_nodes(signals, exclude=() if deltas else DELTAS, payloads=payloads),
    )


def plain_show(view: ShowView) -> str:
    """The plain-text form of :func:`show_view`."""
    header = "\n".join(
        [view.title, *(f"  {label + ':':<9} {value}" for label, value in view.header)]
    )
    timeline = "\n".join(
        f"{offset:>9}  {seq:<5} {name}  [{source}]" + (f"  {detail}" if detail else "")
        for offset, seq, name, source, detail in view.timeline
    )
    sections = [
        header,
        "Agents\n" + _indent(view.agents.plain()),
        "Timeline\n" + _indent(timeline),
        "Causal tree\n" + _indent(plain_tree(view.tree)),
    ]
    return "\n\n".join(sections)


def agents_table(signals: Sequence[Signal]) -> Table:
    """Per agent: activations, how they ended (cancelled too), time, tokens and cost."""
    figures: dict[str, dict[str, Any]] = {}

    def row(agent: str) -> dict[str, Any]:
        return figures.setdefault(
            agent,
            {"activated": 0, "completed": 0, "failed": 0, "cancelled": 0, "skipped": 0}
            | {"ms": [], "in": 0, "out": 0, "calls": 0, "cost": 0.0},
        )

    for signal in signals:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        parsed = parse_agent_event(signal.name)
        if parsed is not None and parsed[1] in (
            "activated",
            "completed",
            "failed",
            "cancelled",
            "skipped",
        ):
            figures_of = row(parsed[0])
            figures_of[parsed[1]] += 1
            duration = payload.get("duration_ms")
            if parsed[1] in ("completed", "failed") and isinstance(duration, int | float):
                figures_of["ms"].append(float(duration))
        elif signal.name == PROVIDER_END:
            figures_of = row(str(payload.get("agent")))
            usage = payload.get("usage")
            usage = usage if isinstance(usage, Mapping) else {}
            figures_of["calls"] += 1
            figures_of["in"] += input_tokens(usage)
            figures_of["out"] += _count(usage.get("output_tokens"))
            cost = payload.get("cost_usd")
            known = isinstance(cost, int | float) and figures_of["cost"] is not None
            figures_of["cost"] = figures_of["cost"] + cost if known else None
    rows = []
    for agent, data in figures.items():
        mean = f"{sum(data['ms']) / len(data['ms']):.1f}" if data["ms"] else "-"
        rows.append(
            (
                clean(agent),
                *(str(data[key]) for key in ("activated", "completed", "failed", "cancelled")),
                str(data["skipped"]),
                mean,
                f"{data['in']:,}/{data['out']:,}" if data["calls"] else "-",
                money(data["cost"]) if data["calls"] else "-",
            )
        )
    total_in = sum(data["in"] for data in figures.values())
    total_out = sum(data["out"] for data in figures.values())
    rows.append(
        (
            "total",
            str(sum(data["activated"] for data in figures.values())),
            *("" for _ in range(5)),
            f"{total_in:,}/{total_out:,}",
            money(cost_of(signals)),
        )
    )
    return Table(
        ("AGENT", "RUNS", "OK", "FAILED", "CANCELLED", "SKIPPED", "MEAN MS", "TOKENS", "COST"),
        tuple(rows),
        right=frozenset(range(1, 9)),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def _timeline(signals: Sequence[Signal], *, deltas: bool) -> list[tuple[str, str, str, str, str]]:
    rows: list[tuple[str, str, str, str, str]] = []
    start = signals[0].timestamp if signals else 0.0
    pending: tuple[str, str | None, int] | None = None  # a collapsed run of deltas

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            name, source, count = pending
            rows.append(("", "", f"{clean(name)} x{count}", clean(source or "-"), ""))
            pending = None

    for signal in signals:
        if not deltas and signal.name in DELTAS:
            if pending is not None and pending[0] == signal.name and pending[1] == signal.source:
                pending = (pending[0], pending[1], pending[2] + 1)
            else:
                flush()
                pending = (signal.name, signal.source, 1)
            continue
        flush()
        offset = (signal.timestamp - start) * 1000
        rows.append(
            (
                f"{offset:.0f}ms",
                f"#{signal.seq}",
                clean(signal.name),
                clean(signal.source or "-"),
                clean(_brief(signal)),
            )
        )
    flush()
    return rows


def _brief(signal: Signal) -> str:
    payload = signal.payload
    if not isinstance(payload, Mapping):
        return ""
    if signal.name.endswith(":skipped"):
        return f"reason={payload.get('reason')}"
    if signal.name.endswith(":failed") or signal.name == PROVIDER_ERROR:
        error = payload.get("error")
        error = error if isinstance(error, Mapping) else {}
        return f"{error.get('type')}: {error.get('message')}"
    if signal.name == PROVIDER_END:
        usage = payload.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        return f"tokens={input_tokens(usage)}/{usage.get('output_tokens')}"
    state = parse_state_event(signal.name)
    if state is not None and state[1] == "changed":
        return f"paths={payload.get('paths')}  by {payload.get('actor')}"
    if signal.name == HARNESS_END:
        return f"status={payload.get('status')}"
    if signal.name in (TOOL_CALL, TOOL_RESULT):
        return str(payload.get("name"))
    if signal.name == SESSION_PROMPT:
        return f"{payload.get('prompt_id')}: {payload.get('question')}"
    if signal.name == SESSION_REPLY:
        return f"{payload.get('prompt_id')}: {payload.get('answer')!r} by {signal.source}"
    if signal.name == SESSION_ABORT:
        return f"{payload.get('reason')} by {signal.source}"
    if signal.name.startswith(("phase:", "task:")):
        return str(payload.get("name"))
    return ""


def _kind(name: str) -> str:
    parsed = parse_agent_event(name)
    if name.startswith("harness:"):
        return "harness"
    if parsed is not None:
        return parsed[1]
    return "state" if parse_state_event(name) is not None else ""


def tree_nodes(
    signals: Sequence[Signal], *, exclude: Iterable[Pattern] = DELTAS, payloads: bool = False
) -> list[Node]:
    """The causal tree: each signal under the signal that caused it (an iterative walk)."""
    skip = [compile_pattern(pattern) for pattern in exclude]
    shown = [signal for signal in signals if not any(match(signal.name) for match in skip)]
    start = signals[0].timestamp if signals else 0.0
    nodes: dict[str, Node] = {}
    roots: list[Node] = []
    for signal in shown:
        # Only an earlier signal can be a cause: a damaged log cannot make a loop.
        parent = nodes.get(signal.caused_by) if signal.caused_by is not None else None
        node = Node(clean(describe(signal, start, payloads)), _kind(signal.name))
        (parent.children if parent is not None else roots).append(node)
        nodes.setdefault(signal.id, node)
    return roots


def plain_tree(roots: Sequence[Node]) -> str:
    """Draw a tree with box-drawing branches, one node a line (iteratively)."""
    lines: list[str] = []
    stack: list[tuple[Node, str, str]] = [(node, "", "") for node in reversed(roots)]
    while stack:
        node, prefix, child_prefix = stack.pop()
        lines.append(prefix + node.label)
        kids = node.children
        for index in range(len(kids) - 1, -1, -1):
            last = index == len(kids) - 1
            stack.append(
                (
                    kids[index],
                    child_prefix + ("└── " if last else "├── "),
                    child_prefix + ("    " if last else "│   "),
                )
            )
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("  " + line if line else line for line in text.splitlines())
