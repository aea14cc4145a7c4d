"""The errors of the migration package, under reactor's root ``ReactorError``.

::

    ReactorError
    ├── FlowSpecError(ValueError)         a FlowSpec is invalid (every problem listed)
    │   └── UnknownNodeTypeError          a node's type is not in the registry
    ├── FlowRunError(RuntimeError)        a node failed and the flow stopped (failFast)
    │   └── FlowLoopError                 a loop edge wanted more than maxIterations
    ├── BindingError(LookupError)         a strict {{path}} binding has no value
    ├── FlowFailError(RuntimeError)       a control.fail node failed on purpose
    └── NodeTimeoutError(TimeoutError)    a node attempt ran past policy.timeoutMs

The last three are node failures: ``policy.retry`` retries them and
``continueOnError`` records them as failure markers.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from reactor.exceptions import ReactorError

__all__ = [
    "BindingError",
    "FlowFailError",
    "FlowLoopError",
    "FlowRunError",
    "FlowSpecError",
    "NodeTimeoutError",
    "UnknownNodeTypeError",
]


class FlowSpecError(ReactorError, ValueError):
    """A FlowSpec (or an edge-based Python definition) is invalid.

    Every problem found is listed at once, each naming the node or edge it is about
    and saying how to fix it.

    Attributes:
        problems: One sentence per problem.
        node: The id of the node the first problem is about, if any.
        edge: The edge the first problem is about, as ``"from->to"``, if any.
        flow: The flow's name, when known.
    """

    def __init__(
        self,
        problems: str | Sequence[str],
        *,
        node: str | None = None,
        edge: str | None = None,
        flow: str | None = None,
    ) -> None:
        self.problems = (problems,) if isinstance(problems, str) else tuple(problems)
        self.node = node
        self.edge = edge
        self.flow = flow
        if len(self.problems) == 1:
            message = self.problems[0]
        else:
            name = f" {flow!r}" if flow else ""
            lines = "\n".join(f"  - {problem}" for problem in self.problems)
            message = f"Flow{name} has {len(self.problems)} problems:\n{lines}"
        super().__init__(message)


class UnknownNodeTypeError(FlowSpecError):
    """A node's ``type`` is not registered in the :class:`~migration.NodeRegistry`.

    Attributes:
        type: The unknown type.
        known: The types the registry knows, sorted.
    """

    def __init__(self, message: str, *, type: str, node: str | None, known: Sequence[str]) -> None:
        super().__init__(message, node=node)
        self.type = type
        self.known = tuple(known)


class FlowRunError(ReactorError, RuntimeError):
    """A flow run stopped on a node failure (``policy.failFast``, the default).

    The original error is the ``__cause__``.

    Attributes:
        node: The id of the node that failed.
        outputs: Node outputs recorded so far (markers included; the failed node's
            is its failure marker).
        state: The flow's state when it stopped.
    """

    def __init__(
        self,
        message: str,
        *,
        node: str,
        outputs: Mapping[str, Any],
        state: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.node = node
        self.outputs = copy.deepcopy(dict(outputs))  # plain data, even from a snapshot
        self.state = copy.deepcopy(dict(state or {}))


class FlowLoopError(FlowRunError):
    """A loop edge's ``when`` still held after ``maxIterations`` re-runs.

    Attributes:
        edge: The loop edge, as ``"from->to"``.
        max_iterations: Its ``maxIterations``.
    """

    def __init__(
        self,
        message: str,
        *,
        node: str,
        outputs: Mapping[str, Any],
        edge: str,
        max_iterations: int,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, node=node, outputs=outputs, state=state)
        self.edge = edge
        self.max_iterations = max_iterations


class FlowFailError(ReactorError, RuntimeError):
    """Raised by a ``control.fail`` node: the flow fails on purpose, with its message.

    Like any node failure it is retried by ``policy.retry`` and recorded as a failure
    marker under ``continueOnError``.

    Attributes:
        node: The id of the ``control.fail`` node.
    """

    def __init__(self, message: str, *, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


class BindingError(ReactorError, LookupError):
    """A strict binding (``{{path}}``) found no value; the node fails.

    Attributes:
        path: The dotted path that is missing.
        node: The node whose input holds the binding, if known.
    """

    def __init__(self, message: str, *, path: str, node: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.node = node


class NodeTimeoutError(ReactorError, TimeoutError):
    """A node attempt ran longer than its ``policy.timeoutMs`` and was cancelled.

    Attributes:
        node: The node's id.
        timeout_ms: Its ``timeoutMs``.
    """

    def __init__(self, message: str, *, node: str, timeout_ms: int) -> None:
        super().__init__(message)
        self.node = node
        self.timeout_ms = timeout_ms
