"""ProgressReporter: one live line while a run is going, a summary when it ends."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from reactor._signals.names import (
    HARNESS_END,
    HARNESS_SIGNALS,
    HARNESS_START,
    PROVIDER_END,
    TEXT_DELTA,
    agent_event,
    parse_agent_event,
)
from reactor._signals.payloads import input_tokens
from reactor._signals.signal import Signal

__all__ = ["ProgressReporter"]


class ProgressReporter:
    """Shows a run's progress on a terminal: activations, agents running, tokens, cost.

    On a terminal the line is live (drawn by rich, with a spinner, when rich is
    installed; redrawn in place at most every ``interval`` seconds otherwise);
    elsewhere only the final summary line is written. A cost stays ``-`` while any
    call's price is unknown: an unknown price is not a zero.

    Args:
        stream: Where to draw (stderr by default).
        interval: Least seconds between redraws.
        live: Redraw while running (default: when ``stream`` is a terminal).
        rich: Draw with rich (default: when it is installed); ``False`` for plain text.
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
        self,
        stream: TextIO | None = None,
        *,
        interval: float = 0.1,
        live: bool | None = None,
        rich: bool | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self.live = live if live is not None else bool(getattr(self.stream, "isatty", bool)())
        self._rich = rich
        self._display: Any = None
        self._reset()

    def _reset(self) -> None:
        self.started = time.perf_counter()
        self.activations = 0
        self.tokens = 0
        self.cost: float | None = 0.0
        self.running: dict[str, int] = {}
        self._names = "idle"  # what the drawing thread reads: one string, swapped whole
        self._drawn = 0.0

    def on_signal(self, signal: Signal) -> None:
        """Update the counters, and the line if it is time."""
        name = signal.name
        if name == HARNESS_START:
            self._reset()
            if self.live:
                self._start_display()
        elif (parsed := parse_agent_event(name)) is not None:
            agent, event = parsed
            if event == "activated":
                self.activations += 1
                self.running[agent] = self.running.get(agent, 0) + 1
            elif self.running.get(agent):
                self.running[agent] -= 1
                if not self.running[agent]:
                    del self.running[agent]
            self._names = ", ".join(sorted(self.running)) or "idle"
        elif name == PROVIDER_END and isinstance(signal.payload, dict):
            usage = signal.payload.get("usage") or {}
            self.tokens += input_tokens(usage) + int(usage.get("output_tokens", 0))
            cost = signal.payload.get("cost_usd")
            if self.cost is not None and isinstance(cost, int | float):
                self.cost += cost
            else:
                self.cost = None
        if name == HARNESS_END:
            self.close()
            self._final(signal)
        elif self.live and time.perf_counter() - self._drawn >= self.interval:
            self._draw()

    def line(self) -> str:
        """The progress line as it would be drawn now."""
        elapsed = time.perf_counter() - self.started
        return (
            f"{self.activations} activation{'s' if self.activations != 1 else ''} · "
            f"running: {self._names} · {self.tokens:,} tokens · {self._cost()} · "
            f"{elapsed:.1f}s"
        )

    def close(self) -> None:
        """Stop the live display (the run ended, or was interrupted)."""
        display, self._display = self._display, None
        if display is not None:
            display.stop()

    def _cost(self) -> str:
        return "cost -" if self.cost is None else f"${self.cost:.4f}"

    def _start_display(self) -> None:
        self.close()
        if self._rich is False:
            return
        try:
            from rich.console import Console
            from rich.live import Live
        except ImportError:  # rich is the `cli` extra: without it, a plain line
            return
        console = Console(file=self.stream, force_terminal=True, highlight=False)
        self._display = Live(
            _Line(self),
            console=console,
            refresh_per_second=8,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._display.start()

    def _draw(self) -> None:
        self._drawn = time.perf_counter()
        if self._display is not None:
            self._display.refresh()
            return
        self.stream.write(f"\r\x1b[2K{self.line()}")
        self.stream.flush()

    def _final(self, signal: Signal) -> None:
        status = signal.payload.get("status", "?") if isinstance(signal.payload, dict) else "?"
        failures = signal.payload.get("failures") if isinstance(signal.payload, dict) else 0
        ok = status in ("completed", "ended") and not failures
        failed = f" ({failures} failed)" if isinstance(failures, int) and failures else ""
        prefix = "\r\x1b[2K" if self.live else ""
        elapsed = time.perf_counter() - self.started
        self.stream.write(
            f"{prefix}{'✓' if ok else '✗'} {status}{failed} in {elapsed:.1f}s · "
            f"{self.activations} activations · {self.tokens:,} tokens · {self._cost()}\n"
        )
        self.stream.flush()


class _Line:
    """What rich's live display redraws: a spinner and the reporter's line."""

    def __init__(self, reporter: ProgressReporter) -> None:
        from rich.spinner import Spinner

        self.reporter = reporter
        self.spinner = Spinner("dots", style="cyan")

    def __rich__(self) -> Any:
        from rich.table import Table

        grid = Table.grid(padding=(0, 1))
        grid.add_row(self.spinner, self.reporter.line())
        return grid
