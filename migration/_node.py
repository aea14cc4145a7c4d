"""Settling one node, the same way in both executors.

Given whether the node's incoming edges let it run, :func:`settle` applies the
node's ``when``, runs its work under its policy (retries with backoff, a timeout per
attempt, ``continueOnError``) and returns the output to record: the node's output as
JSON data, a skip marker, or a failure marker. After it, :func:`resolve_edges` says
which outgoing edges fire and which loop edges want to re-run their target.
Scheduling (which node settles when) is the executors' business, not this module's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import pydantic_core

from migration._bindings import evaluate_when, resolve
from migration._errors import FlowLoopError, NodeTimeoutError
from migration._registry import NodeContext, NodeRegistry
from migration._spec import EdgeSpec, NodeSpec
from migration._topology import Topology
from reactor.typing import Provider

__all__ = [
    "Outcome",
    "Skip",
    "failure_marker",
    "jsonable",
    "registry_work",
    "resolve_edges",
    "settle",
    "skip_marker",
]

Work = Callable[[int], Awaitable[Any]]
"""One attempt at a node's work: ``work(attempt) -> output``."""


class Skip(Exception):
    """Raised by a node's work when the node's own condition says it must not run."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a node settled.

    Attributes:
        output: What to record under ``outputs.<node>``: the output, or a marker.
        status: ``completed``, ``skipped`` or ``failed``.
        error: The last error of a failed node.
        stop: Whether the flow must stop (a failure under ``failFast`` without
            ``continueOnError``).
    """

    output: Any
    status: Literal["completed", "skipped", "failed"]
    error: BaseException | None = None
    stop: bool = False


def skip_marker(reason: str) -> dict[str, Any]:
    """The output of a skipped node: ``{"skipped": True, "reason": reason}``."""
    return {"skipped": True, "reason": reason}


def failure_marker(error: BaseException, attempts: int) -> dict[str, Any]:
    """The output of a failed node that the flow tolerates."""
    message = str(error) or type(error).__name__
    return {"failed": True, "error": {"message": message}, "attempts": attempts}


def jsonable(value: Any) -> Any:
    """A node output as JSON data (as edge-based flows recorded outputs)."""
    return pydantic_core.to_jsonable_python(value, fallback=repr)


def registry_work(
    node: NodeSpec,
    registry: NodeRegistry,
    *,
    flow_input: Mapping[str, Any],
    bindings: Mapping[str, Any],
    provider: Provider | None,
) -> Work:
    """The work of a registry-typed node: bind its input, then call its type."""

    async def work(attempt: int) -> Any:
        bound = resolve(node.input, bindings, node=node.id)
        ctx = NodeContext(
            node=node.id,
            type=node.type,
            config=node.config,
            flow_input=flow_input,
            bindings=bindings,
            provider=provider,
            attempt=attempt,
        )
        return await registry.call(node.type, bound, ctx)

    return work


async def settle(
    node: NodeSpec,
    *,
    fired: bool,
    bindings: Mapping[str, Any],
    work: Work,
    fail_fast: bool,
) -> Outcome:
    """Decide whether ``node`` runs, run it under its policy, and say what to record.

    Args:
        node: The node.
        fired: Whether it may run: it has no incoming edges, one of them fired, or a
            loop edge re-opened it.
        bindings: The binding context its ``when`` is evaluated against.
        work: One attempt at its work.
        fail_fast: The flow's ``policy.failFast``.
    """
    if not fired:
        return Outcome(skip_marker("edges"), "skipped")
    if node.when is not None and not evaluate_when(node.when, bindings):
        return Outcome(skip_marker("when"), "skipped")
    policy = node.policy
    attempts = policy.retry.max_attempts
    error: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            output = await _attempt(node, work, attempt)
        except Skip:
            return Outcome(skip_marker("when"), "skipped")
        except Exception as exc:
            error = exc
            if attempt < attempts and policy.retry.backoff_ms:
                await asyncio.sleep(policy.retry.backoff_ms / 1000)
        else:
            return Outcome(jsonable(output), "completed")
    assert error is not None
    stop = fail_fast and not policy.continue_on_error
    return Outcome(failure_marker(error, attempts), "failed", error, stop)


async def _attempt(node: NodeSpec, work: Work, attempt: int) -> Any:
    timeout_ms = node.policy.timeout_ms
    if timeout_ms is None:
        return await work(attempt)
    deadline = asyncio.timeout(timeout_ms / 1000)
    try:
        async with deadline:
            return await work(attempt)
    except TimeoutError as exc:
        if not deadline.expired():
            raise  # the work's own TimeoutError, not the policy's
        raise NodeTimeoutError(
            f"Node {node.id!r} timed out after {timeout_ms} ms (attempt {attempt}).",
            node=node.id,
            timeout_ms=timeout_ms,
        ) from exc


def resolve_edges(
    node: str,
    topology: Topology,
    bindings: Mapping[str, Any],
    loop_counts: Mapping[str, int],
    outputs: Mapping[str, Any],
) -> tuple[dict[str, bool], list[EdgeSpec]]:
    """Evaluate ``node``'s outgoing edges once it has settled.

    Returns:
        Whether each forward edge fired (by ``"from->to"``), and the loop edges that
        want to re-run their target (their ``when`` holds).

    Raises:
        FlowLoopError: A loop edge's ``when`` holds after ``maxIterations`` re-runs.
    """
    fired = {edge.key: evaluate_when(edge.when, bindings) for edge in topology.outgoing[node]}
    loops = []
    for edge in topology.loops_out[node]:
        if not evaluate_when(edge.when, bindings):
            continue
        limit = edge.max_iterations or 0
        if loop_counts.get(edge.key, 0) >= limit:
            raise FlowLoopError(
                f"Loop edge {edge.key} still wants to re-run {edge.target!r} after "
                f"maxIterations={limit} iterations. Make its when false once the work "
                "is done, or raise maxIterations.",
                node=node,
                outputs=outputs,
                edge=edge.key,
                max_iterations=limit,
            )
        loops.append(edge)
    return fired, loops
