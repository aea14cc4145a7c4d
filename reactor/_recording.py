"""Recordings: a run's signal log as data you can inspect, compare, export and replay."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pydantic_core

from reactor._result import causal_chain, render_tree
from reactor._signal import Signal, json_fallback, to_jsonable

__all__ = ["Divergence", "Recording", "RunInfo", "canonical_order", "normalize_tags"]

VOLATILE = frozenset({"duration_ms"})
"""Payload keys that differ between identical runs (timings); ignored by ``diff``."""


def normalize_tags(tags: Mapping[str, str] | Iterable[str] | None) -> dict[str, str]:
    """Tags as a dict: ``["nightly"]`` is ``{"nightly": ""}``; ``{"env": "prod"}`` as is."""
    if not tags:
        return {}
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items()}
    if isinstance(tags, str):
        return {tags: ""}
    return {str(tag): "" for tag in tags}


@dataclasses.dataclass(frozen=True)
class RunInfo:
    """What a signal store knows about a run, for listings.

    Attributes:
        run_id: The run.
        graph: The graph's name.
        tags: User tags (``{"nightly": ""}``, ``{"env": "prod"}``).
        started_at: UNIX seconds.
        ended_at: UNIX seconds, once ``harness:end`` was recorded.
        status: The run's status from ``harness:end`` (``None`` while incomplete).
        reason: Why it ended.
        signals: How many signals are recorded.
        target: ``module:attribute`` of the graph, when known (the CLI records it).
    """

    run_id: str
    graph: str | None = None
    tags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    started_at: float = 0.0
    ended_at: float | None = None
    status: str | None = None
    reason: str | None = None
    signals: int = 0
    target: str | None = None

    @property
    def complete(self) -> bool:
        """Whether the run's ``harness:end`` was recorded."""
        return self.status is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**dataclasses.asdict(self), "tags": dict(self.tags), "complete": self.complete}


@dataclasses.dataclass(frozen=True)
class Divergence:
    """Where two runs first differ (see :meth:`Recording.diff`).

    Attributes:
        step: Position in the canonical (causal) order of both runs.
        path: Names of the signals leading to it (its causal chain).
        field: What differs: ``"name"``, ``"source"``, ``"payload.<key>..."``, or
            ``"length"`` when one run has more signals.
        left: The first run's signal there (``None`` if it ended earlier).
        right: The second run's signal there.
    """

    step: int
    path: tuple[str, ...]
    field: str
    left: Signal | None
    right: Signal | None

    def __str__(self) -> str:
        where = " > ".join(self.path) or "(start)"
        return (
            f"Runs diverge at step {self.step} ({where}), in {self.field}:\n"
            f"  left:  {_describe(self.left)}\n"
            f"  right: {_describe(self.right)}"
        )


def _describe(signal: Signal | None) -> str:
    if signal is None:
        return "(no signal: the run ended here)"
    payload = json.dumps(to_jsonable(signal.payload), sort_keys=True, default=str)
    if len(payload) > 300:
        payload = payload[:297] + "..."
    return f"{signal.name} [{signal.source}] {payload}"


@dataclasses.dataclass(frozen=True)
class Recording:
    """A recorded run: its signals (payloads as JSON data) and what is known about it.

    Attributes:
        info: Run metadata (:class:`RunInfo`).
        signals: Every recorded signal, in ``seq`` order.
        requests: Provider requests by ``request_hash`` (the rendered system prompt,
            messages, schema, tools and options), when the store keeps them.
    """

    info: RunInfo
    signals: tuple[Signal, ...]
    requests: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    @property
    def run_id(self) -> str:
        """The recorded run's id."""
        return self.info.run_id

    @property
    def complete(self) -> bool:
        """Whether ``harness:end`` was recorded; a killed run loads as incomplete."""
        return bool(self.signals) and self.signals[-1].name == "harness:end"

    @property
    def status(self) -> str | None:
        """The run's final status, or ``None`` if the recording is incomplete."""
        return self.signals[-1].payload.get("status") if self.complete else None

    @property
    def input(self) -> Any:
        """The run's input, from ``harness:start``."""
        start = self._start()
        return None if start is None else start.payload.get("input")

    @property
    def state(self) -> dict[str, Any]:
        """The last recorded state."""
        return self.state_at(self.signals[-1].seq if self.signals else 0)

    def _start(self) -> Signal | None:
        for signal in self.signals:
            if signal.name == "harness:start":
                return signal
        return None

    def state_at(self, seq: int) -> dict[str, Any]:
        """Rebuild the state as it was right after signal ``seq`` was emitted.

        Starts from the state in ``harness:start`` and applies the ``new`` value of
        every ``state:<key>:changed`` up to ``seq``.
        """
        start = self._start()
        state: dict[str, Any] = copy.deepcopy(start.payload.get("state") or {}) if start else {}
        for signal in self.signals:
            if signal.seq > seq:
                break
            name = signal.name
            if name.startswith("state:") and name.endswith(":changed"):
                payload = signal.payload
                state[payload["key"]] = copy.deepcopy(payload["new"])
        return state

    def select(self, pattern: str) -> list[Signal]:
        """Signals whose names match ``pattern``."""
        return [s for s in self.signals if s.matches(pattern)]

    def causal_chain(self, signal: Signal | str) -> list[Signal]:
        """The chain of causes of a signal (or id), root first."""
        return causal_chain(self.signals, signal)

    def tree(self, **options: Any) -> str:
        """The causal tree (see :meth:`reactor.RunResult.tree`)."""
        return render_tree(self.signals, **options)

    def diff(self, other: Recording, *, ignore: Iterable[str] = VOLATILE) -> Divergence | None:
        """Return the first divergence from ``other``, or ``None`` if they match.

        Signals are compared in causal order (each signal's consequences, in the order
        they happened, right after it), so two runs whose parallel agents merely
        interleaved differently still match. Ids, timestamps and run ids are not
        compared, nor payload keys in ``ignore`` (timings, by default).
        """
        ignored = frozenset(ignore)
        left, right = canonical_order(self.signals), canonical_order(other.signals)
        by_id = {s.id: s for s in self.signals}
        for step, (a, b) in enumerate(zip(left, right, strict=False)):
            field = _difference(a, b, ignored)
            if field is not None:
                path = tuple(s.name for s in _chain(a, by_id)[:-1])
                return Divergence(step, path, field, a, b)
        if len(left) != len(right):
            step = min(len(left), len(right))
            return Divergence(
                step,
                (),
                "length",
                left[step] if step < len(left) else None,
                right[step] if step < len(right) else None,
            )
        return None

    def to_jsonl(self) -> str:
        """One JSON object per line: a header (run info, requests), then each signal."""
        header = {"recording": self.info.to_dict(), "requests": dict(self.requests)}
        lines = [json.dumps(header, default=str)]
        lines.extend(
            pydantic_core.to_json(signal.to_dict(), fallback=json_fallback).decode()
            for signal in self.signals
        )
        return "\n".join(lines) + "\n"

    @classmethod
    def from_jsonl(cls, text: str) -> Recording:
        """Parse :meth:`to_jsonl` output (a file of signal lines alone works too).

        Raises:
            ValueError: A line is not JSON or not a serialized signal (with its number).
        """
        info: RunInfo | None = None
        requests: dict[str, Any] = {}
        signals: list[Signal] = []
        for number, line in enumerate(
            text.split("\n"), start=1
        ):  # not splitlines(): JSON may hold \x85 or \u2028
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if number == 1 and "recording" in data:
                    meta = dict(data["recording"])
                    meta.pop("complete", None)
                    info = RunInfo(**meta)
                    requests = dict(data.get("requests") or {})
                else:
                    signals.append(Signal.from_dict(data))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"Line {number} is not a recorded signal: {exc}") from exc
        if info is None:
            run_id = signals[0].run_id if signals and signals[0].run_id else "unknown"
            info = RunInfo(run_id=run_id, signals=len(signals))
        return cls(info=info, signals=tuple(signals), requests=requests)

    @classmethod
    def from_signals(
        cls,
        signals: Sequence[Signal],
        *,
        info: RunInfo | None = None,
        requests: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Recording:
        """Make a recording from live signals (payloads are normalized to JSON data)."""
        normalized = tuple(Signal.from_dict(s.to_dict()) for s in signals)
        run_id = normalized[0].run_id if normalized and normalized[0].run_id else "unknown"
        return cls(
            info=info or RunInfo(run_id=run_id, signals=len(normalized)),
            signals=normalized,
            requests=dict(requests or {}),
        )


def canonical_order(signals: Sequence[Signal]) -> list[Signal]:
    """Signals in causal order: depth-first over the causal tree, siblings by ``seq``.

    Within one signal's consequences the order is deterministic (they are emitted by
    its dispatch or by one activation in sequence), so this order does not depend on
    how concurrent activations interleaved.
    """
    ids = {s.id for s in signals}
    children: dict[str | None, list[Signal]] = {}
    for signal in signals:
        parent = signal.caused_by if signal.caused_by in ids else None
        children.setdefault(parent, []).append(signal)
    ordered: list[Signal] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        signal = stack.pop()
        ordered.append(signal)
        stack.extend(reversed(children.get(signal.id, [])))
    return ordered


def _chain(signal: Signal, by_id: Mapping[str, Signal]) -> list[Signal]:
    chain = [signal]
    while chain[-1].caused_by in by_id:
        chain.append(by_id[chain[-1].caused_by])  # type: ignore[index]
    chain.reverse()
    return chain


def _difference(a: Signal, b: Signal, ignored: frozenset[str]) -> str | None:
    if a.name != b.name:
        return "name"
    if a.source != b.source:
        return "source"
    return _payload_difference(to_jsonable(a.payload), to_jsonable(b.payload), "payload", ignored)


def _payload_difference(a: Any, b: Any, path: str, ignored: frozenset[str]) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in {**a, **b}:
            if key in ignored:
                continue
            if key not in a or key not in b:
                return f"{path}.{key}"
            found = _payload_difference(a[key], b[key], f"{path}.{key}", ignored)
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return path
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _payload_difference(x, y, f"{path}.{index}", ignored)
            if found:
                return found
        return None
    return None if a == b else path
