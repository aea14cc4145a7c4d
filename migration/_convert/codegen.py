"""to_python(): a flow as Python you can paste and edit (what ``reactor migrate`` prints).

The module it writes builds the same graph as :func:`harness_to_reactive`, spelled
out: a :class:`~migration.Flow` holding the edges, then one ``agent(...)`` per node
with its ``activate_on``, join guard and ``emits`` visible, then ``graph =
reactive(...)``. Node types that are not built in are imported when the registry's
function can be imported, and written as stubs to fill in otherwise.
"""

from __future__ import annotations

import importlib
import json
import re
import textwrap
from typing import Any

from migration._nodes.registry import NodeRegistry, RegistrySource, registry_of
from migration._reactive.flow import Flow, done_signal
from migration._spec.models import AGENT_TYPE, NodeSpec
from migration._spec.spec import FlowSource, FlowSpec

__all__ = ["to_python"]

_WIDTH = 88  # ruff's and black's default line length, for pasting anywhere

_BUILTINS = NodeRegistry()
_BUILTIN_FUNCTIONS = {name: _BUILTINS.function(name) for name in _BUILTINS}


def to_python(spec: FlowSource, *, registry: RegistrySource | None = None) -> str:
    """Return Python source that defines ``graph``, the reactive form of a flow.

    The module defines ``registry`` (node types), ``flow`` (the edges), ``agents`` and
    ``graph = reactive(...)``; run it with ``graph.run_sync(provider=...)`` and read
    ``result.state["outputs"]``. Replace a node's ``flow.step("id", "type", ...)`` with
    ``flow.step("id", my_function, ...)`` (``my_function(input)`` or
    ``my_function(input, ctx)``) to rewrite it in Python.

    Args:
        spec: A FlowSpec (path, YAML text, mapping or model).
        registry: Where custom node types come from (a registry or a function
            building one; default: :meth:`NodeRegistry.discover`): importable
            functions are imported by the generated code; others become stubs to
            fill in.

    Raises:
        FlowSpecError: The flow is invalid.
        TypeError: ``spec`` is an edge-based Python definition (it is Python already:
            use ``harness_to_reactive`` on it).
    """
    flow_spec = FlowSpec.load(spec)
    if any(node.type == AGENT_TYPE for node in flow_spec.nodes):
        raise TypeError(
            "to_python() writes Python for FlowSpec files; an edge-based Python definition "
            "is Python already: pass it to harness_to_reactive() as it is."
        )
    types = registry_of(registry)
    custom = {
        node.type: node.id
        for node in flow_spec.nodes
        if node.type not in _BUILTIN_FUNCTIONS
        or (node.type in types and types.function(node.type) is not _BUILTIN_FUNCTIONS[node.type])
    }
    imports, registrations, stubs = _custom_types(custom, types)
    flow = Flow.from_spec(flow_spec)
    loops = any(flow_spec.topology.loops_in.values())  # body loops run inside an agent
    lines = [f'"""{_docstring(flow_spec)}"""', ""]
    for warning in flow_spec.order_warnings():
        lines += textwrap.wrap(
            f"Warning: {warning}", _WIDTH, initial_indent="# ", subsequent_indent="#   "
        )
    if len(lines) > 2:
        lines.append("")
    lines += ["from __future__ import annotations", ""]
    if loops:
        lines.append("import warnings")
    if stubs:
        lines.append("from typing import Any")
    if stubs or loops:
        lines.append("")
    migration_names = ["Flow", "NodeRegistry"] + (["NodeContext"] if stubs else [])
    imports.append(f"from migration import {', '.join(sorted(migration_names))}")
    imports.append(f"from reactor import {'CycleWarning, ' if loops else ''}agent, reactive")
    lines.extend(sorted(imports, key=lambda line: line.split()[1]))
    lines += ["", "registry = NodeRegistry()"]
    for stub in stubs:
        lines += ["", "", *stub]
    if stubs:
        lines += ["", ""]
    lines += registrations
    lines += ["", "flow = Flow("]
    lines.append(f"    name={_q(flow_spec.name)},")
    lines.append(f"    nodes={_literal([n.id for n in flow_spec.nodes], 4, 'nodes=')},")
    edges = [
        e.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
        for e in flow_spec.edges
    ]
    lines.append(f"    edges={_literal(edges, 4, 'edges=')},")
    lines.append(f"    input={_literal(flow_spec.input, 4, 'input=')},")
    lines.append(f"    fail_fast={flow_spec.policy.fail_fast!r},")
    lines.append("    registry=registry,")
    if flow_spec.state.initial:
        lines.append(f"    state={_literal(flow_spec.state.initial, 4, 'state=')},")
    bodies = {owner: list(body) for owner, body in flow_spec.scopes.bodies.items()}
    if bodies:
        lines.append(f"    bodies={_literal(bodies, 4, 'bodies=')},")
    lines += [")"]
    for owner, body in bodies.items():
        lines += ["", f"# The body of foreach node {owner!r}: it runs these nodes once per item."]
        for member in body:
            lines += _step(flow_spec.node(member), 0)
    lines += [
        "",
        "agents = {",
        "    # The flow's phase: it starts the nodes and ends when they have resolved.",
        '    "flow": flow.phase(),',
    ]
    for node in flow_spec.nodes:
        if flow_spec.scopes.scope_of(node.id) is None:
            lines += _agent(node, flow)
    lines.append("}")
    limits = flow.limits()
    call = [
        "reactive(",
        "    agents,",
        "    state=flow.state,",
        f"    name={_q(flow_spec.name)},",
        f"    input={_literal(flow_spec.input, 4, 'input=')},",
        "    fail_fast=True,",
        f"    max_depth={limits['max_depth']},",
        f"    max_activations={limits['max_activations']},",
        ")",
    ]
    lines.append("")
    if loops:
        lines += [
            "# Loop edges are cycles on purpose (maxIterations bounds them): no cycle warning.",
            "with warnings.catch_warnings():",
            '    warnings.simplefilter("ignore", CycleWarning)',
            f"    graph = {call[0]}",
            *(f"    {line}" for line in call[1:]),
        ]
    else:
        lines += [f"graph = {call[0]}", *call[1:]]
    return "\n".join(lines) + "\n"


def _docstring(spec: FlowSpec) -> str:
    parts = [f"{spec.name}: migrated from an edge-based flow by `reactor migrate`."]
    if spec.description:
        parts.append(spec.description.strip())
    parts.append(
        "Each node is an agent. It activates when a predecessor is done (node:<id>:done),\n"
        "and its guard, flow.ready(...), lets it run once all of its incoming edges are\n"
        "resolved. Its output is recorded in the run's state under outputs.<id>:\n"
        "\n"
        "    result = graph.run_sync()   # LLM nodes need provider=...\n"
        '    print(result.state["outputs"])\n'
    )
    return "\n\n".join(parts).replace('"""', r"\"\"\"")


def _step(node: NodeSpec, indent: int) -> list[str]:
    """``flow.step(...)`` for ``node``, its first line at ``indent``."""
    inner = " " * (indent + 4)
    step = [f"{inner}{_q(node.id)},", f"{inner}{_q(node.type)},"]
    for field, value in (
        ("input", node.input),
        ("config", node.config),
        ("when", node.when),
        ("policy", node.policy.model_dump(by_alias=True, exclude_defaults=True)),
    ):
        if value:
            step.append(f"{inner}{field}={_literal(value, indent + 4, field + '=')},")
    return [f"{' ' * indent}flow.step(", *step, f"{' ' * indent})"]


def _agent(node: NodeSpec, flow: Flow) -> list[str]:
    step = _step(node, 8)
    return [
        f"    {_q(node.id)}: agent(",
        f"        run={step[0].lstrip()}",
        *step[1:-1],
        "        ),",
        f"        activate_on={_literal(flow.triggers(node.id), 8, 'activate_on=')},",
        f"        when=flow.ready({_q(node.id)}),",
        f"        emits=[{_q(done_signal(node.id))}],",
        "    ),",
    ]


def _q(text: str) -> str:
    """A double-quoted Python string literal (JSON string syntax is valid Python)."""
    return json.dumps(text, ensure_ascii=False)


def _inline(value: Any) -> str:
    if isinstance(value, str):
        return _q(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_inline(k)}: {_inline(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    return repr(value)


def _literal(value: Any, indent: int, prefix: str = "") -> str:
    """``value`` as Python, on one line when ``indent + prefix + value,`` fits the width."""
    inline = _inline(value)
    if indent + len(prefix) + len(inline) + 1 <= _WIDTH or not (
        isinstance(value, dict | list | tuple) and value
    ):
        return inline
    inner = " " * (indent + 4)
    if isinstance(value, dict):
        items = [
            f"{inner}{_q(str(k))}: {_literal(v, indent + 4, _q(str(k)) + ': ')},"
            for k, v in value.items()
        ]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    items = [f"{inner}{_literal(item, indent + 4)}," for item in value]
    return "[\n" + "\n".join(items) + "\n" + " " * indent + "]"


def _custom_types(
    custom: dict[str, str], registry: NodeRegistry
) -> tuple[list[str], list[str], list[list[str]]]:
    """Imports, ``registry.register`` lines, and stubs for the non-built-in types."""
    imports: list[str] = []
    registrations: list[str] = []
    stubs: list[list[str]] = []
    for type_name, node in sorted(custom.items()):
        replace = ", replace=True" if type_name in _BUILTIN_FUNCTIONS else ""
        fn = registry.function(type_name) if type_name in registry else None
        where = _importable(fn)
        if where is not None:
            module, name = where
            imports.append(f"from {module} import {name}")
            registrations.append(f"registry.register({_q(type_name)}, {name}{replace})")
            continue
        name = re.sub(r"\W", "_", type_name)
        stubs.append(
            [
                f"def {name}(input: dict[str, Any], node: NodeContext) -> Any:",
                f'    """Node type {_q(type_name)} (used by node {_q(node)}): write it here."""',
                f"    raise NotImplementedError({_q(f'Write node type {type_name!r}.')})",
            ]
        )
        registrations.append(f"registry.register({_q(type_name)}, {name}{replace})")
    return imports, registrations, stubs


def _importable(fn: Any) -> tuple[str, str] | None:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None)
    if not module or not name or module == "__main__" or "<" in name or "." in name:
        return None
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return (module, name) if found is fn else None
