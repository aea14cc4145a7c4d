"""A migrated flow's phase: the ``flow`` agent, whose activation is ``Run Flow``.

The old kernel ran a flow inside ``phase("Run Flow")`` and each node inside
``task("node:<id>")``. In the reactive graph the phase is one agent's activation: it
opens on ``harness:start``, the nodes without predecessors start on its
``phase:start`` (so everything the flow does hangs under the phase in the causal
tree), and it completes once every top-level node has resolved and no loop waits to
re-open one, read from the ledger (:mod:`migration._reactive.ledger`) as it changes. A run
that stops before (a failure, a timeout, an abort) fails the phase.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from reactor import Agent, AgentContext, agent
from reactor._signals.names import HARNESS_START, span_event, state_event
from reactor._signals.signal import Signal

__all__ = ["FLOW_AGENT", "FLOW_PHASE", "PHASE_START", "phase_agent", "starts_flow"]

FLOW_AGENT = "flow"
"""The agent that runs a flow's phase (no node can be called ``flow``: it is reserved)."""
FLOW_PHASE = "Run Flow"
"""The name of the phase a flow runs in, as the old kernel named it."""
PHASE_START = span_event("phase", "start")


def phase_agent(flow: str, top_level: Sequence[str]) -> Agent:
    """The ``flow`` agent of flow ``flow``, whose top-level nodes are ``top_level``."""

    def resolved(ledger: Mapping[str, Any]) -> bool:
        done = ledger["done"]
        return not ledger["pending"] and not ledger["looped"] and all(n in done for n in top_level)

    async def run_flow(ctx: AgentContext) -> None:
        finished = asyncio.Event()

        def check(signal: object = None) -> None:
            if resolved(ctx.store.snapshot()["flow"]):
                finished.set()

        subscription = ctx.store.subscribe(state_event("flow", "changed"), check)
        try:
            async with ctx.phase(FLOW_PHASE):
                check()
                await finished.wait()
        finally:
            subscription.cancel()

    run_flow.__qualname__ = f"phase[{flow}]"
    return agent(name=FLOW_AGENT, run=run_flow, activate_on=[HARNESS_START])


def starts_flow(signal: Signal, *, phased: bool) -> bool:
    """Whether ``signal`` starts a flow: its phase's start, or (no phase) the run's."""
    if signal.name == HARNESS_START:
        return not phased
    payload = signal.payload
    return (
        phased
        and signal.name == PHASE_START
        and isinstance(payload, Mapping)
        and payload.get("name") == FLOW_PHASE
        and payload.get("agent") == FLOW_AGENT
    )
