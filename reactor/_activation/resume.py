"""Resuming a recorded run: what its log says is done, in flight, and still to decide.

A run's log holds every decision it made: each activation (``agent:<name>:activated``,
caused by its trigger), how it ended (``completed``, ``failed``, ``cancelled``), each
skip, each provider call and tool result. A :class:`ResumePlan` reads it back, through
a :class:`~reactor._activation.fold.LogFold` that starts from the latest sound
``harness:snapshot`` (so a long run is read from its last snapshot on; one that was
changed after it was taken is skipped, see ``reactor._recording.seals``):

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

import bisect
import dataclasses
import json
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from reactor._activation.fold import Flight, LogFold, Prompt
from reactor._activation.snapshot import fold_from
from reactor._agents.asking import PendingPrompt, RecordedPrompt, recorded_prompt
from reactor._providers.base import End, ProviderRequest
from reactor._providers.toolrun import RecordedToolError
from reactor._providers.tools import Tool
from reactor._recording.log import latest_snapshot
from reactor._recording.recording import Recording
from reactor._recording.seals import skip
from reactor._signals.names import HARNESS_SNAPSHOT
from reactor._signals.signal import Signal
from reactor.exceptions import RecordingError, ToolNotRecordedError

__all__ = ["InFlight", "RecordedAnswers", "ResumePlan"]


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

    def tools(
        self, tools: Sequence[Tool], *, live: Collection[str] | None = None
    ) -> tuple[Tool, ...]:
        """``tools`` whose recorded calls return their recorded results again.

        A call that was not recorded runs the tool; with ``live`` (an evaluation), only
        if the tool is among them: any other raises :class:`~reactor.ToolNotRecordedError`.
        """
        if not self._tools and live is None:
            return tuple(tools)
        return tuple(dataclasses.replace(tool, fn=self._remembered(tool, live)) for tool in tools)

    def _remembered(self, tool: Tool, live: Collection[str] | None) -> Callable[..., Any]:
        run = tool.fn

        async def remembered(**arguments: Any) -> Any:
            given = {k: v for k, v in arguments.items() if k != tool.context_param}
            results = self._tools.get((tool.name, _key(given)))
            if results:
                result, error = results.pop(0)
                if error is not None:
                    raise RecordedToolError(error)
                return result
            if live is not None and tool.name not in live:
                raise ToolNotRecordedError(
                    f"The model called tool {tool.name!r} with {_key(given)}, which the "
                    "recording never saw: an evaluation does not repeat a side effect. "
                    f"Name it in live_tools (--live-tool {tool.name}) to run it for real.",
                    tool=tool.name,
                    arguments=given,
                )
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
    """What a resumed run restores and does before anything new.

    Attributes:
        recording: The log the plan was read from: the whole run, or its tail from the
            latest ``harness:snapshot`` on (what a resume loads of a long run).
        fold: What the log says, folded (a resumed run's recorder goes on from it).
    """

    recording: Recording
    fold: LogFold
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
        return self.fold.input

    @property
    def fingerprints(self) -> dict[str, dict[str, str]] | None:
        """The agents of the graph that last ran the run, as recorded (``None``: unknown)."""
        return self.fold.fingerprints

    @property
    def sections(self) -> Mapping[str, Any]:
        """What the extra sections of the fold keep (see ``reactor._activation.fold``)."""
        return self.fold.sections

    @classmethod
    def read(
        cls, recording: Recording, agents: Sequence[str], routes: Callable[[str], Sequence[int]]
    ) -> ResumePlan:
        """Read a plan from a recording; ``routes(name)`` gives the agents a name triggers.

        The log is folded from its latest sound ``harness:snapshot`` on (from its start
        when it has none), so a recording loaded from a snapshot (``store.load_tail``)
        is enough. A snapshot that fails its check, or that cannot be read back into a
        fold, is skipped with a warning (``reactor._recording.seals``) for the one
        before it.

        Raises:
            RecordingError: The log read is a tail whose snapshots are all unusable (a
                store's tail from its latest snapshot, unchecked): load the whole run.
        """
        signals, run_id = recording.signals, recording.run_id
        snapshot = latest_snapshot(signals)
        while snapshot is not None:
            try:
                fold = fold_from(snapshot.payload, agents, routes, run_id, _finder(signals))
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                skip(snapshot, f"it cannot be read back ({type(exc).__name__}: {exc})")
                snapshot = latest_snapshot(signals, int(snapshot.payload["seq"]) - 1)
            else:
                fold.add([signal for signal in signals if signal.seq > fold.seq])
                return cls.of(recording, fold)
        if not _from_the_start(signals):
            raise RecordingError(
                f"Run {run_id} was read from its latest snapshot on, and no snapshot in "
                "what was read can be used (see the warnings); load the whole run "
                "(store.load) to resume it from its start."
            )
        fold = LogFold(agents, routes, run_id)
        fold.add(signals)
        return cls.of(recording, fold)

    @classmethod
    def of(cls, recording: Recording, fold: LogFold) -> ResumePlan:
        """The plan of a log already folded (``fold`` is taken over, not copied)."""
        current = set(fold.agents)
        in_flight = [
            InFlight(
                flight.agent,
                flight.activated,
                flight.trigger,
                flight.index,
                _answers(flight, fold.prompts),
            )
            for flight in fold.flights.values()
            if flight.agent in current
        ]
        asked = fold.prompts.values()
        pending = [PendingPrompt.of(prompt.asked) for prompt in asked if not prompt.answered]
        return cls(
            recording=recording,
            fold=fold,
            state=fold.state_now(),
            activations=sum(fold.launched.values()),
            launched=dict(fold.launched),
            in_flight=in_flight,
            undecided=[pair for pair in fold.undecided_pairs() if pair[1] in current],
            input_tokens=fold.tokens[0],
            output_tokens=fold.tokens[1],
            cost_usd=fold.cost_usd,
            pending_prompts=pending,
            mailboxes={agent: list(box) for agent, box in fold.mailboxes.items() if box},
        )


def _from_the_start(signals: Sequence[Signal]) -> bool:
    """Whether a log holds every signal up to its first snapshot (it is not a tail)."""
    first = next((i for i, s in enumerate(signals) if s.name == HARNESS_SNAPSHOT), None)
    if first is None:
        return True  # no snapshot: a store's tail is the whole run
    return all(signal.seq == number for number, signal in enumerate(signals[:first], start=1))


def _finder(signals: Sequence[Signal]) -> Callable[[int], Signal | None]:
    """Find a signal of a log (in ``seq`` order) by its ``seq``."""

    def find(seq: int) -> Signal | None:
        index = bisect.bisect_left(signals, seq, key=lambda signal: signal.seq)
        return signals[index] if index < len(signals) and signals[index].seq == seq else None

    return find


def _answers(flight: Flight, prompts: Mapping[str, Prompt]) -> RecordedAnswers:
    """What a flight's log answered: provider calls, tool results, questions."""
    answers = RecordedAnswers()
    for digest, end in flight.ends:
        answers.add_end(digest, end)
    for name, arguments, result, error in flight.tools:
        answers.add_tool(name, arguments, result, error)
    for prompt_id in flight.prompts:
        prompt = prompts.get(prompt_id)
        if prompt is not None:
            answers.prompts.append(
                recorded_prompt(prompt.asked, prompt.reply, timed_out=prompt.timed_out)
            )
    return answers
