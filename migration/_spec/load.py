"""Reading a flow: from a path, YAML text or a mapping, to the fields of a FlowSpec.

The file's shape (``flow:``/``workflow:``, ``nodes:``, ``edges:``), the flat shape
(``name``, ``nodes``, ``edges``, as ``FlowSpec.model_dump()`` gives) and edge-based
Python definitions (``{"agents": {...}, "edges": [...]}``) all end up as one mapping
of :class:`~migration.FlowSpec` fields plus the problems found on the way, so that
``FlowSpec.load`` reports everything at once. Files an LLM node names
(``outputSchemaFile``, ``promptFile``) are read here, relative to the flow file, and
inlined, so that both executors and the generated Python see the same flow.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pydantic

from migration._expressions.errors import FlowSpecError
from migration._expressions.values import shorten
from migration._spec.limits import check_shape, load_yaml, read_text
from migration._spec.models import AGENT_TYPE, LLM_TYPES, EdgeSpec, NodeSpec
from migration._spec.topology import Problem
from reactor import Agent
from reactor._signals.diagnostics import log

__all__ = ["Parsed", "is_path", "messages", "parse_definition", "parse_mapping", "read_source"]

HEADER_KEYS = ("name", "version", "description", "input", "policy", "nodePacks", "state")
_NODE_KEYS = ("id", "type", "input", "config", "when", "policy")
_EDGE_KEYS = ("from", "to", "when", "type", "maxIterations", "forEach")
_EACH_KEYS = ("in", "as", "concurrency")
_POLICY_KEYS = ("retry", "timeoutMs", "continueOnError")
_RETRY_KEYS = ("maxAttempts", "backoffMs")
_DEFINITION_KEYS = ("agents", "edges", "name", "description", "input", "policy", "policies")


@dataclasses.dataclass
class Parsed:
    """The FlowSpec fields read from a source, and the problems found reading them."""

    fields: dict[str, Any]
    problems: list[Problem]
    name: str | None = None


def is_path(text: str) -> bool:
    """Whether a string names a flow file rather than holding YAML."""
    if "\n" in text or len(text) > 4096:
        return False
    if text.endswith((".yaml", ".yml", ".json")):
        return True
    try:
        return Path(text).is_file()
    except OSError:
        return False


def read_source(
    source: Mapping[str, Any] | str | os.PathLike[str],
) -> tuple[Mapping[str, Any], Path]:
    """The mapping a source holds, and the folder its relative file names start from.

    Raises:
        FileNotFoundError: ``source`` names a file that does not exist.
        FlowSpecError: The file is not UTF-8, not valid YAML, not a mapping, or
            beyond the size limits.
    """
    if isinstance(source, os.PathLike) or (isinstance(source, str) and is_path(source)):
        path = Path(source)
        if not path.is_file():
            raise FileNotFoundError(f"No flow file at {str(path)!r}.")
        data: Any = load_yaml(read_text(path), f"flow file {str(path)!r}")
        base = path.parent
    elif isinstance(source, str):
        data, base = load_yaml(source), Path.cwd()
    else:
        check_shape(source)
        data, base = source, Path.cwd()
    if not isinstance(data, Mapping):
        raise FlowSpecError(
            "A flow file is a mapping with flow: (or workflow:), nodes: and edges:; "
            f"got {type(data).__name__}."
        )
    return data, base


def unknown(raw: Mapping[str, Any], known: Iterable[str], where: str) -> list[str]:
    """Near-misses of known keys are problems; other unknown keys are logged and ignored."""
    problems = []
    known = tuple(known)
    for key in raw:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.8)
        if close:
            problems.append(f"{where}: unknown key {shorten(key)}; did you mean {close[0]!r}?")
        else:
            log("migration.spec", "debug", "ignored flow key", key=shorten(key), where=where)
    return problems


def messages(exc: pydantic.ValidationError) -> list[str]:
    """One sentence per validation error, the offending value cut down to size."""
    found = []
    for error in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in error["loc"])
        value = f" (got {shorten(error['input'])})" if error["type"] != "missing" else ""
        found.append(f"{loc}: {error['msg']}{value}." if loc else f"{error['msg']}{value}.")
    return found


def parse_mapping(raw: Mapping[str, Any], base: Path) -> Parsed:
    """The fields of a flow in the file's shape (or the flat one)."""
    problems: list[Problem] = []
    headers = [key for key in ("flow", "workflow") if key in raw]
    if len(headers) == 2:
        problems.append(("Give the header once, as flow: or as workflow:, not both.", None, None))
    if headers:
        header = raw[headers[0]] or {}
        top_known: tuple[str, ...] = ("flow", "workflow", "nodes", "edges")
    else:
        header = {k: raw[k] for k in HEADER_KEYS if k in raw}
        top_known = (*HEADER_KEYS, "nodes", "edges")
    if not isinstance(header, Mapping):
        problems.append(("The flow: header must be a mapping.", None, None))
        header = {}
    problems.extend((p, None, None) for p in unknown(raw, top_known, "The flow file"))
    problems.extend((p, None, None) for p in unknown(header, HEADER_KEYS, "flow"))
    for key, known in (("policy", ("failFast",)), ("state", ("initial",))):
        if isinstance(header.get(key), Mapping):
            found = unknown(header[key], known, f"flow.{key}")
            problems.extend((p, None, None) for p in found)
    name = header.get("name") if isinstance(header.get("name"), str) else None
    nodes = list(_nodes(raw.get("nodes"), base, problems))
    if "edges" not in raw:
        problems.append(
            (
                "The flow has no edges:; the edge-based format requires it. Add the edges "
                "between the nodes, or edges: [] if they do not depend on each other.",
                None,
                None,
            )
        )
    edges = list(edges_of(raw.get("edges"), problems))
    fields = {k: header[k] for k in HEADER_KEYS if k in header}
    return Parsed({**fields, "nodes": nodes, "edges": edges}, problems, name)


def _nodes(raw: Any, base: Path, problems: list[Problem]) -> Iterable[NodeSpec]:
    if raw is None:
        problems.append(("The flow has no nodes:; add at least one node.", None, None))
        return
    if not isinstance(raw, list | tuple):
        problems.append((f"nodes: must be a list of nodes, got {type(raw).__name__}.", None, None))
        return
    for position, item in enumerate(raw, start=1):
        if not isinstance(item, Mapping):
            problems.append(
                (f"Node #{position} must be a mapping, got {shorten(item)}.", None, None)
            )
            continue
        node_id = item.get("id")
        where = f"Node {node_id!r}" if isinstance(node_id, str) else f"Node #{position}"
        own = node_id if isinstance(node_id, str) else None
        found = unknown(item, _NODE_KEYS, where)
        policy = item.get("policy")
        if isinstance(policy, Mapping):
            found += unknown(policy, _POLICY_KEYS, f"{where} policy")
            if isinstance(policy.get("retry"), Mapping):
                found += unknown(policy["retry"], _RETRY_KEYS, f"{where} policy.retry")
        fields = {k: item[k] for k in _NODE_KEYS if k in item}
        if item.get("type") in LLM_TYPES:
            fields = _inline_files(fields, base, where, found)
        problems.extend((p, own, None) for p in found)
        try:
            yield NodeSpec.model_validate(fields)
        except pydantic.ValidationError as exc:
            problems.extend((f"{where}: {m}", own, None) for m in messages(exc))
            if own is not None:  # keep its id, so edges to it are not reported as well
                yield NodeSpec.model_construct(id=own, type="?")


def _inline_files(
    fields: dict[str, Any], base: Path, where: str, found: list[str]
) -> dict[str, Any]:
    """Read ``outputSchemaFile`` (in ``input.options`` or ``config``) and ``input.promptFile``.

    Each schema file read is named in the node's ``schema_files``.
    """
    fields = dict(fields)
    for section, key in (("input", "options"), ("config", None)):
        holder = fields.get(section)
        if not isinstance(holder, Mapping):
            continue
        place = holder.get(key) if key else holder
        if not isinstance(place, Mapping) or "outputSchemaFile" not in place:
            continue
        label = f"{section}.{key}" if key else section
        schema = _read_schema(place["outputSchemaFile"], base, f"{where} {label}", found)
        if "outputSchema" in place:
            found.append(f"{where} {label}: give outputSchema or outputSchemaFile, not both.")
        inlined = {k: v for k, v in place.items() if k != "outputSchemaFile"}
        inlined["outputSchema"] = schema
        fields[section] = {**holder, key: inlined} if key else inlined
        if isinstance(place["outputSchemaFile"], str):
            read = fields.setdefault("schema_files", {})
            read[f"{label}.outputSchema"] = str(base / place["outputSchemaFile"])
    data = fields.get("input")
    if isinstance(data, Mapping) and "promptFile" in data:
        if "prompt" in data:
            found.append(f"{where}: give input.prompt or input.promptFile, not both.")
        path = _file(data["promptFile"], base, f"{where} input.promptFile", found)
        prompt = read_text(path, "prompt file") if path is not None else ""
        fields["input"] = {**{k: v for k, v in data.items() if k != "promptFile"}, "prompt": prompt}
    return fields


def _file(name: Any, base: Path, where: str, found: list[str]) -> Path | None:
    if not isinstance(name, str) or not name:
        found.append(f"{where} must be a file name, got {shorten(name)}.")
        return None
    path = Path(name) if Path(name).is_absolute() else base / name
    if not path.is_file():
        found.append(
            f"{where}: {name!r} was not found (looked at {str(path)!r}); a relative name "
            "starts from the flow file's folder."
        )
        return None
    return path


def _read_schema(name: Any, base: Path, where: str, found: list[str]) -> Any:
    path = _file(name, base, f"{where}.outputSchemaFile", found)
    if path is None:
        return {}
    try:
        schema = load_yaml(read_text(path, "schema file"), f"schema file {str(path)!r}")
    except FlowSpecError as exc:
        found.append(f"{where}.outputSchemaFile: {exc}")
        return {}
    if not isinstance(schema, Mapping):
        found.append(f"{where}.outputSchemaFile: {name!r} must hold a JSON schema object.")
        return {}
    return dict(schema)


def edges_of(raw: Any, problems: list[Problem]) -> Iterable[EdgeSpec]:
    """The edges of a list in the file's shape (``[from, to]`` pairs allowed)."""
    if raw is None:
        return
    if not isinstance(raw, list | tuple):
        problems.append((f"edges: must be a list of edges, got {type(raw).__name__}.", None, None))
        return
    for position, item in enumerate(raw, start=1):
        if isinstance(item, list | tuple) and len(item) == 2:
            item = {"from": item[0], "to": item[1]}
        if not isinstance(item, Mapping):
            problems.append(
                (f"Edge #{position} must be a mapping, got {shorten(item)}.", None, None)
            )
            continue
        key = f"{item.get('from')}->{item.get('to')}"
        where = f"Edge {key}" if "from" in item and "to" in item else f"Edge #{position}"
        own = key if where != f"Edge #{position}" else None
        found = unknown(item, _EDGE_KEYS, where)
        if isinstance(item.get("forEach"), Mapping):
            found += unknown(item["forEach"], _EACH_KEYS, f"{where} forEach")
        problems.extend((p, None, own) for p in found)
        try:
            yield EdgeSpec.model_validate({k: item[k] for k in _EDGE_KEYS if k in item})
        except pydantic.ValidationError as exc:
            problems.extend((f"{where}: {m}", None, own) for m in messages(exc))


def parse_definition(raw: Mapping[str, Any]) -> Parsed:
    """The fields of an edge-based Python definition ``{"agents": {...}, "edges": [...]}``."""
    problems: list[Problem] = []
    problems.extend((p, None, None) for p in unknown(raw, _DEFINITION_KEYS, "The definition"))
    agents = raw["agents"]
    if not isinstance(agents, Mapping) or not agents:
        raise FlowSpecError(
            "agents must be a non-empty mapping {name: agent(...)} of the flow's nodes."
        )
    policies = raw.get("policies") or {}
    nodes: list[NodeSpec] = []
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
        try:
            nodes.append(NodeSpec.model_validate(node))
        except pydantic.ValidationError as exc:
            problems.extend((f"{where} policy: {m}", name, None) for m in messages(exc))
    for name in policies:
        if name not in agents:
            problems.append((f"policies names {name!r}, which is not an agent.", name, None))
    edges = list(edges_of(raw.get("edges") or [], problems))
    header = {k: raw[k] for k in ("name", "description", "input", "policy") if k in raw}
    name = header.get("name") if isinstance(header.get("name"), str) else None
    return Parsed({**header, "nodes": nodes, "edges": edges}, problems, name)
