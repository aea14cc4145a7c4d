"""to_python(): a flow as Python you can paste and edit (what ``reactor migrate`` prints).

The module it writes builds the same graph as :func:`harness_to_reactive`, spelled
out: a :class:`~migration.Flow` holding the edges (the one place they are kept), then
one ``agent(...)`` per node whose wiring comes from them (``flow.triggers(id)``, the
join guard ``flow.ready(id)``, ``emits``), then ``graph = reactive(...)``. Deleting or
adding an edge in ``Flow(edges=...)`` rewires the agents with it: no second copy of an
edge can drift from the first. Prompts are written as their lines; schema files the
flow names (``outputSchemaFile``) are read by the module when it is imported, from
their path, so that editing the file has effect. Node types that are not built in
are imported when the registry's function can be imported, and written as stubs to
fill in otherwise.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import textwrap
from pathlib import Path
from typing import Any

from migration._convert.literal import WIDTH, Code, literal, quoted
from migration._nodes.registry import NodeRegistry, RegistrySource, registry_of
from migration._reactive.flow import Flow, done_signal
from migration._spec.models import AGENT_TYPE, FOREACH_TYPE, NodeSpec
from migration._spec.spec import FlowSource, FlowSpec

__all__ = ["to_python"]

_BUILTINS = NodeRegistry()
_BUILTIN_FUNCTIONS = {name: _BUILTINS.function(name) for name in _BUILTINS}

_SCHEMA_READER = [
    "# The folder of this module: the flow's schema files are read from their path,",
    "# relative to it, when the module is imported (edit them there).",
    "HERE = Path(__file__).parent",
    "",
    "",
    "def schema(path: str) -> Any:",
    '    """The JSON schema in the file at ``path`` (JSON or YAML), from this folder."""',
    '    return yaml.safe_load((HERE / path).read_text(encoding="utf-8"))',
]


def to_python(
    spec: FlowSource,
    *,
    registry: RegistrySource | None = None,
    saved_as: str | os.PathLike[str] | None = None,
) -> str:
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
        saved_as: Where the module will be saved (default: a file in the current
            folder): the schema files it reads are named relative to its folder.

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
    folder = Path(saved_as).resolve().parent if saved_as is not None else Path.cwd()
    module = _Module(flow_spec, registry_of(registry), folder)
    return "\n".join(module.lines()) + "\n"


@dataclasses.dataclass
class _Module:
    """The generated module, section by section."""

    spec: FlowSpec
    types: NodeRegistry
    folder: Path  # where the module is saved

    def lines(self) -> list[str]:
        custom = {
            node.type: node.id
            for node in self.spec.nodes
            if node.type not in _BUILTIN_FUNCTIONS
            or (
                node.type in self.types
                and self.types.function(node.type) is not _BUILTIN_FUNCTIONS[node.type]
            )
        }
        imports, registrations, stubs = _custom_types(custom, self.types)
        lines = [f'"""{_docstring(self.spec)}"""', ""]
        for warning in self.spec.order_warnings():
            lines += textwrap.wrap(
                f"Warning: {warning}", WIDTH, initial_indent="# ", subsequent_indent="#   "
            )
        if len(lines) > 2:
            lines.append("")
        lines += self._imports(imports, stubs=bool(stubs))
        if self._schemas:
            lines += ["", *_SCHEMA_READER, ""]
        lines += ["", "registry = NodeRegistry()"]
        for stub in stubs:
            lines += ["", "", *stub]
        if stubs:
            lines += ["", ""]
        lines += registrations
        lines += self._flow()
        lines += self._steps()
        lines += self._agents()
        lines += self._graph()
        return lines

    @property
    def _loops(self) -> bool:
        """Whether the top level has loop edges (those inside a body run in a step)."""
        return any(self.spec.topology.loops_in.values())

    @property
    def _schemas(self) -> bool:
        return any(node.schema_files for node in self.spec.nodes)

    def _imports(self, imports: list[str], *, stubs: bool) -> list[str]:
        standard = ["from __future__ import annotations", ""]
        if self._loops:
            standard.append("import warnings")
        if self._schemas:
            standard.append("from pathlib import Path")
        if stubs or self._schemas:
            standard.append("from typing import Any")
        if len(standard) > 2:
            standard.append("")
        names = ["Flow", "NodeRegistry"] + (["NodeContext"] if stubs else [])
        imports = [
            *imports,
            f"from migration import {', '.join(sorted(names))}",
            f"from reactor import {'CycleWarning, ' if self._loops else ''}agent, reactive",
        ]
        third = ["import yaml", ""] if self._schemas else []
        return [*standard, *third, *sorted(imports, key=lambda line: line.split()[1])]

    def _flow(self) -> list[str]:
        spec = self.spec
        edges = [
            e.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
            for e in spec.edges
        ]
        lines = ["", "flow = Flow("]
        lines.append(f"    name={quoted(spec.name)},")
        lines.append(f"    nodes={literal([n.id for n in spec.nodes], 4, 'nodes=')},")
        lines.append(f"    edges={literal(edges, 4, 'edges=')},")
        lines.append(f"    input={literal(spec.input, 4, 'input=')},")
        lines.append(f"    fail_fast={spec.policy.fail_fast!r},")
        lines.append("    registry=registry,")
        if spec.state.initial:
            lines.append(f"    state={literal(spec.state.initial, 4, 'state=')},")
        bodies = {owner: list(body) for owner, body in spec.scopes.bodies.items()}
        if bodies:
            lines.append(f"    bodies={literal(bodies, 4, 'bodies=')},")
        return [*lines, ")"]

    def _steps(self) -> list[str]:
        """The steps of the nodes that have no agent: foreach bodies, per-item parts."""
        lines: list[str] = []
        for owner, body in self.spec.scopes.bodies.items():
            lines += [
                "",
                f"# The body of foreach node {owner!r}: it runs these nodes once per item.",
            ]
            for member in body:
                lines += self._step(self.spec.node(member), 0)
        for head, part in self.spec.scopes.parts.items():
            if len(part) == 1:
                continue
            lines += [
                "",
                *textwrap.wrap(
                    f"The rest of the part the forEach edge into {head!r} repeats: the step "
                    f"of {head!r} runs these nodes once per item, after it.",
                    WIDTH,
                    initial_indent="# ",
                    subsequent_indent="# ",
                ),
            ]
            for member in part[1:]:
                lines += self._step(self.spec.node(member), 0)
        return lines

    def _agents(self) -> list[str]:
        lines = [
            "",
            "agents = {",
            "    # The flow's phase: it starts the nodes and ends when they have resolved.",
            '    "flow": flow.phase(),',
        ]
        for node_id in self.spec.scopes.members(None):
            lines += self._agent(self.spec.node(node_id))
        return [*lines, "}"]

    def _agent(self, node: NodeSpec) -> list[str]:
        step = self._step(node, 8)
        name = quoted(node.id)
        return [
            f"    {name}: agent(",
            f"        run={step[0].lstrip()}",
            *step[1:-1],
            "        ),",
            f"        activate_on=flow.triggers({name}),",
            f"        when=flow.ready({name}),",
            f"        emits=[{quoted(done_signal(node.id))}],",
            "    ),",
        ]

    def _step(self, node: NodeSpec, indent: int) -> list[str]:
        """``flow.step(...)`` for ``node``, its first line at ``indent``."""
        inner = " " * (indent + 4)
        step = [f"{inner}{quoted(node.id)},", f"{inner}{quoted(node.type)},"]
        given = self._given(node)
        for field, value in (
            ("input", given["input"]),
            ("config", given["config"]),
            ("when", node.when),
            ("policy", node.policy.model_dump(by_alias=True, exclude_defaults=True)),
        ):
            if value:
                step.append(f"{inner}{field}={literal(value, indent + 4, field + '=')},")
        return [f"{' ' * indent}flow.step(", *step, f"{' ' * indent})"]

    def _given(self, node: NodeSpec) -> dict[str, Any]:
        """A node's input and config as the module gives them: schema files by path.

        A foreach node's body is left out of its input: ``Flow(bodies=...)`` has it.
        """
        given: dict[str, Any] = {"input": dict(node.input), "config": dict(node.config)}
        if node.type == FOREACH_TYPE:
            given["input"].pop("body", None)
        for key, path in node.schema_files.items():
            *parents, last = key.split(".")
            holder = given
            for part in parents:
                holder[part] = dict(holder[part])
                holder = holder[part]
            holder[last] = Code("schema", self._relative(path))
        return given

    def _relative(self, path: str) -> str:
        """``path`` relative to the module's folder (as it is, when it cannot be)."""
        try:
            return Path(os.path.relpath(Path(path).resolve(), self.folder)).as_posix()
        except ValueError:  # another drive
            return str(Path(path).resolve())

    def _graph(self) -> list[str]:
        limits = Flow.from_spec(self.spec).limits()
        call = [
            "reactive(",
            "    agents,",
            "    state=flow.state,",
            f"    name={quoted(self.spec.name)},",
            f"    input={literal(self.spec.input, 4, 'input=')},",
            "    fail_fast=True,",
            f"    max_depth={limits['max_depth']},",
            f"    max_activations={limits['max_activations']},",
            ")",
        ]
        if not self._loops:
            return ["", f"graph = {call[0]}", *call[1:]]
        return [
            "",
            "# Loop edges are cycles on purpose (maxIterations bounds them): no cycle warning.",
            "with warnings.catch_warnings():",
            '    warnings.simplefilter("ignore", CycleWarning)',
            f"    graph = {call[0]}",
            *(f"    {line}" for line in call[1:]),
        ]


def _docstring(spec: FlowSpec) -> str:
    parts = [f"{spec.name}: migrated from an edge-based flow by `reactor migrate`."]
    if spec.description:
        parts.append(spec.description.strip())
    parts.append(
        "The edges are in Flow(edges=...), and only there. Each node is an agent: it\n"
        "activates on flow.triggers(id) (its predecessors' node:<id>:done), and its\n"
        "guard, flow.ready(id), lets it run once all of its incoming edges are resolved;\n"
        "both come from the edges. Its output is recorded in the run's state under\n"
        "outputs.<id>:\n"
        "\n"
        "    result = graph.run_sync()   # LLM nodes need provider=...\n"
        '    print(result.state["outputs"])\n'
    )
    return "\n\n".join(parts).replace('"""', r"\"\"\"")


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
            registrations.append(f"registry.register({quoted(type_name)}, {name}{replace})")
            continue
        name = re.sub(r"\W", "_", type_name)
        stubs.append(
            [
                f"def {name}(input: dict[str, Any], node: NodeContext) -> Any:",
                f'    """Node type {quoted(type_name)} (used by node {quoted(node)}): '
                'write it here."""',
                f"    raise NotImplementedError({quoted(f'Write node type {type_name!r}.')})",
            ]
        )
        registrations.append(f"registry.register({quoted(type_name)}, {name}{replace})")
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
