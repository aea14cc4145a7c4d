"""Measurement helpers and the result table shared by every workload."""

from __future__ import annotations

import gc
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Row:
    """One line of the table: our figure, the baseline's, and how they compare."""

    workload: str
    ours: str
    baseline: str
    ratio: float
    ratio_text: str
    target: str
    met: bool | None  # None when the target is "report the figure"


def best_of(runs: int, measure: Callable[[], float]) -> float:
    """Run ``measure`` (returns seconds) ``runs`` times; return the fastest.

    The minimum is the figure least disturbed by the rest of the machine.
    """
    results = []
    for _ in range(runs):
        gc.collect()
        results.append(measure())
    return min(results)


def best_of_pair(
    runs: int, first: Callable[[], float], second: Callable[[], float]
) -> tuple[float, float]:
    """Measure two workloads alternately (ABAB...) and return each one's fastest run.

    Interleaving puts both sides under the same machine conditions, so their ratio is
    not skewed by a slow patch that hit only one of them.
    """
    a: list[float] = []
    b: list[float] = []
    for _ in range(runs):
        gc.collect()
        a.append(first())
        gc.collect()
        b.append(second())
    return min(a), min(b)


def timed(fn: Callable[[], object]) -> float:
    """Return the seconds ``fn()`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def rate(count: int, seconds: float) -> str:
    """Format a throughput."""
    return f"{count / seconds:,.0f}/s"


def micros(seconds: float) -> str:
    """Format a duration in microseconds."""
    return f"{seconds * 1e6:,.2f} µs"


def percentile(values: list[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie (``0.0`` when there are none)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def render(rows: list[Row], machine: str) -> str:
    """Render rows as a Markdown table."""
    header = "| workload | ours | baseline | ratio | target | met |\n|---|---|---|---|---|---|\n"
    lines = []
    for row in rows:
        met = "—" if row.met is None else ("yes" if row.met else "**no**")
        lines.append(
            f"| {row.workload} | {row.ours} | {row.baseline} | {row.ratio_text} "
            f"| {row.target} | {met} |"
        )
    return header + "\n".join(lines) + f"\n\nMachine: {machine}\n"


def write_section(path: Path, name: str, content: str) -> None:
    """Replace the section ``name`` of a Markdown file (between markers), or append it."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{content.rstrip()}\n{end}"
    text = path.read_text() if path.exists() else HEADER
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


HEADER = """# Benchmarks

Figures measured on this project's machine by `make bench` (the workloads of DESIGN.md
section 12, each beside its baseline in the same run) and `make bench-peers` (the same
workloads on peer frameworks). Re-run them to refresh this file.
"""


def peak_rss_kb() -> int:
    """This process's peak resident memory.

    ``VmHWM`` belongs to this process image; ``ru_maxrss`` can carry the high-water
    mark of the parent it was forked from, so it is only the fallback.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
