"""ScriptedProvider: offline, deterministic answers that stream like a real model's."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import math
import operator
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeAlias

import pydantic

from reactor._agents.templates import to_json
from reactor._providers.base import (
    End,
    Provider,
    ProviderEvent,
    ProviderRequest,
    TextComplete,
    TextDelta,
    Usage,
)
from reactor._providers.pricing import ModelPrice, price_of
from reactor.exceptions import ScriptExhaustedError

__all__ = ["Answer", "Script", "ScriptedProvider"]

Answer: TypeAlias = "str | dict[str, Any] | list[Any] | pydantic.BaseModel | BaseException"
"""One scripted answer: text, JSON data, a model instance, or an exception to raise."""

Script: TypeAlias = "Sequence[Answer] | Callable[[ProviderRequest], Answer | Awaitable[Answer]]"
"""An agent's script: answers used in order, or a function of the request."""

_WORDS = re.compile(r"\S+\s*|\s+")


class ScriptedProvider(Provider):
    """Answers agents from scripts: offline, deterministic, shaped like a real provider.

    ::

        provider = ScriptedProvider({
            "analyst": [Analysis(trend="up", confidence=0.9)],   # used in order
            "writer": lambda request: f"Summary of: {request.prompt[:40]}",
        })

    Text answers stream as ``text:delta`` words, structured answers as their JSON;
    token usage is estimated from the text (about four characters a token).

    Args:
        responses: Per agent name, a list of answers (each call takes the next) or a
            function of the :class:`ProviderRequest` (sync or async). An answer is a
            string, JSON data (dict/list), a pydantic model instance, or an exception
            instance to raise (for testing failures).
        default: The script of every agent not in ``responses``: each such agent
            goes through it on its own.
        latency: Seconds to wait before answering (or a function of the request);
            the wait is cancellable, like a real network call.
        model: The model name reported in ``provider:start``.
        pricing: To report ``cost_usd``: a :class:`~reactor.ModelPrice`, an
            ``(input, output)`` pair of USD per million tokens, or a model id whose price
            is in :data:`reactor.model_prices` (``"claude-sonnet-5-5"``: what the same
            tokens would cost there). ``None`` reports no cost.
        keep_requests: How many of the latest requests :attr:`requests` keeps
            (``None``: all of them). Bounded by default, so a provider serving a
            long-running service or thousands of runs does not grow without end.

    Attributes:
        requests: The requests received, oldest first: the latest ``keep_requests``
            of them (handy in tests).
    """

    def __init__(
        self,
        responses: Mapping[str, Script] | None = None,
        *,
        default: Script | None = None,
        latency: float | Callable[[ProviderRequest], float] = 0.0,
        model: str = "scripted",
        pricing: ModelPrice | tuple[float, float] | str | None = None,
        keep_requests: int | None = 1_000,
    ) -> None:
        if keep_requests is not None and (
            isinstance(keep_requests, bool)
            or not isinstance(keep_requests, int)
            or keep_requests < 0
        ):
            raise ValueError(
                f"ScriptedProvider(keep_requests=...) takes a whole number >= 0, or None to "
                f"keep every request; got {keep_requests!r}."
            )
        self._scripts: dict[str, Any] = {}
        for agent, script in (responses or {}).items():
            self._scripts[agent] = _normalize(script, agent)
        self._default = _normalize(default, "default") if default is not None else None
        self._cursors: dict[str, int] = {}
        self.latency = latency
        self.model = model
        if isinstance(pricing, str):
            price = price_of(pricing)
            if price is None:
                raise ValueError(
                    f"No price for model {pricing!r} in reactor.model_prices; give "
                    "pricing=(input, output) in USD per million tokens instead."
                )
            pricing = price
        elif isinstance(pricing, tuple):
            pricing = ModelPrice(*pricing)
        self.pricing: ModelPrice | None = pricing
        self.requests: list[ProviderRequest] = []
        self._keep_requests = keep_requests

    def price_known(self, request: ProviderRequest) -> bool:
        """Whether its answers are priced (``pricing=``): budgets in USD need a price."""
        return self.pricing is not None

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Answer ``request`` from its agent's script.

        The events come from a small iterator rather than an async generator: thousands
        of scripted calls may be in flight (a generator is larger, and the event loop
        keeps a weak reference to each one).
        """
        return _Answering(self, request)

    def _take(self, request: ProviderRequest) -> Any:
        """Keep ``request``; its answer (a :class:`_Later` from an async script)."""
        requests, keep = self.requests, self._keep_requests
        requests.append(request)
        if keep is not None and len(requests) > keep:
            del requests[: len(requests) - keep]
        return self._next_answer(request)

    def _delay(self, request: ProviderRequest) -> float:
        return self.latency(request) if callable(self.latency) else self.latency

    def _events(self, request: ProviderRequest, answer: Any) -> list[ProviderEvent]:
        """What answering ``request`` with ``answer`` streams, last first."""
        if isinstance(answer, BaseException):
            raise answer
        text, output = _render(answer)
        events: list[ProviderEvent] = [TextDelta(piece) for piece in _WORDS.findall(text)]
        usage = Usage(
            input_tokens=_tokens(_request_length(request)),
            output_tokens=_tokens(len(text)),
        )
        events.append(TextComplete(text))
        events.append(
            End(
                output=output,
                usage=usage,
                cost_usd=self._cost(usage),
                stop_reason="end_turn",
                model=self.model,
            )
        )
        events.reverse()  # taken from the end
        return events

    def _next_answer(self, request: ProviderRequest) -> Any:
        """The next answer to ``request`` (an async script's comes as a :class:`_Later`)."""
        agent = request.agent
        script = self._scripts.get(agent, self._default)
        if script is None:
            known = ", ".join(sorted(self._scripts)) or "none"
            raise ScriptExhaustedError(
                f"ScriptedProvider has no script for agent {agent!r} (scripted agents: "
                f"{known}). Add it: ScriptedProvider({{{agent!r}: [...]}}), or pass default=.",
                agent=agent,
            )
        if callable(script):
            answer = script(request)
            if type(answer) is str or type(answer) is dict:  # surely not awaitable
                return answer
            return _Later(answer) if inspect.isawaitable(answer) else answer
        index = self._cursors.get(agent, 0)
        if index >= len(script):
            whose = "its script" if agent in self._scripts else "the default script"
            raise ScriptExhaustedError(
                f"ScriptedProvider has no answer left for agent {agent!r}: {whose} had "
                f"{len(script)} and it used them all. Add more answers, or script it with a "
                "function of the request.",
                agent=agent,
            )
        self._cursors[agent] = index + 1
        return script[index]

    def _cost(self, usage: Usage) -> float | None:
        return None if self.pricing is None else self.pricing.cost(usage)

    def remaining(self, agent: str) -> int | None:
        """Answers left in ``agent``'s list (``None`` for a function script)."""
        script = self._scripts.get(agent, self._default)
        if script is None or callable(script):
            return None
        return len(script) - self._cursors.get(agent, 0)

    def __repr__(self) -> str:
        return f"ScriptedProvider(agents={sorted(self._scripts)!r}, model={self.model!r})"


_NO_CONTEXT = contextvars.Context()
"""The timers' context: answering reads no context variable, so none is copied."""


class _Answering:
    """The events of one scripted answer, as an async iterator (see ``stream``).

    While the scripted latency passes, the caller awaits a future that a timer resolves
    with the first event: no coroutine of the iterator's is held meanwhile (thousands of
    calls may be waiting at once). A cancelled wait leaves the timer to find the future
    cancelled when it comes, and do nothing.
    """

    __slots__ = ("_answer", "_events", "_provider", "_request")

    def __init__(self, provider: ScriptedProvider, request: ProviderRequest) -> None:
        self._provider, self._request = provider, request
        self._events: list[ProviderEvent] | None = None
        self._answer: Any = None

    def __aiter__(self) -> _Answering:
        return self

    def __anext__(self) -> Awaitable[ProviderEvent]:
        if self._events is not None:
            return self._next()
        provider, request = self._provider, self._request
        answer = provider._take(request)
        delay = provider._delay(request)
        if type(answer) is _Later or not delay:
            return self._first(answer, delay)
        # The first event, once the timer has run: see _answered.
        self._answer = answer
        loop = asyncio.get_running_loop()
        first: asyncio.Future[ProviderEvent] = loop.create_future()
        # A function, not a bound method: one object fewer per call in flight.
        loop.call_later(delay, _Answering._answered, self, first, context=_NO_CONTEXT)
        return first

    def _answered(self, first: asyncio.Future[ProviderEvent]) -> None:
        if first.done():  # cancelled meanwhile
            return
        try:
            events = self._events = self._provider._events(self._request, self._answer)
        except BaseException as exc:  # the scripted answer was an exception to raise
            first.set_exception(exc)
        else:
            first.set_result(events.pop())
        self._answer = None

    async def _first(self, answer: Any, delay: float) -> ProviderEvent:
        """The first event of an async script's answer, or of one with no latency."""
        if type(answer) is _Later:
            answer = await answer.awaitable
        if delay:
            await asyncio.sleep(delay)
        events = self._events = self._provider._events(self._request, answer)
        return events.pop()

    async def _next(self) -> ProviderEvent:
        events = self._events
        if not events:
            raise StopAsyncIteration
        return events.pop()


class _Later:
    """An answer an async script has yet to give."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Any) -> None:
        self.awaitable = awaitable


def _normalize(script: Any, agent: str) -> Any:
    if callable(script):
        return script
    if isinstance(script, str | bytes | dict | pydantic.BaseModel | BaseException):
        return [script]
    if isinstance(script, Sequence):
        return list(script)
    raise TypeError(
        f"The script of {agent!r} must be a list of answers or a function of the request, "
        f"got {script!r}."
    )


def _render(answer: Any) -> tuple[str, Any]:
    """The text that streams and the output that ``End`` carries."""
    if isinstance(answer, str):
        return answer, answer
    if isinstance(answer, pydantic.BaseModel):
        return answer.model_dump_json(), answer.model_dump(mode="json")
    return to_json(answer), answer


def _request_length(request: ProviderRequest) -> int:
    """How long the request's text is: prompts, and the schema and tools as JSON."""
    length = len(request.system or "") + sum(map(len, map(_CONTENT, request.messages)))
    schema, tools = request.output_schema, request.tools
    if schema is not None or tools:
        key = (id(schema), id(tools))
        found = _LENGTHS.get(key)
        if found is None or found[0] is not schema or found[1] is not tools:
            size = len(to_json(schema)) if schema is not None else 0
            size += sum(len(to_json(tool.definition())) for tool in tools)
            if len(_LENGTHS) > 1_024:
                _LENGTHS.clear()
            found = _LENGTHS[key] = (schema, tools, size)
        length += found[2]
    return length


_CONTENT = operator.attrgetter("content")
_LENGTHS: dict[tuple[int, int], tuple[object, object, int]] = {}
"""The JSON length of an agent's schema and tools (the same objects on every call)."""


def _tokens(length: int) -> int:
    return max(1, math.ceil(length / 4))
