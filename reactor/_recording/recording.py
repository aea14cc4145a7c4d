"""Recordings: a run's signal log loaded from a signal store, to inspect, compare and replay."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from reactor._recording.info import RunInfo
from reactor._recording.log import SignalLog, latest_snapshot
from reactor._signals.names import HARNESS_END, HARNESS_START
from reactor._signals.signal import Signal

__all__ = ["Recording"]


@dataclasses.dataclass(frozen=True, repr=False)
class Recording(SignalLog):
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

    def __repr__(self) -> str:
        return (
            f"<Recording {self.run_id} {self.status or 'incomplete'}: {len(self.signals)} signals>"
        )

    @property
    def run_id(self) -> str:
        """The recorded run's id."""
        return self.info.run_id

    @property
    def run_info(self) -> RunInfo:
        """What the store knows about the run (the same as :attr:`info`)."""
        return self.info

    @property
    def complete(self) -> bool:
        """Whether ``harness:end`` was recorded; a killed run loads as incomplete."""
        return bool(self.signals) and self.signals[-1].name == HARNESS_END

    @property
    def status(self) -> str | None:
        """The run's final status, or ``None`` if the recording is incomplete."""
        if not self.complete:
            return None
        payload = self.signals[-1].payload
        status = payload.get("status") if isinstance(payload, Mapping) else None
        return str(status) if status is not None else None

    @property
    def input(self) -> Any:
        """The run's input, from ``harness:start`` (or a snapshot, in a log's tail)."""
        start = self._start() or latest_snapshot(self.signals)
        payload = None if start is None else start.payload
        return payload.get("input") if isinstance(payload, Mapping) else None

    @property
    def state(self) -> dict[str, Any]:
        """The last recorded state."""
        return self.state_at(self.signals[-1].seq if self.signals else 0)

    def _start(self) -> Signal | None:
        for signal in self.signals:
            if signal.name == HARNESS_START:
                return signal
        return None

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
