"""Migration from edge-based (nodes + edges) harnesses to reactive graphs.

Load an edge-based flow (:class:`FlowSpec`: a FlowSpec YAML file, text or mapping, or
a Python definition ``{"agents": {...}, "edges": [...]}``), run it with the old
semantics (:func:`run_edge_harness`, the oracle), turn it into a reactive graph
(:func:`harness_to_reactive`), print it as editable Python (:func:`to_python`), and
check that both executors agree (:func:`check`). The kernel's later dialect is
understood too: expression conditions and bindings, structured LLM output,
``control.foreach`` and ``forEach`` edges, flow ``state``, and node packs
(:class:`NodeRegistry`, entry point group ``reactor.node_types``).

Public names load on first use, as :mod:`reactor`'s do: the ``reactor`` command
declares ``reactor migrate`` without loading the converter. ``_PUBLIC`` is the one
list of them; the ``TYPE_CHECKING`` imports show the same names to type checkers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from migration._convert.check import CheckResult as CheckResult
    from migration._convert.check import NodeDifference as NodeDifference
    from migration._convert.check import check as check
    from migration._convert.check import check_sync as check_sync
    from migration._convert.check import scripted_provider as scripted_provider
    from migration._convert.codegen import to_python as to_python
    from migration._convert.convert import harness_to_reactive as harness_to_reactive
    from migration._edge.edge import run_edge_harness as run_edge_harness
    from migration._edge.edge import run_edge_harness_sync as run_edge_harness_sync
    from migration._expressions.errors import BindingError as BindingError
    from migration._expressions.errors import FlowFailError as FlowFailError
    from migration._expressions.errors import FlowLoopError as FlowLoopError
    from migration._expressions.errors import FlowRunError as FlowRunError
    from migration._expressions.errors import FlowSpecError as FlowSpecError
    from migration._expressions.errors import NodeTimeoutError as NodeTimeoutError
    from migration._expressions.errors import UnknownNodeTypeError as UnknownNodeTypeError
    from migration._nodes.context import NodeContext as NodeContext
    from migration._nodes.context import NodeFunction as NodeFunction
    from migration._nodes.registry import NodeRegistry as NodeRegistry
    from migration._reactive.flow import Flow as Flow
    from migration._spec.models import EdgeSpec as EdgeSpec
    from migration._spec.models import FlowPolicy as FlowPolicy
    from migration._spec.models import NodePolicy as NodePolicy
    from migration._spec.models import NodeSpec as NodeSpec
    from migration._spec.models import RetryPolicy as RetryPolicy
    from migration._spec.spec import FlowSpec as FlowSpec

_PUBLIC: dict[str, str] = {
    "BindingError": "migration._expressions.errors",
    "CheckResult": "migration._convert.check",
    "EdgeSpec": "migration._spec.models",
    "Flow": "migration._reactive.flow",
    "FlowFailError": "migration._expressions.errors",
    "FlowLoopError": "migration._expressions.errors",
    "FlowPolicy": "migration._spec.models",
    "FlowRunError": "migration._expressions.errors",
    "FlowSpec": "migration._spec.spec",
    "FlowSpecError": "migration._expressions.errors",
    "NodeContext": "migration._nodes.context",
    "NodeDifference": "migration._convert.check",
    "NodeFunction": "migration._nodes.context",
    "NodePolicy": "migration._spec.models",
    "NodeRegistry": "migration._nodes.registry",
    "NodeSpec": "migration._spec.models",
    "NodeTimeoutError": "migration._expressions.errors",
    "RetryPolicy": "migration._spec.models",
    "UnknownNodeTypeError": "migration._expressions.errors",
    "check": "migration._convert.check",
    "check_sync": "migration._convert.check",
    "harness_to_reactive": "migration._convert.convert",
    "run_edge_harness": "migration._edge.edge",
    "run_edge_harness_sync": "migration._edge.edge",
    "scripted_provider": "migration._convert.check",
    "to_python": "migration._convert.codegen",
}
"""Each public name, and the module it is loaded from on first use."""

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'migration' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
