"""Runs as OpenTelemetry spans: the GenAI conventions, causal parents, contents on request."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from reactor import AnthropicProvider, ScriptedProvider, agent, reactive, run_reactive, tool
from reactor.otel import OpenTelemetryReporter
from reactor.testing import FakeAnthropic, ToolUse, turn
from tests.reactor.otlp import Receiver


@pytest.fixture(autouse=True)
def no_real_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith("ANTHROPIC_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    spans.clear()


@pytest.fixture
def tracing(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
async def fake() -> AsyncIterator[FakeAnthropic]:
    endpoint = FakeAnthropic()
    yield endpoint
    await endpoint.aclose()


@tool
def get_price(symbol: str) -> float:
    """Latest price of a stock."""
    return {"AAPL": 104.2}[symbol]


def by_name(spans: Any) -> dict[str, ReadableSpan]:
    found: dict[str, ReadableSpan] = {}
    for span in spans:
        assert span.name not in found, f"two spans named {span.name!r}"
        found[span.name] = span
    return found


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def desk_graph() -> Any:
    analyst = agent(
        prompt="Analyse {{ input }}.",
        system="You are terse.",
        tools=[get_price],
        activate_on=["harness:start"],
        emits=["analysis:done"],
    )
    trader = agent(run=lambda ctx: "buy", activate_on=["analysis:done"])
    return reactive(agents={"analyst": analyst, "trader": trader}, name="desk")


def claude(fake: FakeAnthropic) -> AnthropicProvider:
    fake.replies.extend(
        [
            turn(ToolUse("toolu_1", "get_price", {"symbol": "AAPL"})),
            turn(
                "AAPL looks fine.",
                input_tokens=20,
                output_tokens=7,
                cache_read_input_tokens=100,
                cache_creation_input_tokens=30,
            ),
        ]
    )
    return AnthropicProvider(client=fake.client(max_retries=0))


async def test_a_run_is_a_trace_of_workflow_agents_model_and_tool_calls(
    fake: FakeAnthropic, tracing: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    result = await desk_graph().run(
        input="AAPL", provider=claude(fake), reporters=[OpenTelemetryReporter(tracing)]
    )
    assert result.status == "completed"
    spans = by_name(exporter.get_finished_spans())
    assert set(spans) == {
        "invoke_workflow desk",
        "invoke_agent analyst",
        "chat claude-sonnet-5-5",
        "execute_tool get_price",
        "invoke_agent trader",
    }
    run, analyst, chat, price, trader = (
        spans["invoke_workflow desk"],
        spans["invoke_agent analyst"],
        spans["chat claude-sonnet-5-5"],
        spans["execute_tool get_price"],
        spans["invoke_agent trader"],
    )
    assert parent_of(run) is None
    assert parent_of(analyst) == span_id(run)
    assert parent_of(chat) == span_id(analyst)
    assert parent_of(price) == span_id(chat)
    assert parent_of(trader) == span_id(analyst)  # analysis:done, emitted by the analyst
    assert {span.context.trace_id for span in spans.values() if span.context} == {
        run.context.trace_id if run.context else 0
    }
    for span in spans.values():
        assert span.attributes is not None
        assert span.attributes["reactor.run_id"] == result.run_id
    assert run.attributes == {
        "gen_ai.operation.name": "invoke_workflow",
        "reactor.run_id": result.run_id,
        "reactor.graph": "desk",
        "reactor.status": "completed",
    }
    assert analyst.attributes is not None
    assert analyst.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert analyst.attributes["gen_ai.agent.name"] == "analyst"
    assert chat.kind is SpanKind.CLIENT
    assert chat.attributes is not None
    assert {key: chat.attributes[key] for key in chat.attributes if key.startswith("gen_ai")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.name": "analyst",
        "gen_ai.request.model": "claude-sonnet-5-5",
        "gen_ai.response.model": "claude-sonnet-5-5",
        "gen_ai.response.finish_reasons": ("end_turn",),
        # Anthropic leaves cache reads and writes out of input_tokens; the convention
        # counts them: 10 + 20 of the two rounds, plus 100 read and 30 written.
        "gen_ai.usage.input_tokens": 160,
        "gen_ai.usage.output_tokens": 12,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_creation.input_tokens": 30,
    }
    assert price.attributes is not None
    assert price.attributes["gen_ai.tool.name"] == "get_price"
    assert price.attributes["gen_ai.tool.call.id"] == "toolu_1"
    assert price.attributes["gen_ai.operation.name"] == "execute_tool"


async def test_span_times_are_the_signals_times(
    tracing: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    slow = agent(prompt="hi", activate_on=["harness:start"])
    result = await reactive(agents={"slow": slow}, name="g").run(
        provider=ScriptedProvider({"slow": ["ok"]}, latency=0.05),
        reporters=[OpenTelemetryReporter(tracing)],
    )
    spans = by_name(exporter.get_finished_spans())
    (activated,) = result.select("agent:slow:activated")
    (completed,) = result.select("agent:slow:completed")
    span = spans["invoke_agent slow"]
    assert span.start_time == int(activated.timestamp * 1e9)
    assert span.end_time == int(completed.timestamp * 1e9)


async def test_contents_are_recorded_only_when_asked(
    fake: FakeAnthropic, tracing: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    await desk_graph().run(
        input="AAPL", provider=claude(fake), reporters=[OpenTelemetryReporter(tracing)]
    )
    for span in exporter.get_finished_spans():
        assert span.attributes is not None
        assert not [key for key in span.attributes if "messages" in key or "call.arg" in key]
        assert "gen_ai.system_instructions" not in span.attributes
        assert "gen_ai.tool.call.result" not in span.attributes
    exporter.clear()

    await desk_graph().run(
        input="AAPL",
        provider=claude(fake),
        reporters=[OpenTelemetryReporter(tracing, capture_content=True)],
    )
    spans = by_name(exporter.get_finished_spans())
    chat = spans["chat claude-sonnet-5-5"].attributes
    price = spans["execute_tool get_price"].attributes
    assert chat is not None
    assert price is not None
    assert chat["gen_ai.input.messages"] == (
        '[{"role": "user", "parts": [{"type": "text", "content": "Analyse AAPL."}]}]'
    )
    assert chat["gen_ai.system_instructions"] == '[{"type": "text", "content": "You are terse."}]'
    assert chat["gen_ai.output.messages"] == (
        '[{"role": "assistant", "parts": [{"type": "text", "content": "AAPL looks fine."}]}]'
    )
    assert price["gen_ai.tool.call.arguments"] == '{"symbol": "AAPL"}'
    assert price["gen_ai.tool.call.result"] == "104.2"


async def test_failures_set_the_status_and_error_type(
    tracing: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def broken(ctx: Any) -> None:
        raise KeyError("no quote")

    result = await run_reactive(
        agent(name="quoter", run=broken), reporters=[OpenTelemetryReporter(tracing)]
    )
    assert result.status == "failed"
    spans = by_name(exporter.get_finished_spans())
    quoter, run = spans["invoke_agent quoter"], spans["invoke_workflow quoter"]
    assert quoter.status.status_code is StatusCode.ERROR
    assert quoter.attributes is not None
    assert quoter.attributes["error.type"] == "KeyError"
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes is not None
    assert run.attributes["error.type"] == "failed"


async def test_a_model_call_that_fails_is_an_error_span(
    fake: FakeAnthropic, tracing: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from reactor.testing import Failure

    fake.replies.append(Failure(400, "invalid_request_error", "prompt is too long"))
    provider = AnthropicProvider(client=fake.client(max_retries=0))
    await run_reactive(
        agent(name="writer", prompt="hi"),
        provider=provider,
        reporters=[OpenTelemetryReporter(tracing)],
    )
    chat = by_name(exporter.get_finished_spans())["chat claude-sonnet-5-5"]
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes is not None
    assert chat.attributes["error.type"] == "ProviderError"


async def test_one_reporter_traces_concurrent_runs_apart(
    tracing: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    import asyncio

    reporter = OpenTelemetryReporter(tracing)
    graph = reactive(agents={"echo": agent(run=lambda ctx: ctx.input)}, name="echo")
    results = await asyncio.gather(*(graph.run(input=n, reporters=[reporter]) for n in range(5)))
    spans = exporter.get_finished_spans()
    assert len(spans) == 10
    traces: dict[int, set[str]] = {}
    for span in spans:
        assert span.context is not None
        assert span.attributes is not None
        traces.setdefault(span.context.trace_id, set()).add(str(span.attributes["reactor.run_id"]))
    assert sorted(run for runs in traces.values() for run in runs) == sorted(
        result.run_id for result in results
    )
    assert all(len(runs) == 1 for runs in traces.values())
    assert reporter._runs == {}  # nothing kept once the runs ended


async def test_spans_reach_an_otlp_http_receiver_configured_by_the_standard_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reactor.otel import tracer_provider_from_env

    receiver = Receiver()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "trading-desk")
        provider = tracer_provider_from_env()
        slow = agent(prompt="hi", activate_on=["harness:start"])
        result = await reactive(agents={"slow": slow}, name="g").run(
            provider=ScriptedProvider({"slow": ["ok"]}),
            reporters=[OpenTelemetryReporter(provider)],
        )
        provider.shutdown()  # flushes the batch
    finally:
        receiver.close()
    assert receiver.paths
    assert set(receiver.paths) == {"/v1/traces"}
    assert set(receiver.content_types) == {"application/x-protobuf"}
    spans = {
        span.name: span
        for request in receiver.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    }
    assert set(spans) == {"invoke_workflow g", "invoke_agent slow", "chat scripted"}
    resource_attributes = {
        attribute.key: attribute.value.string_value
        for request in receiver.requests
        for resource in request.resource_spans
        for attribute in resource.resource.attributes
    }
    assert resource_attributes["service.name"] == "trading-desk"
    chat = {a.key: a.value for a in spans["chat scripted"].attributes}
    assert chat["reactor.run_id"].string_value == result.run_id
    assert chat["gen_ai.operation.name"].string_value == "chat"
    assert chat["gen_ai.usage.output_tokens"].int_value > 0
    assert spans["chat scripted"].parent_span_id == spans["invoke_agent slow"].span_id


def test_an_unknown_exporter_is_refused_with_the_accepted_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reactor.otel import tracer_provider_from_env

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(
        ValueError,
        match=r"^OTEL_TRACES_EXPORTER='zipkin' is not an exporter reactor can use: set it to "
        r"'otlp' \(OTLP over HTTP, the default\), 'console' or 'none'\.$",
    ):
        tracer_provider_from_env()
