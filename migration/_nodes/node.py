"""Settling one node, the same way in both executors.

Given whether the node's incoming edges let it run, :func:`settle` applies the
node's ``when``, runs its work under its policy (retries with backoff, a timeout per
attempt, ``continueOnError``), and returns the output to record (the node's output as
JSON data, a skip marker, or a failure marker) with the state writes to apply. (The
head of a ``forEach`` edge's per-item part settles the part: see ``each``.) After it,
:func:`resolve_edges` says which outgoing edges fire and which loop edges want to
re-run their target, and :func:`stop_error` what to raise when the flow must stop.
Scheduling (which node settles when) is the executors' business, not this module's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from migration._expressions.bindings import resolve
from migration._expressions.errors import FlowLoopError, FlowRunError, NodeTimeoutError
from migration._expressions.values import jsonable
from migration._expressions.when import evaluate_when
from migration._nodes.context import BodyRunner, NodeContext, Writes
from migration._nodes.registry import NodeRegistry
from migration._spec.models import EdgeSpec, NodeSpec
from migration._spec.topology import Topology
from reactor.typing import Provider

__all__ = [
    "Outcome",
    "Skip",
    "Work",
    "failed",
    "failure_marker",
    "failure_message",
    "registry_work",
    "resolve_edges",
    "settle",
    "skip_marker",
    "stop_error",
]

Work = Callable[[int, Mapping[str, Any]], Awaitable[tuple[Any, Writes]]]
"""One attempt at a node's work: ``work(attempt, bindings) -> (output, state writes)``."""


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
        writes: The state writes of a completed node, to apply in order.
        others: For the head of a ``forEach`` edge's per-item part, the outputs of
            the part's other nodes, recorded with the head's.
        failed_node: For a per-item part that stopped the flow, the part's node that
            failed (``error`` is then the :class:`FlowRunError` it raised).
    """

    output: Any
    status: Literal["completed", "skipped", "failed"]
    error: BaseException | None = None
    stop: bool = False
    writes: Writes = dataclasses.field(default_factory=list)
    others: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    failed_node: str | None = None

    def recorded(self, node: str) -> dict[str, Any]:
        """What to record for ``node``'s resolution: each node's output, by id."""
        if self.failed_node is not None:
            return {self.failed_node: self.output}
        return {node: self.output, **self.others}


def skip_marker(reason: str) -> dict[str, Any]:
    """The output of a skipped node: ``{"skipped": True, "reason": reason}``."""
    return {"skipped": True, "reason": reason}


def failure_marker(error: BaseException, attempts: int) -> dict[str, Any]:
    """The output of a failed node that the flow tolerates."""
    message = str(error) or type(error).__name__
    return {"failed": True, "error": {"message": message}, "attempts": attempts}


def failure_message(node: NodeSpec, outcome: Outcome) -> str:
    """Why the flow stopped at ``node``, and how to let it continue."""
    error = outcome.error
    attempts = outcome.output.get("attempts", 1) if isinstance(outcome.output, dict) else 1
    plural = "s" if attempts != 1 else ""
    reason = f"{type(error).__name__}: {str(error).rstrip('.')}"
    if isinstance(error, FlowRunError) and error.__cause__ is not None:  # a foreach body's
        cause = error.__cause__
        reason = (
            f"{type(error).__name__}: its body node {error.node!r} failed: "
            f"{type(cause).__name__}: {str(cause).rstrip('.')}"
        )
    return (
        f"Node {node.id!r} ({node.type}) failed after {attempts} attempt{plural}: {reason}. "
        "The flow stopped (policy.failFast); set policy.continueOnError on the node, or "
        "failFast: false on the flow, to record the failure and go on."
    )


def registry_work(
    node: NodeSpec,
    registry: NodeRegistry,
    *,
    flow_input: Mapping[str, Any],
    provider: Provider | None,
    body: Callable[[Mapping[str, Any]], BodyRunner] | None = None,
) -> Work:
    """The work of a registry-typed node: bind its input, then call its type.

    ``body`` makes the runner of a ``control.foreach`` node's body, given the
    bindings the node runs with.
    """

    async def work(attempt: int, bindings: Mapping[str, Any]) -> tuple[Any, Writes]:
        bound = resolve(node.input, bindings, node=node.id)
        ctx = NodeContext(
            node=node.id,
            type=node.type,
            config=node.config,
            flow_input=flow_input,
            bindings=bindings,
            provider=provider,
            attempt=attempt,
            state=bindings.get("state") or {},
            body=body(bindings) if body is not None else None,
        )
        output = await registry.call(node.type, bound, ctx)
        return output, list(ctx.writes)

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
        bindings: The binding context its ``when`` and input are evaluated against.
        work: One attempt at its work.
        fail_fast: The flow's ``policy.failFast``.
    """
    if not fired:
        return Outcome(skip_marker("edges"), "skipped")
    if node.when is not None and not evaluate_when(node.when, bindings):
        return Outcome(skip_marker("when"), "skipped")
    return await _attempts(node, lambda attempt: work(attempt, bindings), fail_fast)


def stop_error(
    node: NodeSpec, outcome: Outcome, outputs: Mapping[str, Any], state: Mapping[str, Any]
) -> tuple[FlowRunError, BaseException | None]:
    """The error that stops the flow at ``node``, with the flow's outputs; and its cause.

    A per-item part that stopped says which of its nodes failed, as that node's own
    error did (a :class:`FlowLoopError` stays one).
    """
    inner = outcome.error
    if isinstance(inner, FlowLoopError) and outcome.failed_node is not None:
        loop = FlowLoopError(
            str(inner),
            node=inner.node,
            outputs=outputs,
            edge=inner.edge,
            max_iterations=inner.max_iterations,
            state=state,
        )
        return loop, inner.__cause__
    if isinstance(inner, FlowRunError) and outcome.failed_node is not None:
        error = FlowRunError(str(inner), node=inner.node, outputs=outputs, state=state)
        return error, inner.__cause__
    message = failure_message(node, outcome)
    return FlowRunError(message, node=node.id, outputs=outputs, state=state), inner


def failed(node: NodeSpec, error: BaseException, attempts: int, fail_fast: bool) -> Outcome:
    """The outcome of a node that failed: its failure marker; whether the flow stops."""
    stop = fail_fast and not node.policy.continue_on_error
    return Outcome(failure_marker(error, attempts), "failed", error, stop)


async def _attempts(
    node: NodeSpec, attempt_at: Callable[[int], Awaitable[tuple[Any, Writes]]], fail_fast: bool
) -> Outcome:
    policy = node.policy
    attempts = policy.retry.max_attempts
    error: BaseException | None = None
    for attempt in range(1, attempts + 1):
        try:
            output, writes = await _attempt(node, attempt_at, attempt)
        except Skip:
            return Outcome(skip_marker("when"), "skipped")
        except Exception as exc:
            error = exc
            if attempt < attempts and policy.retry.backoff_ms:
                await asyncio.sleep(policy.retry.backoff_ms / 1000)
        else:
            return Outcome(jsonable(output), "completed", writes=writes)
    assert error is not None
    return failed(node, error, attempts, fail_fast)


async def _attempt(
    node: NodeSpec, attempt_at: Callable[[int], Awaitable[tuple[Any, Writes]]], attempt: int
) -> tuple[Any, Writes]:
    timeout_ms = node.policy.timeout_ms
    if timeout_ms is None:
        return await attempt_at(attempt)
    deadline = asyncio.timeout(timeout_ms / 1000)
    try:
        async with deadline:
            return await attempt_at(attempt)
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
    topology: Topology[EdgeSpec],
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
                state=bindings.get("state"),
            )
        loops.append(edge)
    return fired, loops
