"""What a node type receives besides its input, and the per-item loop both executors share.

:class:`NodeContext` carries the node's id, config and bindings, the flow's state
(read it as ``ctx.state``, write it with ``ctx.set_state``), the provider for model
calls, and, for a ``control.foreach`` node, the way to run its body
(``ctx.run_body``). The executor that calls the node type fills it in; the node type
does not know which executor that is.

:func:`each_item` is how a list is worked through, by ``control.foreach`` bodies and
by ``forEach`` edges alike: one item after another (each seeing the state the ones
before it wrote), or up to ``concurrency`` at once (each starting from the same
state, their writes applied in item order), results always in item order.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from migration._expressions.values import apply_writes, jsonable
from reactor.typing import Provider

__all__ = ["BodyRun", "BodyRunner", "NodeContext", "NodeFunction", "Writes", "each_item"]

NodeFunction = Callable[..., Any]
"""A node type: ``fn(input)`` or ``fn(input, ctx)``, sync or async, returning the output."""

Writes = list[tuple[str, Any]]
"""State writes in the order they were made: ``(dotted path, value)``."""

_PATH = re.compile(r"^[A-Za-z_][\w-]*(?:\.[\w-]+)*$")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class BodyRun:
    """One run of a foreach body: each body node's output, and the state it wrote."""

    outputs: dict[str, Any]
    writes: Writes


class BodyRunner(Protocol):
    """Runs a foreach node's body once (given by the executor)."""

    def __call__(
        self, variables: Mapping[str, Any], state: Mapping[str, Any]
    ) -> Awaitable[BodyRun]:
        """Run the body with ``variables`` bound and the flow state ``state``."""


@dataclasses.dataclass(frozen=True)
class NodeContext:
    """What a node type receives besides its input (when it takes a second argument).

    Attributes:
        node: The node's id (also the ``agent`` of its provider requests).
        type: The node's type.
        config: The node's ``config`` mapping.
        flow_input: The flow's input (defaults merged with the run's input).
        bindings: The binding context: node outputs so far, ``flow.input``,
            ``workflow.input``, ``state`` (``control.if`` evaluates conditions
            against it).
        provider: The provider for model calls (the node's run's), if any.
        attempt: Which attempt this is, from 1 (``policy.retry``).
        state: The flow's state as the node found it.
        writes: The state writes made so far with :meth:`set_state`; they take
            effect when the node completes (a failed attempt's are dropped).
        body: Runs a ``control.foreach`` node's body (see :meth:`run_body`).
    """

    node: str
    type: str
    config: Mapping[str, Any]
    flow_input: Mapping[str, Any]
    bindings: Mapping[str, Any]
    provider: Provider | None
    attempt: int = 1
    state: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    writes: Writes = dataclasses.field(default_factory=list, repr=False, compare=False)
    body: BodyRunner | None = dataclasses.field(default=None, repr=False, compare=False)

    def set_state(self, path: str, value: Any) -> None:
        """Set ``state.<path>`` (a dotted path) to ``value`` when the node completes.

        Raises:
            ValueError: ``path`` is not a dotted path of names.
        """
        if not isinstance(path, str) or not _PATH.match(path):
            raise ValueError(
                f"Node {self.node!r}: a state path is names joined by dots, such as "
                f"'tasks.done', got {path!r}."
            )
        self.writes.append((path, jsonable(value)))

    def current_state(self) -> dict[str, Any]:
        """The flow's state with this node's writes so far applied."""
        return apply_writes(self.state, self.writes)

    async def run_body(
        self, variables: Mapping[str, Any], *, state: Mapping[str, Any] | None = None
    ) -> BodyRun:
        """Run this ``control.foreach`` node's body once, with ``variables`` bound.

        The body's nodes run as a small flow of their own (their edges, loop edges
        included), reading ``variables`` (the item, by its ``as`` name), the outputs
        around the foreach node, and ``state`` (default: :meth:`current_state`). The
        body's state writes are returned, not applied.

        Raises:
            TypeError: The node has no body (it is not a ``control.foreach`` node).
        """
        if self.body is None:
            raise TypeError(
                f"Node {self.node!r} ({self.type}) has no body to run; only "
                "control.foreach nodes (input.body: [node ids]) do."
            )
        return await self.body(variables, self.current_state() if state is None else state)


async def each_item(
    items: Sequence[Any],
    run: Callable[[Any, Mapping[str, Any]], Awaitable[tuple[T, Writes]]],
    *,
    state: Mapping[str, Any],
    concurrency: int | None = None,
) -> tuple[list[T], Writes]:
    """Run ``run(item, state)`` for each item; return the results and all state writes.

    Without ``concurrency`` items run one after another, each seeing the writes of the
    ones before. With it, up to that many run at once, each from ``state``; their
    writes are applied in item order. Results are in item order either way. A failure
    is raised (with ``concurrency``, the items still running are cancelled first, and
    the failure of the earliest item is the one raised).
    """
    results: list[T] = []
    writes: Writes = []
    if concurrency is None:
        current = dict(state)
        for item in items:
            result, made = await run(item, current)
            current = apply_writes(current, made)
            results.append(result)
            writes += made
        return results, writes
    if not items:
        return results, writes
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Any) -> tuple[T, Writes]:
        async with gate:
            return await run(item, state)

    # Tasks this function owns and always awaits: on a failure (or a cancellation of
    # its caller) the others are cancelled and awaited before it returns.
    tasks = [asyncio.create_task(one(item)) for item in items]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:  # the first failing item, in item order
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    for task in tasks:
        result, made = task.result()
        results.append(result)
        writes += made
    return results, writes
