"""Runs as structured logs (through structlog), and metrics aggregated from signals.

reactor never configures logging on import. Applications (and the ``reactor`` CLI)
call :func:`configure` once; libraries leave it to the application::

    import reactor.logging

    reactor.logging.configure(json=True)              # JSON lines on stdout
    result = await graph.run(reporters=[reactor.logging.StructlogReporter()])

``configure(stdlib=True)`` routes the standard ``logging`` module (every library) and
warnings the same way: one format for every line of the process.
"""

from __future__ import annotations

import json as jsonlib
import logging
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, TextIO

import structlog

from reactor._recording.info import RunInfo
from reactor._signals.names import (
    AGENT_SIGNALS,
    DELTAS,
    HARNESS_END,
    HARNESS_ENDING,
    HARNESS_FORKED,
    HARNESS_RESUMED,
    HARNESS_START,
    PROVIDER_END,
    PROVIDER_ERROR,
    TOOL_CALL,
    parse_agent_event,
)
from reactor._signals.patterns import Pattern, compile_pattern
from reactor._signals.payloads import input_tokens
from reactor._signals.signal import Signal, to_jsonable

__all__ = ["MetricsReporter", "StructlogReporter", "configure", "level_of"]

_RESERVED = frozenset(
    {"event", "level", "log_level", "timestamp", "logger", "run_id", "graph", "tags"}
    | {"seq", "signal", "source", "caused_by", "depth"}
)


def configure(
    *,
    json: bool = False,
    level: str | int = "info",
    stream: TextIO | None = None,
    colors: bool | None = None,
    stdlib: bool = False,
) -> None:
    """Configure structlog for an application: a processor chain and a renderer.

    Args:
        json: Render JSON lines (for log pipelines) instead of readable console lines.
        level: The lowest level logged (``"debug"`` shows every signal).
        stream: Where to write; stdout for JSON, stderr for console lines by default.
        colors: Colour console lines (default: when the stream is a terminal).
        stdlib: Also route the standard :mod:`logging` module (the root logger: every
            library's lines, uvicorn's, taskiq's, alembic's) and Python's warnings through
            the same chain to the same stream, so that every line is in one format. It
            replaces the handler an earlier ``configure(stdlib=True)`` installed.
    """
    out = stream or (sys.stdout if json else sys.stderr)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        _add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
    ]
    rendering: list[Any]
    if json:
        rendering = [
            structlog.processors.ExceptionRenderer(_TRACEBACKS),
            structlog.processors.JSONRenderer(serializer=_dumps),
        ]
    else:
        use_colors = colors if colors is not None else bool(getattr(out, "isatty", bool)())
        rendering = [structlog.dev.ConsoleRenderer(colors=use_colors)]
    numeric = level if isinstance(level, int) else _LEVELS[level.lower()]
    structlog.configure(
        processors=[*shared, *rendering],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_PrinterFactory(out),
        cache_logger_on_first_use=False,
    )
    if stdlib:
        formatter = structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
        )
        root = logging.getLogger()
        for handler in [h for h in root.handlers if isinstance(h, _StdlibHandler)]:
            root.removeHandler(handler)
        root.addHandler(_StdlibHandler(formatter, _Printer(out)))
        root.setLevel(numeric)
        logging.captureWarnings(True)  # a warning is a line of the log (logger py.warnings)


class _Printer(structlog.PrintLogger):
    """A :class:`structlog.PrintLogger` that knows its name (``get_logger("reactor.service")``).

    Every printer of one stream shares structlog's lock for it: lines written from
    structlog and from the standard ``logging`` module never interleave.
    """

    def __init__(self, file: TextIO, name: str | None = None) -> None:
        super().__init__(file)
        self.name = name


class _PrinterFactory:
    def __init__(self, out: TextIO) -> None:
        self._out = out

    def __call__(self, *args: Any) -> _Printer:
        return _Printer(self._out, str(args[0]) if args else None)


def _add_logger_name(logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
    """``logger``: the stdlib logger's name of a routed record, else the structlog logger's."""
    record = event.get("_record")
    if isinstance(record, logging.LogRecord):
        event.setdefault("logger", record.name)
    elif isinstance(logger, _Printer) and logger.name:
        event.setdefault("logger", logger.name)
    return event


class _StdlibHandler(logging.Handler):
    """The root logger's handler: a record rendered by the chain, printed under the lock."""

    def __init__(self, formatter: logging.Formatter, printer: _Printer) -> None:
        super().__init__()
        self.setFormatter(formatter)
        self._printer = printer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._printer.msg(self.format(record))
        except Exception:  # the output is gone (a closed pipe): drop the line, never print why
            return


_TRACEBACKS = structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
"""A traceback as JSON data, without the frames' local variables: those hold what must
never be shipped to a log pipeline (a request's token, a prompt, a tool's arguments)."""

_HARNESS = frozenset({HARNESS_START, HARNESS_ENDING, HARNESS_END, HARNESS_RESUMED, HARNESS_FORKED})

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def _dumps(data: Any, **kwargs: Any) -> str:
    return jsonlib.dumps(data, default=str, ensure_ascii=False)


def level_of(name: str) -> str:
    """The log level of a signal: errors, run and completion milestones, else debug.

    ``*:failed`` and ``*:error`` (and ``bus:handler_error``) are ``error``;
    ``harness:*`` (snapshots aside) and ``agent:*:completed`` are ``info``; the rest ``debug``.
    """
    last = name.rpartition(":")[2]
    if last in ("failed", "error") or last.endswith("_error"):
        return "error"
    agent = parse_agent_event(name)
    if name in _HARNESS or (agent is not None and agent[1] == "completed"):
        return "info"
    return "debug"


class StructlogReporter:
    """Logs every matching signal as a structlog event.

    The event is the signal's name; fields are ``run_id``, ``graph``, ``seq``,
    ``signal``, ``source``, ``caused_by``, ``depth`` and the payload (a dict payload's
    keys become fields; anything else is ``payload``). Text and thinking deltas are
    excluded by default. Levels follow :func:`level_of`.

    Args:
        patterns: Signals to log.
        exclude: Signals not to log, even if they match ``patterns``.
        logger: The structlog logger to use (``structlog.get_logger("reactor")``).
    """

    def __init__(
        self,
        patterns: Iterable[Pattern] = ("**",),
        exclude: Iterable[Pattern] = DELTAS,
        *,
        logger: Any = None,
    ) -> None:
        self.patterns = tuple(patterns)
        self._exclude = [compile_pattern(p) for p in exclude]
        self._logger = logger if logger is not None else structlog.get_logger("reactor")
        self._runs: dict[str | None, Any] = {}
        self.broken: OSError | None = None

    def start(self, info: RunInfo) -> None:
        """Bind the run's context (id, graph, tags) for its signals."""
        context: dict[str, Any] = {"run_id": info.run_id, "graph": info.graph}
        if info.tags:
            context["tags"] = dict(info.tags)
        self._runs[info.run_id] = self._logger.bind(**context)

    def on_signal(self, signal: Signal) -> None:
        """Log one signal (after the log's output broke, e.g. a closed pipe, nothing)."""
        if self.broken is not None:
            return
        name = signal.name
        for excluded in self._exclude:
            if excluded(name):
                return
        logger = self._runs.get(signal.run_id)
        if logger is None:
            logger = self._runs[signal.run_id] = self._logger.bind(run_id=signal.run_id)
        fields: dict[str, Any] = {
            "seq": signal.seq,
            "signal": name,
            "source": signal.source,
            "caused_by": signal.caused_by,
            "depth": signal.depth,
        }
        payload = to_jsonable(signal.payload)
        if isinstance(payload, dict):
            for key, value in payload.items():
                fields[f"payload_{key}" if key in _RESERVED else key] = value
        elif payload is not None:
            fields["payload"] = payload
        try:
            getattr(logger, level_of(name))(name, **fields)
        except OSError as exc:  # the output is gone (say, `| head`): stop, keep the run
            self.broken = exc
            return
        if name == HARNESS_END:
            self._runs.pop(signal.run_id, None)


class MetricsReporter:
    """Aggregates what runs cost and how agents behave, from their signals.

    Use one across runs to accumulate. :meth:`snapshot` returns the figures as JSON
    data; ``str(reporter)`` renders a table.
    """

    patterns = (AGENT_SIGNALS, PROVIDER_END, PROVIDER_ERROR, TOOL_CALL, HARNESS_END)

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything aggregated so far."""
        self.runs: Counter[str] = Counter()
        self.run_durations: list[float] = []
        self.activations: Counter[str] = Counter()
        self.completed: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.cancelled: Counter[str] = Counter()
        self.skipped: defaultdict[str, Counter[str]] = defaultdict(Counter)
        self.durations: defaultdict[str, list[float]] = defaultdict(list)
        self.input_tokens: Counter[str] = Counter()
        self.output_tokens: Counter[str] = Counter()
        self.cost_usd: defaultdict[str, float | None] = defaultdict(float)
        self.provider_calls: Counter[str] = Counter()
        self.provider_errors: Counter[str] = Counter()
        self.tool_calls: Counter[str] = Counter()

    def on_signal(self, signal: Signal) -> None:
        """Aggregate one signal."""
        name, payload = signal.name, signal.payload
        parsed = parse_agent_event(name)
        if parsed is not None:
            agent, event = parsed
            if event == "activated":
                self.activations[agent] += 1
            elif event in ("completed", "failed"):
                (self.completed if event == "completed" else self.failed)[agent] += 1
                self.durations[agent].append(float(payload.get("duration_ms") or 0.0))
            elif event == "skipped":
                self.skipped[agent][str(payload.get("reason"))] += 1
            elif event == "cancelled":
                self.cancelled[agent] += 1
        elif name == PROVIDER_END:
            agent = str(payload.get("agent"))
            usage: Mapping[str, int] = payload.get("usage") or {}
            self.provider_calls[agent] += 1
            self.input_tokens[agent] += input_tokens(usage)  # the prompt cache's too
            self.output_tokens[agent] += int(usage.get("output_tokens", 0))
            cost, spent = payload.get("cost_usd"), self.cost_usd[agent]
            known = spent is not None and isinstance(cost, int | float)
            self.cost_usd[agent] = spent + cost if known else None  # unknown stays unknown
        elif name == PROVIDER_ERROR:
            self.provider_errors[str(payload.get("agent"))] += 1
        elif name == TOOL_CALL:
            self.tool_calls[str(payload.get("name"))] += 1
        elif name == HARNESS_END:
            self.runs[str(payload.get("status"))] += 1
            self.run_durations.append(float(payload.get("duration_ms") or 0.0))

    def snapshot(self) -> dict[str, Any]:
        """Everything aggregated, as JSON data."""
        agents = sorted(
            set(self.activations) | set(self.provider_calls) | set(self.skipped) | set(self.failed)
        )
        return {
            "runs": dict(self.runs),
            "agents": {agent: self._agent(agent) for agent in agents},
            "totals": {
                "activations": sum(self.activations.values()),
                "input_tokens": sum(self.input_tokens.values()),
                "output_tokens": sum(self.output_tokens.values()),
                "cost_usd": _total(self.cost_usd.values()),
                "provider_errors": sum(self.provider_errors.values()),
                "tool_calls": dict(self.tool_calls),
            },
        }

    def _agent(self, agent: str) -> dict[str, Any]:
        durations = self.durations.get(agent, [])
        return {
            "activations": self.activations[agent],
            "completed": self.completed[agent],
            "failed": self.failed[agent],
            "cancelled": self.cancelled[agent],
            "skipped": dict(self.skipped.get(agent, {})),
            "duration_ms": {
                "total": round(sum(durations), 3),
                "mean": round(statistics.fmean(durations), 3) if durations else 0.0,
                "max": round(max(durations), 3) if durations else 0.0,
            },
            "provider_calls": self.provider_calls[agent],
            "input_tokens": self.input_tokens[agent],
            "output_tokens": self.output_tokens[agent],
            "cost_usd": _total([self.cost_usd[agent]]),
        }

    def __str__(self) -> str:
        data = self.snapshot()
        header = (
            f"{'agent':<16} {'runs':>5} {'ok':>4} {'fail':>4} {'mean ms':>9} "
            f"{'tokens in/out':>15} {'cost':>10}"
        )
        lines = [header, "-" * len(header)]
        for agent, row in data["agents"].items():
            tokens = f"{row['input_tokens']}/{row['output_tokens']}"
            lines.append(
                f"{agent:<16} {row['activations']:>5} {row['completed']:>4} {row['failed']:>4} "
                f"{row['duration_ms']['mean']:>9.1f} {tokens:>15} {_money(row['cost_usd']):>10}"
            )
        totals = data["totals"]
        tokens = f"{totals['input_tokens']}/{totals['output_tokens']}"
        lines.append(
            f"{'total':<16} {totals['activations']:>5} {'':>4} {'':>4} {'':>9} "
            f"{tokens:>15} {_money(totals['cost_usd']):>10}"
        )
        return "\n".join(lines)


def _total(costs: Iterable[float | None]) -> float | None:
    """The sum of ``costs``, or ``None`` if any is unknown (never a guessed zero)."""
    total = 0.0
    for cost in costs:
        if cost is None:
            return None
        total += cost
    return round(total, 6)


def _money(cost: float | None) -> str:
    return "unknown" if cost is None else f"${cost:.4f}"
