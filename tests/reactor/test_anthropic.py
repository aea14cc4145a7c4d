"""AnthropicProvider through the real anthropic SDK, against a fake Messages endpoint."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from pydantic import BaseModel, Field

import reactor
from reactor import (
    AnthropicProvider,
    End,
    ModelPrice,
    OutputValidationError,
    ProviderError,
    ProviderRequest,
    RunResult,
    TextComplete,
    TextDelta,
    ToolCall,
    ToolResult,
    agent,
    reactive,
    run_reactive,
    tool,
)
from reactor.testing import (
    Failure,
    FakeAnthropic,
    Hang,
    Text,
    Thinking,
    ToolUse,
    turn,
)
from reactor.testing import signal_names as names


@pytest.fixture(autouse=True)
def no_real_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test can reach the real API: no key in the environment, no profile on disk."""
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    endpoint = FakeAnthropic()
    yield endpoint
    await endpoint.aclose()


def claude(
    fake: FakeAnthropic, *replies: Any, retries: int = 0, **options: Any
) -> AnthropicProvider:
    """An AnthropicProvider whose client talks to ``fake``, which answers ``replies``."""
    fake.replies.extend(replies)
    return AnthropicProvider(client=fake.client(), max_retries=retries, **options)


class Verdict(BaseModel):
    approve: bool
    confidence: float = Field(ge=0, le=1)


@tool
def get_price(symbol: str) -> float:
    """Latest price of a stock."""
    return {"AAPL": 104.2}[symbol]


@tool
def get_news(symbol: str) -> str:
    """Latest news about a stock."""
    raise RuntimeError(f"news service down for {symbol}")


def tool_signals(result: RunResult) -> list[tuple[str, str, Any]]:
    """Each tool signal as (name, call id, input / result / error)."""
    return [
        (
            s.name,
            s.payload["id"],
            s.payload["input"]
            if s.name == "tool:call"
            else s.payload["error"] or s.payload["result"],
        )
        for s in result.select("tool:*")
    ]


# --- streaming -------------------------------------------------------------------------


async def test_text_streams_to_signals_in_order(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn(Text("Hel", "lo ", "world")))
    result = await run_reactive(agent(name="writer", prompt="Greet."), provider=provider)
    assert result.output == "Hello world"
    assert names(result, deltas=True) == [
        "harness:start",
        "agent:writer:activated",
        "provider:start",
        "text:delta",
        "text:delta",
        "text:delta",
        "text:complete",
        "provider:end",
        "agent:writer:completed",
        "harness:end",
    ]
    assert [s.payload["content"] for s in result.select("text:*")] == [
        "Hel",
        "lo ",
        "world",
        "Hello world",
    ]


async def test_thinking_streams_as_thinking_deltas(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn(Thinking("Weigh ", "it."), Text("Yes.")))
    result = await run_reactive(agent(name="judge", prompt="Well?"), provider=provider)
    assert [s.payload["content"] for s in result.select("thinking:delta")] == ["Weigh ", "it."]
    assert result.output == "Yes."


async def test_the_stream_ends_with_exactly_one_end(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn(Text("a", "b")))
    request = ProviderRequest.build(agent="writer", system=None, prompt="Go.")
    events = [event async for event in provider.stream(request)]
    assert [type(e) for e in events] == [TextDelta, TextDelta, TextComplete, End]
    end = events[-1]
    assert isinstance(end, End)
    assert (end.output, end.stop_reason, end.model) == ("ab", "end_turn", "claude-sonnet-5-5")


# --- request bodies ----------------------------------------------------------------------


async def test_the_request_carries_model_max_tokens_system_and_prompt(
    fake: FakeAnthropic,
) -> None:
    provider = claude(fake, turn("Hi."))
    await run_reactive(
        agent(name="writer", system="Be brief.", prompt="Greet {{ input }}."),
        input="Ada",
        provider=provider,
    )
    (body,) = fake.bodies
    assert body == {
        "model": "claude-sonnet-5-5",
        "max_tokens": 16384,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Greet Ada."}],
        "stream": True,
    }


async def test_agent_options_override_the_provider_defaults(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn("Hi."), max_tokens=1000)
    writer = agent(
        name="writer",
        prompt="Greet.",
        options={
            "model": "claude-haiku-5-5",
            "max_tokens": 64,
            "temperature": 0.3,
            "stop_sequences": ["END"],
        },
    )
    result = await run_reactive(writer, provider=provider)
    (body,) = fake.bodies
    assert (body["model"], body["max_tokens"]) == ("claude-haiku-5-5", 64)
    assert (body["temperature"], body["stop_sequences"]) == (0.3, ["END"])
    assert result.select("provider:start")[0].payload["model"] == "claude-haiku-5-5"


async def test_cache_system_marks_the_system_prompt_as_a_cache_breakpoint(
    fake: FakeAnthropic,
) -> None:
    provider = claude(fake, turn("Hi."), cache_system=True)
    await run_reactive(agent(name="w", system="Long rules.", prompt="Go."), provider=provider)
    assert fake.bodies[0]["system"] == [
        {"type": "text", "text": "Long rules.", "cache_control": {"type": "ephemeral"}}
    ]


async def test_tools_are_sent_with_their_definitions(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn("No need."))
    await run_reactive(agent(name="a", prompt="Go.", tools=[get_price]), provider=provider)
    assert fake.bodies[0]["tools"] == [
        {
            "name": "get_price",
            "description": "Latest price of a stock.",
            "input_schema": {
                "type": "object",
                "properties": {"symbol": {"type": "string", "title": "Symbol"}},
                "required": ["symbol"],
            },
        }
    ]


async def test_thinking_configuration_is_sent(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn("Hi."), thinking={"type": "adaptive", "display": "summarized"})
    await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert fake.bodies[0]["thinking"] == {"type": "adaptive", "display": "summarized"}


# --- the tool-use loop -------------------------------------------------------------------


async def two_tool_rounds(fake: FakeAnthropic) -> RunResult:
    provider = claude(
        fake,
        turn("Checking.", ToolUse("toolu_1", "get_price", {"symbol": "AAPL"})),
        turn(ToolUse("toolu_2", "get_news", {"symbol": "AAPL"})),
        turn("AAPL is at 104.2; no news."),
    )
    analyst = agent(name="analyst", prompt="AAPL?", tools=[get_price, get_news])
    return await run_reactive(analyst, provider=provider)


async def test_the_tool_loop_runs_until_the_model_answers(fake: FakeAnthropic) -> None:
    result = await two_tool_rounds(fake)
    assert result.output == "AAPL is at 104.2; no news."
    assert tool_signals(result) == [
        ("tool:call", "toolu_1", {"symbol": "AAPL"}),
        ("tool:result", "toolu_1", 104.2),
        ("tool:call", "toolu_2", {"symbol": "AAPL"}),
        ("tool:result", "toolu_2", "RuntimeError: news service down for AAPL"),
    ]
    assert [s.payload["content"] for s in result.select("text:complete")] == [
        "Checking.",
        "AAPL is at 104.2; no news.",
    ]


async def test_tool_results_go_back_after_the_assistant_turn(fake: FakeAnthropic) -> None:
    await two_tool_rounds(fake)
    assert fake.bodies[1]["messages"] == [
        {"role": "user", "content": "AAPL?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_price",
                    "input": {"symbol": "AAPL"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "104.2"}],
        },
    ]


async def test_a_tool_that_raises_reaches_the_model_as_an_error_result(
    fake: FakeAnthropic,
) -> None:
    await two_tool_rounds(fake)
    assert fake.bodies[2]["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": "RuntimeError: news service down for AAPL",
                "is_error": True,
            }
        ],
    }


async def test_parallel_tool_calls_of_one_turn_are_answered_together(
    fake: FakeAnthropic,
) -> None:
    provider = claude(
        fake,
        turn(
            ToolUse("toolu_a", "get_price", {"symbol": "AAPL"}),
            ToolUse("toolu_b", "get_news", {"symbol": "AAPL"}),
        ),
        turn("Done."),
    )
    result = await run_reactive(
        agent(name="a", prompt="Go.", tools=[get_price, get_news]), provider=provider
    )
    assert names(result)[3:7] == ["tool:call", "tool:call", "tool:result", "tool:result"]
    (results,) = [m["content"] for m in fake.bodies[1]["messages"] if m["role"] == "user"][1:]
    assert [(r["tool_use_id"], r.get("is_error", False)) for r in results] == [
        ("toolu_a", False),
        ("toolu_b", True),
    ]


async def test_thinking_blocks_go_back_with_their_signature(fake: FakeAnthropic) -> None:
    provider = claude(
        fake,
        turn(Thinking("Need a price."), ToolUse("toolu_1", "get_price", {"symbol": "AAPL"})),
        turn("104.2"),
    )
    await run_reactive(agent(name="a", prompt="Go.", tools=[get_price]), provider=provider)
    assert fake.bodies[1]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Need a price.",
        "signature": "sig-fake",
    }


async def test_a_before_tool_hook_can_block_a_call(fake: FakeAnthropic) -> None:
    called: list[str] = []

    @tool
    def trade(symbol: str) -> str:
        """Buy a stock."""
        called.append(symbol)
        return "bought"

    provider = claude(fake, turn(ToolUse("toolu_1", "trade", {"symbol": "AAPL"})), turn("Ok."))
    trader = agent(name="t", prompt="Go.", tools=[trade], before_tool=lambda call: None)
    result = await run_reactive(trader, provider=provider)
    assert called == []
    assert fake.bodies[1]["messages"][-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "Blocked by a before_tool hook.",
            "is_error": True,
        }
    ]
    assert result.select("tool:result")[0].payload["error"] == "Blocked by a before_tool hook."


async def test_the_providers_hooks_run_after_the_agents(fake: FakeAnthropic) -> None:
    seen: list[str] = []

    def agent_before(call: ToolCall) -> ToolCall:
        seen.append(f"agent:{call.input['symbol']}")
        return ToolCall(call.id, call.name, {"symbol": "AAPL"})

    def provider_before(call: ToolCall) -> ToolCall:
        seen.append(f"provider:{call.input['symbol']}")
        return call

    def provider_after(call: ToolCall, result: ToolResult) -> ToolResult:
        seen.append(f"after:{result.result}")
        return ToolResult(result.id, result.name, "price withheld")

    provider = claude(
        fake,
        turn(ToolUse("toolu_1", "get_price", {"symbol": "aapl"})),
        turn("Ok."),
        before_tool=provider_before,
        after_tool=provider_after,
    )
    analyst = agent(name="a", prompt="Go.", tools=[get_price], before_tool=agent_before)
    await run_reactive(analyst, provider=provider)
    assert seen == ["agent:aapl", "provider:AAPL", "after:104.2"]
    assert fake.bodies[1]["messages"][-1]["content"][0]["content"] == "price withheld"


async def test_more_tool_rounds_than_allowed_fail_the_request(fake: FakeAnthropic) -> None:
    provider = claude(
        fake,
        turn(ToolUse("toolu_1", "get_price", {"symbol": "AAPL"})),
        turn(ToolUse("toolu_2", "get_price", {"symbol": "AAPL"})),
        max_tool_rounds=1,
    )
    result = await run_reactive(agent(name="a", prompt="Go.", tools=[get_price]), provider=provider)
    assert len(fake.requests) == 2
    assert isinstance(result.error, ProviderError)
    with pytest.raises(
        ProviderError,
        match=(
            r"^Agent 'a': the model asked for tools again after 1 round, the limit "
            r"\(max_tool_rounds=1\)\. Raise max_tool_rounds on the provider or in the agent's "
            r"options, or ask for fewer steps in the prompt\.$"
        ),
    ):
        raise result.error


# --- structured output -------------------------------------------------------------------


async def test_structured_output_is_asked_for_with_the_json_schema(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn('{"approve": true, "confidence": 0.8}'))
    await run_reactive(agent(name="judge", prompt="Judge.", output=Verdict), provider=provider)
    assert fake.bodies[0]["output_config"] == {
        "format": {
            "type": "json_schema",
            "schema": anthropic.transform_schema(Verdict.model_json_schema()),
        }
    }


async def test_structured_output_is_parsed_and_validated(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn(Text('{"approve": true,', ' "confidence": 0.8}')))
    result = await run_reactive(
        agent(name="judge", prompt="Judge.", output=Verdict), provider=provider
    )
    assert result.output == Verdict(approve=True, confidence=0.8)
    assert result.select("provider:end")[0].payload["output"] == {
        "approve": True,
        "confidence": 0.8,
    }


async def test_output_config_options_are_kept_beside_the_format(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn('{"approve": true, "confidence": 1}'))
    judge = agent(
        name="judge", prompt="Judge.", output=Verdict, options={"output_config": {"effort": "low"}}
    )
    await run_reactive(judge, provider=provider)
    assert fake.bodies[0]["output_config"]["effort"] == "low"
    assert fake.bodies[0]["output_config"]["format"]["type"] == "json_schema"


async def test_invalid_output_is_corrected_in_a_second_request(fake: FakeAnthropic) -> None:
    provider = claude(
        fake,
        turn('{"approve": true, "confidence": 2}'),
        turn('{"approve": true, "confidence": 0.9}'),
    )
    result = await run_reactive(
        agent(name="judge", prompt="Judge.", output=Verdict), provider=provider
    )
    assert result.output == Verdict(approve=True, confidence=0.9)
    user, assistant, feedback = fake.bodies[1]["messages"]
    assert user == {"role": "user", "content": "Judge."}
    assert assistant == {"role": "assistant", "content": '{"approve":true,"confidence":2}'}
    assert feedback["role"] == "user"
    assert feedback["content"].startswith(
        "Your answer did not match the required JSON schema:\n- confidence: Input should be "
        "less than or equal to 1"
    )


async def test_output_that_never_validates_fails_the_agent(fake: FakeAnthropic) -> None:
    provider = claude(fake, *[turn('{"approve": "maybe"}')] * 3)
    judge = agent(name="judge", prompt="Judge.", output=Verdict, output_retries=2)
    result = await run_reactive(judge, provider=provider)
    assert isinstance(result.error, OutputValidationError)
    assert result.error.output == {"approve": "maybe"}
    assert len(fake.requests) == 3


async def test_structured_output_that_is_not_json_is_left_to_validation(
    fake: FakeAnthropic,
) -> None:
    provider = claude(fake, turn("I refuse."))
    request = ProviderRequest.build(
        agent="judge", system=None, prompt="Judge.", output_schema=Verdict.model_json_schema()
    )
    events = [event async for event in provider.stream(request)]
    assert isinstance(events[-1], End)
    assert events[-1].output == "I refuse."


# --- usage and cost ----------------------------------------------------------------------


async def test_usage_and_cost_add_up_over_the_rounds(fake: FakeAnthropic) -> None:
    provider = claude(
        fake,
        turn(
            ToolUse("toolu_1", "get_price", {"symbol": "AAPL"}), input_tokens=100, output_tokens=20
        ),
        turn("104.2", input_tokens=150, output_tokens=30),
    )
    result = await run_reactive(agent(name="a", prompt="Go.", tools=[get_price]), provider=provider)
    (end,) = result.select("provider:end")
    assert end.payload["usage"] == {"input_tokens": 250, "output_tokens": 50}
    # claude-sonnet-5-5: $2 in, $10 out per million tokens
    assert end.payload["cost_usd"] == pytest.approx((250 * 2 + 50 * 10) / 1e6)
    assert (result.metrics.input_tokens, result.metrics.output_tokens) == (250, 50)
    assert result.metrics.cost_usd == pytest.approx(0.001)


async def test_cache_tokens_are_reported_and_priced(fake: FakeAnthropic) -> None:
    reply = turn(
        "Hi.",
        input_tokens=10,
        output_tokens=5,
        cache_creation_input_tokens=1000,
        cache_read_input_tokens=2000,
    )
    provider = claude(fake, reply, cache_system=True)
    result = await run_reactive(agent(name="w", system="Rules.", prompt="Go."), provider=provider)
    (end,) = result.select("provider:end")
    assert end.payload["usage"] == {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 1000,
        "cache_read_input_tokens": 2000,
    }
    # input 10 x $2, writes 1000 x $2.50, reads 2000 x $0.10, output 5 x $10
    assert end.payload["cost_usd"] == pytest.approx((20 + 2500 + 200 + 50) / 1e6)


async def test_a_model_without_a_known_price_reports_no_cost(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn("Hi."), model="claude-experimental-1")
    result = await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert result.select("provider:end")[0].payload["cost_usd"] is None
    assert result.select("provider:start")[0].payload["model"] == "claude-experimental-1"


async def test_prices_given_to_the_provider_win_over_the_table(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn("Hi."), prices={"claude-sonnet-5-5": (1.0, 2.0)})
    result = await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert result.select("provider:end")[0].payload["cost_usd"] == pytest.approx(20 / 1e6)


async def test_the_module_price_table_reaches_existing_providers(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = claude(fake, turn("Hi."), model="claude-in-house-1")
    monkeypatch.setitem(reactor.model_prices, "claude-in-house-1", ModelPrice(3, 6))
    result = await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert result.select("provider:end")[0].payload["cost_usd"] == pytest.approx(60 / 1e6)


# --- errors and retries ------------------------------------------------------------------


async def failure(fake: FakeAnthropic, *replies: Any, retries: int = 2) -> ProviderError:
    provider = claude(fake, *replies, retries=retries)
    result = await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert result.status == "failed"
    assert isinstance(result.error, ProviderError)
    assert result.select("provider:error")[0].payload["retryable"] is result.error.retryable
    return result.error


async def test_a_rate_limit_is_retried_by_reactor_not_the_sdk(fake: FakeAnthropic) -> None:
    provider = claude(fake, Failure(429, "rate_limit_error", "Slow down."), turn("Hi."), retries=2)
    result = await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert result.output == "Hi."
    # The SDK's own retries are off: each attempt is a fresh request of reactor's.
    assert [seen.headers["x-stainless-retry-count"] for seen in fake.requests] == ["0", "0"]
    (retry,) = result.select("provider:retry")
    assert retry.payload == {
        "agent": "w",
        "attempt": 1,
        "wait_s": 0.001,
        "status": 429,
        "error": "Agent 'w': the Anthropic API answered HTTP 429 rate_limit_error: Slow down. "
        "This is usually temporary: try again later, or raise max_retries= on the provider.",
    }


async def test_a_bad_request_is_not_retryable(fake: FakeAnthropic) -> None:
    error = await failure(fake, Failure(400, "invalid_request_error", "max_tokens: too large"))
    assert str(error) == (
        "Agent 'w': the Anthropic API answered HTTP 400 invalid_request_error: max_tokens: too "
        "large. Sending the same request again will not help: change the request."
    )
    assert (error.retryable, error.status_code, error.agent) == (False, 400, "w")
    assert isinstance(error.__cause__, anthropic.BadRequestError)
    assert len(fake.requests) == 1


async def test_an_overloaded_api_is_retryable_once_the_sdk_gives_up(fake: FakeAnthropic) -> None:
    error = await failure(fake, *[Failure(529, "overloaded_error", "Overloaded")] * 3)
    assert str(error) == (
        "Agent 'w': the Anthropic API answered HTTP 529 overloaded_error: Overloaded. This is "
        "usually temporary: try again later, or raise max_retries= on the provider."
    )
    assert (error.retryable, error.status_code) == (True, 529)
    assert isinstance(error.__cause__, anthropic.OverloadedError)
    assert len(fake.requests) == 3


async def test_a_server_error_is_retryable(fake: FakeAnthropic) -> None:
    error = await failure(fake, Failure(500, "api_error", "Internal error"), retries=0)
    assert (error.retryable, error.status_code) == (True, 500)
    assert isinstance(error.__cause__, anthropic.InternalServerError)


async def test_an_authentication_error_points_at_the_key(fake: FakeAnthropic) -> None:
    error = await failure(fake, Failure(401, "authentication_error", "invalid x-api-key"))
    assert str(error).endswith("Check the API key (ANTHROPIC_API_KEY) and what it may access.")
    assert (error.retryable, error.status_code) == (False, 401)


async def test_an_error_event_inside_the_stream_is_retryable(fake: FakeAnthropic) -> None:
    reply = turn("Hel", error_after={"type": "overloaded_error", "message": "Overloaded"})
    error = await failure(fake, reply, reply, reply)  # the first try, then two retries
    assert str(error).startswith(
        "Agent 'w': the Anthropic API answered overloaded_error in the stream: Overloaded."
    )
    assert (error.retryable, error.status_code) == (True, None)


async def test_connection_errors_are_retryable(fake: FakeAnthropic) -> None:
    error = await failure(fake, httpx2.ConnectError("connection refused"), retries=0)
    assert str(error).startswith(
        "Agent 'w': could not reach the Anthropic API (ConnectError: connection refused). "
        "Check the network and ANTHROPIC_BASE_URL."
    )
    assert error.retryable is True
    assert isinstance(error.__cause__, anthropic.APIConnectionError)


async def test_timeouts_are_retryable(fake: FakeAnthropic) -> None:
    error = await failure(fake, httpx2.ReadTimeout("too slow"), retries=0)
    assert str(error) == (
        "Agent 'w': the Anthropic API did not answer in time. This is usually temporary: try "
        "again later, or raise max_retries= on the provider."
    )
    assert error.retryable is True
    assert isinstance(error.__cause__, anthropic.APITimeoutError)


async def test_timeout_passes_through_to_the_sdk(fake: FakeAnthropic) -> None:
    provider = claude(fake, turn("Hi."), timeout=12.5)
    await run_reactive(agent(name="w", prompt="Go."), provider=provider)
    assert fake.requests[0].timeout["read"] == 12.5


# --- cancellation ------------------------------------------------------------------------


async def test_a_run_timeout_closes_the_http_stream(fake: FakeAnthropic) -> None:
    hang = Hang(turn("Let me see"))
    provider = claude(fake, hang)
    result = await run_reactive(agent(name="w", prompt="Go."), provider=provider, timeout=0.2)
    assert result.status == "timeout"
    assert [s.payload["content"] for s in result.select("text:delta")] == ["Let me see"]
    assert (hang.cancelled, hang.closed) == (True, True)


async def test_aborting_a_run_closes_the_http_stream(fake: FakeAnthropic) -> None:
    hang = Hang(turn("Let me see"))
    handle = reactive(agents={"w": agent(prompt="Go.")}).start(provider=claude(fake, hang))
    await asyncio.wait_for(hang.started.wait(), timeout=5)
    handle.abort()
    result = await handle.result()
    assert result.status == "aborted"
    assert (hang.cancelled, hang.closed) == (True, True)


async def test_closing_the_event_stream_early_closes_the_http_stream(
    fake: FakeAnthropic,
) -> None:
    hang = Hang(turn("Let me see"))
    events = claude(fake, hang).stream(ProviderRequest.build(agent="w", system=None, prompt="Go."))
    assert isinstance(events, AsyncGenerator)
    assert await anext(events) == TextDelta("Let me see")
    await events.aclose()
    assert hang.closed


# --- configuration -----------------------------------------------------------------------


async def test_without_an_api_key_the_error_says_how_to_set_one() -> None:
    provider = AnthropicProvider()  # no client yet: it is made at the first call
    request = ProviderRequest.build(agent="writer", system=None, prompt="Hi.")
    with pytest.raises(
        ProviderError,
        match=(
            r"^Agent 'writer' cannot call Claude: no Anthropic API key is configured\. Set the "
            r"ANTHROPIC_API_KEY environment variable \(export ANTHROPIC_API_KEY=sk-ant-\.\.\.\), "
            r"or pass AnthropicProvider\(client=anthropic\.AsyncAnthropic\(api_key=\.\.\.\)\)\.$"
        ),
    ):
        async for _ in provider.stream(request):
            pass


def test_an_unknown_option_is_refused_at_construction() -> None:
    with pytest.raises(
        TypeError,
        match=(
            r"^AnthropicProvider\(\) got unknown option 'top_k'\. It takes the settings above, "
            r"timeout, and the keywords of client\.messages\.stream\(\)\.$"
        ),
    ):
        AnthropicProvider(top_k=5)


async def test_an_unknown_agent_option_fails_the_request(fake: FakeAnthropic) -> None:
    provider = claude(fake)
    result = await run_reactive(
        agent(name="w", prompt="Go.", options={"top_k": 5}), provider=provider
    )
    assert isinstance(result.error, ProviderError)
    assert str(result.error).startswith(
        "Agent 'w' has option 'top_k', which AnthropicProvider does not know. Known options: "
    )
    assert fake.requests == []


def test_the_default_model_is_the_newest_sonnet() -> None:
    assert AnthropicProvider().model == "claude-sonnet-5-5"
    assert (
        repr(AnthropicProvider("claude-opus-5-5")) == "AnthropicProvider(model='claude-opus-5-5')"
    )
