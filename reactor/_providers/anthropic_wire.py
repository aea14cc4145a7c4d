"""The Messages API on the wire: one streamed round, its errors, usage and content.

What :class:`~reactor.AnthropicProvider` needs to turn one streamed response of the
``anthropic`` SDK into provider events, and its failures into ``ProviderError``.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import anthropic
import httpx2  # the HTTP library the anthropic SDK runs on, installed with it
from anthropic.lib.streaming import ParsedContentBlockStopEvent
from anthropic.types import Message as APIMessage
from anthropic.types import RawContentBlockDeltaEvent, TextBlock, ToolUseBlock
from anthropic.types import TextDelta as APITextDelta
from anthropic.types import ThinkingDelta as APIThinkingDelta

from reactor._agents.templates import to_json
from reactor._providers.base import (
    ProviderEvent,
    ProviderRequest,
    TextComplete,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolResult,
    Usage,
)
from reactor.exceptions import ProviderError

__all__ = [
    "RESPOND",
    "add_usage",
    "content_of",
    "force_tool",
    "forced_answer",
    "parse_json",
    "provider_error",
    "refuses_structured_output",
    "request_params",
    "retry_after",
    "stream_round",
    "text_of",
    "tool_result_block",
    "usage_of",
]

_RETRYABLE_TYPES = frozenset({"rate_limit_error", "overloaded_error", "api_error", "timeout_error"})


async def stream_round(
    client: anthropic.AsyncAnthropic, params: dict[str, Any], agent: str
) -> AsyncGenerator[ProviderEvent | APIMessage, None]:
    """Stream one model response as provider events, then yield the final message."""
    pending: list[str] = []  # text of the turn, reported before its tool calls
    try:
        # The stream's context manager closes the HTTP response however the block is
        # left: at the end, on an error, or when the consuming task is cancelled (the
        # CancelledError or GeneratorExit passes through here).
        async with client.messages.stream(**params) as stream:
            async for event in stream:
                if isinstance(event, RawContentBlockDeltaEvent):
                    delta = event.delta
                    if isinstance(delta, APITextDelta):
                        yield TextDelta(delta.text)
                    elif isinstance(delta, APIThinkingDelta):
                        yield ThinkingDelta(delta.thinking)
                elif isinstance(event, ParsedContentBlockStopEvent):
                    block = event.content_block
                    if isinstance(block, TextBlock):
                        pending.append(block.text)
                    elif isinstance(block, ToolUseBlock):
                        if pending:
                            yield TextComplete("".join(pending))
                            pending.clear()
                        yield ToolCall(block.id, block.name, dict(block.input))
            message = await stream.get_final_message()
    except (anthropic.AnthropicError, httpx2.TransportError) as exc:
        raise provider_error(exc, agent) from exc
    if pending:
        yield TextComplete("".join(pending))
    yield message


def _transport_cause(exc: BaseException) -> str:
    """What went wrong on the wire, in the transport's words: the SDK's own text changes.

    The SDK wraps the transport's error (``httpx2.ConnectError("connection refused")``)
    in its own; the innermost one names the real fault.
    """
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    text = str(root)
    return f"{type(root).__name__}: {text}" if text else type(root).__name__


def provider_error(exc: Exception, agent: str) -> ProviderError:
    """An SDK or transport failure as a ``ProviderError`` saying whether to retry."""
    again = "This is usually temporary: try again later, or raise max_retries= on the provider."
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return ProviderError(
            f"Agent {agent!r}: the Anthropic API did not answer in time. {again}",
            retryable=True,
            agent=agent,
        )
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return ProviderError(
            f"Agent {agent!r}: could not reach the Anthropic API ({_transport_cause(exc)}). "
            "Check the network "
            f"and ANTHROPIC_BASE_URL. {again}",
            retryable=True,
            agent=agent,
        )
    if isinstance(exc, anthropic.APIStatusError):
        # An error event inside a stream arrives on a 200 response: no HTTP status.
        status = exc.status_code if exc.status_code >= 400 else None
        kind = exc.type or "error"
        retryable = kind in _RETRYABLE_TYPES or (
            status is not None and (status in (408, 409, 429) or status >= 500)
        )
        if retryable:
            hint = again
        elif status in (401, 403):
            hint = "Check the API key (ANTHROPIC_API_KEY) and what it may access."
        else:
            hint = "Sending the same request again will not help: change the request."
        where = f"HTTP {status} {kind}" if status is not None else f"{kind} in the stream"
        detail = (exc.api_message or exc.message).rstrip(".")
        return ProviderError(
            f"Agent {agent!r}: the Anthropic API answered {where}: {detail}. {hint}",
            retryable=retryable,
            agent=agent,
            status_code=status,
            retry_after=retry_after(exc.response.headers) if status is not None else None,
        )
    return ProviderError(f"Agent {agent!r}: the Anthropic SDK failed: {exc}", agent=agent)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a response asks to wait before trying again, ``None`` when it does not say.

    ``retry-after-ms`` (milliseconds) wins over ``retry-after`` (seconds, or an HTTP date).
    """
    try:
        if "retry-after-ms" in headers:
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def usage_of(message: APIMessage) -> Usage:
    usage = message.usage
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_creation_input_tokens=usage.cache_creation_input_tokens or 0,
        cache_read_input_tokens=usage.cache_read_input_tokens or 0,
    )


def add_usage(total: Usage, more: Usage) -> Usage:
    return Usage(
        input_tokens=total.input_tokens + more.input_tokens,
        output_tokens=total.output_tokens + more.output_tokens,
        cache_creation_input_tokens=(
            total.cache_creation_input_tokens + more.cache_creation_input_tokens
        ),
        cache_read_input_tokens=total.cache_read_input_tokens + more.cache_read_input_tokens,
    )


def content_of(message: APIMessage) -> list[dict[str, Any]]:
    """The response's blocks as they go back to the API (thinking signatures included)."""
    return [block.to_dict(mode="json") for block in message.content]


def tool_result_block(result: ToolResult) -> dict[str, Any]:
    if result.error is not None:
        return {
            "type": "tool_result",
            "tool_use_id": result.id,
            "content": result.error,
            "is_error": True,
        }
    value = result.result
    content = value if isinstance(value, str) else to_json(value)
    return {"type": "tool_result", "tool_use_id": result.id, "content": content}


def text_of(message: APIMessage) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextBlock))


def parse_json(text: str) -> Any:
    """Structured output as data; text that is not JSON is left for validation to report."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


RESPOND = "respond"
"""The tool a model without native structured output answers through."""
_REFUSAL = re.compile(r"output_config|output_format|structured output|json_schema", re.IGNORECASE)


def refuses_structured_output(exc: ProviderError) -> bool:
    """Whether the API refused a request because the model has no native structured output."""
    return exc.status_code == 400 and bool(_REFUSAL.search(str(exc)))


def force_tool(params: dict[str, Any], tools: Sequence[Any]) -> dict[str, Any]:
    """``params`` asking for the answer as the input of a forced ``respond`` tool."""
    forced = dict(params)
    config = dict(forced.pop("output_config", None) or {})
    schema = config.pop("format", {}).get("schema") or {"type": "object"}
    if config:
        forced["output_config"] = config
    respond = {
        "name": RESPOND,
        "description": "Give your final answer, in exactly this schema.",
        "input_schema": schema,
    }
    forced["tools"] = [*forced.get("tools", ()), respond]
    forced["tool_choice"] = {"type": "any"} if tools else {"type": "tool", "name": RESPOND}
    return forced


def forced_answer(message: APIMessage) -> dict[str, Any] | None:
    """The input of the ``respond`` call in ``message``, if it made one."""
    for block in message.content:
        if isinstance(block, ToolUseBlock) and block.name == RESPOND:
            return dict(block.input)
    return None


def request_params(
    request: ProviderRequest, settings: Mapping[str, Any], passed: frozenset[str]
) -> dict[str, Any]:
    """The keyword arguments of ``messages.stream()``, without the messages.

    ``passed`` are the settings that go to ``messages.stream()`` as they are.
    """
    params = {name: value for name, value in settings.items() if name in passed}
    params["model"] = settings["model"]
    params["max_tokens"] = settings["max_tokens"]
    if request.system:
        params["system"] = (
            [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}]
            if settings["cache_system"]
            else request.system
        )
    if request.tools:
        params["tools"] = [tool.definition() for tool in request.tools]
    if settings["thinking"] is not None:
        params["thinking"] = dict(settings["thinking"])
    if settings["temperature"] is not None:
        # anthropic 2.x dropped the parameter (API 2026-10-21 rejects it): send it raw.
        params["extra_body"] = {
            **(params.get("extra_body") or {}),
            "temperature": settings["temperature"],
        }
    if request.output_schema is not None:
        try:
            schema = anthropic.transform_schema(request.output_schema)
        except ValueError as exc:
            raise ProviderError(
                f"Agent {request.agent!r}: its output schema cannot be sent as a structured "
                f"output format: {exc}",
                agent=request.agent,
            ) from exc
        params["output_config"] = {
            **(params.get("output_config") or {}),
            "format": {"type": "json_schema", "schema": schema},
        }
    return params
