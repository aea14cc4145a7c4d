"""FlowSpec: the edge-based flow format being migrated from, loaded and checked.

A FlowSpec file has a ``flow:`` header (alias ``workflow:``) with ``name``,
``version``, ``description``, ``input`` and ``policy.failFast``, then ``nodes:`` and
``edges:``. :meth:`FlowSpec.load` reads it from a path, YAML text or a mapping, and
also accepts an edge-based Python definition ``{"agents": {...}, "edges": [...]}``.
Every problem is reported at once in a :class:`~migration.FlowSpecError`.
"""

from __future__ import annotations

import difflib
import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
import yaml
from pydantic import Field

from migration._bindings import bound_nodes, check_bindings, check_when
from migration._errors import FlowSpecError
from migration._topology import Problem, Topology, check_topology
from reactor import Agent
from reactor._diagnostics import log

__all__ = ["EdgeSpec", "FlowPolicy", "FlowSpec", "NodePolicy", "NodeSpec", "RetryPolicy"]


AGENT_TYPE = "reactor.agent"
"""The node type of an agent from an edge-based Python definition."""

_HEADER_KEYS = ("name", "version", "description", "input", "policy")
_NODE_KEYS = ("id", "type", "input", "config", "when", "policy")
_EDGE_KEYS = ("from", "to", "when", "type", "maxIterations")
_POLICY_KEYS = ("retry", "timeoutMs", "continueOnError")
_RETRY_KEYS = ("maxAttempts", "backoffMs")
_DEFINITION_KEYS = ("agents", "edges", "name", "description", "input", "policy", "policies")


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(
        frozen=True,
        extra="ignore",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        arbitrary_types_allowed=True,
    )


class RetryPolicy(_Model):
    """``policy.retry``: how many attempts a node gets, and the pause between them."""

    max_attempts: int = Field(default=1, ge=1, alias="maxAttempts")
    backoff_ms: int = Field(default=0, ge=0, alias="backoffMs")


class NodePolicy(_Model):
    """A node's ``policy``: retries, a timeout per attempt, and ``continueOnError``."""

    retry: RetryPolicy = RetryPolicy()
    timeout_ms: int | None = Field(default=None, gt=0, alias="timeoutMs")
    continue_on_error: bool = Field(default=False, alias="continueOnError")


class NodeSpec(_Model):
    """One node: ``id``, ``type``, ``input`` (bindings allowed), ``config``, ``when``, ``policy``.

    ``agent`` holds the agent of a node that comes from an edge-based Python
    definition (its ``type`` is then ``"reactor.agent"``).
    """

    id: str
    type: str
    input: dict[str, Any] = {}
    config: dict[str, Any] = {}
    when: dict[str, Any] | None = None
    policy: NodePolicy = NodePolicy()
    # Typed Any: pydantic would otherwise try to build a schema for the Agent dataclass.
    agent: Any = Field(default=None, exclude=True, repr=False)

    @pydantic.field_validator("agent")
    @classmethod
    def _is_agent(cls, value: Any) -> Agent | None:
        if value is not None and not isinstance(value, Agent):
            raise ValueError(f"agent must be a reactor agent, got {value!r}")
        return value


class EdgeSpec(_Model):
    """An edge ``from`` -> ``to``: ``forward`` (default) or ``loop`` (needs ``maxIterations``)."""

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    when: dict[str, Any] | None = None
    type: Literal["forward", "loop"] = "forward"
    max_iterations: int | None = Field(default=None, ge=1, alias="maxIterations")

    @property
    def key(self) -> str:
        """``"from->to"``: how messages and the run's bookkeeping name the edge."""
        return f"{self.source}->{self.target}"


class FlowPolicy(_Model):
    """The flow's ``policy``: ``failFast`` (default true) stops the flow at the first failure."""

    fail_fast: bool = Field(default=True, alias="failFast")


class FlowSpec(_Model):
    """An edge-based flow: a header, nodes, and the edges between them.

    Build one with :meth:`load`, which checks everything and reports every problem at
    once; constructing it directly checks fields only.
    """

    name: str = "flow"
    version: int | float | str = 1
    description: str | None = None
    input: dict[str, Any] = {}
    policy: FlowPolicy = FlowPolicy()
    nodes: tuple[NodeSpec, ...] = ()
    edges: tuple[EdgeSpec, ...] = ()

    @functools.cached_property
    def topology(self) -> Topology:
        """The flow's order, joins and loop bodies (call :meth:`check` first)."""
        return Topology([node.id for node in self.nodes], self.edges)

    def node(self, node_id: str) -> NodeSpec:
        """The node with ``node_id``.

        Raises:
            KeyError: There is no such node.
        """
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    @property
    def has_loops(self) -> bool:
        """Whether the flow has loop edges."""
        return any(edge.type == "loop" for edge in self.edges)

    def order_warnings(self) -> list[str]:
        """Reads of node outputs that only the edge-based executor's order made safe.

        The edge-based executor ran one node at a time in topological order, so a
        node could read the output of a node it has no path from. The reactive graph
        runs independent branches concurrently, so such a read (in an input binding,
        a node's ``when``, or an edge's ``when`` about its source) may see the output
        or not. Each warning names the read and the edge that would order it.
        """
        topology = self.topology
        ids = {node.id for node in self.nodes}
        found: list[str] = []
        for node in self.nodes:
            upstream = topology.upstream(node.id)
            for read in sorted(bound_nodes(node.input, node.when) & ids - upstream - {node.id}):
                found.append(
                    f"Node {node.id!r} reads {read!r}, which is not upstream of it: the reactive "
                    f"graph may run them in either order. Add an edge {read}->{node.id} if "
                    f"{node.id!r} needs that output."
                )
        for edge in self.edges:
            upstream = topology.upstream(edge.source)
            for read in sorted(bound_nodes(when=edge.when) & ids - upstream - {edge.source}):
                found.append(
                    f"Edge {edge.key} decides on {read!r}, which is not upstream of "
                    f"{edge.source!r}: the reactive graph may settle them in either order. "
                    f"Add an edge {read}->{edge.source} if the decision needs it."
                )
        return found

    def check(self) -> FlowSpec:
        """Check ids, bindings, conditions and edges; return ``self``.

        Raises:
            FlowSpecError: Every problem found, each naming its node or edge.
        """
        _raise(self._problems(), self.name)
        return self

    def _problems(self) -> list[Problem]:
        problems: list[Problem] = check_topology([n.id for n in self.nodes], self.edges)
        for node in self.nodes:
            where = f"Node {node.id!r}"
            problems.extend((p, node.id, None) for p in check_bindings(node.input, where))
            if node.when is not None:
                problems.extend((p, node.id, None) for p in check_when(node.when, f"{where} when"))
        for edge in self.edges:
            if edge.when is not None:
                found = check_when(edge.when, f"Edge {edge.key} when")
                problems.extend((p, None, edge.key) for p in found)
        return problems

    @classmethod
    def load(cls, source: FlowSource) -> FlowSpec:
        """Load and check a flow.

        Args:
            source: A ``FlowSpec``; a path to a YAML file; YAML text; a mapping in
                the file's shape (``flow:``/``workflow:``, ``nodes:``, ``edges:``) or
                flat (``name``, ``nodes``, ``edges``, as :meth:`model_dump` gives);
                or an edge-based Python definition ``{"agents": {name: agent(...)},
                "edges": [...]}`` (optional ``name``, ``input``, ``policy`` and
                ``policies: {name: {...}}``).

        Raises:
            FlowSpecError: Every problem found.
            FileNotFoundError: ``source`` names a file that does not exist.
        """
        if isinstance(source, FlowSpec):
            return source.check()
        if isinstance(source, os.PathLike) or (isinstance(source, str) and _is_path(source)):
            path = Path(source)
            if not path.exists():
                raise FileNotFoundError(f"No flow file at {str(path)!r}.")
            return cls.load(path.read_text(encoding="utf-8"))
        if isinstance(source, str):
            try:
                data = yaml.safe_load(source)
            except yaml.YAMLError as exc:
                raise FlowSpecError(f"The flow is not valid YAML: {exc}") from None
            if not isinstance(data, Mapping):
                raise FlowSpecError(
                    "A flow file is a mapping with flow: (or workflow:), nodes: and edges:; "
                    f"got {type(data).__name__}."
                )
            return cls.load(data)
        if isinstance(source, Mapping):
            if "agents" in source:
                return _from_definition(source)
            return _from_mapping(source)
        raise TypeError(
            f"Cannot load a flow from {source!r}: give a path, YAML text, a mapping, a "
            "FlowSpec, or {'agents': {...}, 'edges': [...]}."
        )


FlowSource = FlowSpec | Mapping[str, Any] | str | os.PathLike[str]
"""What :meth:`FlowSpec.load` (and so every function of the package) accepts."""


def _is_path(text: str) -> bool:
    if "\n" in text or len(text) > 4096:
        return False
    if text.endswith((".yaml", ".yml", ".json")):
        return True
    try:
        return Path(text).is_file()
    except OSError:
        return False


def _raise(problems: list[Problem], flow: str | None) -> None:
    if problems:
        _, node, edge = problems[0]
        raise FlowSpecError([p[0] for p in problems], node=node, edge=edge, flow=flow)


def _unknown(raw: Mapping[str, Any], known: Iterable[str], where: str) -> list[str]:
    """Near-misses of known keys are problems; other unknown keys are logged and ignored."""
    problems = []
    known = tuple(known)
    for key in raw:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.8)
        if close:
            problems.append(f"{where}: unknown key {key!r}; did you mean {close[0]!r}?")
        else:
            log("migration.spec", "debug", "ignored flow key", key=key, where=where)
    return problems


def _from_mapping(raw: Mapping[str, Any]) -> FlowSpec:
    problems: list[Problem] = []
    headers = [key for key in ("flow", "workflow") if key in raw]
    if len(headers) == 2:
        problems.append(("Give the header once, as flow: or as workflow:, not both.", None, None))
    if headers:
        header = raw[headers[0]] or {}
        top_known: tuple[str, ...] = ("flow", "workflow", "nodes", "edges")
    else:
        header = {k: raw[k] for k in _HEADER_KEYS if k in raw}
        top_known = (*_HEADER_KEYS, "nodes", "edges")
    if not isinstance(header, Mapping):
        problems.append(("The flow: header must be a mapping.", None, None))
        header = {}
    problems.extend((p, None, None) for p in _unknown(raw, top_known, "The flow file"))
    problems.extend((p, None, None) for p in _unknown(header, _HEADER_KEYS, "flow"))
    if isinstance(header.get("policy"), Mapping):
        found = _unknown(header["policy"], ("failFast",), "flow.policy")
        problems.extend((p, None, None) for p in found)
    name = header.get("name") if isinstance(header.get("name"), str) else None
    nodes = list(_nodes(raw.get("nodes"), problems))
    edges = list(_edges(raw.get("edges"), problems))
    header_fields = {k: header[k] for k in _HEADER_KEYS if k in header}
    try:
        spec = FlowSpec.model_validate({**header_fields, "nodes": nodes, "edges": edges})
    except pydantic.ValidationError as exc:
        problems.extend((f"flow: {m}", None, None) for m in _messages(exc))
        _raise(problems, name)
        raise AssertionError("unreachable") from None  # pragma: no cover
    _raise([*problems, *spec._problems()], spec.name)
    return spec


def _nodes(raw: Any, problems: list[Problem]) -> Iterable[NodeSpec]:
    if raw is None:
        problems.append(("The flow has no nodes:; add at least one node.", None, None))
        return
    if not isinstance(raw, list | tuple):
        problems.append((f"nodes: must be a list of nodes, got {type(raw).__name__}.", None, None))
        return
    for position, item in enumerate(raw, start=1):
        if not isinstance(item, Mapping):
            problems.append((f"Node #{position} must be a mapping, got {item!r}.", None, None))
            continue
        node_id = item.get("id")
        where = f"Node {node_id!r}" if isinstance(node_id, str) else f"Node #{position}"
        own = node_id if isinstance(node_id, str) else None
        found = _unknown(item, _NODE_KEYS, where)
        policy = item.get("policy")
        if isinstance(policy, Mapping):
            found += _unknown(policy, _POLICY_KEYS, f"{where} policy")
            if isinstance(policy.get("retry"), Mapping):
                found += _unknown(policy["retry"], _RETRY_KEYS, f"{where} policy.retry")
        problems.extend((p, own, None) for p in found)
        try:
            yield NodeSpec.model_validate({k: item[k] for k in _NODE_KEYS if k in item})
        except pydantic.ValidationError as exc:
            problems.extend((f"{where}: {m}", own, None) for m in _messages(exc))
            if own is not None:  # keep its id, so edges to it are not reported as well
                yield NodeSpec.model_construct(id=own, type="?")


def _edges(raw: Any, problems: list[Problem]) -> Iterable[EdgeSpec]:
    if raw is None:
        return
    if not isinstance(raw, list | tuple):
        problems.append((f"edges: must be a list of edges, got {type(raw).__name__}.", None, None))
        return
    for position, item in enumerate(raw, start=1):
        if isinstance(item, list | tuple) and len(item) == 2:
            item = {"from": item[0], "to": item[1]}
        if not isinstance(item, Mapping):
            problems.append((f"Edge #{position} must be a mapping, got {item!r}.", None, None))
            continue
        key = f"{item.get('from')}->{item.get('to')}"
        where = f"Edge {key}" if "from" in item and "to" in item else f"Edge #{position}"
        own = key if where != f"Edge #{position}" else None
        problems.extend((p, None, own) for p in _unknown(item, _EDGE_KEYS, where))
        try:
            yield EdgeSpec.model_validate({k: item[k] for k in _EDGE_KEYS if k in item})
        except pydantic.ValidationError as exc:
            problems.extend((f"{where}: {m}", None, own) for m in _messages(exc))


def _messages(exc: pydantic.ValidationError) -> list[str]:
    messages = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error["loc"])
        value = f" (got {error['input']!r})" if error["type"] != "missing" else ""
        messages.append(f"{loc}: {error['msg']}{value}." if loc else f"{error['msg']}{value}.")
    return messages


def _from_definition(raw: Mapping[str, Any]) -> FlowSpec:
    problems: list[Problem] = []
    problems.extend((p, None, None) for p in _unknown(raw, _DEFINITION_KEYS, "The definition"))
    agents = raw["agents"]
    if not isinstance(agents, Mapping) or not agents:
        raise FlowSpecError(
            "agents must be a non-empty mapping {name: agent(...)} of the flow's nodes."
        )
    policies = raw.get("policies") or {}
    nodes: list[dict[str, Any]] = []
    for name, node_agent in agents.items():
        where = f"Agent {name!r}"
        if not isinstance(node_agent, Agent):
            problems.append((f"{where} is not an agent; build it with agent(...).", name, None))
            continue
        if node_agent.activate_on != ("harness:start",):
            problems.append(
                (
                    f"{where} has activate_on={list(node_agent.activate_on)!r}; in an edge-based "
                    "definition the edges say when it runs, so leave activate_on out.",
                    name,
                    None,
                )
            )
        if node_agent.emits or node_agent.updates is not None:
            problems.append(
                (
                    f"{where} declares emits= or updates=; a node's output is recorded under "
                    f"outputs.{name} and announced as node:{name}:done, so leave them out.",
                    name,
                    None,
                )
            )
        node: dict[str, Any] = {"id": name, "type": AGENT_TYPE, "agent": node_agent}
        if name in policies:
            node["policy"] = policies[name]
        nodes.append(node)
    for name in policies:
        if name not in agents:
            problems.append((f"policies names {name!r}, which is not an agent.", name, None))
    edges = list(_edges(raw.get("edges") or [], problems))
    validated: list[NodeSpec] = []
    for node in nodes:
        try:
            validated.append(NodeSpec.model_validate(node))
        except pydantic.ValidationError as exc:
            problems.extend(
                (f"Agent {node['id']!r} policy: {m}", node["id"], None) for m in _messages(exc)
            )
    header = {k: raw[k] for k in ("name", "description", "input", "policy") if k in raw}
    try:
        spec = FlowSpec.model_validate({**header, "nodes": validated, "edges": edges})
    except pydantic.ValidationError as exc:
        problems.extend((m, None, None) for m in _messages(exc))
        _raise(problems, None)
        raise AssertionError("unreachable") from None  # pragma: no cover
    _raise(problems, spec.name)
    return spec.check()
