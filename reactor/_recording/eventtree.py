"""The event tree: a run's causal tree as nodes with kinds, statuses and durations.

``result.event_tree()``, ``recording.event_tree()`` and a ``reactor.trace()``'s
``event_tree()`` turn a signal log into an :class:`EventTree`: one node per activation,
``agent.prompt()`` call, model request, tool call, MCP call, reflection, task (a
``ctx.step`` is one), phase and child run, each opened by one signal and closed by
another (the node takes its status and duration from the pair, and a model request
its token usage), plus a leaf per other signal (state changes, emits). Streaming
deltas are left out.

A node's id is the id of the signal that opened it; the nodes of a child run started
with ``ctx.spawn`` are prefixed with that run's id (``run_.../sig_3``), since signal
ids are unique within a run only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from reactor._signals.names import (
    DELTAS,
    HARNESS_END,
    HARNESS_START,
    MCP_CALL,
    MCP_ERROR,
    MCP_RESULT,
    PROMPT_END,
    PROVIDER_END,
    PROVIDER_ERROR,
    PROVIDER_START,
    REFLECTION_END,
    SPAWN_END,
    SPAWN_START,
    TEXT_COMPLETE,
    TOOL_CALL,
    TOOL_RESULT,
    parse_agent_event,
)
from reactor._signals.signal import Signal, to_jsonable

__all__ = ["EventNode", "EventTree"]

_PAIRS = {
    "prompt": (PROMPT_END,),
    "reflection": (REFLECTION_END,),
    "spawn": (SPAWN_END,),
    **{kind: (f"{kind}:complete", f"{kind}:failed") for kind in ("task", "phase")},
}
"""Node kinds opened by ``<kind>:start`` and closed by one of these (tasks and phases
are ``ctx.task`` / ``ctx.phase``'s)."""
_CLOSERS = {closer: kind for kind, closers in _PAIRS.items() for closer in closers}


@dataclasses.dataclass(eq=False)
class EventNode:
    """One node of an :class:`EventTree`.

    Attributes:
        id: The id of the signal that opened it (prefixed with the run's id in a child run).
        kind: ``run``, ``activation``, ``prompt``, ``model``, ``tool``, ``mcp``,
            ``reflection``, ``task``, ``phase``, ``spawn`` or ``signal``.
        name: The agent, tool, step... it is about (for a ``signal`` leaf, its name).
        signal: The name of the signal that opened it.
        run_id: The run it belongs to.
        parent_id: Its parent's id (``None`` for the root).
        status: ``running``, then ``completed``, ``failed``, ``cancelled`` (or the run's
            status, for a run); ``None`` for a leaf.
        started_at: When it opened (UNIX seconds).
        duration_ms: How long it lasted, once closed.
        usage: Token usage, for model requests and prompts.
        data: The opening signal's payload (``end``: the closing one's).
        children: Its children's ids, in order.
    """

    id: str
    kind: str
    name: str
    signal: str
    run_id: str | None
    parent_id: str | None
    status: str | None
    started_at: float
    duration_ms: float | None = None
    usage: dict[str, int] | None = None
    data: dict[str, Any] = dataclasses.field(default_factory=dict)
    children: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The node alone (children as ids), as JSON-able data."""
        return to_jsonable(dataclasses.asdict(self))  # type: ignore[no-any-return]


class EventTree:
    """Lookups over the event tree of a run (see the module docstring).

    Attributes:
        root: The run's node (or, for a trace, a node standing for the trace).
    """

    def __init__(self, root: EventNode, nodes: Mapping[str, EventNode]) -> None:
        self.root = root
        self._nodes = dict(nodes)

    @classmethod
    def build(
        cls,
        signals: Sequence[Signal],
        children: Mapping[str, Sequence[Signal]]
        | Callable[[str], Sequence[Signal] | None]
        | None = None,
        *,
        name: str = "run",
    ) -> EventTree:
        """Build the tree of ``signals``.

        Args:
            signals: A run's signals, in order.
            children: Child runs' signals by run id (or a function giving them), to
                hang each child run's tree under the ``spawn`` node that started it.
            name: The root's name.
        """
        found = children or {}
        find = found if callable(found) else found.get
        builder = _Builder()
        root = builder.add_run(signals, None, "", name)
        done = 0
        while done < len(builder.spawns):
            spawn = builder.spawns[done]
            done += 1
            child_id = spawn.data.get("run_id") or spawn.data.get("end", {}).get("run_id")
            child = find(child_id) if isinstance(child_id, str) else None
            if child:
                builder.add_run(child, spawn.id, f"{child_id}/", child_id)
        return cls(root, builder.nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __iter__(self) -> Iterator[EventNode]:
        return iter(self._nodes.values())

    def get_node(self, id: str) -> EventNode | None:
        """The node with that id, or ``None``."""
        return self._nodes.get(id)

    def get_children(self, id: str) -> list[EventNode]:
        """The children of the node ``id``, in order (empty for an unknown id)."""
        node = self._nodes.get(id)
        return [] if node is None else [self._nodes[child] for child in node.children]

    def get_ancestors(self, id: str) -> list[EventNode]:
        """The ancestors of the node ``id``, root first, without the node itself."""
        found: list[EventNode] = []
        node = self._nodes.get(id)
        while node is not None and node.parent_id is not None:
            node = self._nodes.get(node.parent_id)
            if node is not None:
                found.append(node)
        found.reverse()
        return found

    def find(self, kind: str | None = None, name: str | None = None) -> list[EventNode]:
        """The nodes of a kind and/or name, in the order they opened."""
        return [
            node
            for node in self._nodes.values()
            if (kind is None or node.kind == kind) and (name is None or node.name == name)
        ]

    def to_dict(self) -> dict[str, Any]:
        """The whole tree as nested data: each node with its ``children`` as nodes."""
        top = {**self.root.to_dict(), "children": []}
        stack = [(top, self.root)]
        while stack:
            data, node = stack.pop()
            for child_id in node.children:
                child = self._nodes[child_id]
                child_data = {**child.to_dict(), "children": []}
                data["children"].append(child_data)
                stack.append((child_data, child))
        return top

    def to_json(self, indent: int | None = None) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        return f"<EventTree {self.root.name!r}: {len(self._nodes)} nodes>"


class _Builder:
    """Builds nodes from signals in one pass (no recursion: child runs are queued)."""

    def __init__(self) -> None:
        self.nodes: dict[str, EventNode] = {}
        self.spawns: list[EventNode] = []

    def add_run(
        self, signals: Sequence[Signal], parent: str | None, prefix: str, name: str
    ) -> EventNode:
        """Add the nodes of one run's ``signals`` under ``parent``; return the run's node."""
        first = signals[0] if signals else None
        root = self._root(first, parent, prefix, name)
        run = _RunPass(self, root, prefix)
        owner: dict[str, EventNode] = {}  # signal id -> the node it belongs to
        for signal in signals:
            name_ = signal.name
            if (
                name_ in DELTAS
                or name_ == TEXT_COMPLETE
                or (signal is first and root.signal != "trace")
            ):
                owner[signal.id] = root
                continue
            above = owner.get(signal.caused_by or "", root)
            data = signal.payload if isinstance(signal.payload, dict) else {}
            node = run.place(signal, above, data)
            if node is None:
                kind = "mcp" if name_.startswith("mcp:") else "signal"
                node = self.node(signal, kind, name_, above.id, prefix, None)
            owner[signal.id] = node
        return root

    def _root(self, first: Signal | None, parent: str | None, prefix: str, name: str) -> EventNode:
        """The run's node: its ``harness:start``'s, or one standing for a trace."""
        if first is not None and first.name == HARNESS_START:
            return self.node(first, "run", name, parent, prefix, status="running")
        root = EventNode(
            f"{prefix}root",
            "run",
            name,
            "trace",
            first.run_id if first is not None else None,
            parent,
            None,
            first.timestamp if first is not None else 0.0,
        )
        self.nodes[root.id] = root
        if parent is not None:
            self.nodes[parent].children.append(root.id)
        return root

    def running_node(
        self, above: EventNode, kind: str, data: Mapping[str, Any]
    ) -> EventNode | None:
        """The open node a closer of ``kind`` closes: its cause, or its cause's last child."""
        if above.kind == kind and above.status == "running":
            return above
        name = data.get("name")
        for child_id in reversed(above.children):
            child = self.nodes[child_id]
            if (
                child.kind == kind
                and child.status == "running"
                and (name is None or child.name == name)
            ):
                return child
        return None

    def node(
        self,
        signal: Signal,
        kind: str,
        name: str,
        parent: str | None,
        prefix: str,
        status: str | None,
    ) -> EventNode:
        data = signal.payload if isinstance(signal.payload, dict) else {"payload": signal.payload}
        node = EventNode(
            prefix + signal.id,
            kind,
            name,
            signal.name,
            signal.run_id,
            parent,
            status,
            signal.timestamp,
            data=dict(data),
        )
        self.nodes[node.id] = node
        if parent is not None:
            self.nodes[parent].children.append(node.id)
        return node

    @staticmethod
    def close(node: EventNode, signal: Signal, status: Any) -> None:
        payload = signal.payload if isinstance(signal.payload, dict) else {}
        node.status = str(status) if status is not None else "completed"
        duration = payload.get("duration_ms")
        node.duration_ms = (
            float(duration)
            if isinstance(duration, int | float)
            else round((signal.timestamp - node.started_at) * 1000, 3)
        )
        if isinstance(payload.get("usage"), dict):
            node.usage = payload["usage"]
        node.data["end"] = dict(payload)


class _RunPass:
    """One run's pass: the model requests, tool and MCP calls open in it."""

    def __init__(self, builder: _Builder, root: EventNode, prefix: str) -> None:
        self.builder = builder
        self.root = root
        self.prefix = prefix
        self.models: dict[str, EventNode] = {}  # parent node id -> its open model request
        self.tools: dict[str, EventNode] = {}  # tool call id -> its node
        self.mcps: dict[tuple[str, Any, Any], EventNode] = {}

    def place(self, signal: Signal, above: EventNode, data: Mapping[str, Any]) -> EventNode | None:
        """The node ``signal`` opens or closes, or ``None`` for a leaf of its own."""
        name = signal.name
        if name == HARNESS_END:
            self.builder.close(self.root, signal, data.get("status"))
            return self.root
        parsed = parse_agent_event(name)
        if parsed is not None:
            return self._activation(signal, above, parsed[0], parsed[1])
        if name in (PROVIDER_START, PROVIDER_END, PROVIDER_ERROR):
            return self._model(signal, above, data)
        if name in (TOOL_CALL, TOOL_RESULT):
            return self._tool(signal, above, data)
        if name in (MCP_CALL, MCP_RESULT, MCP_ERROR):
            return self._mcp(signal, above, data)
        kind = name.partition(":")[0]
        if name.endswith(":start") and kind in _PAIRS:
            return self._open(signal, above, data, kind)
        if name in _CLOSERS:
            return self._end(signal, above, data)
        return None

    def _node(self, signal: Signal, kind: str, name: str, parent: str) -> EventNode:
        return self.builder.node(signal, kind, name, parent, self.prefix, "running")

    def _activation(
        self, signal: Signal, above: EventNode, agent: str, event: str
    ) -> EventNode | None:
        if event == "activated":
            return self._node(signal, "activation", agent, above.id)
        finished = event in ("completed", "failed", "cancelled")
        if finished and above.kind == "activation" and above.status == "running":
            self.builder.close(above, signal, event)
            return above
        return None

    def _model(self, signal: Signal, above: EventNode, data: Mapping[str, Any]) -> EventNode | None:
        if signal.name == PROVIDER_START:
            node = self._node(signal, "model", str(data.get("agent")), above.id)
            self.models[above.id] = node
            return node
        request = self.models.pop(above.id, None)
        if request is not None:
            status = "completed" if signal.name == PROVIDER_END else "failed"
            self.builder.close(request, signal, status)
            request.usage = data.get("usage")
        return request

    def _tool(self, signal: Signal, above: EventNode, data: Mapping[str, Any]) -> EventNode | None:
        if signal.name == TOOL_CALL:
            holder = self.models.get(above.id, above)
            node = self._node(signal, "tool", str(data.get("name")), holder.id)
            self.tools[str(data.get("id"))] = node
            return node
        call = self.tools.pop(str(data.get("id")), None)
        if call is not None:
            self.builder.close(call, signal, "failed" if data.get("error") else "completed")
        return call

    def _mcp(self, signal: Signal, above: EventNode, data: Mapping[str, Any]) -> EventNode | None:
        key = (above.id, data.get("server"), data.get("tool"))
        if signal.name == MCP_CALL:
            tool = f"__{data.get('tool')}"
            holder = next(
                (t for t in reversed(self.tools.values()) if t.name.endswith(tool)), above
            )
            node = self._node(signal, "mcp", str(data.get("tool")), holder.id)
            self.mcps[key] = node
            return node
        call = self.mcps.pop(key, None)
        if call is not None:
            status = "completed" if signal.name == MCP_RESULT else "failed"
            self.builder.close(call, signal, status)
        return call

    def _open(
        self, signal: Signal, above: EventNode, data: Mapping[str, Any], kind: str
    ) -> EventNode:
        label = data.get("name") or data.get("agent") or data.get("graph") or kind
        node = self._node(signal, kind, str(label), above.id)
        if signal.name == SPAWN_START:
            self.builder.spawns.append(node)
        return node

    def _end(self, signal: Signal, above: EventNode, data: Mapping[str, Any]) -> EventNode | None:
        name = signal.name
        node = self.builder.running_node(above, _CLOSERS[name], data)
        if node is not None:
            failed = name.endswith(":failed") or data.get("error") or data.get("success") is False
            status = data.get("status") if name == SPAWN_END else None
            self.builder.close(node, signal, status or ("failed" if failed else "completed"))
        return node
