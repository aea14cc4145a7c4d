"""ProgressReporter: one live line while a run is going, a summary when it ends."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from reactor._names import (
    HARNESS_END,
    HARNESS_SIGNALS,
    HARNESS_START,
    PROVIDER_END,
    TEXT_DELTA,
    agent_event,
    parse_agent_event,
)
from reactor._signal import Signal

__all__ = ["ProgressReporter"]

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class ProgressReporter:
    """Shows a run's progress on a terminal: activations, agents running, tokens, cost.

    On a terminal the line is redrawn in place (at most every ``interval`` seconds);
    elsewhere only the final summary line is written.

    Args:
        stream: Where to draw (stderr by default).
        interval: Least seconds between redraws.
        live: Redraw while running (default: when ``stream`` is a terminal).
    """

    patterns = (
        HARNESS_SIGNALS,
        agent_event("*", "activated"),
        agent_event("*", "completed"),
        agent_event("*", "failed"),
        agent_event("*", "cancelled"),
        PROVIDER_END,
        TEXT_DELTA,
    )

    def __init__(
        self, stream: TextIO | None = None, *, interval: float = 0.1, live: bool | None = None
    ) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self.live = live if live is not None else bool(getattr(self.stream, "isatty", bool)())
        self._reset()

    def _reset(self) -> None:
        self.started = time.perf_counter()
        self.activations = 0
        self.tokens = 0
        self.cost = 0.0
        self.running: dict[str, int] = {}
        self._drawn = 0.0
        self._frame = 0

    def on_signal(self, signal: Signal) -> None:
        """Update the counters, and the line if it is time."""
        name = signal.name
        if name == HARNESS_START:
            self._reset()
        elif (parsed := parse_agent_event(name)) is not None:
            agent, event = parsed
            if event == "activated":
                self.activations += 1
                self.running[agent] = self.running.get(agent, 0) + 1
            elif self.running.get(agent):
                self.running[agent] -= 1
                if not self.running[agent]:
                    del self.running[agent]
        elif name == PROVIDER_END:
            usage = signal.payload.get("usage") or {}
            self.tokens += int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
            self.cost += float(signal.payload.get("cost_usd") or 0.0)
        if name == HARNESS_END:
            self._final(signal)
        elif self.live and time.perf_counter() - self._drawn >= self.interval:
            self._draw()

    def line(self) -> str:
        """The progress line as it would be drawn now."""
        elapsed = time.perf_counter() - self.started
        running = ", ".join(sorted(self.running)) or "idle"
        return (
            f"{self.activations} activation{'s' if self.activations != 1 else ''} · "
            f"running: {running} · {self.tokens:,} tokens · ${self.cost:.4f} · {elapsed:.1f}s"
        )

    def _draw(self) -> None:
        self._drawn = time.perf_counter()
        self._frame = (self._frame + 1) % len(_SPINNER)
        self.stream.write(f"\r\x1b[2K{_SPINNER[self._frame]} {self.line()}")
        self.stream.flush()

    def _final(self, signal: Signal) -> None:
        status = signal.payload.get("status", "?") if isinstance(signal.payload, dict) else "?"
        mark = "✓" if status in ("completed", "ended") else "✗"
        prefix = "\r\x1b[2K" if self.live else ""
        elapsed = time.perf_counter() - self.started
        self.stream.write(
            f"{prefix}{mark} {status} in {elapsed:.1f}s · {self.activations} activations · "
            f"{self.tokens:,} tokens · ${self.cost:.4f}\n"
        )
        self.stream.flush()
