"""Collecting and checking the signals of runs, for tests."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence

from reactor._engine.runspec import watching
from reactor._recording.log import SignalLog
from reactor._signals.names import DELTAS
from reactor._signals.patterns import Pattern, compile_pattern
from reactor._signals.signal import Signal

__all__ = ["CapturedSignals", "assert_signals", "capture_signals", "signal_names"]


class CapturedSignals:
    """Every signal of the runs started inside a :func:`capture_signals` block.

    Attributes:
        signals: All of them, in the order they were dispatched (runs interleaved).
    """

    def __init__(self) -> None:
        self.signals: list[Signal] = []

    def append(self, signal: Signal) -> None:
        """Collect one signal (the runs call it)."""
        self.signals.append(signal)

    @property
    def run_ids(self) -> list[str]:
        """The runs seen, in the order they started."""
        return list(dict.fromkeys(s.run_id for s in self.signals if s.run_id is not None))

    def of_run(self, run_id: str) -> list[Signal]:
        """The signals of one run, in order."""
        return [s for s in self.signals if s.run_id == run_id]

    def select(self, pattern: Pattern) -> list[Signal]:
        """The signals whose names match ``pattern``, in order."""
        matcher = compile_pattern(pattern)
        return [s for s in self.signals if matcher(s.name)]

    def names(self, *, deltas: bool = False) -> list[str]:
        """Signal names in order, without text and thinking deltas unless asked."""
        return signal_names(self.signals, deltas=deltas)

    def __len__(self) -> int:
        return len(self.signals)

    def __iter__(self) -> Iterator[Signal]:
        return iter(self.signals)

    def __repr__(self) -> str:
        return f"<CapturedSignals {len(self.signals)} signals, {len(self.run_ids)} runs>"


@contextlib.contextmanager
def capture_signals() -> Iterator[CapturedSignals]:
    """Collect every signal of the runs started inside the block, tasks included.

    ::

        with capture_signals() as captured:
            await graph.run(provider=p)
        assert captured.select("agent:*:failed") == []
    """
    captured = CapturedSignals()
    with watching(captured.append):
        yield captured


def signal_names(log: SignalLog | Iterable[Signal], *, deltas: bool = False) -> list[str]:
    """The names of a run's signals in order, leaving out deltas unless asked."""
    signals = log.signals if isinstance(log, SignalLog) else log
    return [s.name for s in signals if deltas or s.name not in DELTAS]


def assert_signals(log: SignalLog | Iterable[Signal], patterns: Sequence[Pattern]) -> None:
    """Assert that signals matching ``patterns`` happened in this order.

    Other signals may come between them: ``["harness:start", "agent:b:completed",
    "harness:end"]`` checks the order of three milestones, not the whole log.

    Raises:
        AssertionError: Naming the first pattern not found after the previous ones,
            and listing the signal names of the log.
    """
    signals = list(log.signals if isinstance(log, SignalLog) else log)
    position = 0
    for index, pattern in enumerate(patterns):
        matcher = compile_pattern(pattern)
        while position < len(signals) and not matcher(signals[position].name):
            position += 1
        if position == len(signals):
            after = f" after {patterns[index - 1]!r}" if index else ""
            names = "\n".join(f"  {s.seq:>4} {s.name}" for s in signals if s.name not in DELTAS)
            raise AssertionError(
                f"No signal matching {pattern!r}{after} (pattern {index + 1} of "
                f"{len(patterns)}). The signals were:\n{names}"
            )
        position += 1
