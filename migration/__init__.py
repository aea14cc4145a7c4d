"""Migration from edge-based (nodes + edges) harnesses to reactive graphs.

Load an edge-based flow (:class:`FlowSpec`: a FlowSpec YAML file, text or mapping, or
a Python definition ``{"agents": {...}, "edges": [...]}``), run it with the old
semantics (:func:`run_edge_harness`, the oracle), turn it into a reactive graph
(:func:`harness_to_reactive`), print it as editable Python (:func:`to_python`), and
check that both executors agree (:func:`check`). The kernel's later dialect is
understood too: expression conditions and bindings, structured LLM output,
``control.foreach`` and ``forEach`` edges, flow ``state``, and node packs
(:class:`NodeRegistry`, entry point group ``reactor.node_types``).
"""

from __future__ import annotations

from migration._convert.check import (
    CheckResult,
    NodeDifference,
    check,
    check_sync,
    scripted_provider,
)
from migration._convert.codegen import to_python
from migration._convert.convert import harness_to_reactive
from migration._edge.edge import run_edge_harness, run_edge_harness_sync
from migration._expressions.errors import (
    BindingError,
    FlowFailError,
    FlowLoopError,
    FlowRunError,
    FlowSpecError,
    NodeTimeoutError,
    UnknownNodeTypeError,
)
from migration._nodes.context import NodeContext, NodeFunction
from migration._nodes.registry import NodeRegistry
from migration._reactive.flow import Flow
from migration._spec.models import EdgeSpec, FlowPolicy, NodePolicy, NodeSpec, RetryPolicy
from migration._spec.spec import FlowSpec

__all__ = [
    "BindingError",
    "CheckResult",
    "EdgeSpec",
    "Flow",
    "FlowFailError",
    "FlowLoopError",
    "FlowPolicy",
    "FlowRunError",
    "FlowSpec",
    "FlowSpecError",
    "NodeContext",
    "NodeDifference",
    "NodeFunction",
    "NodePolicy",
    "NodeRegistry",
    "NodeSpec",
    "NodeTimeoutError",
    "RetryPolicy",
    "UnknownNodeTypeError",
    "check",
    "check_sync",
    "harness_to_reactive",
    "run_edge_harness",
    "run_edge_harness_sync",
    "scripted_provider",
    "to_python",
]
