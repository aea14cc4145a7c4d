"""The engine's workloads, run by whichever ``reactor`` the interpreter imports.

``make bench`` measures this checkout's engine and an older commit's side by side
(``bench/baseline.py``): each runs this script in a fresh interpreter, this checkout's
with its own ``reactor`` and the older one with ``PYTHONPATH`` naming a worktree of
that commit. The script imports nothing from ``bench`` (the worktree has its own) and
only public names both engines have, so the same graphs run on both.

``python bench/engine_probe.py WORKLOAD N [--tuned]`` prints one line of
``key=value`` figures:

* ``loop N``: ``ours_us`` per self-loop activation and ``base_us`` per step of bare
  asyncio (await a new task), measured alternately in this process, best of 5; and
  each one's CPU time (``*_cpu_us``, this process's: what other load on the machine
  does not inflate).
* ``fanout N``: ``ours_s`` wall for N agents each waiting 50 ms on one signal and
  ``base_s`` for ``asyncio.gather`` of N such sleeps, alternately, best of 5.
* ``many N``: ``cost_ms`` per small run over the 50 ms floor and ``kb`` per in-flight
  run, N concurrent 3-agent runs (two scripted 50 ms calls, an async join); ``cpu_ms``
  the process's CPU time per run.

The collector is Python's unless ``--tuned`` (then the engine's own tuning, whichever
name it has). An engine that tuned the collector by default (before Part III) is
untuned for the untuned figures, so both sides always run under the same settings.
"""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import reactor
from reactor import AgentContext, Reactive, ScriptedProvider, agent, reactive

LATENCY = 0.05
ROUNDS = 5


def _collector(tuned: bool) -> None:
    """Put the collector in the named setting, on old and new engines alike."""
    if tuned:
        tune = getattr(reactor, "tune_gc", None) or reactor.tune_collector
        tune()
    else:
        untune = getattr(reactor, "untune_gc", None) or reactor.untune_collector
        untune()


async def _tick(ctx: AgentContext[Any]) -> None:
    return None


def _self_loop_graph(steps: int) -> Reactive:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return reactive(
            {
                "tick": agent(
                    run=_tick,
                    activate_on=["harness:start", "tick"],
                    emits=["tick"],
                    max_activations=steps,
                )
            },
            max_depth=None,
            max_activations=None,
        )


async def _self_loop(steps: int) -> float:
    graph = _self_loop_graph(steps)
    start = time.perf_counter()
    result = await graph.run()
    elapsed = time.perf_counter() - start
    assert result.metrics.activations == steps, result.status
    return elapsed


async def _bare_loop(steps: int) -> float:
    async def step(i: int) -> int:
        return i + 1

    start = time.perf_counter()
    i = 0
    while i < steps:
        i = await asyncio.create_task(step(i))
    return time.perf_counter() - start


def _fanout_graph(agents: int) -> Reactive:
    async def wait(ctx: AgentContext[Any]) -> None:
        await asyncio.sleep(LATENCY)

    return reactive({f"worker{i}": agent(run=wait) for i in range(agents)}, max_activations=None)


async def _fanout(graph: Reactive, agents: int) -> float:
    start = time.perf_counter()
    result = await graph.run()
    elapsed = time.perf_counter() - start
    assert result.metrics.activations == agents, result.status
    return elapsed


async def _gather(agents: int) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(asyncio.sleep(LATENCY) for _ in range(agents)))
    return time.perf_counter() - start


async def _join(ctx: AgentContext[Any]) -> Any:
    return ctx.state.a + ctx.state.b


def _small_graph() -> Reactive:
    return reactive(
        {
            "a": agent(prompt="a", updates="a"),
            "b": agent(prompt="b", updates="b"),
            "join": agent(
                run=_join,
                activate_on=["state:a:changed", "state:b:changed"],
                when="state.a is not none and state.b is not none",
                updates="joined",
            ),
        },
        state={"a": None, "b": None, "joined": None},
        name="small",
    )


async def _many(graph: Reactive, n: int) -> float:
    provider = ScriptedProvider(default=lambda request: request.agent, latency=LATENCY)
    start = time.perf_counter()
    results = await asyncio.gather(*(graph.run(provider=provider) for _ in range(n)))
    elapsed = time.perf_counter() - start
    assert all(result.state["joined"] == "ab" for result in results)
    return elapsed


def _rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() // 1024


def _peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _alternate(first: Any, second: Any) -> tuple[float, float, float, float]:
    """Each side's best wall time and best CPU time (this process's), alternately."""
    a: list[tuple[float, float]] = []
    b: list[tuple[float, float]] = []
    for _ in range(ROUNDS):
        for side, measure in ((a, first), (b, second)):
            gc.collect()
            cpu = time.process_time()
            wall = asyncio.run(measure())
            side.append((wall, time.process_time() - cpu))
    return min(w for w, _ in a), min(w for w, _ in b), min(c for _, c in a), min(c for _, c in b)


def main(argv: list[str]) -> str:
    workload, n, tuned = argv[0], int(argv[1]), "--tuned" in argv[2:]
    _collector(tuned)
    where = Path(reactor.__file__).resolve().parent.parent
    if workload == "loop":
        base, ours, base_cpu, ours_cpu = _alternate(lambda: _bare_loop(n), lambda: _self_loop(n))
        figures = (
            f"ours_us={ours / n * 1e6:.4f} base_us={base / n * 1e6:.4f} "
            f"ours_cpu_us={ours_cpu / n * 1e6:.4f} base_cpu_us={base_cpu / n * 1e6:.4f}"
        )
    elif workload == "fanout":
        graph = _fanout_graph(n)
        base, ours, _, _ = _alternate(lambda: _gather(n), lambda: _fanout(graph, n))
        figures = f"ours_s={ours:.5f} base_s={base:.5f}"
    elif workload == "many":
        graph = _small_graph()
        asyncio.run(_many(graph, 10))  # warm: imports, caches
        gc.collect()
        before, cpu = _rss_kb(), time.process_time()
        wall = asyncio.run(_many(graph, n))
        cpu = time.process_time() - cpu
        kb = max(0, _peak_rss_kb() - before) / n
        figures = (
            f"cost_ms={(wall - LATENCY) / n * 1000:.5f} kb={kb:.3f} cpu_ms={cpu / n * 1000:.5f}"
        )
    else:
        raise SystemExit(f"unknown workload {workload!r}: use loop, fanout or many")
    return f"{figures} reactor={where} pid={os.getpid()}"


if __name__ == "__main__":
    print(main(sys.argv[1:]))
