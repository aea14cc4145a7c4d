"""A fake Anthropic Messages endpoint that speaks the real wire format.

The real SDK gets a client whose HTTP transport is ``httpx2.MockTransport`` over
:class:`FakeAnthropic`: requests are recorded (parsed JSON bodies and headers), and each
one is answered by the next scripted reply (or by a *brain*, a function of the
request), as server-sent events exactly as the API streams them (``message_start``,
``content_block_start/delta/stop``, ``message_delta``, ``message_stop``) or as an HTTP
error. Nothing here can reach the network.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, TypeAlias

import anthropic
import httpx2

from reactor._providers.anthropic import AnthropicProvider

__all__ = [
    "Brain",
    "Failure",
    "FakeAnthropic",
    "Hang",
    "Reply",
    "Seen",
    "Text",
    "Thinking",
    "ToolUse",
    "Turn",
    "as_endpoint",
    "fake_anthropic",
    "turn",
]

MODEL = "claude-sonnet-5-5"


@dataclasses.dataclass(frozen=True)
class Text:
    """A text block, streamed in ``chunks``."""

    chunks: tuple[str, ...]

    def __init__(self, *chunks: str) -> None:
        object.__setattr__(self, "chunks", chunks)


@dataclasses.dataclass(frozen=True)
class Thinking:
    """A thinking block, streamed in ``chunks``, closed by a signature."""

    chunks: tuple[str, ...]

    def __init__(self, *chunks: str) -> None:
        object.__setattr__(self, "chunks", chunks)


@dataclasses.dataclass(frozen=True)
class ToolUse:
    """A tool_use block whose input streams as ``input_json_delta`` pieces."""

    id: str
    name: str
    input: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Turn:
    """One streamed response."""

    blocks: tuple[Text | Thinking | ToolUse, ...]
    stop_reason: str = "end_turn"
    input_tokens: int = 10
    output_tokens: int = 5
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    model: str | None = None  # None: echo the requested model
    error_after: dict[str, Any] | None = None  # an `error` event after the first block


def turn(*blocks: Text | Thinking | ToolUse | str, **fields: Any) -> Turn:
    """A response; plain strings are text blocks, and tool uses set stop_reason."""
    parts = tuple(Text(block) if isinstance(block, str) else block for block in blocks)
    if "stop_reason" not in fields and any(isinstance(b, ToolUse) for b in parts):
        fields["stop_reason"] = "tool_use"
    return Turn(parts, **fields)


@dataclasses.dataclass(frozen=True)
class Failure:
    """An HTTP error response, with the API's error body.

    ``retry_after`` sends a ``retry-after`` header of that many seconds (a rate limit
    that says how long to wait); without it the response asks for one millisecond
    (``retry-after-ms: 1``), so retries in tests do not wait.
    """

    status: int
    type: str
    message: str
    retry_after: float | None = None


@dataclasses.dataclass
class Hang:
    """A response that streams ``head`` and then waits forever, recording how it ended."""

    head: Turn
    started: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    cancelled: bool = False
    closed: bool = False


Reply: TypeAlias = Turn | Failure | Hang | Exception | str
"""One answer of the endpoint: a response, an HTTP error, a hang, a transport error,
or a plain string (a text response)."""

Brain: TypeAlias = Callable[[dict[str, Any]], Reply]
"""Decides each answer from the request's JSON body (``body["messages"]``, ...)."""


@dataclasses.dataclass
class Seen:
    """A request the fake received."""

    body: dict[str, Any]
    headers: httpx2.Headers
    timeout: dict[str, float | None]


class FakeAnthropic:
    """A Messages API endpoint answering with scripted replies, in order, or a brain.

    ::

        fake = FakeAnthropic(turn("Hello"), Failure(529, "overloaded_error", "busy"))
        provider = fake.provider()            # a real AnthropicProvider, real SDK
        ...
        assert fake.bodies[0]["messages"][0]["content"] == "..."

    Args:
        *replies: Answers used in order, one per request.
        brain: A function of the request's JSON body giving each answer, used when
            no scripted reply is left.
    """

    def __init__(self, *replies: Reply, brain: Brain | None = None) -> None:
        self.replies = list(replies)
        self.brain = brain
        self.requests: list[Seen] = []
        self._clients: list[anthropic.AsyncAnthropic] = []

    def provider(self, **options: Any) -> AnthropicProvider:
        """An :class:`~reactor.AnthropicProvider` whose requests come here.

        ``options`` are the provider's (``model``, ``max_tokens``, ``max_retries``,
        ...); ``max_retries`` is 0 unless given, so errors show at once.
        """
        options.setdefault("max_retries", 0)
        return AnthropicProvider(client=self.client(), **options)

    def client(self, *, max_retries: int = 0, **options: Any) -> anthropic.AsyncAnthropic:
        """A real SDK client whose every request comes here."""
        transport = httpx2.MockTransport(self.handle)
        client = anthropic.AsyncAnthropic(
            api_key="test-key",
            max_retries=max_retries,
            http_client=httpx2.AsyncClient(transport=transport),
            **options,
        )
        self._clients.append(client)
        return client

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the requests received."""
        return [seen.body for seen in self.requests]

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        """The endpoint: record the request, answer with the next reply."""
        assert request.url.path == "/v1/messages", request.url
        body = json.loads(request.content)
        self.requests.append(Seen(body, request.headers, request.extensions.get("timeout", {})))
        if self.replies:
            reply = self.replies.pop(0)
        elif self.brain is not None:
            reply = self.brain(body)
        else:  # an answer the SDK shows as it is, not a transport failure
            message = (
                f"the fake endpoint has no reply left for request {len(self.requests)} "
                f"(messages: {body.get('messages')!r}); give it more replies, or a brain"
            )
            reply = Failure(400, "invalid_request_error", message)
        if isinstance(reply, str):
            reply = turn(reply)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, Failure):
            error = {"type": "error", "error": {"type": reply.type, "message": reply.message}}
            # retry-after-ms keeps retries of 429/5xx fast in tests, unless asked otherwise
            wait = (
                {"retry-after": f"{reply.retry_after:g}"}
                if reply.retry_after is not None
                else {"retry-after-ms": "1"}
            )
            return httpx2.Response(reply.status, json=error, headers=wait)
        headers = {"content-type": "text/event-stream"}
        if isinstance(reply, Hang):
            return httpx2.Response(200, headers=headers, stream=_HangingStream(reply, body))
        return httpx2.Response(200, headers=headers, content=b"".join(_events(reply, body)))

    async def aclose(self) -> None:
        """Close the clients handed out."""
        for client in self._clients:
            await client.close()


class _HangingStream(httpx2.AsyncByteStream):
    def __init__(self, hang: Hang, body: dict[str, Any]) -> None:
        self.hang = hang
        self.head = b"".join(_events(hang.head, body, complete=False))

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.head
        self.hang.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.hang.cancelled = True
            raise
        yield b""  # pragma: no cover

    async def aclose(self) -> None:
        self.hang.closed = True


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _events(reply: Turn, body: dict[str, Any], *, complete: bool = True) -> Iterable[bytes]:
    """The server-sent events of one response, as the API sends them."""
    usage: dict[str, Any] = {"input_tokens": reply.input_tokens, "output_tokens": 1}
    if reply.cache_creation_input_tokens is not None:
        usage["cache_creation_input_tokens"] = reply.cache_creation_input_tokens
    if reply.cache_read_input_tokens is not None:
        usage["cache_read_input_tokens"] = reply.cache_read_input_tokens
    message: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": reply.model or body["model"],
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    yield _sse("message_start", {"type": "message_start", "message": message})
    yield _sse("ping", {"type": "ping"})
    for index, block in enumerate(reply.blocks):
        yield from _block(index, block)
        if reply.error_after is not None:
            yield _sse("error", {"type": "error", "error": reply.error_after})
            return
    if not complete:
        return
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def _block(index: int, block: Text | Thinking | ToolUse) -> Iterable[bytes]:
    def delta(payload: dict[str, Any]) -> bytes:
        return _sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": payload}
        )

    if isinstance(block, Text):
        start: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [delta({"type": "text_delta", "text": chunk}) for chunk in block.chunks]
    elif isinstance(block, Thinking):
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [delta({"type": "thinking_delta", "thinking": chunk}) for chunk in block.chunks]
        deltas.append(delta({"type": "signature_delta", "signature": "sig-fake"}))
    else:
        start = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
        raw = json.dumps(block.input)
        pieces = [raw[i : i + 7] for i in range(0, len(raw), 7)]
        deltas = [delta({"type": "input_json_delta", "partial_json": piece}) for piece in pieces]
    yield _sse(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": start},
    )
    yield from deltas
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})


def as_endpoint(brain: FakeAnthropic | Brain | Reply | Sequence[Reply]) -> FakeAnthropic:
    """The fake endpoint ``brain`` describes (see :func:`fake_anthropic`)."""
    if isinstance(brain, FakeAnthropic):
        return brain
    if callable(brain) and not isinstance(brain, Turn | Failure | Hang | Exception):
        return FakeAnthropic(brain=brain)
    if isinstance(brain, Sequence) and not isinstance(brain, str):
        return FakeAnthropic(*brain)
    return FakeAnthropic(brain)


def fake_anthropic(
    brain: FakeAnthropic | Brain | Reply | Sequence[Reply], **options: Any
) -> AnthropicProvider:
    """An :class:`~reactor.AnthropicProvider` on the real SDK, talking to a fake endpoint.

    ``brain`` is what answers: a :class:`FakeAnthropic` (keep it to inspect the
    requests), a function of the request's JSON body, one reply, or a list of replies
    used in order. ``options`` go to the provider::

        provider = fake_anthropic(["The trend is up.", "Low risk."])
        provider = fake_anthropic(lambda body: turn(f"echo {body['messages'][-1]}"))
    """
    return as_endpoint(brain).provider(**options)
