"""check(): run a flow both ways and say whether the node outputs agree."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from migration._convert.convert import harness_to_reactive
from migration._edge.edge import execute
from migration._expressions.errors import BindingError, FlowRunError
from migration._expressions.values import json_equal, jsonable
from migration._nodes.registry import RegistrySource, registry_of
from migration._spec.spec import FlowSource, FlowSpec
from reactor import ProviderRequest, RunTimeoutError, ScriptedProvider
from reactor.typing import Provider

__all__ = ["CheckResult", "NodeDifference", "check", "check_sync", "scripted_provider"]

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "(no output)"})()
"""Stands for a node that has no output in one of the two runs."""


@dataclasses.dataclass(frozen=True)
class NodeDifference:
    """A node whose outputs differ between the two executors.

    Attributes:
        node: The node's id.
        edge: Its output in the edge-based run (``MISSING`` if none).
        reactive: Its output in the reactive run (``MISSING`` if none).
    """

    node: str
    edge: Any
    reactive: Any


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The verdict of :func:`check`; ``str(result)`` is the readable report.

    Attributes:
        flow: The flow's name.
        agrees: Whether both executors produced the same node outputs (markers
            included). When both stopped on a failure, they agree if they stopped at
            the same node with the same error type and agree on every node both
            recorded outside loop bodies (the reactive run may have gone further on
            independent branches, which it runs concurrently).
        edge_outputs: Node outputs of the edge-based run (as JSON data).
        reactive_outputs: Node outputs of the reactive run (as JSON data).
        edge_error: The error that stopped the edge-based run, if any.
        reactive_error: The error that stopped the reactive run, if any.
        differences: The nodes whose outputs differ.
        warnings: Reads the reactive graph does not order (see
            :meth:`FlowSpec.order_warnings`): outputs may differ from run to run.
        edge_state: The flow's ``state`` at the end of the edge-based run.
        reactive_state: The flow's ``state`` at the end of the reactive run.

    ``agrees`` compares the two runs; :attr:`passed` is the check's verdict: they agree,
    and the flow ran (both runs went to their end, and some node ran in each).
    """

    flow: str
    agrees: bool
    edge_outputs: Mapping[str, Any]
    reactive_outputs: Mapping[str, Any]
    edge_error: BaseException | None
    reactive_error: BaseException | None
    differences: tuple[NodeDifference, ...]
    warnings: tuple[str, ...] = ()
    edge_state: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reactive_state: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def completed(self) -> bool:
        """Whether both runs went to their end (neither stopped on a failure)."""
        return self.edge_error is None and self.reactive_error is None

    @property
    def ran(self) -> bool:
        """Whether some node ran in each run (every node skipped or failed: nothing ran)."""
        return _ran(self.edge_outputs) and _ran(self.reactive_outputs)

    @property
    def passed(self) -> bool:
        """The check's verdict: the runs agree, both went to their end, and nodes ran.

        Two runs that stop at the same node with the same error agree, yet prove
        nothing about the conversion: a check passes only when the flow runs.
        """
        return self.agrees and self.completed and self.ran

    @property
    def state_agrees(self) -> bool:
        """Whether both runs ended with the same flow ``state``."""
        return json_equal(self.edge_state, self.reactive_state)

    def report(self) -> str:
        """A per-node report: every node's output, or the differences and errors.

        Its first line is the verdict; a check that did not pass says why.
        """
        nodes = list(dict.fromkeys([*self.edge_outputs, *self.reactive_outputs]))
        lines = []
        if self.agrees and not self.passed:
            lines.append(self._not_run())
        elif self.agrees:
            every = f"all {len(nodes)} nodes" if len(nodes) != 1 else "its node"
            lines.append(
                f"Flow {self.flow!r}: the edge-based and the reactive run agree on {every}."
            )
            width = max((len(node) for node in nodes), default=0)
            for node in nodes:
                value = self.edge_outputs.get(node, self.reactive_outputs.get(node))
                lines.append(f"  {node.ljust(width)}  {_show(value)}")
            if self.edge_state:
                lines.append(f"  and on the flow state: {_show(self.edge_state)}")
        else:
            lines.append(
                f"Flow {self.flow!r}: the edge-based and the reactive run DISAGREE on "
                f"{len(self.differences)} of {len(nodes)} node{'s' if len(nodes) != 1 else ''}"
                + ("." if self.state_agrees else " and on the flow state.")
            )
            for difference in self.differences:
                lines.append(f"  node {difference.node!r}:")
                lines.append(f"    edge-based: {_show(difference.edge)}")
                lines.append(f"    reactive:   {_show(difference.reactive)}")
            if not self.state_agrees:
                lines.append("  the flow state:")
                lines.append(f"    edge-based: {_show(self.edge_state)}")
                lines.append(f"    reactive:   {_show(self.reactive_state)}")
        for label, error in (("edge-based", self.edge_error), ("reactive", self.reactive_error)):
            if error is not None:
                lines.append(f"  The {label} run stopped: {type(error).__name__}: {error}")
        lines.extend(f"  Warning: {warning}" for warning in self.warnings)
        return "\n".join(lines)

    def _not_run(self) -> str:
        """Why two runs that agree do not pass: they failed alike, or nothing ran."""
        error = self.edge_error
        if error is not None:
            where = getattr(error, "node", None)
            at = f" at node {where!r}" if where else ""
            why = f"both runs stopped{at} with the same error, so the check proves nothing"
        else:
            why = "no node ran in either run (every node was skipped or failed)"
        if _needs_input(error):
            hint = "give the flow its input (reactor migrate --input JSON, check(input=...))"
        elif error is not None:
            hint = "the error is below"
        else:
            hint = "look at the flow's input and its when conditions"
        return f"Flow {self.flow!r}: the check FAILED: {why}; {hint}."

    def __str__(self) -> str:
        return self.report()


def _ran(outputs: Mapping[str, Any]) -> bool:
    """Whether some node of a run has an output that is not a skip or failure marker."""
    return any(
        not (
            isinstance(value, Mapping)
            and (value.get("skipped") is True or value.get("failed") is True)
        )
        for value in outputs.values()
    )


def _needs_input(error: BaseException | None) -> bool:
    """Whether a run stopped on a binding of the flow's input that has no value."""
    cause = error.__cause__ if error is not None else None
    path = getattr(cause, "path", None) if isinstance(cause, BindingError) else None
    return isinstance(path, str) and path.split(".")[:2] in (
        ["flow", "input"],
        ["workflow", "input"],
    )


def _show(value: Any) -> str:
    if value is MISSING:
        return "(no output)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)


def scripted_provider() -> ScriptedProvider:
    """The provider :func:`check` uses when given none: deterministic, offline answers.

    Text requests get ``"(scripted answer of <node>)"``; structured requests get the
    simplest value of their JSON schema (empty strings, zeros, false, empty lists).
    """
    return ScriptedProvider(default=_answer)


def _answer(request: ProviderRequest) -> Any:
    if request.output_schema is not None:
        return _sample(request.output_schema, request.output_schema)
    return f"(scripted answer of {request.agent})"


def _sample(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return _sample(root.get("$defs", {}).get(name, {}), root)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return _sample(schema[key][0], root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if "default" in schema:
        return schema["default"]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {name: _sample(sub, root) for name, sub in properties.items()}
    simplest = {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False}
    return simplest.get(str(kind))


ProviderSource = Provider | Callable[[], Provider]
"""A provider, or a function making one (for providers that keep state between calls)."""


async def check(
    spec: FlowSource,
    *,
    input: Mapping[str, Any] | None = None,
    registry: RegistrySource | None = None,
    provider: ProviderSource | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - the CLI's --timeout, for both runs at once
) -> CheckResult:
    """Run a flow with :func:`run_edge_harness` and as a reactive graph; compare them.

    Both runs must agree on every node's output and on the flow's final ``state``.

    Args:
        spec: The flow (path, YAML text, mapping, ``FlowSpec`` or Python definition).
        input: Overrides of the flow's default input, for both runs.
        registry: Node types: a :class:`~migration.NodeRegistry`, or a function
            building one, called once for each run, so that node types that keep
            state start fresh in each. Default: :meth:`NodeRegistry.discover`.
        provider: The provider of LLM nodes, or a function returning a fresh one for
            each run (do that for providers that keep state, such as a
            ``ScriptedProvider`` with answer lists, which the first run would use up).
            Default: :func:`scripted_provider`.
        timeout: Seconds both runs may take together (default: no limit).

    Raises:
        FlowSpecError: The flow is invalid, or declares a pack the registry lacks.
        UnknownNodeTypeError: A node's type is not in the registry.
        RunTimeoutError: The runs took longer than ``timeout``.
    """
    flow = FlowSpec.load(spec)
    if timeout is not None and timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout}.")
    try:
        async with asyncio.timeout(timeout):
            return await _both(flow, input, registry, provider)
    except TimeoutError:
        raise RunTimeoutError(
            f"The check of flow {flow.name!r} did not finish within {timeout:g} s; a node may "
            "be waiting or looping. Give it more time, or look at the slow node."
        ) from None


async def _both(
    flow: FlowSpec,
    input: Mapping[str, Any] | None,
    registry: RegistrySource | None,
    provider: ProviderSource | None,
) -> CheckResult:
    edge_error: BaseException | None = None
    try:
        edge = await execute(flow, input, registry_of(registry), _provider(provider))
        edge_outputs, edge_state = edge.outputs, edge.state
    except FlowRunError as exc:
        edge_outputs, edge_state, edge_error = exc.outputs, exc.state, exc
    graph = harness_to_reactive(flow, registry=registry_of(registry))
    result = await graph.run(input={**flow.input, **(input or {})}, provider=_provider(provider))
    reactive_outputs = copy.deepcopy(result.state["outputs"])
    verdict = compare(flow, edge_outputs, reactive_outputs, edge_error, result.error)
    return dataclasses.replace(
        verdict,
        edge_state=jsonable(edge_state),
        reactive_state=jsonable(result.state["state"]),
        agrees=verdict.agrees and json_equal(edge_state, result.state["state"]),
    )


def check_sync(
    spec: FlowSource,
    *,
    input: Mapping[str, Any] | None = None,
    registry: RegistrySource | None = None,
    provider: ProviderSource | None = None,
    timeout: float | None = None,
) -> CheckResult:
    """:func:`check` for synchronous code (the CLI, scripts).

    Raises:
        RuntimeError: Called while an event loop is running (await ``check`` there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(
            check(spec, input=input, registry=registry, provider=provider, timeout=timeout)
        )
    raise RuntimeError("check_sync() cannot be used inside a running event loop; await check().")


def _provider(source: ProviderSource | None) -> Provider:
    if source is None:
        return scripted_provider()
    if callable(getattr(source, "stream", None)):
        return source  # type: ignore[return-value]
    return source()  # type: ignore[operator]


def compare(
    flow: FlowSpec,
    edge_outputs: Mapping[str, Any],
    reactive_outputs: Mapping[str, Any],
    edge_error: BaseException | None = None,
    reactive_error: BaseException | None = None,
) -> CheckResult:
    """Compare the node outputs (and stopping errors) of the two executors.

    When both runs stopped on an error, they agree if they stopped at the same node
    with the same type of error, and agree on that node and on every node both
    recorded outside loop bodies (inside a loop body a node's output when the run
    stopped depends on how far the loop had got).
    """
    edge = {node: jsonable(value) for node, value in edge_outputs.items()}
    reactive = {node: jsonable(value) for node, value in reactive_outputs.items()}
    both_failed = edge_error is not None and reactive_error is not None
    if both_failed:
        stop = getattr(edge_error, "node", None)
        looping = set().union(*flow.topology.body.values())
        nodes = [n for n in edge if n in reactive and (n == stop or n not in looping)]
        same_stop = type(edge_error) is type(reactive_error) and stop == getattr(
            reactive_error, "node", None
        )
    else:
        nodes = list(dict.fromkeys([*edge, *reactive]))
        same_stop = edge_error is None and reactive_error is None
    differences = tuple(
        NodeDifference(node, edge.get(node, MISSING), reactive.get(node, MISSING))
        for node in nodes
        if node not in edge or node not in reactive or not json_equal(edge[node], reactive[node])
    )
    return CheckResult(
        warnings=tuple(flow.order_warnings()),
        flow=flow.name,
        agrees=same_stop and not differences,
        edge_outputs=edge,
        reactive_outputs=reactive,
        edge_error=edge_error,
        reactive_error=reactive_error,
        differences=differences,
    )
