"""Recorded runs as a regression suite: ``graph.evaluate(runs, store=...)``.

Each recorded run is run again on the current graph, as a replay: every model request
that equals the recorded one is answered from the recording (no model call, no cost),
every outside input (a reply, a sent signal, a fired timer) is released at its recorded
turn. From the first request that differs, ``provider`` answers (without one, the case
stops there, ``diverged``, naming the agent and the field). The model's tool calls get
their recorded results when the recording has the same call (name and arguments); any
other fails the activation with :class:`~reactor.ToolNotRecordedError`, unless the
tool is in ``live_tools``: an evaluation never repeats a side effect by accident. Each
new run is recorded to ``into`` (``store`` unless another is given, into which the
recordings evaluated are then copied) with the tags ``eval=<id>`` and ``eval_of=<run
id>``, so ``reactor diff`` and the web UI show any case beside its recording.

Before any case runs, every recording is read and checked: a damaged one is one line
(:func:`~reactor._graph.recorded.check_recording`), and one of another graph (an agent
it ran is not in the graph evaluated, by name) is refused unless ``any_graph``; a
changed prompt is what an evaluation is for, never a reason to refuse. A case's final
state is compared as :func:`~reactor._graph.recorded.outcome` has it (a reaction's
decision included); scorers get the recording and the new run's result with its state
and output as JSON data, as the recording holds them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Mapping
from typing import Any, Protocol

from reactor._activation.resume import RecordedAnswers
from reactor._engine.result import RunResult
from reactor._graph.recorded import agents_of, check_recording, outcome
from reactor._graph.report import EvalCase, EvalReport, EvalStatus, spent, state_diff
from reactor._providers.base import (
    Provider,
    ProviderEvent,
    ProviderRequest,
    Retry,
    ToolResult,
    as_provider,
)
from reactor._providers.replay import ReplayProvider
from reactor._recording.info import RunInfo
from reactor._recording.recording import Recording
from reactor._recording.store import SignalStore
from reactor._signals.diagnostics import muted
from reactor._signals.names import TOOL_CALL, TOOL_RESULT
from reactor._signals.signal import to_jsonable
from reactor.exceptions import ReplayMismatchError, RunNotFoundError

__all__ = ["Evaluated", "Runs", "Scope", "Scorer", "evaluate", "evaluate_sync"]


class Evaluated(Protocol):
    """What an evaluation needs of its graph (:class:`~reactor.Reactive` is one)."""

    @property
    def name(self) -> str | None:
        """The graph's name."""
        ...

    @property
    def agents(self) -> Mapping[str, Any]:
        """The graph's agents, by name."""
        ...

    async def run(
        self,
        *,
        replay: ReplayProvider,
        record: SignalStore,
        tags: Mapping[str, str],
        scope: Mapping[str, Any] | None,
    ) -> RunResult:
        """Run the graph (a replay, here)."""
        ...


Scorer = Callable[[Recording, RunResult], bool | float]
"""``scorer(old, new)``: the recorded run and the new one's result; truthy passes."""

Runs = str | Recording | RunInfo | Mapping[str, Any] | Iterable[str | Recording | RunInfo]
"""What ``evaluate`` takes: run ids, recordings, ``store.runs(...)`` or a filter of it."""

Scope = Callable[[Recording], Mapping[str, Any] | None]
"""What a case's agents see beside its input, made from its recording (a reaction's
object, event and objects: ``ctx.scope``, and by name in templates)."""


class _Guarded(Provider):
    """The provider of an evaluation's changed requests: tools get their recorded results."""

    def __init__(self, provider: Provider, recording: Recording, live: Collection[str]) -> None:
        self.provider = as_provider(provider)
        self.model = self.provider.model
        self._answers = _tool_answers(recording)
        self._live = frozenset(live)
        self.calls = 0

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """The provider's answer, its tools guarded (see the module's docstring)."""
        tools = self._answers.tools(request.tools, live=self._live)
        self.calls += 1
        rounds_end = False  # after a round's tool results, the next event is a new request
        async for event in self.provider.stream(dataclasses.replace(request, tools=tools)):
            if isinstance(event, ToolResult):
                rounds_end = True
            elif rounds_end or isinstance(event, Retry):
                self.calls += 1
                rounds_end = False
            yield event


def _tool_answers(recording: Recording) -> RecordedAnswers:
    """Every tool result of a recording, by tool name and arguments."""
    answers = RecordedAnswers()
    calls: dict[str, Any] = {}
    for signal in recording.signals:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        if signal.name == TOOL_CALL:
            calls[str(payload.get("id"))] = payload.get("input")
        elif signal.name == TOOL_RESULT and str(payload.get("id")) in calls:
            arguments = calls.pop(str(payload.get("id")))
            answers.add_tool(
                str(payload.get("name")), arguments, payload.get("result"), payload.get("error")
            )
    return answers


async def evaluate(
    graph: Evaluated,
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
    """Evaluate ``graph`` on recorded runs (see the module's docstring); the report.

    Args:
        graph: The graph as it is now.
        runs: Run ids, recordings, ``store.runs(...)`` or a filter of it.
        store: Where the runs are recorded.
        provider: Who answers a model request that changed (none: ``diverged``).
        scorers: Checks every case must pass: ``scorer(old, new)``.
        live_tools: Tools that may run when their call was not recorded.
        concurrency: Cases run at once.
        into: Where the new runs are recorded (default ``store``); the recordings
            evaluated are copied into it first, so that it shows both sides.
        scope: What each case's agents see beside the input, made from its recording
            before any case runs (an error there runs nothing).
        any_graph: Evaluate recordings of another graph too.

    Raises:
        ValueError: ``concurrency`` is not a whole number >= 1, ``runs`` is empty, or
            a recording is of another graph (nothing was run).
        RunNotFoundError: A run id is not in ``store``.
        RecordingError: A recording is damaged (nothing was run).
    """
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ValueError(f"concurrency must be a whole number >= 1, got {concurrency!r}.")
    recordings = await asyncio.to_thread(_recordings, runs, store)
    if not any_graph:
        _same_graph(graph, recordings)
    seen = [scope(recording) if scope is not None else None for recording in recordings]
    target = store if into is None else into
    if target is not store:
        await asyncio.to_thread(_copied, recordings, target)
    report_id = f"eval_{secrets.token_hex(6)}"
    scoring = tuple(scorers)
    gate = asyncio.Semaphore(concurrency)

    async def case(recording: Recording, scoped: Mapping[str, Any] | None) -> EvalCase:
        async with gate:
            trial = _Trial(graph, target, provider, scoring, live_tools, report_id, scoped)
            return await trial.case(recording)

    cases = await asyncio.gather(*map(case, recordings, seen))
    return EvalReport(report_id, graph.name, tuple(cases))


def _recordings(runs: Runs, store: SignalStore) -> list[Recording]:
    """Every recording to evaluate, read and checked (blocking)."""
    found = []
    for item in _wanted(runs, store):
        recording = item if isinstance(item, Recording) else store.load(store.resolve(item))
        check_recording(recording, recording.run_id)
        found.append(recording)
    return found


def _same_graph(graph: Evaluated, recordings: list[Recording]) -> None:
    """Refuse recordings whose agents are not all in ``graph`` (by name)."""
    known = set(graph.agents)
    for recording in recordings:
        others = [agent for agent in agents_of(recording) if agent not in known]
        if not others:
            continue
        which = ", ".join(map(repr, others))
        recorded = f" (graph {recording.info.graph!r})" if recording.info.graph else ""
        raise ValueError(
            f"Run {recording.run_id}{recorded} was recorded by another graph: its agent"
            f"{'s' if len(others) > 1 else ''} {which} {'are' if len(others) > 1 else 'is'} "
            f"not in {graph.name or 'the graph'}, whose agents are {', '.join(sorted(known))}. "
            "Nothing was run. Evaluate it with the graph it was recorded with, or pass "
            "any_graph=True (reactor eval --any-graph) to run it on this one anyway."
        )


def _copied(recordings: list[Recording], target: SignalStore) -> None:
    """Copy the recordings into ``target`` (those it has already stay as they are)."""
    for recording in recordings:
        try:
            target.info(recording.run_id)
            continue
        except RunNotFoundError:
            pass
        target.start_run(recording.info)
        for signal in recording.signals:
            target.append(signal)
        for digest, fingerprint in recording.requests.items():
            target.record_request(recording.run_id, digest, dict(fingerprint))
    target.flush()


def _wanted(runs: Runs, store: SignalStore) -> list[str | Recording]:
    """Run ids and recordings, from what ``evaluate`` was given (a filter is read here)."""
    items: Iterable[Any]
    if isinstance(runs, str | Recording | RunInfo):
        items = [runs]
    elif isinstance(runs, Mapping):
        items = _recorded(store, runs)
    else:
        items = list(runs)
    wanted: list[str | Recording] = []
    for item in items:
        if isinstance(item, RunInfo):
            wanted.append(item.run_id)
        elif isinstance(item, str | Recording):
            wanted.append(item)
        else:
            raise TypeError(
                f"evaluate() takes run ids, Recordings, RunInfos (store.runs(...)) or a "
                f"filter of store.runs as a dict; got {item!r}."
            )
    if not wanted:
        raise ValueError("evaluate() was given no runs: pass run ids, recordings or a filter.")
    return wanted


def _recorded(store: SignalStore, where: Mapping[str, Any]) -> list[RunInfo]:
    """The runs ``store.runs(**where)`` lists, less the runs evaluations made."""
    where = dict(where)
    limit = where.pop("limit", None)
    mine = str(where.get("tag") or "").startswith("eval")  # asked for evaluations' runs
    asked = limit if limit is not None else 1_000
    while True:
        listed = store.runs(**where, limit=asked)
        kept = [info for info in listed if mine or "eval" not in info.tags]
        if len(listed) < asked or (limit is not None and len(kept) >= limit):
            return kept if limit is None else kept[:limit]
        asked *= 4


@dataclasses.dataclass(frozen=True)
class _Trial:
    """One case's run: the graph, where it is recorded, who answers, what it is scored by."""

    graph: Evaluated
    record: SignalStore
    provider: Provider | None
    scorers: tuple[Scorer, ...]
    live_tools: Collection[str]
    report_id: str
    scope: Mapping[str, Any] | None

    async def case(self, recording: Recording) -> EvalCase:
        """Run ``recording`` again on the graph; what became of it."""
        fallback = None
        if self.provider is not None:
            fallback = _Guarded(self.provider, recording, self.live_tools)
        tags = {"eval": self.report_id, "eval_of": recording.run_id}
        replay = ReplayProvider(recording, fallback=fallback)
        try:
            with muted("agent failed"):  # the report says which agent failed, and why
                result = await self.graph.run(
                    replay=replay, record=self.record, tags=tags, scope=self.scope
                )
        except Exception as exc:  # the graph refused the run: nothing began
            old_tokens, old_cost, old_duration = spent(recording)
            return EvalCase(
                recording.run_id,
                None,
                "failed",
                False,
                tokens=(old_tokens, 0),
                cost_usd=(old_cost, 0.0),
                duration_ms=(old_duration, None),
                error=f"{type(exc).__name__}: {exc}",
                object=_subject(self.scope),
            )
        return self._judged(recording, result, replay, fallback)

    def _judged(
        self,
        recording: Recording,
        result: RunResult,
        replay: ReplayProvider,
        fallback: _Guarded | None,
    ) -> EvalCase:
        divergence = recording.diff(result)
        mismatch = _mismatch(result)
        changed = mismatch or replay.first_change()  # the first request that differs, if one
        status = _status(divergence, mismatch, result, recording)
        scored = status in ("same", "changed")
        scores = _scored(self.scorers, recording, _plain(result)) if scored else {}
        error = None
        if status in ("failed", "diverged"):
            failure = mismatch or result.error
            error = f"{type(failure).__name__}: {failure}"
        left = divergence.left if divergence is not None else None
        old_tokens, old_cost, old_duration = spent(recording)
        return EvalCase(
            run_id=recording.run_id,
            new_run_id=result.run_id,
            status=status,
            passed=scored and all(scores.values()),
            divergence=divergence,
            agent=changed.agent if changed is not None else _agent_of(divergence),
            field=(changed.field if changed is not None else None)
            or (divergence.field if divergence is not None else None),
            seq=left.seq if left is not None else None,
            state_diff=state_diff(outcome(recording), outcome(result)),
            tokens=(old_tokens, result.metrics.input_tokens + result.metrics.output_tokens),
            cost_usd=(old_cost, result.metrics.cost_usd),
            duration_ms=(old_duration, result.metrics.duration_ms),
            scores=scores,
            model_calls=0 if fallback is None else fallback.calls,
            error=error,
            object=_subject(self.scope),
        )


def _status(
    divergence: Any, mismatch: Exception | None, result: RunResult, recording: Recording
) -> EvalStatus:
    if divergence is None:
        return "same"
    if mismatch is not None:
        return "diverged"
    if result.error is not None and recording.status != "failed":
        return "failed"
    return "changed"


def _subject(scope: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The object a case's agents saw (a reaction's), as JSON data."""
    if scope is None or scope.get("object") is None:
        return None
    found = to_jsonable(scope["object"])
    return found if isinstance(found, Mapping) else {"value": found}


def _plain(result: RunResult) -> RunResult:
    """``result`` with its state and output as JSON data, as a recording holds them."""
    return dataclasses.replace(
        result, state=dict(to_jsonable(result.state)), output=to_jsonable(result.output)
    )


def _mismatch(result: RunResult) -> ReplayMismatchError | None:
    """The request no recording answered, if that is what stopped the new run."""
    errors = [result.error, *(failure.error for failure in result.failures)]
    return next((error for error in errors if isinstance(error, ReplayMismatchError)), None)


def _agent_of(divergence: Any) -> str | None:
    if divergence is None:
        return None
    if divergence.agent is not None:
        return str(divergence.agent)
    signal = divergence.left or divergence.right
    return None if signal is None else signal.source


def _scored(scorers: tuple[Scorer, ...], old: Recording, new: RunResult) -> dict[str, bool | float]:
    scores: dict[str, bool | float] = {}
    for scorer in scorers:
        name = str(getattr(scorer, "__name__", None) or repr(scorer))
        try:
            scores[name] = scorer(old, new)
        except Exception as exc:  # a scorer that raises fails its case, and says why
            scores[f"{name} raised {type(exc).__name__}: {exc}"] = False
    return scores


def evaluate_sync(graph: Evaluated, runs: Runs, **options: Any) -> EvalReport:
    """:func:`evaluate` from synchronous code (scripts, CI jobs).

    Raises:
        RuntimeError: Called while an event loop is running (``await`` it there).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(evaluate(graph, runs, **options))
    raise RuntimeError(
        "evaluate_sync() cannot be used inside a running event loop; use "
        "`await graph.evaluate(...)` there."
    )
