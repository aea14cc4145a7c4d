"""Peer comparison: LlamaIndex Workflows and LangGraph beside reactor, in one run.

``make bench-peers`` installs the peers in their own virtualenv (``.venv-peers``, from
``bench/peers/requirements.txt``), then runs ``python -m bench.compare --python
.venv-peers/bin/python``: each peer workload in a subprocess of that interpreter, and
reactor's same workloads here, and writes the table into ``BENCHMARKS.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from bench._runner import best_of_pair, write_section
from bench.many import in_subprocess
from bench.runtime import asyncio_loop, fanout, fanout_graph, gather_sleeps, self_loop

PEERS = Path(__file__).parent / "peers"
STEPS = 10_000
AGENTS = 1_000
LATENCY = 0.05
MANY = 5_000
TUNED_PEER = (
    "import gc, runpy, sys; gc.set_threshold(700, 10, 1000); "
    "sys.argv = [{script!r}, 'many', '{n}']; runpy.run_path({script!r})"
)


def peer(python: str, script: str, *args: str) -> float:
    """Run one peer workload and return its figure (µs per step, or wall seconds)."""
    out = subprocess.run(
        [python, str(PEERS / script), *args], capture_output=True, text=True, check=True
    ).stdout
    found = re.search(r"(?:per_step_us|wall_s)=([0-9.]+)", out)
    if found is None:
        raise RuntimeError(f"{script} {' '.join(args)} printed no figure: {out!r}")
    return float(found.group(1))


def best(runs: int, measure: Callable[[], float]) -> float:
    return min(measure() for _ in range(runs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("--python", required=True, help="the peers' interpreter")
    parser.add_argument("--write", default="BENCHMARKS.md", help="file to update")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    args = parser.parse_args(argv)
    steps, agents = (2_000, 200) if args.quick else (STEPS, AGENTS)
    py = args.python

    print("peers: self-loop ...", file=sys.stderr, flush=True)
    llama_loop = best(2, lambda: peer(py, "llama_wf.py", "loop", str(steps)))
    graph_loop = best(2, lambda: peer(py, "langgraph_wf.py", "loop", str(steps)))
    # Ours and bare asyncio alternately, so that a slow patch of the machine hits both.
    base_loop, ours_loop = (
        seconds / steps * 1e6
        for seconds in best_of_pair(
            3, lambda: asyncio.run(asyncio_loop(steps)), lambda: asyncio.run(self_loop(steps))
        )
    )

    print("peers: fan-out ...", file=sys.stderr, flush=True)
    llama_fan = best(1, lambda: peer(py, "llama_wf.py", "fanout", str(agents), str(LATENCY)))
    graph_fan = best(2, lambda: peer(py, "langgraph_wf.py", "fanout", str(agents), str(LATENCY)))
    graph = fanout_graph(agents, LATENCY)
    base_fan, ours_fan = best_of_pair(
        3,
        lambda: asyncio.run(gather_sleeps(agents, LATENCY)),
        lambda: asyncio.run(fanout(graph, agents)),
    )

    print("peers: many small runs ...", file=sys.stderr, flush=True)
    many = MANY // 5 if args.quick else MANY
    script = str(PEERS / "langgraph_wf.py")
    langgraph = [py, script, "many", str(many)]
    # LangGraph under the thresholds reactor.tune_gc() sets while busy, for the whole process.
    tuned_langgraph = [py, "-c", TUNED_PEER.format(script=script, n=many)]
    rounds = [
        (
            in_subprocess(many, langgraph),
            in_subprocess(many),
            in_subprocess(many, tuned_langgraph),
            in_subprocess(many, tuned=True),
        )
        for _ in range(2 if args.quick else 5)  # interleaved: a slow patch hits all four
    ]
    graph_untuned, ours_untuned, graph_tuned, ours_tuned = (
        min(column) for column in zip(*rounds, strict=True)
    )

    loop_met = llama_loop / ours_loop >= 15 and graph_loop / ours_loop >= 15
    fan_met = ours_fan / base_fan <= 1.3
    untuned_met = graph_untuned[0] / ours_untuned[0] >= 10
    tuned_met = graph_tuned[0] / ours_tuned[0] >= 10
    many_rows = [
        (
            f"many small runs: {many:,} concurrent 3-agent runs (cost per run over the 50 ms "
            "floor; memory per run), both untuned (Python's collector settings, as each "
            "ships: reactor leaves the collector alone)",
            graph_untuned,
            ours_untuned,
            untuned_met,
        ),
        (
            "the same, both tuned (LangGraph under `gc.set_threshold(700, 10, 1000)`; "
            "reactor after `reactor.tune_gc()`, as `reactor serve` and `reactor worker` do)",
            graph_tuned,
            ours_tuned,
            tuned_met,
        ),
    ]
    table = "\n".join(
        [
            "| workload | LlamaIndex Workflows | LangGraph | reactor | bare asyncio "
            "| peer / reactor | target | met |",
            "|---|---|---|---|---|---|---|---|",
            f"| self-loop, {steps:,} steps (per step) | {llama_loop:,.1f} µs | "
            f"{graph_loop:,.1f} µs | {ours_loop:,.1f} µs | {base_loop:,.1f} µs | "
            f"{llama_loop / ours_loop:,.0f}x / {graph_loop / ours_loop:,.0f}x | "
            f">= 15x lower than both | {'yes' if loop_met else '**no**'} |",
            f"| fan-out, {agents:,} x {LATENCY * 1000:.0f} ms (wall) | {llama_fan:,.3f} s | "
            f"{graph_fan:,.3f} s | {ours_fan:,.3f} s | {base_fan:,.3f} s | "
            f"{llama_fan / ours_fan:,.1f}x / {graph_fan / ours_fan:,.1f}x | "
            f"reactor <= 1.3x asyncio ({ours_fan / base_fan:.2f}x) | "
            f"{'yes' if fan_met else '**no**'} |",
            *(
                f"| {what} | — | {peer[0]:.3f} ms; {peer[1]:.0f} KB "
                f"| {ours[0]:.3f} ms; {ours[1]:.0f} KB | — | — / {peer[0] / ours[0]:.1f}x "
                "| >= 10x lower than LangGraph's "
                f"| {'yes' if met else '**no**'} |"
                for what, peer, ours, met in many_rows
            ),
        ]
    )
    versions = subprocess.run(
        [py, "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    pins = [
        line
        for line in versions.splitlines()
        if line.startswith(("llama-index-workflows", "langgraph=="))
    ]
    section = (
        "## Peer frameworks (`make bench-peers`)\n\n"
        "The same workloads written for each framework (`bench/peers/`), run in the same "
        f"session ({', '.join(pins)}). Ratios are the peer's figure over reactor's.\n\n"
        + table
        + "\n"
    )
    print(section)
    write_section(Path(args.write), "peers", section)
    return 0 if loop_met and fan_met and untuned_met and tuned_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
