"""Text views of recordings for a terminal: run lists, agents, timeline, causal tree."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from reactor._names import (
    DELTAS,
    HARNESS_END,
    PROVIDER_END,
    PROVIDER_ERROR,
    TOOL_CALL,
    TOOL_RESULT,
    parse_state_event,
)
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._signal import Signal
from reactor.logging import MetricsReporter

__all__ = ["render_runs", "render_show"]


def render_runs(infos: Sequence[RunInfo]) -> str:
    """A table of runs: id, graph, status, start, duration, signals, tags."""
    rows: list[tuple[str, ...]] = [
        ("RUN", "GRAPH", "STATUS", "STARTED", "DURATION", "SIGNALS", "TAGS")
    ]
    for info in infos:
        duration = f"{info.ended_at - info.started_at:.2f}s" if info.ended_at else "-"
        tags = ",".join(f"{k}={v}" if v else k for k, v in info.tags.items())
        rows.append(
            (
                info.run_id,
                info.graph or "-",
                info.status or "incomplete",
                _when(info.started_at),
                duration,
                str(info.signals),
                tags or "-",
            )
        )
    return _table(rows)


def render_show(recording: Recording, *, payloads: bool = False, deltas: bool = False) -> str:
    """Header, agents (activations, durations, tokens), timeline and causal tree."""
    info = recording.info
    signals = recording.signals
    duration = (signals[-1].timestamp - signals[0].timestamp) if signals else 0.0
    status = recording.status or "incomplete (the run was cut off before harness:end)"
    header = [
        f"Run {info.run_id}" + (f" of {info.graph}" if info.graph else ""),
        f"  status:   {status}",
        f"  started:  {_when(info.started_at or (signals[0].timestamp if signals else 0))}"
        f"   duration: {duration:.3f}s   signals: {len(signals)}",
    ]
    if info.tags:
        header.append(
            "  tags:     " + ", ".join(f"{k}={v}" if v else k for k, v in info.tags.items())
        )
    if recording.complete:
        header.append(f"  reason:   {signals[-1].payload.get('reason')}")
    metrics = MetricsReporter()
    for signal in signals:
        if any(signal.matches(p) for p in metrics.patterns):
            metrics.on_signal(signal)
    sections = [
        "\n".join(header),
        "Agents\n" + _indent(str(metrics)),
        "Timeline\n" + _indent(_timeline(signals, deltas=deltas)),
        "Causal tree\n"
        + _indent(recording.tree(payloads=payloads, exclude=() if deltas else DELTAS)),
    ]
    return "\n\n".join(sections)


def _timeline(signals: Sequence[Signal], *, deltas: bool) -> str:
    lines: list[str] = []
    start = signals[0].timestamp if signals else 0.0
    pending: tuple[str, str | None, int] | None = None  # collapsed run of deltas

    def flush() -> None:
        nonlocal pending
        if pending is not None:
            name, source, count = pending
            lines.append(f"{'':>8}  {'':>5}  {name} x{count}  [{source}]")
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
        lines.append(
            f"{offset:>7.0f}ms  #{signal.seq:<4} {signal.name}  [{signal.source or '-'}]"
            f"{_brief(signal)}"
        )
    flush()
    return "\n".join(lines)


def _brief(signal: Signal) -> str:
    payload = signal.payload
    if not isinstance(payload, dict):
        return ""
    if signal.name.endswith(":skipped"):
        return f"  reason={payload.get('reason')}"
    if signal.name.endswith(":failed") or signal.name == PROVIDER_ERROR:
        error = payload.get("error") or {}
        return f"  {error.get('type')}: {error.get('message')}"
    if signal.name == PROVIDER_END:
        usage = payload.get("usage") or {}
        return f"  tokens={usage.get('input_tokens')}/{usage.get('output_tokens')}"
    state = parse_state_event(signal.name)
    if state is not None and state[1] == "changed":
        return f"  paths={payload.get('paths')}  by {payload.get('actor')}"
    if signal.name == HARNESS_END:
        return f"  status={payload.get('status')}"
    if signal.name in (TOOL_CALL, TOOL_RESULT):
        return f"  {payload.get('name')}"
    return ""


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S") if timestamp else "-"


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _indent(text: str) -> str:
    return "\n".join("  " + line if line else line for line in text.splitlines())
