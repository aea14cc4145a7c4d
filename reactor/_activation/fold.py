"""What a run's log says so far, folded signal by signal: what a resume needs, and snapshots.

A resume needs little of a long log: the state, the activations still in flight (with
the answers their provider calls, tools and questions already got), the signals some
agent has not decided on yet, the questions still pending, the messages waiting in
agents' mailboxes, the counters. :class:`LogFold` keeps exactly that, one signal at a
time, and forgets the rest (an activation that finished leaves nothing behind).

Its serialized form (``reactor._activation.snapshot``) is the payload of
``harness:snapshot``: a run's recorder folds its signals and writes one every
``snapshot_every`` signals, so that a resume loads the latest snapshot and folds only
the signals after it, whatever the length of the log.

More to keep (pending timers, say) is a :class:`Section`: it names the signals it folds
and has its own part of the snapshot; register it in :data:`SECTIONS`. A section with a
``bind(fold)`` method is given its fold when the fold is made (to ask which activations
are still in flight).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from reactor._providers.base import End, Usage
from reactor._signals.names import (
    HARNESS_FORKED,
    HARNESS_RESUMED,
    HARNESS_SNAPSHOT,
    HARNESS_START,
    PROMPT_START,
    PROVIDER_END,
    PROVIDER_START,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    SPAWN_START,
    TOOL_CALL,
    TOOL_RESULT,
    inbox_agent,
    parse_agent_event,
    parse_state_event,
    span_event,
)
from reactor._signals.payloads import input_tokens
from reactor._signals.signal import Signal, to_jsonable

__all__ = ["SECTIONS", "Flight", "LogFold", "Prompt", "Section"]

Routes = Callable[[str], Sequence[int]]
"""The positions (in ``agents``) of the agents a signal name activates."""


class Section(Protocol):
    """A part of what a resume needs that the core fold does not keep (pending timers...).

    A section folds the signals it :meth:`wants`, dumps what it keeps as JSON data into
    the snapshot (under its :attr:`key`) and is loaded back from it. A resumed run finds
    it in ``plan.sections[key]``.
    """

    key: str

    def wants(self, name: str) -> bool:
        """Whether signals named ``name`` change what the section keeps."""
        ...

    def fold(self, signal: Signal) -> None:
        """Take one signal it wants."""
        ...

    def dump(self) -> Any:
        """What it keeps, as JSON data."""
        ...

    def load(self, data: Any) -> None:
        """Take back what :meth:`dump` gave (on a fresh section)."""
        ...


SECTIONS: list[Callable[[], Section]] = []
"""Factories of the sections every fold has, besides the core (see :class:`Section`)."""


class Flight:
    """An activation that started and has not finished, with what its log answered."""

    __slots__ = ("activated", "agent", "ends", "index", "owned", "prompts", "tools", "trigger")

    def __init__(self, agent: str, activated: Signal, trigger: Signal, index: int) -> None:
        self.agent = agent
        self.activated = activated
        self.trigger = trigger
        self.index = index  # the agent's nth activation in the run
        self.ends: list[tuple[str, End]] = []  # (request hash, answer) of answered calls
        self.tools: list[tuple[str, Any, Any, str | None]] = []  # name, input, result, error
        self.prompts: list[str] = []  # ids of the questions it asked, in order
        self.owned: list[str] = []  # its phases, tasks, prompts: what may cause more


class Prompt:
    """A question asked and the outcome the log has for it."""

    __slots__ = ("answered", "asked", "owner", "reply", "timed_out")

    def __init__(self, owner: str, asked: Signal) -> None:
        self.owner = owner
        self.asked = asked
        self.answered = False
        self.timed_out = False
        self.reply: Mapping[str, Any] | None = None


_CAUSES = frozenset(
    {span_event("phase", "start"), span_event("task", "start"), PROMPT_START, SPAWN_START}
)
"""Signals that become the cause of what an activation emits inside them."""
_FINISHED = frozenset({"completed", "failed", "cancelled"})
_DECIDED = frozenset({"activated", "skipped", "failed"})

# What a name is, for the fold (cached per name: a long log has few distinct names).
_OTHER, _STATE, _AGENT, _ASKED, _ANSWERED, _INBOX, _CALL, _END, _TOOL, _RESULT = range(10)
_CAUSE, _GRAPH, _SNAPSHOT = range(10, 13)


_Known = tuple[int, tuple[str, ...], tuple[Section, ...], tuple[str, ...]]
"""For a name: its kind, (agent, event) for an agent's, the sections that want it, and
the agents that decide on it (those its name activates, of the graph's known agents)."""


def _kind(name: str) -> int:
    parsed = parse_state_event(name)
    if parsed is not None:
        return _STATE if parsed[1] == "changed" else _OTHER
    if parse_agent_event(name) is not None:
        return _AGENT
    if inbox_agent(name) is not None:
        return _INBOX
    kinds = {
        SESSION_PROMPT: _ASKED,
        SESSION_REPLY: _ANSWERED,
        SESSION_TIMEOUT: _ANSWERED,
        PROVIDER_START: _CALL,
        PROVIDER_END: _END,
        TOOL_CALL: _TOOL,
        TOOL_RESULT: _RESULT,
        HARNESS_START: _GRAPH,
        HARNESS_RESUMED: _GRAPH,
        HARNESS_FORKED: _GRAPH,
        HARNESS_SNAPSHOT: _SNAPSHOT,
    }
    return kinds.get(name, _CAUSE if name in _CAUSES else _OTHER)


class LogFold:
    """What a resume needs of a run's log, kept up to date one signal at a time.

    Args:
        agents: The names of the current graph's agents, in order.
        routes: Which of them a signal name activates.
        run_id: The run the folded signals belong to.
    """

    def __init__(self, agents: Sequence[str], routes: Routes, run_id: str | None = None) -> None:
        self.agents = list(agents)
        self.routes = routes
        self.run_id = run_id
        self.seq = 0  # the last signal folded
        self.input: Any = None
        self.state: dict[str, Any] = {}
        self.fingerprints: dict[str, dict[str, str]] | None = None
        self.launched: dict[str, int] = {}
        self.flights: dict[str, Flight] = {}  # activated id -> its flight, in start order
        self.owners: dict[str, str] = {}  # id of a cause inside a flight -> activated id
        self.open_calls: dict[str, str] = {}  # activation -> request hash of its open call
        self.calls: dict[str, tuple[str, Any]] = {}  # tool call id -> (activation, input)
        self.prompts: dict[str, Prompt] = {}  # prompt id -> question, in asking order
        self.tokens = [0, 0]  # input, output
        self.cost_usd: float | None = 0.0  # None once a call's cost is unknown
        self.undecided: dict[str, tuple[Signal, tuple[str, ...]]] = {}  # trigger -> agents
        self.mailboxes: dict[str, list[Any]] = {}  # messages no activation took
        self.sections: dict[str, Section] = {
            section.key: section for section in (make() for make in SECTIONS)
        }
        for section in self.sections.values():
            bind = getattr(section, "bind", None)
            if bind is not None:  # a section that asks which activations are in flight
                bind(self)
        self._known: frozenset[str] | None = None  # agents that decide (None: all)
        self._names: dict[str, _Known] = {}
        self._batch: Sequence[Signal] = ()
        self._recent: dict[str, Signal] | None = None

    # -- folding -----------------------------------------------------------------

    def add(self, signals: Iterable[Signal]) -> None:
        """Fold ``signals`` (in ``seq`` order, after those folded before)."""
        names, undecided, state = self._names, self.undecided, self.state
        self._batch = signals if isinstance(signals, Sequence) else ()
        last = None
        for last in signals:
            name = last.name
            known = names.get(name)
            if known is None:
                known = self._learn(name)
            kind, detail, wanting, deciding = known
            if kind == _STATE:
                payload = last.payload
                state[payload["key"]] = payload["new"]
            elif kind == _AGENT:
                self._agent_event(last, *detail)
            elif kind > _AGENT:
                fold = _FOLDS.get(kind)
                if fold is not None:
                    payload = last.payload
                    fold(self, last, payload if isinstance(payload, Mapping) else {})
                if kind == _GRAPH:  # a graph starts here: its own agents decide on it
                    state, deciding = self.state, self._learn(name)[3]
            if wanting:
                for section in wanting:
                    section.fold(last)
            if deciding:
                undecided[last.id] = (last, deciding)
        if last is not None:
            self.seq = last.seq
        self._batch, self._recent = (), None

    def _learn(self, name: str) -> _Known:
        """What the fold does with signals named ``name`` (learnt once per name)."""
        kind = _kind(name)
        detail = tuple(name.split(":")[1:]) if kind == _AGENT else ()
        wanting = tuple(section for section in self.sections.values() if section.wants(name))
        agents, known = self.agents, self._known
        deciding = tuple(
            agents[index] for index in self.routes(name) if known is None or agents[index] in known
        )
        found = self._names[name] = (kind, detail, wanting, deciding)
        return found

    def _find(self, signal_id: str) -> Signal | None:
        """A signal of the batch being folded (a trigger the fold did not route)."""
        if self._recent is None:
            self._recent = {signal.id: signal for signal in self._batch}
        return self._recent.get(signal_id)

    def know(self, fingerprints: Any) -> None:
        """The graph's agents from here on, from its recorded fingerprints.

        Only they decide on the signals folded next: an agent added to the graph by a
        later version of the code reacts to what comes after it was deployed, not to
        signals from before.
        """
        if isinstance(fingerprints, Mapping):
            self.fingerprints = {str(k): dict(v) for k, v in fingerprints.items()}
            self._known = frozenset(self.fingerprints)
            self._names.clear()  # who decides on each name is learnt again

    def owner(self, signal: Signal) -> str:
        """The id of the activation (``agent:<name>:activated``) ``signal`` was emitted in."""
        return self._owner(signal)

    def _owner(self, signal: Signal) -> str:
        """The activation ``signal`` was emitted in (through phases, tasks, prompts)."""
        cause = signal.caused_by
        if cause is None:
            return ""
        if cause in self.flights:
            return cause
        return self.owners.get(cause, cause)

    def _agent_event(self, signal: Signal, agent: str, event: str) -> None:
        # Every activation passes here three times (decided, activated, finished): the
        # hot path of the fold, kept to a few dict operations.
        cause = signal.caused_by
        trigger: Signal | None = None
        if event in _DECIDED and cause is not None:
            undecided = self.undecided
            entry = undecided.get(cause)
            if entry is not None:
                trigger, deciding = entry
                if deciding == (agent,):
                    del undecided[cause]
                elif agent in deciding:
                    undecided[cause] = (trigger, tuple(a for a in deciding if a != agent))
        if event == "activated":
            launched = self.launched
            index = launched[agent] = launched.get(agent, 0) + 1
            if trigger is None and cause is not None:
                trigger = self._find(cause)
            self.flights[signal.id] = Flight(agent, signal, trigger or signal, index)
        elif event in _FINISHED and cause is not None:
            flight = self.flights.pop(cause, None)
            if flight is not None:
                self._finish(cause, flight)

    def _finish(self, activation: str, flight: Flight) -> None:
        if flight.owned:
            for owned in flight.owned:
                self.owners.pop(owned, None)
        if flight.prompts:
            for prompt_id in flight.prompts:
                self.prompts.pop(prompt_id, None)
        if self.open_calls:
            self.open_calls.pop(activation, None)
        if self.mailboxes:
            self.mailboxes.pop(flight.agent, None)  # what it had not taken is gone with it

    def _graph(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        if signal.name == HARNESS_START:
            self.input = payload.get("input")
            self.state = dict(payload.get("state") or {})
        self.know(payload.get("fingerprints"))

    def _cause(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        owner = self._owner(signal)
        flight = self.flights.get(owner)
        if flight is not None:
            self.owners[signal.id] = owner
            flight.owned.append(signal.id)

    def _asked(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        owner = self._owner(signal)
        prompt_id = str(payload.get("prompt_id"))
        self.prompts[prompt_id] = Prompt(owner, signal)
        flight = self.flights.get(owner)
        if flight is not None:
            flight.prompts.append(prompt_id)

    def _reply(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        prompt = self.prompts.get(str(payload.get("prompt_id")))
        if prompt is not None:
            prompt.answered = True
            prompt.timed_out = signal.name == SESSION_TIMEOUT
            prompt.reply = payload if signal.name == SESSION_REPLY else None

    def _inbox(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        agent = inbox_agent(signal.name) or ""
        agents = self.agents
        if agent in agents and agents.index(agent) not in self.routes(signal.name):
            self.mailboxes.setdefault(agent, []).append(signal.payload)

    def _call(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        self.open_calls[self._owner(signal)] = str(payload.get("request_hash"))

    def _tool(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        self.calls[str(payload.get("id"))] = (self._owner(signal), payload.get("input"))

    def _result(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        call = self.calls.pop(str(payload.get("id")), None)
        flight = self.flights.get(self._owner(signal))
        if call is not None and flight is not None:
            result = (payload.get("result"), payload.get("error"))
            flight.tools.append((str(payload.get("name")), call[1], *result))

    def _answered(self, signal: Signal, payload: Mapping[str, Any]) -> None:
        owner = self._owner(signal)
        if owner not in self.open_calls:
            return
        usage = payload.get("usage") or {}
        used = Usage(input_tokens(usage), int(usage.get("output_tokens", 0)))
        self.tokens[0] += used.input_tokens
        self.tokens[1] += used.output_tokens
        cost = payload.get("cost_usd")
        known = self.cost_usd is not None and isinstance(cost, int | float)
        self.cost_usd = self.cost_usd + cost if known else None  # type: ignore[operator]
        digest = self.open_calls.pop(owner)
        flight = self.flights.get(owner)
        if flight is not None:
            end = End(
                output=payload.get("output"),
                usage=used,
                cost_usd=cost,
                stop_reason=payload.get("stop_reason"),
            )
            flight.ends.append((digest, end))

    # -- what it keeps -----------------------------------------------------------

    def state_now(self) -> dict[str, Any]:
        """The state after the last folded signal, as plain JSON data (a copy)."""
        return copy.deepcopy(to_jsonable(self.state))

    def undecided_pairs(self) -> list[tuple[Signal, str]]:
        """(signal, agent) for each decision not made yet, in ``seq`` order."""
        return [(signal, agent) for signal, agents in self.undecided.values() for agent in agents]


_FOLDS: dict[int, Callable[[LogFold, Signal, Mapping[str, Any]], None]] = {
    _GRAPH: LogFold._graph,
    _CAUSE: LogFold._cause,
    _ASKED: LogFold._asked,
    _ANSWERED: LogFold._reply,
    _INBOX: LogFold._inbox,
    _CALL: LogFold._call,
    _END: LogFold._answered,
    _TOOL: LogFold._tool,
    _RESULT: LogFold._result,
}
"""How the fold takes each other kind of signal (a snapshot is read by the resume, not here)."""
