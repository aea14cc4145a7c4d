"""Resuming a recorded run: what its log says is done, in flight, and still to decide.

A run's log holds every decision it made: each activation (``agent:<name>:activated``,
caused by its trigger), how it ended (``completed``, ``failed``, ``cancelled``), each
skip, each provider call and tool result. A :class:`ResumePlan` reads it back:

* the state, rebuilt as ``state_at(last seq)``;
* activations that finished: never run again (their effects are in the log);
* activations in flight when the process died: run again, with the rebuilt state; a
  provider call of theirs that was answered is answered from the log
  (:class:`RecordedAnswers`), and a tool result that was recorded is reused;
* signals some agent should have decided on (activate or skip) but had not: dispatched
  to that agent again, in ``seq`` order, before any new work;
* questions to people: an activation in flight asks again, but takes its recorded
  prompt (never asked twice) and its recorded reply if there was one; prompts still
  waiting are pending again from the start, so a reply can come at once;
* messages to agents (``inbox:<agent>``) since an agent's last finished activation:
  in its mailbox again, for the rerun to ``receive()``.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reactor._agents.asking import PendingPrompt, RecordedPrompt, recorded_prompt
from reactor._providers.base import End, ProviderRequest, Usage
from reactor._providers.toolrun import RecordedToolError
from reactor._providers.tools import Tool
from reactor._recording.recording import Recording
from reactor._signals.names import (
    PROVIDER_END,
    PROVIDER_START,
    SESSION_PROMPT,
    SESSION_REPLY,
    SESSION_TIMEOUT,
    TOOL_CALL,
    TOOL_RESULT,
    inbox_agent,
    parse_agent_event,
)
from reactor._signals.signal import Signal

__all__ = ["InFlight", "RecordedAnswers", "ResumePlan"]

_FINISHED = frozenset({"completed", "failed", "cancelled"})
_DECIDED = frozenset({"activated", "skipped", "failed"})


class RecordedAnswers:
    """The answered provider calls and tool results of one activation, from its log.

    A rerun activation asks its provider again; a request that was answered before the
    crash (same request hash, same occurrence within the activation) gets the recorded
    answer without a call, and a tool the model calls again with the same input returns
    the recorded result without running again.
    """

    def __init__(self) -> None:
        self._ends: dict[str, list[End]] = {}
        self._seen: Counter[str] = Counter()
        self._tools: dict[tuple[str, str], list[tuple[Any, str | None]]] = {}
        self.prompts: list[RecordedPrompt] = []  # in the order they were asked

    def next_prompt(self) -> RecordedPrompt | None:
        """The recorded prompt the activation's next question is (``None``: a new one)."""
        return self.prompts.pop(0) if self.prompts else None

    def add_end(self, request_hash: str, end: End) -> None:
        """Record an answered call."""
        self._ends.setdefault(request_hash, []).append(end)

    def add_tool(self, name: str, arguments: Any, result: Any, error: str | None) -> None:
        """Record a tool's result for its arguments."""
        self._tools.setdefault((name, _key(arguments)), []).append((result, error))

    def answer(self, request: ProviderRequest) -> End | None:
        """The recorded answer to ``request``, if it was answered before."""
        digest = request.request_hash
        index = self._seen[digest]
        self._seen[digest] += 1
        ends = self._ends.get(digest, [])
        return ends[index] if index < len(ends) else None

    def tools(self, tools: Sequence[Tool]) -> tuple[Tool, ...]:
        """``tools`` whose recorded calls return their recorded results again."""
        if not self._tools:
            return tuple(tools)
        return tuple(dataclasses.replace(tool, fn=self._remembered(tool)) for tool in tools)

    def _remembered(self, tool: Tool) -> Callable[..., Any]:
        run = tool.fn

        async def remembered(**arguments: Any) -> Any:
            results = self._tools.get((tool.name, _key(arguments)))
            if results:
                result, error = results.pop(0)
                if error is not None:
                    raise RecordedToolError(error)
                return result
            value = run(**arguments)
            return await value if hasattr(value, "__await__") else value

        return remembered


def _key(arguments: Any) -> str:
    return json.dumps(arguments, sort_keys=True, default=str)


@dataclasses.dataclass
class InFlight:
    """An activation that had started but not finished: it runs again."""

    agent: str
    signal: Signal  # its agent:<name>:activated
    trigger: Signal
    index: int  # the agent's nth activation in the run
    answers: RecordedAnswers


@dataclasses.dataclass
class ResumePlan:
    """What a resumed run restores and does before anything new."""

    recording: Recording
    state: dict[str, Any]
    activations: int
    launched: dict[str, int]
    in_flight: list[InFlight]
    undecided: list[tuple[Signal, str]]  # (signal, agent) in seq order
    pending_prompts: list[PendingPrompt] = dataclasses.field(default_factory=list)
    mailboxes: dict[str, list[Any]] = dataclasses.field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def run_id(self) -> str:
        """The resumed run's id."""
        return self.recording.run_id

    @property
    def last_seq(self) -> int:
        """The ``seq`` the resumed run continues after."""
        return self.recording.signals[-1].seq if self.recording.signals else 0

    @property
    def input(self) -> Any:
        """The run's recorded input."""
        return self.recording.input

    @classmethod
    def read(
        cls, recording: Recording, agents: Sequence[str], routes: Callable[[str], Sequence[int]]
    ) -> ResumePlan:
        """Read a plan from a recording; ``routes(name)`` gives the agents a name triggers."""
        signals = recording.signals
        by_id = {signal.id: signal for signal in signals}
        decided: set[tuple[str, str]] = set()  # (trigger id, agent)
        started: dict[str, tuple[str, Signal, int]] = {}  # activated id -> (agent, sig, nth)
        finished: set[str] = set()
        launched: Counter[str] = Counter()
        answers: dict[str, RecordedAnswers] = {}
        calls: dict[str, Any] = {}  # tool call id -> arguments
        open_calls: dict[str | None, str] = {}  # activation id -> request hash
        spent = [0, 0]  # input tokens, output tokens
        cost_usd: float | None = 0.0  # None once a call's cost is unknown
        asked: dict[str, tuple[str, Signal]] = {}  # prompt id -> (activation id, prompt)
        outcomes: dict[str, Mapping[str, Any] | None] = {}  # prompt id -> reply (None: timeout)
        last_finished: dict[str, int] = {}  # agent -> seq of its last finished activation
        messages: list[Signal] = []  # inbox:<agent> signals

        def owner(signal: Signal) -> str:
            """The activation a signal was emitted in (through phases and tasks)."""
            cause = signal.caused_by
            while cause is not None and cause not in started and cause in by_id:
                cause = by_id[cause].caused_by
            return cause or ""

        for signal in signals:
            name = signal.name
            payload = signal.payload if isinstance(signal.payload, Mapping) else {}
            parsed = parse_agent_event(name)
            if parsed is not None:
                agent, event = parsed
                if event in _DECIDED and signal.caused_by is not None:
                    decided.add((signal.caused_by, agent))
                if event == "activated":
                    launched[agent] += 1
                    started[signal.id] = (agent, signal, launched[agent])
                elif event in _FINISHED and signal.caused_by in started:
                    finished.add(signal.caused_by)
                    last_finished[agent] = signal.seq
            elif name == SESSION_PROMPT:
                asked[str(payload.get("prompt_id"))] = (owner(signal), signal)
            elif name in (SESSION_REPLY, SESSION_TIMEOUT):
                outcomes[str(payload.get("prompt_id"))] = payload if name == SESSION_REPLY else None
            elif inbox_agent(name) is not None:
                messages.append(signal)
            elif name == PROVIDER_START:
                open_calls[owner(signal)] = str(payload.get("request_hash"))
            elif name == PROVIDER_END and owner(signal) in open_calls:
                usage = payload.get("usage") or {}
                spent[0] += int(usage.get("input_tokens", 0))
                spent[1] += int(usage.get("output_tokens", 0))
                cost = payload.get("cost_usd")
                known = cost_usd is not None and isinstance(cost, int | float)
                cost_usd = cost_usd + cost if known else None  # type: ignore[operator]
                end = End(
                    output=payload.get("output"),
                    usage=Usage(
                        int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
                    ),
                    cost_usd=payload.get("cost_usd"),
                    stop_reason=payload.get("stop_reason"),
                )
                activation = owner(signal)
                answers.setdefault(activation, RecordedAnswers()).add_end(
                    open_calls.pop(activation), end
                )
            elif name == TOOL_CALL:
                calls[str(payload.get("id"))] = payload.get("input")
            elif name == TOOL_RESULT and str(payload.get("id")) in calls:
                answers.setdefault(owner(signal), RecordedAnswers()).add_tool(
                    str(payload.get("name")),
                    calls[str(payload.get("id"))],
                    payload.get("result"),
                    payload.get("error"),
                )
        pending: list[PendingPrompt] = []
        for prompt_id, (activation, prompt) in asked.items():
            if activation in finished:
                continue
            if prompt_id in outcomes:
                reply = outcomes[prompt_id]
                recorded = recorded_prompt(prompt, reply, timed_out=reply is None)
            else:
                recorded = recorded_prompt(prompt, None, timed_out=False)
                pending.append(recorded.prompt)
            answers.setdefault(activation, RecordedAnswers()).prompts.append(recorded)
        in_flight = [
            InFlight(
                agent,
                activated,
                by_id.get(activated.caused_by or "", activated),
                nth,
                answers.get(activated.id, RecordedAnswers()),
            )
            for key, (agent, activated, nth) in started.items()
            if key not in finished
        ]
        undecided: list[tuple[Signal, str]] = []
        for signal in signals:
            for index in routes(signal.name):
                if (signal.id, agents[index]) not in decided:
                    undecided.append((signal, agents[index]))
        mailboxes: dict[str, list[Any]] = {}
        for message in messages:
            agent = inbox_agent(message.name) or ""
            # What no activation took, or what one in flight took before the stop.
            taken = agent not in agents or agents.index(agent) in routes(message.name)
            if not taken and message.seq > last_finished.get(agent, 0):
                mailboxes.setdefault(agent, []).append(message.payload)
        return cls(
            recording=recording,
            state=recording.state_at(signals[-1].seq if signals else 0),
            activations=sum(launched.values()),
            launched=dict(launched),
            in_flight=in_flight,
            undecided=undecided,
            input_tokens=int(spent[0]),
            output_tokens=int(spent[1]),
            cost_usd=cost_usd,
            pending_prompts=pending,
            mailboxes=mailboxes,
        )
