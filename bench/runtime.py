"""Runtime workloads: self-loop activations, fan-out, and an LLM-shaped activation."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Callable

from pydantic import BaseModel

from bench._runner import Row, best_of_pair, micros
from reactor import (
    AgentContext,
    CycleWarning,
    ProviderRequest,
    Reactive,
    ScriptedProvider,
    agent,
    reactive,
)

LOOP_STEPS = 10_000
FANOUT_AGENTS = 1_000
FANOUT_LATENCY = 0.05
LLM_STEPS = 2_000
LLM_OVERHEAD_TARGET = 30e-6
SYNC_HOP_TARGET = 200e-6


def _quietly(build: Callable[[], Reactive]) -> Reactive:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CycleWarning)
        return build()


async def _tick(ctx: AgentContext) -> None:
    return None


def _tick_blocking(ctx: AgentContext) -> None:
    return None


def self_loop_graph(steps: int, *, sync: bool = False) -> Reactive:
    """One handler agent re-activating itself through the signal it emits.

    The handler is async (it stays on the loop); ``sync=True`` makes it a plain
    ``def``, which runs in a worker thread: the hop's cost is the difference.
    """
    return _quietly(
        lambda: reactive(
            {
                "tick": agent(
                    run=_tick_blocking if sync else _tick,
                    activate_on=["harness:start", "tick"],
                    emits=["tick"],
                    max_activations=steps,
                )
            },
            max_depth=None,
            max_activations=None,
        )
    )


async def self_loop(steps: int, *, sync: bool = False) -> float:
    graph = self_loop_graph(steps, sync=sync)
    start = time.perf_counter()
    result = await graph.run()
    elapsed = time.perf_counter() - start
    assert result.metrics.activations == steps, result.status
    return elapsed


async def asyncio_loop(steps: int) -> float:
    async def step(i: int) -> int:
        return i + 1

    start = time.perf_counter()
    i = 0
    while i < steps:
        i = await asyncio.create_task(step(i))
    return time.perf_counter() - start


def fanout_graph(agents: int, latency: float) -> Reactive:
    async def wait(ctx: AgentContext) -> None:
        await asyncio.sleep(latency)

    return reactive({f"worker{i}": agent(run=wait) for i in range(agents)}, max_activations=None)


async def fanout(graph: Reactive, agents: int) -> float:
    start = time.perf_counter()
    result = await graph.run()
    elapsed = time.perf_counter() - start
    assert result.metrics.activations == agents, result.status
    return elapsed


async def gather_sleeps(agents: int, latency: float) -> float:
    start = time.perf_counter()
    await asyncio.gather(*(asyncio.sleep(latency) for _ in range(agents)))
    return time.perf_counter() - start


class Quote(BaseModel):
    symbol: str
    price: float
    step: int


class Desk(BaseModel):
    symbol: str = "AAPL"
    quote: Quote | None = None


def llm_graph(steps: int) -> tuple[Reactive, ScriptedProvider]:
    """An LLM agent per step: template, scripted answer, output model, update, emit."""

    def answer(request: ProviderRequest) -> Quote:
        return Quote(symbol="AAPL", price=101.5, step=len(request.prompt))

    provider = ScriptedProvider({"quoter": answer})
    graph = _quietly(
        lambda: reactive(
            {
                "quoter": agent(
                    prompt="Quote {{ state.symbol }}; last {{ state.quote.price if state.quote "
                    "else 'none' }} ({{ signal.name }})",
                    activate_on=["harness:start", "quote:ready"],
                    emits=["quote:ready"],
                    output=Quote,
                    updates="quote",
                    max_activations=steps,
                )
            },
            state=Desk,
            max_depth=None,
            max_activations=None,
        )
    )
    return graph, provider


async def llm_loop(steps: int) -> float:
    graph, provider = llm_graph(steps)
    start = time.perf_counter()
    result = await graph.run(provider=provider)
    elapsed = time.perf_counter() - start
    assert result.metrics.activations == steps, (result.status, result.error)
    return elapsed


def run(runs: int, scale: float) -> list[Row]:
    steps = max(500, int(LOOP_STEPS * scale))
    base, ours = best_of_pair(
        runs,
        lambda: asyncio.run(asyncio_loop(steps)),
        lambda: asyncio.run(self_loop(steps)),
    )
    loop_ratio = ours / base

    sync_steps = max(200, steps // 5)
    on_loop, in_threads = best_of_pair(
        runs,
        lambda: asyncio.run(self_loop(sync_steps)),
        lambda: asyncio.run(self_loop(sync_steps, sync=True)),
    )
    hop = (in_threads - on_loop) / sync_steps

    agents = max(100, int(FANOUT_AGENTS * scale))
    graph = fanout_graph(agents, FANOUT_LATENCY)
    gathered, fanned = best_of_pair(
        runs,
        lambda: asyncio.run(gather_sleeps(agents, FANOUT_LATENCY)),
        lambda: asyncio.run(fanout(graph, agents)),
    )
    fan_ratio = fanned / gathered

    llm_steps = max(200, int(LLM_STEPS * scale))
    plain, llm = best_of_pair(
        runs,
        lambda: asyncio.run(self_loop(llm_steps)),
        lambda: asyncio.run(llm_loop(llm_steps)),
    )
    per_plain, per_llm = plain / llm_steps, llm / llm_steps
    return [
        Row(
            workload=f"self-loop: one run= agent (async) re-activating itself {steps:,} times",
            ours=f"{micros(ours / steps)} per activation",
            baseline=f"{micros(base / steps)} per step (await a new task)",
            ratio=loop_ratio,
            ratio_text=f"{loop_ratio:.2f}x",
            target="<= 4x",
            met=loop_ratio <= 4.0,
        ),
        Row(
            workload=f"self-loop with a sync handler (def, in a worker thread) {sync_steps:,} "
            "times",
            ours=f"{micros(in_threads / sync_steps)} per activation",
            baseline=f"{micros(on_loop / sync_steps)} per activation (async handler)",
            ratio=in_threads / on_loop,
            ratio_text=f"+{micros(hop)} per thread hop",
            target=f"<= {micros(SYNC_HOP_TARGET)} per hop",
            met=hop <= SYNC_HOP_TARGET,
        ),
        Row(
            workload=f"fan-out: {agents:,} agents on one signal, each waiting 50 ms",
            ours=f"{fanned * 1000:,.0f} ms wall",
            baseline=f"{gathered * 1000:,.0f} ms (asyncio.gather of sleeps)",
            ratio=fan_ratio,
            ratio_text=f"{fan_ratio:.2f}x",
            target="<= 1.3x",
            met=fan_ratio <= 1.3,
        ),
        Row(
            workload="LLM-shaped activation (template + scripted provider + output model "
            "+ store update + emit)",
            ours=f"{micros(per_llm)} per activation",
            baseline=f"{micros(per_plain)} per self-loop activation",
            ratio=per_llm / per_plain,
            ratio_text=f"+{micros(per_llm - per_plain)} overhead",
            target=f"<= {micros(LLM_OVERHEAD_TARGET)} overhead",
            met=per_llm - per_plain <= LLM_OVERHEAD_TARGET,
        ),
    ]
