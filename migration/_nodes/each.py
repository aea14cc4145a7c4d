"""A ``forEach`` edge's per-item part, settled once per item, the same way in both executors.

A ``forEach`` edge repeats its target and everything downstream of it up to the
join (the part, see :mod:`migration._spec.scopes`). Its head settles it: the list is
bound from the edge's ``in``, then the part runs once per item as a small flow of its
own (the executor's runner of it, as for a ``control.foreach`` body), one item after
another or ``concurrency`` at once (:func:`~migration._nodes.context.each_item`). Each
node of the part records ``{"iterations": [{"item", "output"}, ...]}`` in item order,
markers included (a node skipped or failed for an item, under ``continueOnError``).
A failure that stops the flow inside the part names the part's node that failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from migration._expressions.bindings import resolve
from migration._expressions.errors import FlowRunError
from migration._expressions.values import shorten
from migration._nodes.context import BodyRunner, Writes, each_item
from migration._nodes.node import Outcome, failed, skip_marker
from migration._spec.models import EachSpec, NodeSpec

__all__ = ["settle_part"]


async def settle_part(
    head: NodeSpec,
    part: Sequence[str],
    *,
    fired: bool,
    bindings: Mapping[str, Any],
    each: EachSpec,
    run: BodyRunner,
    fail_fast: bool,
) -> Outcome:
    """Settle the per-item part headed by ``head``: every one of its nodes, per item.

    Args:
        head: The ``forEach`` edge's target.
        part: The part's nodes, the head first.
        fired: Whether the head may run (see :func:`~migration._nodes.node.settle`).
        bindings: The binding context around the part (``in`` is bound against it).
        each: The edge's ``forEach``.
        run: Runs the part once: ``run({as: item}, state)``.
        fail_fast: The flow's ``policy.failFast``.

    Returns:
        The head's outcome; the other nodes' outputs are its ``others``.
    """
    others = part[1:]
    if not fired:
        return Outcome(skip_marker("edges"), "skipped", others=_skipped(others))
    try:
        items = _items(head, each, bindings)
    except Exception as exc:
        outcome = failed(head, exc, 1, fail_fast)
        return Outcome(outcome.output, "failed", exc, outcome.stop, others=_skipped(others))

    async def one(item: Any, state: Mapping[str, Any]) -> tuple[dict[str, Any], Writes]:
        done = await run({each.name: item}, state)
        return {
            node: {"item": item, "output": done.outputs.get(node)} for node in part
        }, done.writes

    try:
        results, writes = await each_item(
            items, one, state=bindings.get("state") or {}, concurrency=each.concurrency
        )
    except FlowRunError as stopped:  # a node of the part stopped the flow
        output = stopped.outputs.get(stopped.node)
        return Outcome(output, "failed", stopped, stop=True, failed_node=stopped.node)
    outputs = {node: {"iterations": [result[node] for result in results]} for node in part}
    return Outcome(
        outputs[head.id],
        "completed",
        writes=writes,
        others={node: outputs[node] for node in others},
    )


def _items(head: NodeSpec, each: EachSpec, bindings: Mapping[str, Any]) -> list[Any]:
    items = resolve(each.items, bindings, node=head.id)
    if not isinstance(items, list):
        raise TypeError(
            f"Node {head.id!r}: its forEach in gives {shorten(items)}, not a list; bind "
            'it to a list, as in in: "{{ plan.tasks }}".'
        )
    return items


def _skipped(nodes: Sequence[str]) -> dict[str, Any]:
    """The part's other nodes when it does not run: skipped, as nodes after a skipped edge."""
    return {node: skip_marker("edges") for node in nodes}
