"""What an evaluation found: a case per recorded run, and the report of them all.

:class:`EvalCase` says what became of one recorded run on the current graph: ``same``
(the new log equals the old), ``changed`` (it differs: where first, and what it did to
the final state, the tokens, the cost and the duration), ``diverged`` (a request
changed and no provider was given to answer it) or ``failed`` (an error). An
:class:`EvalReport` holds the cases and shows them: ``summary()``, ``to_json()``,
``to_junit_xml(path)`` for CI, and a table (``rich`` draws it; ``str`` is plain text).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from xml.etree import ElementTree

from reactor._recording.diff import Divergence
from reactor._recording.recording import Recording
from reactor._signals.names import HARNESS_END, PROVIDER_END
from reactor._signals.payloads import input_tokens
from reactor._signals.signal import to_jsonable

__all__ = ["EvalCase", "EvalReport", "EvalStatus", "spent", "state_diff"]

EvalStatus = Literal["same", "changed", "diverged", "failed"]
"""What became of a recorded run on the current graph."""


@dataclasses.dataclass(frozen=True)
class EvalCase:
    """One recorded run evaluated on the current graph.

    Attributes:
        run_id: The recorded run.
        new_run_id: The run the evaluation made (recorded with the tag ``eval=<id>``),
            if it began.
        status: ``same``, ``changed``, ``diverged`` or ``failed``.
        passed: Whether it passes: ``same`` or ``changed``, and every scorer passed.
        divergence: Where the new run first differs from the recorded one.
        agent: The agent of the first divergence (whose request or answer differs).
        field: What differs first: a request's field (``messages[0].content``) for a
            changed request, else the signal's field (``name``, ``payload.new``...).
        seq: The ``seq`` in the recorded run where the runs part.
        state_diff: The final state's keys that differ: key -> (old, new).
        tokens: Input and output tokens of the run's model answers: (old, new). The
            new run's count its answers from the recording too: what the changed
            graph would spend live.
        cost_usd: What the model answers cost: (old, new) (``None``: a price unknown).
        duration_ms: How long the run took: (old, new).
        scores: Each scorer's name and what it gave.
        model_calls: How many requests the evaluation sent to ``provider`` (the
            rest were answered from the recording).
        error: What went wrong (``failed``, ``diverged``), as one line.
        object: The object the run's agents saw (a reaction's), as JSON data.
    """

    run_id: str
    new_run_id: str | None
    status: EvalStatus
    passed: bool
    divergence: Divergence | None = None
    agent: str | None = None
    field: str | None = None
    seq: int | None = None
    state_diff: Mapping[str, tuple[Any, Any]] = dataclasses.field(default_factory=dict)
    tokens: tuple[int, int] = (0, 0)
    cost_usd: tuple[float | None, float | None] = (0.0, 0.0)
    duration_ms: tuple[float | None, float | None] = (None, None)
    scores: Mapping[str, bool | float] = dataclasses.field(default_factory=dict)
    model_calls: int = 0
    error: str | None = None
    object: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the divergence as its text)."""
        data = {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if field.name != "divergence"
        }
        data["divergence"] = None if self.divergence is None else str(self.divergence)
        data["state_diff"] = {
            key: {"old": old, "new": new} for key, (old, new) in self.state_diff.items()
        }
        data["tokens"] = {"old": self.tokens[0], "new": self.tokens[1]}
        data["cost_usd"] = {"old": self.cost_usd[0], "new": self.cost_usd[1]}
        data["duration_ms"] = {"old": self.duration_ms[0], "new": self.duration_ms[1]}
        data["scores"] = dict(self.scores)
        return dict(to_jsonable(data))

    def describe(self) -> str:
        """The case in a line: what differs, or why it failed (a scorer that failed too)."""
        failed = [name for name, score in self.scores.items() if not score]
        scored = f"; failed: {', '.join(failed)}" if failed else ""
        if self.status == "same":
            return f"same log{scored}"
        if self.error is not None and self.status in ("failed", "diverged"):
            return self.error
        where = f"agent {self.agent!r}, " if self.agent else ""
        keys = ", ".join(sorted(self.state_diff))
        state = f"changed {keys}" if keys else "same final state"
        return f"first differs at seq {self.seq} ({where}{self.field}); {state}{scored}"


def _add(total: float | None, value: float | None) -> float | None:
    return None if total is None or value is None else total + value


@dataclasses.dataclass(frozen=True)
class EvalReport:
    """An evaluation of recorded runs on the current graph (``graph.evaluate``).

    Attributes:
        id: The evaluation's id: its new runs are tagged ``eval=<id>``.
        graph: The graph evaluated.
        cases: One per recorded run, in the order they were given.
    """

    id: str
    graph: str | None
    cases: tuple[EvalCase, ...]

    @property
    def passed(self) -> bool:
        """Whether every case passed."""
        return all(case.passed for case in self.cases)

    def summary(self) -> dict[str, Any]:
        """Counts by status, passes and failures, and the cost old and new."""
        counts = dict.fromkeys(("same", "changed", "diverged", "failed"), 0)
        cost_old: float | None = 0.0
        cost_new: float | None = 0.0
        for case in self.cases:
            counts[case.status] += 1
            cost_old, cost_new = _add(cost_old, case.cost_usd[0]), _add(cost_new, case.cost_usd[1])
        passed = sum(case.passed for case in self.cases)
        return {
            "eval": self.id,
            "graph": self.graph,
            "cases": len(self.cases),
            **counts,
            "passed": passed,
            "failed_cases": len(self.cases) - passed,
            "model_calls": sum(case.model_calls for case in self.cases),
            "cost_usd": {"old": cost_old, "new": cost_new},
        }

    def to_json(self) -> str:
        """The report as JSON: its summary and every case."""
        data = {"summary": self.summary(), "cases": [case.to_dict() for case in self.cases]}
        return json.dumps(data, indent=2, default=str)

    def to_junit_xml(self, path: str | Path) -> None:
        """Write the report as JUnit XML (a test case per recorded run), for CI.

        The XML is always well formed: a character XML cannot hold (a control
        character in an error or a name) is written as its Python escape (backslash,
        ``x07``).
        """
        graph = _xml(self.graph or "")
        suite = ElementTree.Element(
            "testsuite",
            name=f"reactor eval {graph}".strip(),
            tests=str(len(self.cases)),
            failures=str(sum(not case.passed for case in self.cases if case.status != "failed")),
            errors=str(sum(case.status == "failed" for case in self.cases)),
        )
        for case in self.cases:
            seconds = (case.duration_ms[1] or 0.0) / 1000
            test = ElementTree.SubElement(
                suite,
                "testcase",
                classname=f"eval.{graph or 'graph'}",
                name=_xml(case.run_id),
                time=f"{seconds:.3f}",
            )
            if case.passed:
                continue
            kind = "error" if case.status == "failed" else "failure"
            problem = ElementTree.SubElement(
                test, kind, message=_xml(f"{case.status}: {case.describe()}")
            )
            problem.text = _xml(json.dumps(case.to_dict(), indent=2, default=str))
        ElementTree.ElementTree(suite).write(Path(path), encoding="utf-8", xml_declaration=True)

    def rows(self) -> list[tuple[str, ...]]:
        """The table's rows: run, status, passed, tokens, cost, what differs."""
        return [
            (
                case.run_id,
                case.status,
                "yes" if case.passed else "no",
                f"{case.tokens[0]} -> {case.tokens[1]}",
                f"{_money(case.cost_usd[0])} -> {_money(case.cost_usd[1])}",
                case.describe(),
            )
            for case in self.cases
        ]

    def __str__(self) -> str:
        heads = ("run", "status", "passed", "tokens", "cost", "what")
        lines = ["  ".join(heads)] + ["  ".join(row) for row in self.rows()]
        summary = self.summary()
        lines.append(
            f"{summary['cases']} cases: {summary['same']} same, {summary['changed']} changed, "
            f"{summary['diverged']} diverged, {summary['failed']} failed; "
            f"{summary['passed']} passed"
        )
        return "\n".join(lines)

    def __rich__(self) -> Any:
        """The report as a rich table (needs ``rich``: the ``cli`` extra)."""
        from rich.control import strip_control_codes
        from rich.table import Table
        from rich.text import Text

        title = strip_control_codes(f"eval {self.id} of {self.graph or 'the graph'}")
        table = Table(title=Text(title))
        for head in ("run", "status", "passed", "tokens", "cost"):
            table.add_column(head, no_wrap=True)
        table.add_column("what", overflow="fold", ratio=1)
        styles = {"same": "green", "changed": "yellow", "diverged": "magenta", "failed": "red"}
        for case, row in zip(self.cases, self.rows(), strict=True):
            cells = (Text(strip_control_codes(cell)) for cell in row)  # never markup
            table.add_row(*cells, style=None if case.passed else styles[case.status])
        return table


_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""A character XML 1.0 cannot hold (control characters, lone surrogates, U+FFFE/F)."""


def _xml(text: str) -> str:
    """``text`` with each character XML cannot hold written as its Python escape."""
    return _NOT_XML.sub(lambda found: found.group().encode("unicode_escape").decode(), text)


def _money(cost: float | None) -> str:
    return "?" if cost is None else f"${cost:.4f}"


def state_diff(old: Mapping[str, Any], new: Any) -> dict[str, tuple[Any, Any]]:
    """The keys whose values differ between two states (as JSON data), with both values."""
    new = to_jsonable(new)
    keys: Sequence[str] = list(dict.fromkeys([*old, *new]))
    return {key: (old.get(key), new.get(key)) for key in keys if old.get(key) != new.get(key)}


def spent(recording: Recording) -> tuple[int, float | None, float | None]:
    """A recording's tokens (input and output), cost and duration, from its signals."""
    tokens, cost, duration = 0, 0.0, None
    known = True
    for signal in recording.signals:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        if signal.name == PROVIDER_END:
            usage = payload.get("usage") or {}
            tokens += input_tokens(usage) + int(usage.get("output_tokens", 0))
            price = payload.get("cost_usd")
            if isinstance(price, int | float):
                cost += price
            else:
                known = False
        elif signal.name == HARNESS_END:
            taken = payload.get("duration_ms")
            duration = float(taken) if isinstance(taken, int | float) else None
    return tokens, (round(cost, 6) if known else None), duration
