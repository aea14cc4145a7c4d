from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic import BaseModel, Field, RootModel

from reactor import (
    AgentContext,
    End,
    MemorySignalStore,
    OutputValidationError,
    PayloadError,
    Provider,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    ScriptedProvider,
    ScriptExhaustedError,
    TemplateError,
    ThinkingDelta,
    ToolCall,
    ToolResult,
    Usage,
    agent,
    reactive,
    run_reactive,
)
from reactor.testing import signal_names as names


class Verdict(BaseModel):
    approve: bool
    confidence: float = Field(ge=0, le=1)


async def test_invalid_output_is_retried_with_the_validation_error() -> None:
    provider = ScriptedProvider(
        {"judge": [{"approve": "maybe", "confidence": 2}, Verdict(approve=True, confidence=0.7)]}
    )
    result = await run_reactive(
        agent(name="judge", prompt="Judge it.", output=Verdict), provider=provider
    )
    assert result.status == "completed"
    assert result.output == Verdict(approve=True, confidence=0.7)
    first, second = provider.requests
    assert [m.role for m in first.messages] == ["user"]
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert second.messages[1].content == '{"approve":"maybe","confidence":2}'
    feedback = second.messages[2].content
    assert feedback.startswith("Your answer did not match the required JSON schema:\n- approve:")
    assert "- confidence: Input should be less than or equal to 1" in feedback
    assert first.request_hash != second.request_hash
    assert len(result.select("provider:start")) == 2


async def test_output_that_never_validates_fails_after_the_retries() -> None:
    provider = ScriptedProvider({"judge": ['{"approve": 1'] * 3})
    judge = agent(name="judge", prompt="Judge it.", output=Verdict, output_retries=2)
    result = await run_reactive(judge, provider=provider)
    assert result.status == "failed"
    assert isinstance(result.error, OutputValidationError)
    assert str(result.error).startswith(
        "Agent 'judge': the output did not match Verdict after 3 attempts:"
    )
    assert result.error.output == '{"approve": 1'
    assert len(provider.requests) == 3


async def test_json_text_output_is_parsed_even_inside_a_code_fence() -> None:
    fenced = '```json\n{"approve": true, "confidence": 0.5}\n```'
    result = await run_reactive(
        agent(name="judge", prompt="x", output=Verdict),
        provider=ScriptedProvider({"judge": [fenced]}),
    )
    assert result.output == Verdict(approve=True, confidence=0.5)


async def test_handler_output_is_validated_against_the_output_model() -> None:
    ok = await run_reactive(
        agent(name="h", run=lambda ctx: {"approve": True, "confidence": 1}, output=Verdict)
    )
    assert ok.output == Verdict(approve=True, confidence=1)
    bad = await run_reactive(agent(name="h", run=lambda ctx: {"approve": True}, output=Verdict))
    assert isinstance(bad.error, OutputValidationError)


async def test_a_missing_template_variable_names_it() -> None:
    writer = agent(name="writer", prompt="Write about {{ input.topic }} for {{ audience }}.")
    result = await run_reactive(
        writer, input={"topic": "rates"}, provider=ScriptedProvider({"writer": ["x"]})
    )
    assert result.status == "failed"
    assert isinstance(result.error, TemplateError)
    assert result.error.variable == "audience"
    assert str(result.error).startswith(
        "Agent 'writer': the prompt uses 'audience', which is not defined"
    )
    assert result.select("agent:writer:failed")[0].payload["error"]["type"] == "TemplateError"


async def test_a_missing_attribute_is_named_too() -> None:
    writer = agent(name="writer", prompt="{{ input.topci }}")
    result = await run_reactive(
        writer, input={"topic": "x"}, provider=ScriptedProvider({"writer": ["x"]})
    )
    assert isinstance(result.error, TemplateError)
    assert result.error.variable == "topci"


async def test_templates_render_state_input_signal_agent_and_run_id() -> None:
    class State(BaseModel):
        symbol: str = "AAPL"

    provider = ScriptedProvider({"a": ["ok"]})
    a = agent(
        prompt="{{ agent }} {{ state.symbol }} {{ input.n }} {{ signal.name }} {{ run_id[:4] }} "
        "{{ input | tojson }} {{ state | tojson }}",
        system="You help with {{ state.symbol }}.",
    )
    result = await reactive({"a": a}, state=State).run(input={"n": 1}, provider=provider)
    (request,) = provider.requests
    assert request.prompt == 'a AAPL 1 harness:start run_ {"n":1} {"symbol":"AAPL"}'
    assert request.system == "You help with AAPL."
    assert result.ok


async def test_the_request_carries_schema_tools_options_and_a_stable_hash() -> None:
    def lookup(symbol: str) -> float:
        """Price of a symbol."""
        return 1.0

    judge = agent(name="judge", prompt="x", output=Verdict, tools=[lookup], options={"model": "m1"})
    one, two = (
        ScriptedProvider({"judge": [Verdict(approve=True, confidence=1)]}),
        ScriptedProvider({"judge": [Verdict(approve=False, confidence=0)]}),
    )
    first = await run_reactive(judge, provider=one)
    await run_reactive(judge, provider=two)
    request = one.requests[0]
    assert request.output_schema == Verdict.model_json_schema()
    assert [t.name for t in request.tools] == ["lookup"]
    assert request.options == {"model": "m1"}
    assert request.request_hash == two.requests[0].request_hash
    start = first.select("provider:start")[0].payload
    assert start == {"agent": "judge", "model": "m1", "request_hash": request.request_hash}


class EventfulProvider(Provider):
    """Streams every kind of event a real provider does, then fails if asked."""

    model = "eventful"

    def __init__(self, fail: ProviderError | None = None) -> None:
        self.fail = fail

    async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        yield ThinkingDelta("hmm")
        yield ToolCall(id="t1", name="lookup", input={"symbol": "AAPL"})
        yield ToolResult(id="t1", name="lookup", result=101.5)
        if self.fail is not None:
            raise self.fail
        yield End(
            output="done",
            usage=Usage(10, 2, cache_read_input_tokens=8),
            cost_usd=0.01,
            stop_reason="end_turn",
        )


async def test_provider_events_become_signals_with_their_payloads() -> None:
    result = await run_reactive(agent(name="a", prompt="x"), provider=EventfulProvider())
    assert names(result, deltas=True)[2:7] == [
        "provider:start",
        "thinking:delta",
        "tool:call",
        "tool:result",
        "provider:end",
    ]
    assert result.select("tool:call")[0].payload == {
        "agent": "a",
        "id": "t1",
        "name": "lookup",
        "input": {"symbol": "AAPL"},
    }
    assert result.select("tool:result")[0].payload["result"] == 101.5
    end = result.select("provider:end")[0].payload
    assert end["usage"] == {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 8}
    assert (end["cost_usd"], end["stop_reason"], end["output"]) == (0.01, "end_turn", "done")
    assert result.metrics.cost_usd == 0.01


async def test_provider_errors_are_signalled_and_fail_the_activation() -> None:
    error = ProviderError("overloaded", retryable=True, status_code=529)
    result = await run_reactive(agent(name="a", prompt="x"), provider=EventfulProvider(fail=error))
    assert result.status == "failed"
    assert result.error is error
    payload = result.select("provider:error")[0].payload
    assert payload == {
        "agent": "a",
        "error": {"type": "ProviderError", "message": "overloaded"},
        "retryable": True,
    }
    assert names(result)[-3:] == ["provider:error", "agent:a:failed", "harness:end"]


async def test_a_stream_without_end_is_a_provider_error() -> None:
    class Mute(Provider):
        async def stream(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
            return
            yield  # pragma: no cover

    result = await run_reactive(agent(name="a", prompt="x"), provider=Mute())
    assert isinstance(result.error, ProviderError)
    assert "finished without an End event" in str(result.error)


async def test_scripted_exceptions_are_raised_as_provider_failures() -> None:
    provider = ScriptedProvider({"a": [ProviderError("rate limited", retryable=True)]})
    result = await run_reactive(agent(name="a", prompt="x"), provider=provider)
    assert result.select("provider:error")[0].payload["retryable"] is True


def test_scripted_provider_says_when_a_script_runs_out() -> None:
    graph = reactive({"a": agent(prompt="x"), "b": agent(prompt="y")})
    result = graph.run_sync(provider=ScriptedProvider({"a": ["only one"]}))
    assert result.status == "failed"
    assert str(result.error).startswith(
        "ScriptedProvider has no script for agent 'b' (scripted agents: a)."
    )


async def test_scripted_provider_function_scripts_see_the_request() -> None:
    async def answer(request: ProviderRequest) -> Any:
        return {"approve": "yes" in request.prompt, "confidence": 0.5}

    provider = ScriptedProvider({"judge": answer})
    result = await run_reactive(
        agent(name="judge", prompt="say {{ input }}", output=Verdict),
        input="yes",
        provider=provider,
    )
    assert result.output == Verdict(approve=True, confidence=0.5)
    assert provider.remaining("judge") is None


async def test_scripted_lists_are_used_in_order_and_then_exhausted() -> None:
    provider = ScriptedProvider({"a": ["one", "two"]})
    a = agent(name="a", prompt="x")
    assert (await run_reactive(a, provider=provider)).output == "one"
    assert provider.remaining("a") == 1
    assert (await run_reactive(a, provider=provider)).output == "two"
    exhausted = await run_reactive(a, provider=provider)
    assert isinstance(exhausted.error, ScriptExhaustedError)
    assert str(exhausted.error).startswith(
        "ScriptedProvider has no answer left for agent 'a': its script had 2 and it used them all."
    )


async def test_the_default_script_is_each_unscripted_agents_own() -> None:
    provider = ScriptedProvider(default=["first", "second"])
    a, b = agent(name="a", prompt="x"), agent(name="b", prompt="x")
    assert (await run_reactive(a, provider=provider)).output == "first"
    assert (await run_reactive(b, provider=provider)).output == "first"
    assert (provider.remaining("a"), provider.remaining("b")) == (1, 1)
    await run_reactive(b, provider=provider)
    exhausted = await run_reactive(b, provider=provider)
    assert str(exhausted.error).startswith(
        "ScriptedProvider has no answer left for agent 'b': the default script had 2 and it "
        "used them all."
    )


async def test_scripted_cost_can_be_priced_as_a_known_model() -> None:
    provider = ScriptedProvider({"a": ["one two three four"]}, pricing="claude-haiku-4-5")
    result = await run_reactive(agent(name="a", prompt="count to four"), provider=provider)
    assert result.metrics.cost_usd == pytest.approx((4 * 1 + 5 * 5) / 1e6)
    with pytest.raises(
        ValueError, match=r"^No price for model 'gpt-nope' in reactor\.model_prices"
    ):
        ScriptedProvider(pricing="gpt-nope")


async def test_scripted_provider_keeps_the_latest_requests() -> None:
    echo = agent(name="echo", prompt="say {{ input }}")
    bounded = ScriptedProvider(default=lambda request: request.prompt, keep_requests=2)
    unbounded = ScriptedProvider(default=lambda request: request.prompt, keep_requests=None)
    for word in ("one", "two", "three"):
        await run_reactive(echo, input=word, provider=bounded)
        await run_reactive(echo, input=word, provider=unbounded)
    assert [r.prompt for r in bounded.requests] == ["say two", "say three"]
    assert [r.prompt for r in unbounded.requests] == ["say one", "say two", "say three"]
    default = ScriptedProvider(default=["ok"] * 1_001)
    asked = [ProviderRequest.build(agent="a", system=None, prompt=str(i)) for i in range(1_001)]
    for request in asked:
        async for _ in default.stream(request):
            pass
    assert [r.prompt for r in default.requests] == [str(i) for i in range(1, 1_001)]
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match=r"keep_requests=\.\.\.\) takes a whole number >= 0"):
            ScriptedProvider(keep_requests=bad)  # type: ignore[arg-type]


async def test_run_handlers_call_models_through_the_run() -> None:
    async def summarize(ctx: AgentContext) -> Any:
        assert ctx.provider is not None
        request = ProviderRequest.build(agent=ctx.agent, system=None, prompt="Summarize.")
        output = None
        async for event in ctx.provider.stream(request):
            if isinstance(event, End):
                output = event.output
        return output

    store = MemorySignalStore()
    provider = ScriptedProvider({"summarizer": ["short and sweet"]}, pricing=(3.0, 15.0))
    result = await run_reactive(
        agent(name="summarizer", run=summarize), provider=provider, record=store
    )
    assert result.output == "short and sweet"
    activated = result.select("agent:summarizer:activated")[0]
    for signal in result.select("provider:*") + result.select("text:*"):
        assert signal.caused_by == activated.id
    assert result.metrics.output_tokens > 0
    assert (result.metrics.cost_usd or 0.0) > 0
    replayed = await run_reactive(
        agent(name="summarizer", run=summarize), replay=store.load(result.run_id)
    )
    assert replayed.output == "short and sweet"
    assert provider.requests[0].agent == "summarizer"
    assert len(provider.requests) == 1  # the replay did not ask the provider


async def test_run_handlers_without_any_provider_see_none() -> None:
    seen: list[Any] = []
    await run_reactive(agent(name="caller", run=lambda ctx: seen.append(ctx.provider)))
    assert seen == [None]


# -- templates that fail are TemplateErrors, and bounded -----------------------------


@pytest.mark.parametrize(
    ("when", "prompt", "message"),
    [
        pytest.param(
            "state['ty' ~ 'po']",  # a key built at run time: no build-time check sees it
            "x",
            r"^Agent 'a': the when expression uses 'typo', which is not defined \(dict has no",
            id="guard-typo",
        ),
        pytest.param(
            "signal['__cla' ~ 'ss__']",  # a path built at run time: refused when it renders
            "x",
            r"^Agent 'a': the when expression reaches for 'Signal.__class__', which is not data",
            id="sandbox",
        ),
        pytest.param(
            None,
            "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
            r"^Agent 'a': the prompt recursed too deeply",
            id="recursion",
        ),
        pytest.param(
            None,
            "{{ 'a' * 10**9 }}",
            r"^Agent 'a': the prompt did something the template sandbox does not allow: "
            r"repeating a value 1,000,000,000 times",
            id="repetition",
        ),
        pytest.param(
            None,
            "{% for i in range(100000) %}{{ 'abcdefghij' * 9 }}{% endfor %}",
            r"^Agent 'a': the prompt rendered more than 4,000,000 characters",
            id="size",
        ),
    ],
)
async def test_failing_templates_fail_the_activation_with_a_template_error(
    when: str | None, prompt: str, message: str
) -> None:
    graph = reactive({"a": agent(prompt=prompt, when=when)}, state={"count": 0})
    result = await graph.run(provider=ScriptedProvider({"a": ["ok"]}))
    assert result.status == "failed"
    assert isinstance(result.error, TemplateError)
    assert re.match(message, str(result.error)), str(result.error)


class Headline(BaseModel):
    title: str


class Feed(BaseModel):
    headlines: list[Headline] = []


@pytest.mark.parametrize(
    "output",
    [pytest.param(list[Headline], id="list"), pytest.param(RootModel[list[Headline]], id="root")],
)
async def test_a_list_output_fills_a_list_key(output: Any) -> None:
    graph = reactive({"news": agent(prompt="news", output=output, updates="headlines")}, state=Feed)
    answers = ScriptedProvider({"news": [{"result": [{"title": "Rates cut"}]}]})
    result = await graph.run(provider=answers)
    assert result.status == "completed", result.error
    assert result.state["headlines"] == [{"title": "Rates cut"}]
    assert answers.requests[0].output_schema is not None
    assert answers.requests[0].output_schema["required"] == ["result"]


class Names:
    """A reporter keeping the names of the signals it hears."""

    patterns = ("**",)

    def __init__(self) -> None:
        self.names: list[str] = []

    def on_signal(self, signal: Any) -> None:
        self.names.append(signal.name)


async def test_runs_started_alike_check_what_each_gives_of_its_own() -> None:
    """Options checked once for a graph's runs; each run's input, scope, tags, id checked."""
    seen: list[Any] = []
    graph = reactive({"reader": agent(run=lambda ctx: seen.append((ctx.input, ctx.scope)))})
    store, first, later = MemorySignalStore(), Names(), Names()
    reporters = [first]
    for n in range(3):
        result = await graph.run(
            input={"n": n},
            scope={"region": f"r{n}"},
            tags={"n": str(n)},
            run_id=f"run_alike_{n}",
            record=store,
            reporters=reporters,
        )
        assert result.ok
        assert store.info(f"run_alike_{n}").tags == {"n": str(n)}
        if n == 1:
            reporters.append(later)  # the same list, changed between runs: heard
    assert seen == [({"n": n}, {"region": f"r{n}"}) for n in range(3)]
    assert first.names.count("harness:start") == 3
    assert later.names.count("harness:start") == 1
    given: dict[str, Any] = {"record": store, "reporters": reporters, "tags": {"n": "3"}}
    with pytest.raises(ValueError, match=r"^scope cannot define 'state': templates already"):
        await graph.run(input={"n": 3}, scope={"state": 1}, run_id="run_alike_3", **given)
    with pytest.raises(ValueError, match=r"^run_id must be 1-64 letters"):
        await graph.run(input={"n": 3}, scope={"region": "r3"}, run_id="bad id", **given)
    with pytest.raises(PayloadError):
        await graph.run(input={"n": float("nan")}, scope={}, run_id="run_alike_4", **given)


async def test_scope_values_reach_handlers_and_templates() -> None:
    seen: list[Any] = []
    graph = reactive(
        {
            "writer": agent(prompt="About {{ object.name }} ({{ region }})", updates="text"),
            "reader": agent(run=lambda ctx: seen.append((ctx.object, ctx.objects, ctx.scope))),
        },
        state={"text": None},
    )
    provider = ScriptedProvider({"writer": ["ok"]})
    scope = {"object": {"name": "Ada"}, "objects": "the store", "region": "eu"}
    result = await graph.run(provider=provider, scope=scope)
    assert provider.requests[0].prompt == "About Ada (eu)"
    assert seen == [({"name": "Ada"}, "the store", scope)]
    with pytest.raises(ValueError, match=r"^scope cannot define 'state': templates already"):
        await graph.run(provider=provider, scope={"state": 1})
    assert result.ok
