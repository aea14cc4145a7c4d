"""Run the benchmarks: ``python -m bench [--quick] [--only NAME ...]``."""

from __future__ import annotations

import argparse
import platform
import sys
from datetime import date
from pathlib import Path

from bench import (
    authority,
    bus,
    chains,
    desk,
    evaluation,
    feed,
    limits,
    longlife,
    many,
    reactions,
    recording,
    resume,
    runtime,
    serve,
    stores,
    stream,
    telemetry,
    workers,
    writes,
)
from bench._runner import Row, render, write_section
from bench.baseline import LABEL, older_bench, older_engine

WORKLOADS = {
    "bus": bus.run,
    "stores": stores.run,
    # this checkout's engine beside the commit before Part III's (bench/baseline.py)
    "engine": runtime.side_by_side,
    "runtime": runtime.in_process,
    "telemetry": telemetry.run,
    "limits": limits.run,
    "recording": recording.run,
    "resume": resume.run,
    "longlife": longlife.run,
    "many": many.run,
    "reactions": reactions.run,
    "feed": feed.run,
    "writes": writes.run,
    "serve": serve.run,
    "authority": authority.run,
    "desk": desk.run,
    "stream": stream.run,
    "workers": workers.run,
    "evaluation": evaluation.run,
    "chain": chains.run,
}


def machine() -> str:
    """Describe where the figures were measured."""
    import os

    return (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    parser.add_argument("--only", nargs="*", choices=sorted(WORKLOADS), help="workloads to run")
    parser.add_argument("--write", metavar="FILE", help="also write the table into FILE")
    parser.add_argument(
        "--section",
        default="main",
        help="the section of FILE to write (default: main, the whole `make bench` table)",
    )
    parser.add_argument(
        "--beside",
        action="store_true",
        help="then run the same workloads at the commit before Part V's engine work "
        "(its own bench, in a temporary worktree) and show its table beside",
    )
    args = parser.parse_args(argv)
    runs, scale = (2, 0.1) if args.quick else (5, 1.0)
    rows: list[Row] = []
    for name in args.only or list(WORKLOADS):
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows.extend(WORKLOADS[name](runs, scale))
    table = render(rows, machine())
    if args.beside:
        table += "\n\n" + _beside(
            [name for name in args.only or WORKLOADS if name != "engine"], quick=args.quick
        )
    print(table)
    if args.write:
        command = (
            "`make bench`"
            if args.section == "main"
            else f"`python -m bench {' '.join(argv if argv is not None else sys.argv[1:])}`"
        )
        section = (
            f"## Workloads ({command}, {date.today().isoformat()})\n\n"
            "Each workload is measured beside its baseline in the same run; "
            "the best of several runs is kept.\n\n" + table
        )
        write_section(Path(args.write), args.section, section)
    return 0 if all(row.met is not False for row in rows) else 1


def _beside(names: list[str], *, quick: bool) -> str:
    """The older commit's table for ``names``, measured now (the engine rows compare already)."""
    print(f"running {', '.join(names)} at {LABEL} ...", file=sys.stderr, flush=True)
    with older_engine() as tree:
        if isinstance(tree, str):
            return f"The same workloads at {LABEL}: not measured, {tree}."
        return f"The same workloads at {LABEL}, in the same session:\n\n" + older_bench(
            tree, names, quick=quick
        )


if __name__ == "__main__":
    raise SystemExit(main())
