"""reactive() builds a graph from agents and state; run(), start() and run_reactive() run it."""

from __future__ import annotations

import asyncio
import dataclasses
import operator
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Unpack

from reactor._agents.agent import Agent
from reactor._engine.options import OPTION_NAMES, RunKwargs, RunOptions
from reactor._engine.result import RunResult
from reactor._engine.run import Run
from reactor._graph.evaluate import Runs, Scope, Scorer, evaluate, evaluate_sync
from reactor._graph.handle import Channel, RunHandle
from reactor._graph.origin import Origin
from reactor._graph.reads import NOTHING, Read, needs_reading, read_store, with_input
from reactor._graph.report import EvalReport
from reactor._graph.shape import GraphShape, shape_of
from reactor._graph.validate import Declarations, find_cycles, problems, state_schema
from reactor._providers.replay import ReplayProvider
from reactor._signals.door import check_payload
from reactor._signals.patterns import Pattern, normalize_patterns
from reactor.exceptions import AgentConfigError, CycleWarning, GraphValidationError
from stores import create_store

if TYPE_CHECKING:
    from reactor._providers.base import Provider
    from reactor._recording.store import SignalStore
    from reactor.typing import EndCondition

__all__ = ["Reactive", "reactive", "run_reactive"]


def _same(given: Mapping[str, Any], overrides: Mapping[str, Any]) -> bool:
    """Whether ``overrides`` gives the very objects ``given`` gave, and nothing else."""
    return given.keys() == overrides.keys() and all(
        map(operator.is_, map(given.__getitem__, overrides), overrides.values())
    )


def _reusable(given: Mapping[str, Any]) -> bool:
    """Whether options made of ``given`` may serve the next run given the same objects.

    Not a replay, fork or resume (each reads its own log), nor reporters given as a
    list (the caller may change it between runs; the options keep a copy).
    """
    return (
        "replay" not in given
        and "fork" not in given
        and "resume" not in given
        and type(given.get("reporters", ())) is tuple
    )


class Reactive:
    """A validated graph of agents over a state; create one with :func:`reactive`.

    Attributes:
        name: The graph's name (used in logs and recordings).
        agents: Agents by name.
        state: The state spec each run builds its store from.
        end_when: When a run ends before quiescence (callable or pattern), if ever.
        external: Patterns of signals that arrive from outside (``handle.send``).
        warnings: Cycle warnings found at build time.
        defaults: The run options given to :func:`reactive` (``input`` among them).
    """

    def __init__(
        self,
        agents: Mapping[str, Agent],
        *,
        state: Any,
        end_when: EndCondition | None,
        external: tuple[Pattern, ...],
        name: str | None,
        defaults: Mapping[str, Any],
        single: bool = False,
        origin: Origin | None = None,
        naming_problems: Iterable[str] = (),
    ) -> None:
        self.agents = dict(agents)
        self.state = state
        self.end_when = end_when
        self.external = external
        self.name = name
        self.single = single
        self.defaults: Mapping[str, Any] = dict(defaults)
        # The options of the last run, by what it was given (see _options).
        self._last_options: tuple[dict[str, Any], Mapping[str, Any], RunOptions] | None = None
        self._origin = origin or Origin(None, None)
        self._declarations = Declarations(
            agents=self.agents,
            state=state_schema(create_store(state)),
            external=external,
            single=single,
            scope=frozenset(self.defaults.get("scope") or ()),
        )
        found = [*naming_problems, *problems(self._declarations)]
        if found:
            raise GraphValidationError(found, graph=name)
        self.warnings: tuple[str, ...] = tuple(
            f"Agents form a cycle: {' -> '.join(cycle)}. Loops can be intentional; "
            "max_depth and max_activations bound them, and a guard (when=) or end_when "
            "ends them."
            for cycle in find_cycles(self._declarations)
        )
        for message in self.warnings:
            warnings.warn(message, CycleWarning, stacklevel=3)

    def _options(self, overrides: Mapping[str, Any]) -> RunOptions:
        last = self._last_options
        if last is not None and _same(last[0], overrides) and last[1] is self.defaults:
            # The same options as the run before (thousands of runs of one graph are
            # started alike): checked once. Only the input is checked for each run.
            check_payload(last[2].input, "input")
            return last[2]
        unknown = set(overrides) - OPTION_NAMES
        if unknown:
            raise TypeError(
                f"Unknown run option(s): {', '.join(sorted(unknown))}. "
                f"Run options are: {', '.join(sorted(OPTION_NAMES))}."
            )
        options = self._new_options(overrides)
        if _reusable(overrides) and _reusable(self.defaults):
            self._last_options = (dict(overrides), self.defaults, options)
        return options

    def _new_options(self, overrides: Mapping[str, Any]) -> RunOptions:
        merged = {**self.defaults, **overrides}
        replay = merged.get("replay")
        if replay is not None and "input" not in overrides:
            # A replay re-runs the recorded input, unless this run gives another.
            recording = replay.recording if isinstance(replay, ReplayProvider) else replay
            merged["input"] = recording.input
        else:
            check_payload(merged.get("input"), "input")  # before anything is emitted
        return RunOptions(**merged)

    def _run(self, options: RunOptions, read: Read, *, live: bool = False) -> Run:
        """The run of ``options``, from what was read of its store (:func:`read_store`)."""
        target, target_hash = self._origin.describe(self, options.target)
        plan, forked, _ = read
        return Run(
            self,
            options,
            live=live,
            target=target,
            target_hash=target_hash,
            resume=plan,
            forked=forked,
        )

    def _run_options(self, options: Mapping[str, Any], run_id: str | None) -> RunOptions:
        if run_id is not None:
            options = {**options, "run_id": run_id}
        return self._options(options)

    async def resume(
        self, run_id: str, *, channels: Sequence[Channel] = (), **options: Unpack[RunKwargs]
    ) -> RunResult:
        """Continue a recorded run that stopped before its end (its process died, say).

        Give ``record=``, the signal store the run was recorded in (it is required).
        The run keeps its id and goes on recording after its last ``seq``, starting
        with ``harness:resumed``. What the log says finished never runs again; what was
        in flight runs again, with provider calls that were answered answered from the
        log; signals that were not yet dispatched are. See ``docs/durability.md``.

        The graph may have changed since the run last ran: agents added, or changed but
        never activated, are fine; an agent changed or removed that has recorded
        activations, or a guard that now decides a recorded signal differently, raises
        :class:`~reactor.GraphChangedError` unless ``on_change="force"``.

        Raises:
            RunNotFoundError: ``record`` has no run ``run_id``.
            RunFinishedError: The run has already ended.
            GraphChangedError: The graph changed what the log says was done.
        """
        merged: RunKwargs = {**options, "resume": run_id}
        return await self.run(channels=channels, **merged)

    async def fork(
        self,
        run_id: str,
        *,
        at: int,
        state: Mapping[str, Any] | None = None,
        channels: Sequence[Channel] = (),
        **options: Unpack[RunKwargs],
    ) -> RunResult:
        """Start a new run from run ``run_id``'s log up to signal ``at``, and go on live.

        Give ``record=``, the store the source run is in (the fork is recorded there
        too, with ``RunInfo.forked_from``). The new run's log begins with the source's
        signals up to ``at``; what was in flight then runs again, its provider calls
        answered from the log where the log has their answers (no model call for the
        past). Then ``harness:forked {from_run_id, at}``, then ``state`` (key ->
        value) written by the actor ``user``, then the run goes on. Same as
        ``run(fork={"run_id": ..., "at": ..., "state": ...}, record=store)``.

        Raises:
            RunNotFoundError: ``record`` has no run ``run_id``.
            ValueError: ``at`` is not one of its signals, or ``record`` is missing.
            StateValidationError: ``state`` does not fit the graph's state.
        """
        merged: RunKwargs = {**options, "fork": {"run_id": run_id, "at": at, "state": state}}
        return await self.run(channels=channels, **merged)

    async def evaluate(
        self,
        runs: Runs,
        *,
        store: SignalStore,
        provider: Provider | None = None,
        scorers: Iterable[Scorer] = (),
        live_tools: Collection[str] = (),
        concurrency: int = 8,
        into: SignalStore | None = None,
        scope: Scope | None = None,
        any_graph: bool = False,
    ) -> EvalReport:
        """Run recorded runs again on this graph, and say what changed (a regression suite).

        ``runs``: run ids, :class:`~reactor.Recording` s, ``store.runs(...)`` or a dict
        filter of it. Unchanged model requests are answered from the recording, then
        ``provider`` (without one: ``diverged``); unrecorded tool calls raise
        :class:`~reactor.ToolNotRecordedError` unless in ``live_tools``. A case passes
        when it is ``same`` or ``changed`` and every scorer (``scorer(old, new)``, see
        :mod:`reactor.eval`) is truthy. New runs are tagged ``eval=<id>`` in ``into``
        (default ``store``; the recordings are copied into another). ``scope`` makes
        what each case's agents see beside the input from its recording (a reaction's
        object). Recordings of another graph (an agent not in this one) are refused
        unless ``any_graph``.

        Raises:
            ValueError: ``runs`` is empty, ``concurrency`` < 1, or a recording is of
                another graph (RunNotFoundError: unknown id; RecordingError: damaged).
        """
        return await evaluate(
            self,
            runs,
            store=store,
            provider=provider,
            scorers=scorers,
            live_tools=live_tools,
            concurrency=concurrency,
            into=into,
            scope=scope,
            any_graph=any_graph,
        )

    def evaluate_sync(self, runs: Runs, **options: Any) -> EvalReport:
        """:meth:`evaluate` from synchronous code (a script, a CI job)."""
        return evaluate_sync(self, runs, **options)

    def resume_sync(
        self, run_id: str, *, channels: Sequence[Channel] = (), **options: Unpack[RunKwargs]
    ) -> RunResult:
        """:meth:`resume` from synchronous code."""
        merged: RunKwargs = {**options, "resume": run_id}
        return self.run_sync(channels=channels, **merged)

    async def run(
        self,
        *,
        channels: Sequence[Channel] = (),
        run_id: str | None = None,
        fresh: bool = False,
        **options: Unpack[RunKwargs],
    ) -> RunResult:
        """Run the graph until quiescence, ``end_when``, a failure, a limit or timeout.

        Returns the :class:`RunResult`; failures are in ``result.status`` and
        ``result.error``, not raised. ``channels`` are attached to the run while it
        runs (``ConsoleChannel()`` shows it in the terminal and answers its prompts).
        ``run_id`` names the new run when the caller must know it before it starts (a
        job queue does); by default it is a fresh ``run_<time><random>`` (ids sort by
        when they were made). ``fresh``: the caller made that id just now and told
        nobody, so its inbox is not read before it begins (what is posted to it is
        delivered while it runs, as to any run).
        """
        run_options = self._run_options(options, run_id)
        read = NOTHING
        if needs_reading(run_options, fresh):  # the store is read off the event loop
            read = await asyncio.to_thread(read_store, self, run_options)
        if channels:
            handle = self._handle(run_options, options, read, channels, live=False)
            return await handle.result()
        run = self._run(with_input(run_options, options, read), read)
        run.begin(read[2])
        # Thousands of runs may wait here at once: what made the run is not kept.
        del options, run_options, read
        return await run.execute()

    def run_sync(
        self,
        *,
        raise_on_error: bool = False,
        channels: Sequence[Channel] = (),
        run_id: str | None = None,
        **options: Unpack[RunKwargs],
    ) -> RunResult:
        """Run from synchronous code (scripts, notebooks without a loop).

        Args:
            raise_on_error: Raise ``result.error`` if the run stopped on one.
            channels: Attached to the run, as for :meth:`run`.
            run_id: The new run's id, as for :meth:`run`.
            **options: Run options, as for :meth:`run`.

        Raises:
            RuntimeError: Called while an event loop is running (use ``await run()``).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "run_sync() cannot be used inside a running event loop; use "
                "`await graph.run(...)` there."
            )
        result = asyncio.run(self.run(channels=channels, run_id=run_id, **options))
        if raise_on_error and result.error is not None:
            raise result.error
        return result

    def start(
        self,
        *,
        channels: Sequence[Channel] = (),
        keep_open: bool = True,
        run_id: str | None = None,
        fresh: bool = False,
        **options: Unpack[RunKwargs],
    ) -> RunHandle:
        """Start a live run and return its :class:`RunHandle` (call from async code).

        A started run stays open for ``handle.send()`` at quiescence until
        ``end_when`` holds, it times out, or it is closed or aborted. With
        ``keep_open=False`` it ends at quiescence, as :meth:`run` does, and the handle
        takes input (``send``, ``reply``, ``abort``, ``suspend``) while it runs. Await
        ``handle.result()`` (or abort it): the handle owns the run's task.
        ``channels`` are attached to the run (see :class:`reactor.Channel`);
        ``run_id`` names it and ``fresh`` says that id was made just now, as for
        :meth:`run`. A resume or a fork reads its store here, on the event loop:
        :meth:`astart` reads it off the loop.
        """
        asyncio.get_running_loop()
        run_options = self._run_options(options, run_id)
        read = NOTHING
        if needs_reading(run_options, fresh):  # start() is synchronous: read here
            read = read_store(self, run_options)
        return self._handle(run_options, options, read, channels, live=keep_open)

    async def astart(
        self,
        *,
        channels: Sequence[Channel] = (),
        keep_open: bool = True,
        run_id: str | None = None,
        fresh: bool = False,
        **options: Unpack[RunKwargs],
    ) -> RunHandle:
        """:meth:`start`, awaited: what a resume or a fork reads of its store is read off the loop.

        The run has begun when it returns (its first signal is emitted). A server that
        starts runs among others' requests uses it, so that a resume's read of a long
        log never holds up the loop.
        """
        run_options = self._run_options(options, run_id)
        read = NOTHING
        if needs_reading(run_options, fresh):
            read = await asyncio.to_thread(read_store, self, run_options)
        return self._handle(run_options, options, read, channels, live=keep_open)

    def _handle(
        self,
        run_options: RunOptions,
        given: Mapping[str, Any],
        read: Read,
        channels: Sequence[Channel],
        *,
        live: bool,
    ) -> RunHandle:
        """Begin the run of ``run_options`` (its store read already) in a task of its own."""
        run = self._run(with_input(run_options, given, read), read, live=live)
        run.begin(read[2])
        task = asyncio.get_running_loop().create_task(run.execute(), name=f"reactor {run.run_id}")
        return RunHandle(run, task, channels)

    def shape(self, *, observed: Mapping[str, Iterable[str]] | None = None) -> GraphShape:
        """The graph as data: agents, signals, and the edges between them.

        Args:
            observed: State keys each agent was seen writing (in recorded runs), drawn
                as ``observed`` edges where they are not declared.
        """
        return shape_of(self._declarations, observed)

    def to_mermaid(self) -> str:
        """Draw the graph (agents, and the signals between them) as a Mermaid flowchart."""
        return self.shape().to_mermaid()

    def __repr__(self) -> str:
        return f"<Reactive {self.name or '(unnamed)'} agents={list(self.agents)}>"


def reactive(
    agents: Mapping[str, Agent] | Iterable[Agent],
    *,
    state: Any = None,
    end_when: EndCondition | None = None,
    external: Pattern | Iterable[Pattern] = (),
    name: str | None = None,
    **defaults: Unpack[RunKwargs],
) -> Reactive:
    """Build a graph: agents that react to signals, over one state.

    Args:
        agents: ``{name: agent}`` (agents are named after their keys) or a list of
            named agents.
        state: What each run's store is made from: a ``Store`` class or instance, a
            pydantic model class or instance, a dict, or a factory.
        end_when: End the run when ``end_when(run)`` holds after a signal (``run.state``,
            ``run.signal``, ``run.signals``), or when a signal matches this pattern.
        external: Patterns of signals sent from outside the graph (``handle.send``).
        name: The graph's name.
        **defaults: Default run options (see :class:`RunKwargs`).

    Raises:
        GraphValidationError: Every problem found, each with a hint.
        AgentConfigError: An agent is unnamed in a list, or not an agent.
    """
    named, found = _name_agents(agents)
    external_patterns = normalize_patterns(external) if external else ()
    if isinstance(end_when, str):
        normalize_patterns(end_when)
    unknown = set(defaults) - OPTION_NAMES
    if unknown:
        raise TypeError(
            f"Unknown run option(s) for reactive(): {', '.join(sorted(unknown))}. "
            f"Run options are: {', '.join(sorted(OPTION_NAMES))}."
        )
    RunOptions(**defaults)  # validate the defaults now
    return Reactive(
        named,
        state=state,
        end_when=end_when,
        external=external_patterns,
        name=name,
        defaults=defaults,
        origin=Origin.of_caller(),
        naming_problems=found,
    )


def _name_agents(
    agents: Mapping[str, Agent] | Iterable[Agent],
) -> tuple[dict[str, Agent], list[str]]:
    """Agents by name, and the problems of naming them (reported with the others)."""
    named: dict[str, Agent] = {}
    found: list[str] = []
    items = agents.items() if isinstance(agents, Mapping) else ((None, a) for a in agents)
    for key, agent in items:
        if not isinstance(agent, Agent):
            raise AgentConfigError(
                f"{agent!r} is not an agent; build agents with reactor.agent(...).",
                agent=key,
            )
        name = key or agent.name
        if name is None:
            raise AgentConfigError(
                "An agent in the list has no name; give it name= or pass agents as a dict "
                "{name: agent}.",
            )
        if key is not None and agent.name is not None and agent.name != key:
            found.append(
                f"The agent under key {key!r} is named {agent.name!r}. Hint: use the same "
                "name, or leave name= out and let the key name it."
            )
        if name in named:
            found.append(f"Two agents are named {name!r}. Hint: give each agent its own name.")
        try:
            named[name] = agent if agent.name == name else agent.named(name)
        except AgentConfigError as exc:
            found.append(str(exc))
            named[name] = dataclasses.replace(agent, name=name, problems=())
    if not named:
        found.append("The graph has no agents. Hint: pass agents={'name': agent(...)}.")
    return named, found


async def run_reactive(
    agent: Agent | None = None,
    /,
    *,
    agents: Mapping[str, Agent] | Iterable[Agent] | None = None,
    state: Any = None,
    end_when: EndCondition | None = None,
    external: Pattern | Iterable[Pattern] = (),
    name: str | None = None,
    **options: Unpack[RunKwargs],
) -> RunResult:
    """Run one agent, or a graph, in one call.

    ``await run_reactive(analyst, input="...", provider=p)`` runs a single agent
    (``result.output`` is its last output); ``await run_reactive(agents={...},
    state=..., provider=p)`` builds and runs a graph (``result.output`` is the final
    state, or the payload of the signal a pattern ``end_when`` matched).
    """
    if (agent is None) == (agents is None):
        raise TypeError("Pass one agent positionally, or agents={...}, but not both.")
    if agent is not None:
        graph = Reactive(
            {agent.name or "agent": agent.named(agent.name or "agent")},
            state=state,
            end_when=end_when,
            external=normalize_patterns(external) if external else (),
            name=name or agent.name,
            defaults={},
            single=True,
        )
    else:
        assert agents is not None
        graph = reactive(agents, state=state, end_when=end_when, external=external, name=name)
    return await graph.run(**options)
