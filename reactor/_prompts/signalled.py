"""One provider call as signals: each event of its stream checked, then emitted.

``provider:start`` comes first, then a signal per event (``text:delta``, ``tool:call``,
``tool:result``...), and ``provider:end`` (with the usage, the cost and the duration,
which the run's metrics add up) or ``provider:error`` last.

What a model answers (and what the tools it calls return) enters the log here, so it
is checked here, at the door, as everything else that enters a run is
(:func:`~reactor._signals.door.check_payload`). An event the log cannot hold (a lone
surrogate in the text, ``NaN`` in a tool's result) stops the call with
:class:`~reactor.exceptions.PayloadError` naming the path of the bad value: the
activation fails (``agent:<name>:failed``, recorded), instead of a store refusing the
signal, which would leave the run ``running`` with a log that stops there, and a resume
that calls the model (and pays) again, for the same answer, every time.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from reactor._providers.base import (
    End,
    Provider,
    ProviderEvent,
    ProviderRequest,
    Retry,
    TextComplete,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolResult,
    Usage,
)
from reactor._signals.door import check_payload
from reactor._signals.names import (
    PROVIDER_END,
    PROVIDER_ERROR,
    PROVIDER_RETRY,
    PROVIDER_START,
    TEXT_COMPLETE,
    TEXT_DELTA,
    THINKING_DELTA,
    TOOL_CALL,
    TOOL_RESULT,
    error_info,
)
from reactor._signals.sharedkeys import shared_keys
from reactor.exceptions import PayloadError, ProviderError

if TYPE_CHECKING:
    from reactor._signals.bus import SignalBus

__all__ = ["CallSite", "SignalledCall", "since"]

# The payloads every model call emits (see reactor._signals.sharedkeys).
_STARTED = shared_keys("ProviderStart")
_TEXT_PAYLOAD = shared_keys("TextPayload")
_ENDED = shared_keys("ProviderEnd")


class CallSite(Protocol):
    """What a model call needs of the run it streams into."""

    @property
    def bus(self) -> SignalBus:
        """Where the call's events are emitted."""
        ...

    def record_request(self, request: ProviderRequest) -> None:
        """Keep what the provider was asked (for recordings and diffs)."""
        ...

    def count_usage(
        self, usage: Usage, cost_usd: float | None, agent: str = "", model: str | None = None
    ) -> None:
        """Add ``agent``'s call's tokens and cost to the run's metrics."""
        ...

    def check_budget(self, agent: str, provider: Provider, request: ProviderRequest) -> None:
        """Refuse (raise) a call that would start over a budget; else count it."""
        ...


class SignalledCall:
    """One provider call as signals (see the module).

    ``async with call as events:`` iterates the provider's stream; leaving the block on
    an error signals it, and the stream is closed.
    """

    __slots__ = ("end", "events", "name", "provider", "site", "started")

    def __init__(
        self, site: CallSite, provider: Provider, request: ProviderRequest, name: str
    ) -> None:
        self.site, self.provider, self.name = site, provider, name
        self.end: End | None = None
        site.record_request(request)
        payload = _STARTED()
        payload["agent"] = name
        payload["model"] = provider.model_for(request)
        payload["request_hash"] = request.request_hash
        site.bus.emit(PROVIDER_START, payload, source=name)
        self.started = time.perf_counter()
        self.events = provider.stream(request)

    def event(self, event: ProviderEvent) -> None:
        """Check one event of the stream, and signal it.

        Raises:
            PayloadError: The log cannot hold it (nothing of it is emitted).
        """
        kind = type(event)
        if kind is TextDelta or kind is TextComplete:  # most of a stream: its text
            content = event.content  # type: ignore[union-attr]  # both have it
            if type(content) is not str or not content.isascii():
                self.check(content, _CONTENT[kind])
            payload = _TEXT_PAYLOAD()
            payload["agent"] = self.name
            payload["content"] = content
            self.site.bus.emit(_TEXT[kind], payload, source=self.name)
            return
        if kind is End:
            self.ended_with(event)  # type: ignore[arg-type]  # it is one
            return
        emit, name, check = self.site.bus.emit, self.name, self.check
        if isinstance(event, TextDelta):
            check(event.content, f"{TEXT_DELTA}.content")
            emit(TEXT_DELTA, {"agent": name, "content": event.content}, source=name)
        elif isinstance(event, ThinkingDelta):
            check(event.content, f"{THINKING_DELTA}.content")
            emit(THINKING_DELTA, {"agent": name, "content": event.content}, source=name)
        elif isinstance(event, TextComplete):
            check(event.content, f"{TEXT_COMPLETE}.content")
            emit(TEXT_COMPLETE, {"agent": name, "content": event.content}, source=name)
        elif isinstance(event, ToolCall):
            payload = {"agent": name, "id": event.id, "name": event.name}
            payload["input"] = event.input
            check(payload, TOOL_CALL)
            emit(TOOL_CALL, payload, source=name)
        elif isinstance(event, ToolResult):
            payload = {"agent": name, "id": event.id, "name": event.name}
            payload.update(result=event.result, error=event.error)
            check(payload, TOOL_RESULT)
            emit(TOOL_RESULT, payload, source=name)
        elif isinstance(event, Retry):
            payload = {"agent": name, "attempt": event.attempt, "wait_s": event.wait_s}
            payload.update(status=event.status, error=event.error)
            check(payload, PROVIDER_RETRY)
            emit(PROVIDER_RETRY, payload, source=name)
        elif isinstance(event, End):
            self.ended_with(event)
        else:
            raise ProviderError(
                f"Provider {type(self.provider).__name__} yielded {event!r}, which is not a "
                "provider event (TextDelta, ThinkingDelta, TextComplete, ToolCall, "
                "ToolResult, Retry or End).",
                agent=name,
            )

    async def aborted(self, exc: BaseException) -> None:
        """The stream stopped on ``exc``: signal it (unless a cancellation), then close it."""
        if isinstance(exc, Exception):
            self.failed(exc)
        await self.close()

    async def close(self) -> None:
        """Close the provider's stream (nothing to do once an async generator has ended)."""
        if getattr(self.events, "ag_frame", True) is None:
            return
        close = getattr(self.events, "aclose", None)
        if close is not None:
            await close()

    def ended_with(self, end: End) -> None:
        """Check the call's ``End``, count its usage, and signal ``provider:end``."""
        name, usage = self.name, end.usage
        payload = _ENDED()
        payload["agent"] = name
        payload["output"] = end.output
        payload["usage"] = usage.to_dict()
        payload["cost_usd"] = end.cost_usd
        payload["stop_reason"] = end.stop_reason
        payload["duration_ms"] = since(self.started)
        if not _surely_held(payload):
            self.check(payload, PROVIDER_END)
        self.end = end
        self.site.count_usage(usage, end.cost_usd, name, end.model)
        self.site.bus.emit(PROVIDER_END, payload, source=name)

    def check(self, value: Any, where: str) -> None:
        """Refuse what the log cannot hold: the activation fails, naming the bad value.

        Raises:
            PayloadError: ``value`` (at ``where`` in the signal) cannot be recorded.
        """
        try:
            check_payload(value, where)
        except PayloadError as exc:
            raise PayloadError(
                f"Agent {self.name!r}: what its model answered cannot be recorded, so the "
                f"activation fails (a resume does not call the model again for it). {exc}",
                path=exc.path,
            ) from None

    def ended(self) -> End:
        """The call's ``End``.

        Raises:
            ProviderError: The stream finished without one.
        """
        if self.end is None:
            raise ProviderError(
                f"Provider {type(self.provider).__name__} finished without an End event for "
                f"agent {self.name!r}; a stream must end with End(output=...).",
                agent=self.name,
            )
        return self.end

    async def __aenter__(self) -> AsyncIterator[ProviderEvent]:
        return self.events

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if isinstance(exc, Exception):  # not a cancellation
            self.failed(exc)
        await self.close()

    def failed(self, exc: Exception) -> None:
        """Signal the call's failure."""
        self.site.bus.emit(
            PROVIDER_ERROR,
            {
                "agent": self.name,
                "error": error_info(exc),
                "retryable": bool(getattr(exc, "retryable", False)),
            },
            source=self.name,
        )


_TEXT: dict[type[Any], str] = {TextDelta: TEXT_DELTA, TextComplete: TEXT_COMPLETE}
_CONTENT = {kind: f"{name}.content" for kind, name in _TEXT.items()}


def _surely_held(payload: dict[str, Any]) -> bool:
    """Whether the log holds a ``provider:end`` payload without a closer look.

    Its common form (text or nothing, whole token counts, a finite cost) skips the
    check's serialization; anything else is checked in full.
    """
    cost = payload["cost_usd"]
    if not (
        _plain(payload["output"])
        and _plain(payload["stop_reason"])
        and (cost is None or (type(cost) is float and math.isfinite(cost)))
    ):
        return False
    return set(map(type, payload["usage"].values())) <= _WHOLE  # no generator per call


_WHOLE = frozenset({int})


def _plain(value: Any) -> bool:
    """``None``, or ASCII text."""
    return value is None or (type(value) is str and value.isascii())


def since(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()`` reading)."""
    return round((time.perf_counter() - started) * 1000, 3)
