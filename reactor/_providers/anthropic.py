"""AnthropicProvider: Claude through the official ``anthropic`` SDK, streaming.

One :meth:`AnthropicProvider.stream` call answers one agent request: it streams the
model's text and thinking as they arrive, runs the tools the model asks for and sends
their results back (the tool-use loop), and ends with one ``End`` whose usage and cost
add up every round.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any, Literal

import anthropic
from anthropic.resources.messages import AsyncMessages
from anthropic.types import Message as APIMessage
from anthropic.types import ToolUseBlock

from reactor._providers.anthropic_wire import (
    RESPOND,
    add_usage,
    content_of,
    force_tool,
    forced_answer,
    parse_json,
    refuses_structured_output,
    request_params,
    stream_round,
    text_of,
    tool_result_block,
    usage_of,
)
from reactor._providers.base import (
    End,
    Provider,
    ProviderEvent,
    ProviderRequest,
    Retry,
    TextComplete,
    TextDelta,
    ToolCall,
    ToolResult,
    Usage,
)
from reactor._providers.limits import Limits, backoff
from reactor._providers.pricing import DEFAULT_MODEL, ModelPrice, price_of
from reactor._providers.toolrun import AfterTool, BeforeTool, execute_tool_calls
from reactor._signals.diagnostics import log
from reactor.exceptions import ProviderError

__all__ = ["DEFAULT_MODEL", "AnthropicProvider"]


# Settings the provider interprets itself.
_SETTINGS = frozenset(
    {
        "model",
        "max_tokens",
        "temperature",
        "thinking",
        "max_tool_rounds",
        "cache_system",
        "structured_output",
        "stream_retries",
        "max_retries",
    }
)
# Everything else messages.stream() accepts passes through unchanged (timeout included),
# except what the provider builds from the request.
_REQUEST_OPTIONS = frozenset(inspect.signature(AsyncMessages.stream).parameters) - {
    "self",
    "messages",
    "system",
    "tools",
    "output_format",
    *_SETTINGS,
}
_KNOWN = _SETTINGS | _REQUEST_OPTIONS


class AnthropicProvider(Provider):
    """Runs agents on Claude with the official ``anthropic`` SDK (streaming Messages API).

    ::

        provider = AnthropicProvider()                 # ANTHROPIC_API_KEY from the env
        result = await bot.run(input={...}, provider=provider)

    Text and thinking stream as ``text:delta`` / ``thinking:delta`` signals. When an
    agent has tools, the model may call them: the calls run (concurrently, through the
    agent's ``before_tool`` / ``after_tool`` hooks, then this provider's), their results
    go back to the model, and so on until it answers. When an agent has an ``output``
    model, its JSON schema is sent as a native structured-output format
    (``output_config.format``), and the answer's JSON is parsed for validation.

    The client is created at the first call (so a provider can be built anywhere,
    even without a key), from the SDK's usual environment: ``ANTHROPIC_API_KEY``.

    Args:
        model: The default model; agents choose another with ``options={"model": ...}``.
            The default is the newest Sonnet in the installed SDK's model list,
            ``claude-sonnet-5-5``: fast, capable, and priced for everyday agent work.
        client: An ``anthropic.AsyncAnthropic`` to use as is (its own key, base URL,
            HTTP client...). Without one, the provider creates its own.
        max_tokens: The most tokens one response may hold, thinking included.
        temperature: Sampling temperature, sent only when given. The API version that
            ``anthropic`` 2.x speaks (2026-10-21) rejects it with a 400, so it is only
            useful with a gateway or an API version that still accepts it.
        thinking: The ``thinking`` configuration, e.g. ``{"type": "adaptive",
            "display": "summarized"}``; by default the model's own.
        max_tool_rounds: How many times the model may ask for tools in one request; a
            model that asks once more fails the request with a ``ProviderError``.
        cache_system: Mark the system prompt as a prompt-cache breakpoint (5-minute
            ephemeral cache). It caches the tool definitions too, which come before it.
        structured_output: How an ``output`` model is asked for: ``"native"``
            (``output_config.format``), ``"tool"`` (a forced ``respond`` tool whose
            input is the answer, for models without native structured output), or
            ``"auto"``: native, falling back to the tool for a model that refuses it.
        stream_retries: How many times a response that fails after it started
            streaming (a retryable error: overload, a dropped connection) is asked
            again; the text already streamed is not repeated.
        max_retries: How many times a request that fails before anything streamed is
            asked again, when trying again may help (``429`` rate limited, ``529``
            overloaded, other 5xx, 408, 409, a dropped connection). reactor retries, not
            the SDK (a client's own retries are turned off): it waits what
            ``retry-after`` asks (or a jittered exponential backoff, at most 60 s) and
            announces each retry as ``provider:retry {attempt, wait_s, status}``, so
            retries are in the log and replay reproduces them without waiting.
        max_concurrency: At most this many requests in flight at once, shared by
            every run that uses this provider in the process.
        requests_per_minute: At most this many requests started per minute (a token
            bucket: a second's worth may start at once), shared by every run that uses
            this provider; with ``REACTOR_REDIS_URL`` set (workers), shared by every
            process through a token bucket in that Redis.
        rate_limit_url: The Redis that shares ``requests_per_minute``
            (``REACTOR_REDIS_URL`` by default; ``""`` keeps the limit in the process).
        before_tool: ``before_tool(call)`` for every tool call, after the agent's own
            hook: return the call (changed or not) to run it, or ``None`` to block it.
        after_tool: ``after_tool(call, result)`` for every tool result, after the
            agent's own hook: return a replacement result, or ``None`` to keep it.
        prices: Prices per model id (a :class:`~reactor.ModelPrice` or an
            ``(input, output)`` USD-per-million pair), over :data:`reactor.model_prices`.
        **options: ``timeout`` for the SDK, or any other keyword of
            ``client.messages.stream()``: ``stop_sequences``, ``metadata``,
            ``tool_choice``, ``output_config`` (e.g. ``{"effort": "low"}``),
            ``service_tier``, ``extra_headers``, ``extra_body``...

    Every setting but ``client``, the hooks, ``prices`` and the limits can also be given
    per agent, in ``agent(..., options={...})``, and wins over the provider's.

    Raises:
        TypeError: An option is not one the provider or ``messages.stream()`` knows.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        client: anthropic.AsyncAnthropic | None = None,
        max_tokens: int = 16_384,
        temperature: float | None = None,
        thinking: Mapping[str, Any] | None = None,
        max_tool_rounds: int = 10,
        cache_system: bool = False,
        structured_output: Literal["auto", "native", "tool"] = "auto",
        stream_retries: int = 2,
        max_retries: int = 2,
        max_concurrency: int | None = None,
        requests_per_minute: float | None = None,
        rate_limit_url: str | None = None,
        before_tool: BeforeTool | None = None,
        after_tool: AfterTool | None = None,
        prices: Mapping[str, ModelPrice | tuple[float, float]] | None = None,
        **options: Any,
    ) -> None:
        unknown = sorted(set(options) - _KNOWN)
        if unknown:
            raise TypeError(
                f"AnthropicProvider() got unknown option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}. It takes the settings above, timeout, and "
                "the keywords of client.messages.stream()."
            )
        self._client = client
        self._owned: tuple[asyncio.AbstractEventLoop, anthropic.AsyncAnthropic] | None = None
        self._defaults: dict[str, Any] = {
            "model": model,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "thinking": thinking,
            "max_tool_rounds": max_tool_rounds,
            "cache_system": cache_system,
            "structured_output": structured_output,
            "stream_retries": stream_retries,
            "max_retries": max_retries,
            **options,
        }
        self.limits = Limits(
            max_concurrency=max_concurrency,
            requests_per_minute=requests_per_minute,
            redis_url=rate_limit_url,
        )
        self._tool_models: set[str] = set()  # models found to refuse native structured output
        self.before_tool = before_tool
        self.after_tool = after_tool
        self.prices: dict[str, ModelPrice] = {
            name: price if isinstance(price, ModelPrice) else ModelPrice(*price)
            for name, price in (prices or {}).items()
        }

    @property
    def model(self) -> str:
        """The default model (what ``provider:start`` reports for agents without one)."""
        return str(self._defaults["model"])

    @model.setter
    def model(self, model: str) -> None:
        self._defaults["model"] = model

    def price_known(self, request: ProviderRequest) -> bool:
        """Whether the model ``request`` would use has a price (budgets in USD need one)."""
        model = request.options.get("model") or self._defaults["model"]
        return price_of(str(model), self.prices) is not None

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Answer ``request`` on Claude, running the tool-use loop; end with one ``End``.

        A response paused by the API (``pause_turn``) is continued. A retryable failure
        after the response started streaming is retried (``stream_retries`` times),
        without repeating the text already streamed. A model that refuses native
        structured output is asked to answer through a forced tool instead.

        Raises:
            ProviderError: The API failed (``retryable`` says whether trying again
                later may help, ``status_code`` gives the HTTP status), no API key is
                configured, an option is unknown, or the model wanted more than
                ``max_tool_rounds`` rounds of tools.
        """
        agent = request.agent
        settings = self._settings(request)
        client = self._client_for(agent)
        mode = settings["structured_output"]
        params, forced = self._params(request, settings)
        messages: list[dict[str, Any]] = [
            {"role": turn.role, "content": turn.content} for turn in request.messages
        ]
        before = [hook for hook in (request.before_tool, self.before_tool) if hook is not None]
        after = [hook for hook in (request.after_tool, self.after_tool) if hook is not None]
        spent = _Spent(self.prices)
        tool_rounds = 0
        paused = ""  # text of responses the API paused, continued in the next round
        streamed = False
        while True:
            message: APIMessage | None = None
            rounds = self._attempts(client, {**params, "messages": list(messages)}, settings, agent)
            try:
                async with contextlib.aclosing(rounds) as events:
                    async for item in events:
                        if isinstance(item, APIMessage):
                            message = item
                        elif not (forced and isinstance(item, ToolCall) and item.name == RESPOND):
                            streamed = True
                            yield item
            except ProviderError as exc:
                if streamed or forced or mode != "auto" or not refuses_structured_output(exc):
                    raise
                self._tool_models.add(params["model"])
                forced, params = True, force_tool(params, request.tools)
                continue
            assert message is not None  # a round always ends with the message
            spent.add(message, params["model"])
            answer = forced_answer(message) if forced else None
            if not _goes_on(message, answer):
                break
            _check_rounds(agent, tool_rounds, settings["max_tool_rounds"])
            tool_rounds += 1
            messages.append({"role": "assistant", "content": content_of(message)})
            if message.stop_reason == "pause_turn":
                paused += text_of(message)
                continue
            results = await _run_tools(message, request, before, after)
            for result in results:
                yield result
            messages.append({"role": "user", "content": [tool_result_block(r) for r in results]})
        yield _end(request, message, paused, answer, spent)

    def _params(
        self, request: ProviderRequest, settings: Mapping[str, Any]
    ) -> tuple[dict[str, Any], bool]:
        """The request's parameters, and whether it answers through a forced tool."""
        params = request_params(request, settings, _REQUEST_OPTIONS)
        mode = settings["structured_output"]
        forced = request.output_schema is not None and (
            mode == "tool" or (mode == "auto" and params["model"] in self._tool_models)
        )
        return (force_tool(params, request.tools) if forced else params), forced

    async def _attempts(
        self,
        client: anthropic.AsyncAnthropic,
        params: dict[str, Any],
        settings: Mapping[str, Any],
        agent: str,
    ) -> AsyncGenerator[ProviderEvent | APIMessage, None]:
        """One round, within the provider's limits, tried again when it may pass.

        A failure before anything streamed is tried again ``max_retries`` times, one
        after it started ``stream_retries`` times, each after :func:`backoff` (what
        ``retry-after`` asks, or a jittered exponential wait) and announced as a
        :class:`Retry` event. What an attempt already streamed is not streamed again:
        text deltas resume after the text shown so far, and completed texts and tool
        calls already reported are skipped.
        """
        shown = ""
        reported = 0  # TextComplete and ToolCall events already streamed
        failures = restarts = 0
        limits = self.limits
        while True:
            text, seen, started = "", 0, False
            try:
                async with limits.slot() if limits.active else contextlib.nullcontext():
                    round_events = stream_round(client, params, agent)
                    async with contextlib.aclosing(round_events) as events:
                        async for item in events:
                            started = True
                            if isinstance(item, TextDelta):
                                text += item.content
                                if len(text) > len(shown):
                                    fresh, shown = text[len(shown) :], text
                                    yield TextDelta(fresh)
                            elif isinstance(item, TextComplete | ToolCall):
                                seen += 1
                                if seen > reported:
                                    reported = seen
                                    yield item
                            else:
                                yield item
                return
            except ProviderError as exc:
                if started:
                    restarts += 1
                    allowed = restarts <= settings["stream_retries"]
                else:
                    failures += 1
                    allowed = failures <= settings["max_retries"]
                if not (exc.retryable and allowed):
                    raise
                attempt = failures + restarts
                wait = round(backoff(attempt, exc.retry_after), 3)
                log(
                    "reactor.anthropic",
                    "warning",
                    "request failed; retrying",
                    agent=agent,
                    attempt=attempt,
                    wait_s=wait,
                    status=exc.status_code,
                    error=str(exc),
                )
                yield Retry(attempt, wait, exc.status_code, str(exc))
            await asyncio.sleep(wait)

    async def aclose(self) -> None:
        """Close the client this provider created, if any (a given client is the caller's)."""
        await self.limits.aclose()
        if self._owned is not None:
            _, client = self._owned
            self._owned = None
            await client.close()

    def _settings(self, request: ProviderRequest) -> dict[str, Any]:
        unknown = sorted(set(request.options) - _KNOWN)
        if unknown:
            raise ProviderError(
                f"Agent {request.agent!r} has option{'s' if len(unknown) > 1 else ''} "
                f"{', '.join(map(repr, unknown))}, which AnthropicProvider does not know. "
                f"Known options: {', '.join(sorted(_KNOWN))}.",
                agent=request.agent,
            )
        return {**self._defaults, **request.options}

    def _client_for(self, agent: str) -> anthropic.AsyncAnthropic:
        client = self._client if self._client is not None else self._own_client(agent)
        # reactor retries itself, so that every retry is a provider:retry of the log.
        if client.max_retries:
            client = client.with_options(max_retries=0)
        if self.limits.active and self.limits.requests_per_minute is not None:
            self.limits.key = Limits.key_for(client.api_key or client.auth_token)
        return client

    def _own_client(self, agent: str) -> anthropic.AsyncAnthropic:
        # One client per event loop: its connection pool belongs to the loop it was
        # opened on, and scripts may run several loops (run_sync, asyncio.run).
        loop = asyncio.get_running_loop()
        if self._owned is not None and self._owned[0] is loop:
            return self._owned[1]
        try:
            client = anthropic.AsyncAnthropic()
        except anthropic.AnthropicError as exc:
            raise ProviderError(
                f"Agent {agent!r}: the Anthropic client could not load its credentials: {exc}",
                agent=agent,
            ) from exc
        if client.api_key is None and client.auth_token is None and client.credentials is None:
            raise ProviderError(
                f"Agent {agent!r} cannot call Claude: no Anthropic API key is configured. "
                "Set the ANTHROPIC_API_KEY environment variable (export "
                "ANTHROPIC_API_KEY=sk-ant-...), or pass "
                "AnthropicProvider(client=anthropic.AsyncAnthropic(api_key=...)).",
                agent=agent,
            )
        self._owned = (loop, client)
        return client

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r})"


class _Spent:
    """The usage and cost of a request's rounds so far (``None`` once a model has no price)."""

    def __init__(self, prices: Mapping[str, ModelPrice]) -> None:
        self.prices = prices
        self.usage = Usage()
        self.cost: float | None = 0.0

    def add(self, message: APIMessage, model: str) -> None:
        spent = usage_of(message)
        self.usage = add_usage(self.usage, spent)
        price = price_of(message.model or model, self.prices)
        self.cost = None if self.cost is None or price is None else self.cost + price.cost(spent)


def _goes_on(message: APIMessage, answer: Any) -> bool:
    """Whether the request needs another round: the API paused, or tools are to run."""
    return message.stop_reason == "pause_turn" or (
        message.stop_reason == "tool_use" and answer is None
    )


def _check_rounds(agent: str, tool_rounds: int, limit: int) -> None:
    """Refuse another round of tools past ``max_tool_rounds``."""
    if tool_rounds >= limit:
        raise ProviderError(
            f"Agent {agent!r}: the model asked for tools again after "
            f"{tool_rounds} round{'s' if tool_rounds != 1 else ''}, the limit "
            f"(max_tool_rounds={limit}). Raise max_tool_rounds on the provider or in the "
            "agent's options, or ask for fewer steps in the prompt.",
            agent=agent,
        )


async def _run_tools(
    message: APIMessage,
    request: ProviderRequest,
    before: Sequence[BeforeTool],
    after: Sequence[AfterTool],
) -> list[ToolResult]:
    """Run the tools the model asked for in ``message``."""
    calls = [
        ToolCall(block.id, block.name, dict(block.input))
        for block in message.content
        if isinstance(block, ToolUseBlock)
    ]
    return await execute_tool_calls(
        calls,
        request.tools,
        before=before,
        after=after,
        pre=request.pre_tool_use,
        post=request.post_tool_use,
    )


def _end(
    request: ProviderRequest, message: APIMessage, paused: str, answer: Any, spent: _Spent
) -> End:
    """The request's ``End``: the forced tool's answer, or the text (parsed if JSON is due)."""
    text = paused + text_of(message)
    if answer is not None:
        output: Any = answer
    else:
        output = parse_json(text) if request.output_schema is not None else text
    return End(output, spent.usage, spent.cost, message.stop_reason, message.model)
