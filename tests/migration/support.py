"""Helpers: build small flows, and run one through both executors."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from migration import FlowRunError, FlowSpec, NodeRegistry, harness_to_reactive
from migration._convert.check import compare
from migration._edge.edge import execute
from migration._expressions.values import json_equal
from migration._nodes.registry import registry_of
from reactor import RunResult
from reactor.typing import Provider


def flow(
    nodes: list[dict[str, Any]],
    edges: Sequence[Any] = (),
    **header: Any,
) -> dict[str, Any]:
    """A FlowSpec mapping in the file's shape."""
    return {"flow": {"name": "test", **header}, "nodes": nodes, "edges": list(edges)}


def node(node_id: str, type: str = "echo", **fields: Any) -> dict[str, Any]:
    """A node; an echo of its id unless told otherwise."""
    if type == "echo" and "input" not in fields:
        fields["input"] = {"text": node_id}
    return {"id": node_id, "type": type, **fields}


@dataclasses.dataclass
class Both:
    """The two runs of one flow."""

    spec: FlowSpec
    edge: dict[str, Any]
    edge_error: BaseException | None
    result: RunResult
    edge_state: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def reactive(self) -> dict[str, Any]:
        return dict(copy.deepcopy(self.result.state["outputs"]))

    def assert_agree(self) -> None:
        """Same outputs, markers included (on failure: same node and error; see compare).

        When neither run stopped, the flow's final state is the same too.
        """
        verdict = compare(self.spec, self.edge, self.reactive, self.edge_error, self.result.error)
        assert verdict.agrees, verdict.report()
        if self.edge_error is None:
            reactive_state = self.result.state["state"]
            assert json_equal(self.edge_state, reactive_state), (self.edge_state, reactive_state)


async def run_both(
    spec: Mapping[str, Any] | FlowSpec | str | Path,
    *,
    registry: NodeRegistry | None = None,
    provider: Callable[[], Provider] | None = None,
    input: Mapping[str, Any] | None = None,
) -> Both:
    """Run ``spec`` with ``run_edge_harness`` and as a reactive graph."""
    edge_error: BaseException | None = None
    loaded = FlowSpec.load(spec)
    try:
        run = await execute(loaded, input, registry_of(registry), provider() if provider else None)
        edge, state = run.outputs, run.state
    except FlowRunError as exc:
        edge, state, edge_error = exc.outputs, exc.state, exc
    graph = harness_to_reactive(spec, registry=registry)
    result = await graph.run(
        input={**loaded.input, **(input or {})}, provider=provider() if provider else None
    )
    return Both(loaded, edge, edge_error, result, state)
