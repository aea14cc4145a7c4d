"""ReplayProvider: answers agents from a recording, offline and deterministically."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from reactor._providers.base import Provider, ProviderEvent, ProviderRequest, as_provider
from reactor._providers.replaylog import Call, handler_turns, recorded_calls
from reactor._providers.sequence import Sequencer, Step
from reactor._recording.recording import Recording
from reactor._signals.diagnostics import log, short_repr
from reactor._signals.names import SESSION_REPLY, SESSION_TIMEOUT
from reactor.exceptions import ProviderError, ReplayMismatchError

__all__ = ["ReplayProvider"]


class Turn:
    """A handler activation's place in the recorded order (see ``completion_turn``)."""

    def __init__(self, order: Sequencer, step: Step, agent: str) -> None:
        self._order = order
        self._step = step
        self._agent = agent

    async def wait(self) -> None:
        """Wait until everything recorded before the activation finished is replayed."""
        await self._order.wait(self._step, self._agent)


class ReplayProvider(Provider):
    """Answers each request with the recorded answer to the same request.

    Answers are matched by ``(agent, request_hash, occurrence)``: the n-th identical
    request of an agent gets the n-th recorded answer to it. This holds under
    parallel agents, whose calls interleave differently from run to run.

    Args:
        recording: The recorded run (``store.load(run_id)``).
        strict: When no answer matches, raise :class:`ReplayMismatchError` (naming
            the agent and the first field that differs from the nearest recorded
            request). With ``strict=False`` the agent's next recorded answer is used
            anyway, and the difference is logged.
        fallback: A provider to ask when no recorded answer matches; its answer
            becomes part of the new run (and of its recording, if it is recorded).
        order_timeout: Concurrent calls stream their events, and handlers finish, in
            the order they were recorded, so the replayed log equals the recording
            signal for signal (for any number of parallel agents and any recorded
            timing); an event waits at most this many seconds for the signals recorded
            before it, in case the runs diverged. ``0`` disables the ordering.

    Attributes:
        misses: Requests that had no recorded answer.
    """

    def __init__(
        self,
        recording: Recording,
        *,
        strict: bool = True,
        fallback: Provider | None = None,
        order_timeout: float = 5.0,
    ) -> None:
        self.recording = recording
        self.strict = strict
        self.fallback = as_provider(fallback) if fallback is not None else None
        self.order_timeout = order_timeout
        self.misses: list[ProviderRequest] = []
        self._calls: dict[tuple[str, str], list[Call]] = {}
        self._by_agent: dict[str, list[Call]] = {}
        self._seen: Counter[tuple[str, str]] = Counter()
        self._agent_seen: Counter[str] = Counter()
        calls = recorded_calls(recording)
        for call in calls:
            self._calls.setdefault((call.agent, call.request_hash), []).append(call)
            self._by_agent.setdefault(call.agent, []).append(call)
        self._handlers = handler_turns(recording)
        self._order = Sequencer(order_timeout)
        self._last_seq: Callable[[], int] = lambda: 0
        self._answered: set[str] | None = None
        self._first_miss: tuple[ProviderRequest, int] | None = None

    def follow(self, bus: Any) -> None:
        """Order this replay by ``bus``, the replayed run's (the run calls it at its start).

        Each recorded event is released once the run has emitted every signal
        recorded before it.
        """
        self._last_seq = lambda: int(bus.last_seq)
        bus.subscribe("**", self._order.follow(self._last_seq))

    def unanswered(self, prompt_id: str, agent: str) -> ReplayMismatchError | None:
        """Why the replay cannot go on past question ``prompt_id`` (``None``: it can).

        A replay releases only the outside input that was recorded, and never waits for
        a person: a question the recording has no reply (nor timeout) to fails at once.
        """
        if self._answered is None:
            self._answered = {
                str(signal.payload.get("prompt_id"))
                for signal in self.recording.signals
                if signal.name in (SESSION_REPLY, SESSION_TIMEOUT)
                and isinstance(signal.payload, Mapping)
            }
        if prompt_id in self._answered:
            return None
        return ReplayMismatchError(
            f"Replay of run {self.recording.run_id}: agent {agent!r} asks {prompt_id}, and "
            "the recording has no answer to it (the recorded run was still waiting, or "
            "never asked it). A replay releases only the input that was recorded and never "
            "waits for a person: replay a run that got its answer, or resume the recorded "
            "run (graph.resume(run_id, record=store), `reactor resume`) to answer it.",
            agent=agent,
        )

    def model_for(self, request: ProviderRequest) -> str | None:
        """The model the matching recorded call reported (for ``provider:start``)."""
        key = (request.agent, request.request_hash)
        calls = self._calls.get(key, [])
        index = self._seen[key]
        if index < len(calls):
            return calls[index].model
        return self.fallback.model if self.fallback is not None else None

    async def turn_to_start(self, request: ProviderRequest) -> None:
        """Wait until the run has emitted what was recorded before this call started.

        The run calls it before it emits ``provider:start``, so that concurrent agents
        start their calls in the recorded order too.
        """
        key = (request.agent, request.request_hash)
        calls = self._calls.get(key, [])
        index = self._seen[key]
        if index < len(calls):
            await self._order.wait(calls[index].start, request.agent)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the recorded answer to ``request``."""
        key = (request.agent, request.request_hash)
        index = self._seen[key]
        self._seen[key] += 1
        position = self._agent_seen[request.agent]
        self._agent_seen[request.agent] += 1
        calls = self._calls.get(key, [])
        if index < len(calls):
            call = calls[index]
        else:
            self.misses.append(request)
            if self._first_miss is None:
                self._first_miss = (request, position)
            if self.fallback is not None:
                self._order.diverged = True  # the log differs from here on: no ordering
                async for event in self.fallback.stream(request):
                    yield event
                return
            mismatch = self._mismatch(request, position)
            nearest = self._nearest(request.agent, position)
            if self.strict or nearest is None:
                raise mismatch
            log(
                "reactor.replay",
                "warning",
                "replaying a changed request",
                agent=request.agent,
                detail=str(mismatch),
            )
            call = nearest
        for step in call.events:
            await self._order.wait(step, call.agent)
            if step.error is not None:
                raise _replayed_error(step.error, call.agent)
            assert step.event is not None
            yield step.event

    def first_change(self) -> ReplayMismatchError | None:
        """How the first request no recorded answer matched differs (``None``: none did).

        The agent, and the first field of the request that differs from the nearest
        recorded one: what a ``fallback`` answered from there on.
        """
        if self._first_miss is None:
            return None
        return self._mismatch(*self._first_miss)

    def completion_turn(self, agent: str, nth: int) -> Turn | None:
        """The turn of ``agent``'s ``nth`` activation (from 1) to finish, if recorded.

        A handler agent calls no provider, so nothing else holds it to the recorded
        order: the activation waits for this turn before it finishes (its ``updates``,
        ``emits`` and ``completed``).
        """
        turns = self._handlers.get((agent, nth))
        return None if turns is None else Turn(self._order, turns.completion, agent)

    def step_turn(self, agent: str, nth: int) -> Callable[[], asyncio.Future[None] | None] | None:
        """What ``agent``'s ``nth`` activation waits on before each of its steps, if recorded.

        A handler's code emits while it runs (``ctx.emit``, state writes): each of its
        steps (an activation resuming after an ``await``; a handler's thread before it
        hands a call to the loop) waits until the replay has emitted the signal recorded
        before the activation's next own signal, so concurrent handlers interleave as
        they were recorded.
        """
        turns = self._handlers.get((agent, nth))
        if turns is None or not turns.steps:
            return None
        steps, order, last_seq = list(turns.steps), self._order, self._last_seq

        def turn() -> asyncio.Future[None] | None:
            reached = last_seq()
            while steps and steps[0] <= reached:  # emitted already (in its turn)
                del steps[0]
            return order.ahead(steps[0] - 1, agent) if steps else None

        return turn

    async def turn_of(self, seq: int, agent: str) -> None:
        """Wait until the replayed run has emitted what was recorded before signal ``seq``."""
        await self._order.wait(Step(seq), agent)

    def _nearest(self, agent: str, position: int) -> Call | None:
        calls = self._by_agent.get(agent, [])
        return calls[min(position, len(calls) - 1)] if calls else None

    def _mismatch(self, request: ProviderRequest, position: int) -> ReplayMismatchError:
        agent = request.agent
        advice = (
            "The prompt, schema, tools or options changed since the recording: record a "
            "new run, or replay with fallback=<provider> to fetch missing answers live."
        )
        nearest = self._nearest(agent, position)
        if nearest is None:
            recorded = ", ".join(sorted(self._by_agent)) or "none"
            return ReplayMismatchError(
                f"Replay has no recorded answer for agent {agent!r}: the recording has no "
                f"provider calls for it (agents with calls: {recorded}). {advice}",
                agent=agent,
            )
        fingerprint = self.recording.requests.get(nearest.request_hash)
        if fingerprint is None:
            return ReplayMismatchError(
                f"Replay has no recorded answer for agent {agent!r} (request "
                f"{request.request_hash[:12]}; the recording keeps no request details to "
                f"compare with). {advice}",
                agent=agent,
            )
        field, recorded_value, current_value = _first_difference(fingerprint, request.fingerprint())
        recorded_text, current_text = _excerpts(recorded_value, current_value)
        return ReplayMismatchError(
            f"Replay has no recorded answer for agent {agent!r}: the request differs from "
            f"the recorded one in {field} (recorded {recorded_text}, now {current_text}). "
            f"{advice}",
            agent=agent,
            field=field,
            recorded=recorded_value,
            current=current_value,
        )

    def __repr__(self) -> str:
        return f"ReplayProvider(run={self.recording.run_id!r}, strict={self.strict})"


_ERROR_TYPES: dict[str, type[ProviderError]] = {"ProviderError": ProviderError}


def _replayed_error(error: tuple[str, str, bool], agent: str) -> ProviderError:
    """The recorded failure again: same type name, same message."""
    kind, message, retryable = error
    error_type = _ERROR_TYPES.get(kind)
    if error_type is None:
        error_type = _ERROR_TYPES[kind] = type(kind, (ProviderError,), {"__module__": __name__})
    return error_type(message, retryable=retryable, agent=agent)


def _first_difference(
    recorded: Mapping[str, Any], current: Mapping[str, Any]
) -> tuple[str, Any, Any]:
    for key in ("agent", "system", "messages", "output_schema", "tools", "options"):
        found = _walk(recorded.get(key), current.get(key), key)
        if found is not None:
            return found
    return ("request", recorded, current)


def _walk(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in {**a, **b}:
            found = _walk(a.get(key), b.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for index, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _walk(x, y, f"{path}[{index}]")
            if found is not None:
                return found
        if len(a) != len(b):
            return (f"{path} (length)", len(a), len(b))
        return None
    return None if a == b else (path, a, b)


def _excerpts(recorded: Any, current: Any, width: int = 60) -> tuple[str, str]:
    """Both values, around where they first differ when they are long strings."""
    if not (isinstance(recorded, str) and isinstance(current, str)):
        return short_repr(recorded), short_repr(current)
    if len(recorded) <= width * 2 and len(current) <= width * 2:
        return repr(recorded), repr(current)
    at = next(
        (i for i, (a, b) in enumerate(zip(recorded, current, strict=False)) if a != b),
        min(len(recorded), len(current)),
    )
    start = max(0, at - width // 3)

    def cut(text: str) -> str:
        piece = repr(text[start : start + width])
        return ("..." if start else "") + piece + ("..." if start + width < len(text) else "")

    return cut(recorded), cut(current)
