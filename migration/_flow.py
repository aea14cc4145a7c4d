"""Flow: the edges of a migrated flow, as activations, guards and state.

Every node becomes one agent (see :meth:`Flow.agent`):

* it activates on ``node:<pred>:done`` of each predecessor (``harness:start`` when it
  has none), and on ``node:<x>:done`` of the nodes that can re-open it through a loop;
* its guard (:meth:`Flow.ready`) reads the run's state when the trigger is dispatched
  and lets exactly one trigger through per resolution: all incoming edges resolved,
  the node not resolved yet, and the trigger the last predecessor to resolve (or the
  node that re-opened it);
* its run (:meth:`Flow.step`) settles the node (``when``, policies, markers) and, in
  one store transaction, records the output under ``outputs.<id>`` and resolves its
  outgoing edges in the ``flow`` ledger of the state; then ``node:<id>:done`` is
  emitted with the output.

The ledger, ``state["flow"]``: ``clock`` (resolutions so far), ``done`` (node ->
the clock value when it resolved in the current pass), ``edges`` (``"from->to"`` ->
fired?), ``loops`` (loop edge -> times fired), ``pending`` (loop edges waiting for
their body to settle), ``looped`` (re-opened loop target -> the node whose
resolution re-opened it).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pydantic

from migration._agents import agent_work
from migration._bindings import binding_context, check_bindings, check_when
from migration._edge import failure_message
from migration._errors import FlowLoopError, FlowRunError, FlowSpecError
from migration._node import Work, registry_work, resolve_edges, settle
from migration._registry import NodeFunction, NodeRegistry
from migration._spec import AGENT_TYPE, EdgeSpec, FlowSpec, NodePolicy, NodeSpec
from reactor import Agent, AgentContext, agent
from stores import Store

__all__ = ["Flow", "done_signal"]

StepWork = str | Agent | NodeFunction
"""What a node does: a registry type name, an agent, or a node function."""


def done_signal(node: str) -> str:
    """``node:<id>:done``: emitted with the node's output once it has resolved."""
    return f"node:{node}:done"


def _trigger(signal_name: str) -> str | None:
    parts = signal_name.split(":")
    return parts[1] if len(parts) == 3 and parts[0] == "node" and parts[2] == "done" else None


class Flow:
    """The edges of a flow, for building its nodes as reactive agents.

    ``harness_to_reactive()`` builds one from a FlowSpec; ``reactor migrate`` prints
    the same construction as Python you can edit::

        flow = Flow(name="review", nodes=["draft", "check"],
                    edges=[{"from": "draft", "to": "check"}])
        graph = reactive(
            {
                "draft": flow.agent("draft", "claude.agent", input={"prompt": "..."}),
                "check": flow.agent("check", my_check, input={"text": "{{draft.text}}"}),
            },
            state=flow.state,
            **flow.limits(),
        )

    Args:
        name: The flow's name (used in messages).
        nodes: Every node id, in declaration order.
        edges: ``{"from", "to", "when"?, "type"?, "maxIterations"?}`` mappings (or
            ``(from, to)`` pairs, or :class:`EdgeSpec`).
        input: The flow's default input; a run's ``input`` is merged over it.
        fail_fast: ``policy.failFast``: stop the run at the first node failure that
            is not ``continueOnError``.
        registry: Where node types named by a string come from (default: the
            built-ins).

    Raises:
        FlowSpecError: The ids or edges have problems (every one listed).
    """

    def __init__(
        self,
        *,
        name: str = "flow",
        nodes: Sequence[str],
        edges: Sequence[Mapping[str, Any] | Sequence[str] | EdgeSpec] = (),
        input: Mapping[str, Any] | None = None,
        fail_fast: bool = True,
        registry: NodeRegistry | None = None,
    ) -> None:
        parsed = FlowSpec.load(
            {
                "name": name,
                "nodes": [{"id": node, "type": "control.noop"} for node in nodes],
                "edges": [
                    e.model_dump(by_alias=True, exclude_none=True) if isinstance(e, EdgeSpec) else e
                    for e in edges
                ],
            }
        )
        self.name = name
        self.nodes = tuple(nodes)
        self.edges = parsed.edges
        self.input = dict(input or {})
        self.fail_fast = fail_fast
        self.registry = registry if registry is not None else NodeRegistry()
        self.topology = parsed.topology
        self._loop_edges = {e.key: e for e in self.edges if e.type == "loop"}
        self._stepped: set[str] = set()

    @classmethod
    def from_spec(cls, spec: FlowSpec, *, registry: NodeRegistry | None = None) -> Flow:
        """The flow of a (checked) :class:`FlowSpec`."""
        return cls(
            name=spec.name,
            nodes=[node.id for node in spec.nodes],
            edges=spec.edges,
            input=spec.input,
            fail_fast=spec.policy.fail_fast,
            registry=registry,
        )

    # -- wiring ------------------------------------------------------------------------

    def triggers(self, node: str) -> list[str]:
        """The signals ``node``'s agent activates on."""
        self._known(node)
        topology = self.topology
        names = [done_signal(p) for p in topology.predecessors(node)] or ["harness:start"]
        if topology.loops_in[node]:
            reopeners = [*sorted(topology.body[node], key=topology.order.index)]
            reopeners += topology.loop_sources(node)
            names += [done_signal(x) for x in reopeners]
        return list(dict.fromkeys(names))

    def ready(self, node: str) -> Callable[[AgentContext], bool]:
        """The join guard of ``node``'s agent (see the module docstring)."""
        self._known(node)
        topology = self.topology
        incoming = topology.incoming[node]
        predecessors = topology.predecessors(node)

        def ready(ctx: AgentContext) -> bool:
            ledger = ctx.store.snapshot()["flow"]
            trigger = _trigger(ctx.signal.name)
            if node in ledger["looped"]:
                return bool(ledger["looped"][node] == trigger)
            done = ledger["done"]
            if node in done:
                return False
            if not incoming:
                return trigger is None
            if trigger not in predecessors:
                return False
            if not all(edge.key in ledger["edges"] for edge in incoming):
                return False
            return bool(done[trigger] == max(done[p] for p in predecessors))

        ready.__qualname__ = f"ready[{node}]"
        return ready

    def step(
        self,
        node: str,
        work: StepWork,
        *,
        input: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        when: Mapping[str, Any] | None = None,
        policy: Mapping[str, Any] | NodePolicy | None = None,
    ) -> Callable[[AgentContext], Awaitable[Any]]:
        """The ``run`` of ``node``'s agent: settle the node and record it.

        Args:
            node: The node's id.
            work: A node type registered in the flow's registry (``"echo"``), a node
                function ``fn(input)`` / ``fn(input, ctx)``, or an agent (its code
                runs with the activation's context; its ``when`` can skip the node).
            input: The node's input; strings may hold bindings (``{{node.key}}``).
            config: The node's ``config``.
            when: A ``WhenExpr``; false skips the node.
            policy: ``{"retry": {"maxAttempts", "backoffMs"}, "timeoutMs",
                "continueOnError"}``.

        Raises:
            FlowSpecError: The node is unknown, or its bindings or ``when`` are
                malformed.
            UnknownNodeTypeError: ``work`` names a type the registry lacks.
        """
        self._known(node)
        where = f"Node {node!r}"
        problems = check_bindings(input or {}, where)
        if when is not None:
            problems += check_when(when, f"{where} when")
        if problems:
            raise FlowSpecError(problems, node=node, flow=self.name)
        if isinstance(work, str):
            self.registry.require({node: work})
            type_name, function, node_agent = work, None, None
        elif isinstance(work, Agent):
            type_name, function, node_agent = AGENT_TYPE, None, work
        elif callable(work):
            type_name, function, node_agent = _function_type(work), work, None
        else:
            raise TypeError(
                f"{where}: work must be a node type name, a function or an agent, got {work!r}."
            )
        try:
            spec = NodeSpec(
                id=node,
                type=type_name,
                input=dict(input or {}),
                config=dict(config or {}),
                when=dict(when) if when is not None else None,
                policy=NodePolicy.model_validate(policy or {}),
                agent=node_agent,
            )
        except pydantic.ValidationError as exc:
            problems = [
                f"{where}: {error['msg']} ({_loc(error['loc'])})." for error in exc.errors()
            ]
            raise FlowSpecError(problems, node=node, flow=self.name) from None
        self._stepped.add(node)
        registry = self.registry
        if function is not None:
            registry = registry.copy()
            registry.register(type_name, function, replace=True)

        async def run(ctx: AgentContext) -> Any:
            return await self._settle(spec, registry, ctx)

        run.__qualname__ = f"step[{node}]"
        return run

    def agent(self, node: str, work: StepWork, **step: Any) -> Agent:
        """``node``'s agent: ``agent(run=step, activate_on=triggers, when=ready, emits=done)``.

        ``step`` takes the keyword arguments of :meth:`step`.
        """
        return agent(
            name=node,
            run=self.step(node, work, **step),
            activate_on=self.triggers(node),
            when=self.ready(node),
            emits=[done_signal(node)],
        )

    def state(self) -> dict[str, Any]:
        """A run's initial state: no outputs yet, an empty ledger.

        ``reactive(..., state=flow.state)`` calls it for each run (and once when the
        graph is built, which checks that every node has a step).

        Raises:
            FlowSpecError: A node has no step (no agent), so its successors could
                never run.
        """
        missing = [node for node in self.nodes if node not in self._stepped]
        if missing:
            raise FlowSpecError(
                f"Node{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} of "
                f"flow {self.name!r} ha{'ve' if len(missing) > 1 else 's'} no agent; build "
                "one with flow.agent(...) (or flow.step(...)) for every node.",
                node=missing[0],
                flow=self.name,
            )
        ledger = {"clock": 0, "done": {}, "edges": {}, "loops": {}, "pending": [], "looped": {}}
        return {"outputs": {}, "flow": ledger}

    def limits(self) -> dict[str, int]:
        """``max_depth`` and ``max_activations`` large enough for every loop to run out."""
        bound = self.topology.bound() + len(self.nodes)
        return {"max_depth": bound, "max_activations": bound}

    def _known(self, node: str) -> None:
        if node not in self.topology.incoming:
            raise FlowSpecError(
                f"Flow {self.name!r} has no node {node!r} (nodes: {', '.join(self.nodes)}).",
                node=node,
                flow=self.name,
            )

    # -- one resolution ----------------------------------------------------------------

    async def _settle(self, node: NodeSpec, registry: NodeRegistry, ctx: AgentContext) -> Any:
        snapshot = ctx.store.snapshot()
        ledger = snapshot["flow"]
        incoming = self.topology.incoming[node.id]
        fired = (
            node.id in ledger["looped"]
            or not incoming
            or any(ledger["edges"][edge.key] for edge in incoming)
        )
        outputs = copy.deepcopy(snapshot["outputs"])
        flow_input = {**self.input, **(ctx.input or {})}
        bindings = binding_context(flow_input, outputs)
        work: Work
        if node.agent is not None:
            work = agent_work(node.agent, node.id, ctx)
        else:
            work = registry_work(
                node, registry, flow_input=flow_input, bindings=bindings, provider=ctx.provider
            )
        outcome = await settle(
            node, fired=fired, bindings=bindings, work=work, fail_fast=self.fail_fast
        )
        # From here to the return nothing awaits: recording the resolution and the
        # emission of node:<id>:done that follows are one step for the other nodes.
        store = ctx.store
        outputs = {**store.snapshot()["outputs"], node.id: outcome.output}
        if outcome.stop:
            _record_output(store, node.id, outcome.output)
            raise FlowRunError(
                failure_message(node, outcome), node=node.id, outputs=outputs
            ) from outcome.error
        ledger = copy.deepcopy(store.snapshot()["flow"])
        after = binding_context(flow_input, outputs)
        try:
            fired_edges, loops = resolve_edges(
                node.id, self.topology, after, ledger["loops"], outputs
            )
        except FlowLoopError:
            _record_output(store, node.id, outcome.output)
            raise
        self._record(ledger, node.id, fired_edges, loops)
        with store.transaction() as draft:
            draft["outputs"][node.id] = outcome.output
            draft["flow"] = ledger
        return outcome.output

    def _record(
        self, ledger: dict[str, Any], node: str, fired: Mapping[str, bool], loops: list[EdgeSpec]
    ) -> None:
        """Record ``node``'s resolution in ``ledger``, then re-open settled loop bodies.

        The same rules as the edge-based executor's (``_edge._apply_settled``), written
        again on purpose over the JSON ledger: the property tests check one against
        the other.
        """
        ledger["clock"] += 1
        ledger["done"][node] = ledger["clock"]
        ledger["looped"].pop(node, None)
        ledger["edges"].update(fired)
        for edge in loops:
            ledger["loops"][edge.key] = ledger["loops"].get(edge.key, 0) + 1
            ledger["pending"].append(edge.key)
        body_of = self.topology.body
        applied = True
        while applied:
            applied = False
            for key in ledger["pending"]:
                target = self._loop_edges[key].target
                body = body_of[target]
                if all(member in ledger["done"] for member in body):
                    ledger["pending"] = [
                        k for k in ledger["pending"] if self._loop_edges[k].target != target
                    ]
                    for member in body:
                        del ledger["done"][member]
                    for edge in self.edges:
                        if edge.type == "forward" and edge.source in body:
                            ledger["edges"].pop(edge.key, None)
                    ledger["looped"][target] = node
                    applied = True
                    break


def _record_output(store: Store[Any], node: str, output: Any) -> None:
    with store.transaction() as draft:
        draft["outputs"][node] = output


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _function_type(fn: NodeFunction) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"python:{getattr(fn, '__module__', None) or '?'}.{name}"
