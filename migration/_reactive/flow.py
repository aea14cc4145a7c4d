"""Flow: the edges of a migrated flow, as activations, guards and state.

The flow runs as a phase (the ``flow`` agent, :mod:`migration._reactive.phase`). Every
top-level node becomes one agent (see :meth:`Flow.agent`), each resolution a task:

* it activates on ``node:<pred>:done`` of each predecessor (the flow's ``phase:start``
  when it has none, or ``harness:start`` in a graph without the ``flow`` agent), and on
  ``node:<x>:done`` of the nodes that can re-open it through a loop;
* its guard (:meth:`Flow.ready`) reads the run's state when the trigger is dispatched
  and lets exactly one trigger through per resolution: all incoming edges resolved,
  the node not resolved yet, and the trigger the last predecessor to resolve (or the
  node that re-opened it);
* its run (:meth:`Flow.step`) settles the node (``when``, policies, ``forEach``,
  markers) and, in one store transaction, records the output under
  ``outputs.<id>``, applies its writes to the flow's ``state``, and resolves its
  outgoing edges in the ``flow`` ledger of the state; then ``node:<id>:done`` is
  emitted with the output.

The nodes of a ``control.foreach`` body have no agent: their foreach node's step runs
them, once per item, with the old kernel's scheduler (as the edge-based executor
does). Nor do the nodes of a ``forEach`` edge's per-item part, but its head (the
edge's target): the head's step runs the part once per item, records every node of it,
and the edges out of the part leave from the head (:mod:`migration._spec.scopes`). The
ledger (``state["flow"]``) is described in :mod:`migration._reactive.ledger`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import pydantic

from migration._edge.scheduler import body_runner, settle_unit
from migration._expressions.bindings import check_bindings
from migration._expressions.errors import FlowLoopError, FlowSpecError
from migration._expressions.values import apply_writes, binding_context
from migration._expressions.when import When, check_when
from migration._nodes.agents import agent_work
from migration._nodes.context import NodeFunction
from migration._nodes.node import Work, registry_work, resolve_edges, stop_error
from migration._nodes.registry import NodeRegistry
from migration._reactive.ledger import new_ledger, record, trigger_of
from migration._reactive.phase import PHASE_START, phase_agent, starts_flow
from migration._spec.limits import check_shape
from migration._spec.models import AGENT_TYPE, FOREACH_TYPE, EdgeSpec, NodePolicy, NodeSpec
from migration._spec.spec import FlowSpec
from reactor import Agent, AgentContext, RunKwargs, agent
from reactor._signals.names import HARNESS_START
from reactor.typing import Provider

__all__ = ["Flow", "done_signal"]

StepWork = str | Agent | NodeFunction
"""What a node does: a registry type name, an agent, or a node function."""


def done_signal(node: str) -> str:
    """``node:<id>:done``: emitted with the node's output once it has resolved."""
    return f"node:{node}:done"


class Flow:
    """The edges of a flow, for building its nodes as reactive agents.

    ``harness_to_reactive()`` builds one from a FlowSpec; ``reactor migrate`` prints
    the same construction as Python you can edit::

        flow = Flow(name="review", nodes=["draft", "check"],
                    edges=[{"from": "draft", "to": "check"}])
        graph = reactive(
            {
                "flow": flow.phase(),  # the flow's phase; its nodes start in it
                "draft": flow.agent("draft", "claude.agent", input={"prompt": "..."}),
                "check": flow.agent("check", my_check, input={"text": "{{draft.text}}"}),
            },
            state=flow.state,
            **flow.limits(),
        )

    Args:
        name: The flow's name (used in messages).
        nodes: Every node id, in declaration order (foreach body nodes included).
        edges: ``{"from", "to", "when"?, "type"?, "maxIterations"?, "forEach"?}``
            mappings (or ``(from, to)`` pairs, or :class:`EdgeSpec`).
        input: The flow's default input; a run's ``input`` is merged over it.
        fail_fast: ``policy.failFast``: stop the run at the first node failure that
            is not ``continueOnError``.
        registry: Where node types named by a string come from (default: the
            built-ins).
        state: The flow's initial ``state`` (``state.initial``).
        bodies: The body of each ``control.foreach`` node: ``{node: [body ids]}``.
            Body nodes get a step (``flow.step(...)``) but no agent.

    Raises:
        FlowSpecError: The ids, edges or bodies have problems (every one listed).
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
        state: Mapping[str, Any] | None = None,
        bodies: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        bodies = dict(bodies or {})
        self.structure = FlowSpec.load(
            {
                "name": name,
                "nodes": [
                    {"id": n, "type": FOREACH_TYPE, "input": {"body": list(bodies[n]), "items": []}}
                    if n in bodies
                    else {"id": n, "type": "control.noop"}
                    for n in nodes
                ],
                "edges": [
                    e.model_dump(by_alias=True, exclude_none=True) if isinstance(e, EdgeSpec) else e
                    for e in edges
                ],
                "policy": {"failFast": fail_fast},
            }
        )
        self.name = name
        self.nodes = tuple(nodes)
        self.edges = self.structure.edges
        self.input = dict(input or {})
        self.fail_fast = fail_fast
        self.registry = registry if registry is not None else NodeRegistry()
        self.initial_state = dict(state or {})
        self.topology = self.structure.topology
        self._steps: dict[str, tuple[NodeSpec, NodeRegistry]] = {}
        self._phased = False

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
            state=spec.state.initial,
            bodies=spec.scopes.bodies,
        )

    # -- wiring ------------------------------------------------------------------------

    def triggers(self, node: str) -> list[str]:
        """The signals ``node``'s agent activates on."""
        self._top_level(node)
        topology = self.topology
        names = [done_signal(p) for p in topology.predecessors(node)] or [
            HARNESS_START,
            PHASE_START,
        ]
        if topology.loops_in[node]:
            reopeners = [*sorted(topology.body[node], key=topology.position.__getitem__)]
            reopeners += topology.loop_sources(node)
            names += [done_signal(x) for x in reopeners]
        return list(dict.fromkeys(names))

    def ready(self, node: str) -> Callable[[AgentContext], bool]:
        """The join guard of ``node``'s agent (see the module docstring)."""
        self._top_level(node)
        incoming = self.topology.incoming[node]
        predecessors = self.topology.predecessors(node)

        def ready(ctx: AgentContext) -> bool:
            trigger = trigger_of(ctx.signal.name)
            if trigger is None and not starts_flow(ctx.signal, phased=self._phased):
                return False
            ledger = ctx.store.snapshot()["flow"]
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
        when: When | None = None,
        policy: Mapping[str, Any] | NodePolicy | None = None,
    ) -> Callable[[AgentContext], Awaitable[Any]]:
        """The ``run`` of ``node``'s agent: settle the node and record it.

        For a node of a foreach body, this defines the node for its foreach node to
        run; the returned function is not for an agent.

        Args:
            node: The node's id.
            work: A node type registered in the flow's registry (``"echo"``), a node
                function ``fn(input)`` / ``fn(input, ctx)``, or an agent (its code
                runs with the activation's context; its ``when`` can skip the node).
            input: The node's input; strings may hold bindings (``{{node.key}}``).
            config: The node's ``config``.
            when: A ``WhenExpr`` mapping or an expression string; false skips it.
            policy: ``{"retry": {"maxAttempts", "backoffMs"}, "timeoutMs",
                "continueOnError"}``.

        Raises:
            FlowSpecError: The node is unknown, or its bindings or ``when`` are
                malformed.
            UnknownNodeTypeError: ``work`` names a type the registry lacks.
        """
        self._known(node)
        where = f"Node {node!r}"
        check_shape({"input": input, "config": config, "when": when}, f"node {node!r}")
        problems = check_bindings(input or {}, where, key="input")
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
                when=when if isinstance(when, str) or when is None else dict(when),
                policy=NodePolicy.model_validate(policy or {}),
                agent=node_agent,
            )
        except pydantic.ValidationError as exc:
            problems = [
                f"{where}: {error['msg']} ({_loc(error['loc'])})." for error in exc.errors()
            ]
            raise FlowSpecError(problems, node=node, flow=self.name) from None
        registry = self.registry
        if function is not None:
            registry = registry.copy()
            registry.register(type_name, function, replace=True)
        self._steps[node] = (spec, registry)
        runner = self._runner(node)

        async def run(ctx: AgentContext) -> Any:
            if runner is not None:
                raise TypeError(f"{runner}; it has no agent of its own.")
            async with ctx.task(f"node:{node}"):
                return await self._settle(spec, ctx)

        run.__qualname__ = f"step[{node}]"
        return run

    def phase(self) -> Agent:
        """The ``flow`` agent: the flow's phase, ``Run Flow`` (see :func:`phase_agent`).

        ``reactive({"flow": flow.phase(), **node_agents}, ...)``. Once a flow has made
        its phase, its nodes without predecessors start on the phase's ``phase:start``,
        not on ``harness:start``: put the agent in the graph.
        """
        top_level = self.structure.scopes.members(None)
        self._phased = True
        return phase_agent(self.name, top_level)

    def agent(self, node: str, work: StepWork, **step: Any) -> Agent:
        """``node``'s agent: ``agent(run=step, activate_on=triggers, when=ready, emits=done)``.

        ``step`` takes the keyword arguments of :meth:`step`.
        """
        self._top_level(node)
        return agent(
            name=node,
            run=self.step(node, work, **step),
            activate_on=self.triggers(node),
            when=self.ready(node),
            emits=[done_signal(node)],
        )

    def state(self) -> dict[str, Any]:
        """A run's initial state: no outputs yet, an empty ledger, the initial flow state.

        ``reactive(..., state=flow.state)`` calls it for each run (and once when the
        graph is built, which checks that every node has a step).

        Raises:
            FlowSpecError: A node has no step, so it (or its successors) could
                never run.
        """
        missing = [node for node in self.nodes if node not in self._steps]
        if missing:
            raise FlowSpecError(
                f"Node{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} of "
                f"flow {self.name!r} ha{'ve' if len(missing) > 1 else 's'} no agent; build "
                "one with flow.agent(...) (or flow.step(...)) for every node.",
                node=missing[0],
                flow=self.name,
            )
        return {
            "outputs": {},
            "flow": new_ledger(),
            "state": copy.deepcopy(self.initial_state),
        }

    def limits(self) -> RunKwargs:
        """``max_depth`` and ``max_activations`` large enough for every loop to run out."""
        bound = self.topology.bound() + len(self.nodes) + 1  # the flow's own agent
        return {"max_depth": bound, "max_activations": bound}

    def _known(self, node: str) -> None:
        if node not in self.nodes:
            raise FlowSpecError(
                f"Flow {self.name!r} has no node {node!r} (nodes: {', '.join(self.nodes)}).",
                node=node,
                flow=self.name,
            )

    def _top_level(self, node: str) -> None:
        self._known(node)
        runner = self._runner(node)
        if runner is not None:
            raise FlowSpecError(
                f"{runner}; give it a step (flow.step({node!r}, ...)) but no agent.",
                node=node,
                flow=self.name,
            )

    def _runner(self, node: str) -> str | None:
        """Who runs ``node`` once per item, in a sentence, if not an agent of its own."""
        scopes = self.structure.scopes
        owner = scopes.scope_of(node)
        if owner is not None:
            return (
                f"Node {node!r} is in the body of foreach node {owner!r}, which runs it "
                "once per item"
            )
        head = scopes.head.get(node)
        if head is not None:
            return (
                f"Node {node!r} runs once per item of the forEach edge into {head!r}, in the "
                f"step of {head!r}"
            )
        return None

    # -- one resolution ----------------------------------------------------------------

    async def _settle(self, node: NodeSpec, ctx: AgentContext) -> Any:
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
        bindings = binding_context(flow_input, outputs, copy.deepcopy(snapshot["state"]))
        executor = _RunExecutor(self, flow_input, ctx.provider, ctx)
        outcome = await settle_unit(
            self.structure, node, self.topology, executor, fired=fired, bindings=bindings
        )
        # From here to the return nothing awaits: recording the resolution and the
        # emission of node:<id>:done that follows are one step for the other nodes.
        store = ctx.store
        now = store.snapshot()
        recorded = outcome.recorded(node.id)
        outputs = {**now["outputs"], **recorded}
        state = apply_writes(now["state"], outcome.writes)
        if outcome.stop:
            self._record_outputs(ctx, recorded, state)
            error, cause = stop_error(node, outcome, outputs, state)
            raise error from cause
        ledger = copy.deepcopy(now["flow"])
        after = binding_context(flow_input, outputs, state)
        try:
            fired_edges, loops = resolve_edges(
                node.id, self.topology, after, ledger["loops"], outputs
            )
        except FlowLoopError:
            self._record_outputs(ctx, recorded, state)
            raise
        record(ledger, self.topology, node.id, fired_edges, loops)
        with store.transaction() as draft:
            for name, output in recorded.items():
                draft["outputs"][name] = output
            draft["state"] = state
            draft["flow"] = ledger
        return outcome.output

    @staticmethod
    def _record_outputs(
        ctx: AgentContext, outputs: Mapping[str, Any], state: dict[str, Any]
    ) -> None:
        with ctx.store.transaction() as draft:
            for name, output in outputs.items():
                draft["outputs"][name] = output
            draft["state"] = state


@dataclasses.dataclass
class _RunExecutor:
    """Node work for one activation: its input, provider and context (foreach bodies too)."""

    flow: Flow
    flow_input: dict[str, Any]
    provider: Provider | None
    ctx: AgentContext

    @property
    def fail_fast(self) -> bool:
        return self.flow.fail_fast

    def node(self, node_id: str) -> NodeSpec:
        return self.flow._steps[node_id][0]

    def work(self, node: NodeSpec) -> Work:
        if node.agent is not None:
            return agent_work(node.agent, node.id, self.ctx)
        registry = self.flow._steps[node.id][1]
        body = None
        if node.id in self.flow.structure.scopes.bodies:

            def body(bindings: Mapping[str, Any]) -> Any:
                return body_runner(self.flow.structure, node.id, self, bindings)

        return registry_work(
            node, registry, flow_input=self.flow_input, provider=self.provider, body=body
        )


def _loc(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _function_type(fn: NodeFunction) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"python:{getattr(fn, '__module__', None) or '?'}.{name}"
