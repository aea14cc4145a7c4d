"""Convert an edge-based flow, run it both ways, and compare.

    python -m examples.migration

The flow (``release_check.yaml``) probes three services and asks a model for a
verdict. ``run_edge_harness`` runs it with the old sequential semantics;
``harness_to_reactive`` turns it into a reactive graph, where the three probes run
at the same time. The node outputs must be the same; the wall time is not.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from migration import (
    NodeContext,
    NodeRegistry,
    check_sync,
    harness_to_reactive,
    run_edge_harness_sync,
    to_python,
)
from reactor import ProviderRequest, ScriptedProvider

FLOW = Path(__file__).with_name("release_check.yaml")


async def probe(input: dict[str, Any], ctx: NodeContext) -> dict[str, Any]:
    """ops.probe: ask a service for its health (simulated: waits ``ms``).

    A ``flaky`` service fails its first attempt; the node's retry policy handles it.
    """
    await asyncio.sleep(input["ms"] / 1000)
    if input.get("flaky") and ctx.attempt == 1:
        raise ConnectionError(f"{input['service']}: connection reset")
    return {"service": input["service"], "status": "ok", "attempts": ctx.attempt}


def registry() -> NodeRegistry:
    """The built-in node types plus this harness's own."""
    nodes = NodeRegistry()
    nodes.register("ops.probe", probe)
    return nodes


def verdict(request: ProviderRequest) -> str:
    """The offline model: go when every service reports ok."""
    healthy = request.prompt.count("=ok") == 3
    return "go: every service is healthy" if healthy else "no-go: a service is unhealthy"


def provider() -> ScriptedProvider:
    """Offline answers for the LLM node (keyed by its node id, in both executors)."""
    return ScriptedProvider({"verdict": verdict})


def main() -> int:
    started = time.perf_counter()
    old = run_edge_harness_sync(FLOW, registry=registry(), provider=provider())
    old_seconds = time.perf_counter() - started

    graph = harness_to_reactive(FLOW, registry=registry())
    started = time.perf_counter()
    result = graph.run_sync(provider=provider())
    new_seconds = time.perf_counter() - started
    new = result.state["outputs"]

    print(f"Edge-based executor: {old_seconds:.2f}s   reactive graph: {new_seconds:.2f}s")
    print(f"Verdict: {new['verdict']['text']}")
    print(f"Same node outputs: {old == new}\n")
    print(check_sync(FLOW, registry=registry(), provider=provider()).report())
    print("\nThe graph as Python (reactor migrate prints it all):")
    print("\n".join(to_python(FLOW, registry=registry()).splitlines()[:12]), "\n...")
    return 0 if old == new and result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
