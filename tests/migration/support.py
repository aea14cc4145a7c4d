"""Helpers: build small flows, and run one through both executors."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from migration import FlowRunError, FlowSpec, NodeRegistry, harness_to_reactive, run_edge_harness
from migration._check import compare
from reactor import RunResult
from reactor.typing import Provider


def flow(
    nodes: list[dict[str, Any]],
    edges: list[Any] = (),
    **header: Any,  # type: ignore[assignment]
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

    @property
    def reactive(self) -> dict[str, Any]:
        return dict(copy.deepcopy(self.result.state["outputs"]))

    def assert_agree(self) -> None:
        """Same outputs, markers included (on failure: same node and error; see compare)."""
        verdict = compare(self.spec, self.edge, self.reactive, self.edge_error, self.result.error)
        assert verdict.agrees, verdict.report()


async def run_both(
    spec: Mapping[str, Any] | FlowSpec | str,
    *,
    registry: NodeRegistry | None = None,
    provider: Callable[[], Provider] | None = None,
    input: Mapping[str, Any] | None = None,
) -> Both:
    """Run ``spec`` with ``run_edge_harness`` and as a reactive graph."""
    edge_error: BaseException | None = None
    try:
        edge = await run_edge_harness(spec, input, registry, provider() if provider else None)
    except FlowRunError as exc:
        edge, edge_error = exc.outputs, exc
    graph = harness_to_reactive(spec, registry=registry)
    loaded = FlowSpec.load(spec)
    result = await graph.run(
        input={**loaded.input, **(input or {})}, provider=provider() if provider else None
    )
    return Both(loaded, edge, edge_error, result)
