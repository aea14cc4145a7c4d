"""The provider base class: what an agent asks of a model, and the events streamed back."""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Literal

from reactor._providers.tools import Tool
from reactor._signals.sharedkeys import shared_keys
from reactor._signals.signal import to_jsonable

__all__ = [
    "End",
    "Message",
    "Provider",
    "ProviderEvent",
    "ProviderRequest",
    "TextComplete",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "ToolResult",
    "Usage",
    "as_provider",
]


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """One turn of the conversation sent to the model."""

    role: Literal["user", "assistant"]
    content: str


@dataclasses.dataclass(frozen=True, slots=True)
class ProviderRequest:
    """Everything that determines a provider's answer for one agent activation.

    Attributes:
        agent: The agent asking.
        system: The rendered system prompt, if any.
        prompt: The rendered prompt (also the first user message).
        messages: The conversation to send, starting with the prompt; an output
            retry appends the rejected answer and the validation error.
        output_schema: JSON schema the answer must match, or ``None`` for text.
        tools: Tools the model may call.
        options: Model options (``model``, ``max_tokens``, ``temperature``, ...).
        request_hash: Stable hash of all of the above; replay matches on it.
        before_tool: The agent's ``before_tool(call)`` hook, for providers that run
            tools (not part of the hash).
        after_tool: The agent's ``after_tool(call, result)`` hook (not hashed either).
        pre_tool_use: The ``pre_tool_use`` hooks of the call (see :class:`reactor.Hooks`),
            run before ``before_tool`` (not hashed).
        post_tool_use: Its ``post_tool_use`` hooks, run before ``after_tool``.
    """

    agent: str
    system: str | None
    prompt: str
    messages: tuple[Message, ...]
    output_schema: dict[str, Any] | None = None
    tools: tuple[Tool, ...] = ()
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    request_hash: str = ""
    before_tool: Callable[..., Any] | None = dataclasses.field(
        default=None, compare=False, repr=False
    )
    after_tool: Callable[..., Any] | None = dataclasses.field(
        default=None, compare=False, repr=False
    )
    pre_tool_use: tuple[Callable[..., Any], ...] = dataclasses.field(
        default=(), compare=False, repr=False
    )
    post_tool_use: tuple[Callable[..., Any], ...] = dataclasses.field(
        default=(), compare=False, repr=False
    )

    @classmethod
    def build(
        cls,
        *,
        agent: str,
        system: str | None,
        prompt: str,
        messages: Sequence[Message] | None = None,
        output_schema: dict[str, Any] | None = None,
        tools: Sequence[Tool] = (),
        options: Mapping[str, Any] | None = None,
        before_tool: Callable[..., Any] | None = None,
        after_tool: Callable[..., Any] | None = None,
        pre_tool_use: Sequence[Callable[..., Any]] = (),
        post_tool_use: Sequence[Callable[..., Any]] = (),
    ) -> ProviderRequest:
        """Create a request and compute its ``request_hash``."""
        turns = tuple(messages) if messages is not None else (Message("user", prompt),)
        given = options or {}
        digest = request_hash(agent, system, turns, output_schema, tuple(tools), given)
        # Built as a draft of the same slots, then made a request: the frozen
        # __init__ would set each of its twelve fields through object.__setattr__.
        request: Any = object.__new__(_RequestDraft)
        request.agent = agent
        request.system = system
        request.prompt = prompt
        request.messages = turns
        request.output_schema = output_schema
        request.tools = tuple(tools)
        request.options = dict(given)
        request.request_hash = digest
        request.before_tool = before_tool
        request.after_tool = after_tool
        request.pre_tool_use = tuple(pre_tool_use)
        request.post_tool_use = tuple(post_tool_use)
        request.__class__ = cls
        return request  # type: ignore[no-any-return]

    def fingerprint(self) -> dict[str, Any]:
        """The JSON data the hash is computed from (used to explain replay mismatches)."""
        return _fingerprint(
            self.agent, self.system, self.messages, self.output_schema, self.tools, self.options
        )


class _RequestDraft:
    """A :class:`ProviderRequest` being built: the same slots, not frozen (see ``build``)."""

    __slots__ = ProviderRequest.__slots__


def _fingerprint(
    agent: str,
    system: str | None,
    messages: tuple[Message, ...],
    output_schema: dict[str, Any] | None,
    tools: tuple[Tool, ...],
    options: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "agent": agent,
        "system": system,
        "messages": [{"role": m.role, "content": m.content} for m in messages],
        "output_schema": output_schema,
        "tools": [tool.definition() for tool in tools],
        "options": to_jsonable(dict(options)),
    }


def request_hash(
    agent: str,
    system: str | None,
    messages: tuple[Message, ...],
    output_schema: dict[str, Any] | None,
    tools: tuple[Tool, ...],
    options: Mapping[str, Any],
) -> str:
    """Return a stable hash of everything that determines a provider's answer.

    The hash is of the fingerprint's canonical JSON (sorted keys, no spaces). The
    schema, tools and options of an agent are the same objects on every call, so their
    JSON is made once and spliced in: the bytes are exactly those of dumping the whole
    fingerprint, which keeps hashes (and recordings) the same across versions. The
    hash is interned: the ``provider:start`` of thousands of runs asking the same hold
    one string.
    """
    # Most calls give no options, schema or tools: their JSON without a call each.
    options_json = _dumps_once(options, lambda: to_jsonable(dict(options))) if options else "{}"
    schema_json = (
        "null" if output_schema is None else _dumps_once(output_schema, lambda: output_schema)
    )
    tools_json = (
        _dumps_once(tools, lambda: [tool.definition() for tool in tools]) if tools else "[]"
    )
    text = (
        f'{{"content":{_string(messages[0].content)},"role":{_string(messages[0].role)}}}'
        if len(messages) == 1
        else ",".join(_message(m) for m in messages)
    )
    canonical = (
        f'{{"agent":{_string(agent)},'
        f'"messages":[{text}],'
        f'"options":{options_json},'
        f'"output_schema":{schema_json},'
        f'"system":{"null" if system is None else _string(system)},'
        f'"tools":{tools_json}}}'
    )
    return sys.intern(hashlib.sha256(canonical.encode()).hexdigest()[:32])


_string = json.encoder.encode_basestring
"""A string as canonical JSON: what ``json.dumps(..., ensure_ascii=False)`` makes of it."""


def _message(message: Message) -> str:
    return f'{{"content":{_string(message.content)},"role":{_string(message.role)}}}'


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dumps(value: Any) -> str:
    return _CANONICAL.encode(value)


_ONCE: dict[int, tuple[object, str]] = {}


def _dumps_once(key: object, data: Callable[[], Any]) -> str:
    """The canonical JSON of ``data()``, remembered for the object ``key``.

    ``key`` (an agent's options, schema or tools) is kept alive by the entry, so its
    ``id`` cannot be reused by another object while it is remembered.
    """
    if not key:  # no schema, options or tools
        return "null" if key is None else "{}" if isinstance(key, Mapping) else "[]"
    found = _ONCE.get(id(key))
    if found is not None and found[0] is key:
        return found[1]
    text = _dumps(data())
    if len(_ONCE) > 4_096:
        _ONCE.clear()
    _ONCE[id(key)] = (key, text)
    return text


_USAGE = shared_keys("Usage")
"""The usage of every ``provider:end`` (see ``reactor._signals.sharedkeys``)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one provider call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        """Input and output tokens, plus cache tokens when there are any."""
        data = _USAGE()
        data["input_tokens"] = self.input_tokens
        data["output_tokens"] = self.output_tokens
        if self.cache_creation_input_tokens:
            data["cache_creation_input_tokens"] = self.cache_creation_input_tokens
        if self.cache_read_input_tokens:
            data["cache_read_input_tokens"] = self.cache_read_input_tokens
        return data


@dataclasses.dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the answer's text, as it streams (``text:delta``)."""

    content: str


@dataclasses.dataclass(frozen=True, slots=True)
class ThinkingDelta:
    """A piece of extended thinking (``thinking:delta``)."""

    content: str


@dataclasses.dataclass(frozen=True, slots=True)
class TextComplete:
    """The full text of a response turn (``text:complete``)."""

    content: str


@dataclasses.dataclass(frozen=True, slots=True)
class ToolCall:
    """The model asked for a tool (``tool:call``)."""

    id: str
    name: str
    input: dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result, as fed back to the model (``tool:result``)."""

    id: str
    name: str
    result: Any
    error: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class End:
    """The final answer (``provider:end``): text, or parsed JSON for structured output.

    Attributes:
        output: The answer: a string, or a dict when an output schema was requested.
        usage: Tokens used, summed over every round of the call.
        cost_usd: Price of the call, if the provider knows it.
        stop_reason: Why the model stopped (``end_turn``, ``max_tokens``, ...).
        model: The model that answered.
    """

    output: Any
    usage: Usage = Usage()
    cost_usd: float | None = None
    stop_reason: str | None = None
    model: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Retry:
    """The provider waits, then asks again (``provider:retry``): rate limited, overloaded...

    Attributes:
        attempt: Which retry this is (1 for the first).
        wait_s: Seconds the provider waits before it (what ``retry-after`` asked, or
            a jittered backoff).
        status: The HTTP status of the failure (``429``, ``529``...), if it had one.
        error: What failed.
    """

    attempt: int
    wait_s: float
    status: int | None = None
    error: str = ""


ProviderEvent = TextDelta | ThinkingDelta | TextComplete | ToolCall | ToolResult | Retry | End
"""Everything a provider's ``stream()`` may yield; it must end with one :class:`End`."""


class Provider(abc.ABC):
    """Runs one agent request on a model and streams what happens.

    Subclass it and implement :meth:`stream`: it yields :data:`reactor.ProviderEvent`
    values (text deltas, tool calls and results, ...) and ends with exactly one ``End``
    carrying the output. The runtime turns each event into a signal on the run's bus.
    Raise :class:`reactor.ProviderError` on failure, with ``retryable`` set.

    Every other member is optional, and declared here with its default; override the
    ones your provider knows better. An object that is no subclass but has a
    ``stream`` method still works: the runtime wraps it where it enters a run or a
    model call, and it gets these defaults.

    Attributes:
        model: The default model, reported in ``provider:start`` for requests that
            name none in their options (default ``None``: not known).
    """

    model: str | None = None

    @abc.abstractmethod
    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Stream the answer to ``request``."""

    def model_for(self, request: ProviderRequest) -> str | None:
        """The model that will answer ``request``, for its ``provider:start`` signal.

        The default is the request's ``model`` option, else :attr:`model`.
        """
        return request.options.get("model") or self.model

    def price_known(self, request: ProviderRequest) -> bool | None:
        """Whether the answer to ``request`` will carry a cost (budgets in USD need one).

        The default, ``None``, says the provider cannot tell: the call is allowed, and
        an answer that reports no cost then makes the spending unknown, which refuses
        the next call over a budget in USD.
        """
        return None

    async def turn_to_start(self, request: ProviderRequest) -> None:
        """Wait until ``request`` may start (its ``provider:start`` is emitted after).

        A replay waits for the call's recorded turn; the default starts at once.
        """
        return


class _Adapted(Provider):
    """A provider that is no :class:`Provider` subclass, given the defaults of one."""

    def __init__(self, given: Any) -> None:
        self.given = given

    def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """The wrapped provider's stream."""
        events: AsyncIterator[ProviderEvent] = self.given.stream(request)
        return events

    def __repr__(self) -> str:
        return repr(self.given)


def as_provider(provider: Provider | Any) -> Provider:
    """``provider`` as a :class:`Provider`: itself, or a duck-typed one wrapped.

    The runtime calls it where a provider enters a model call, so that code past it
    reads every optional member without probing for it. A wrapped object gets the
    defaults of :class:`Provider` (subclass it to offer more).

    Raises:
        TypeError: ``provider`` has no ``stream`` method.
    """
    if isinstance(provider, Provider):
        return provider
    if not callable(getattr(provider, "stream", None)):  # the one required member
        raise TypeError(
            f"A provider must subclass reactor.Provider (or have a stream(request) method); "
            f"got {provider!r}."
        )
    return _Adapted(provider)
