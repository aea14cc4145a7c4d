"""Runs as OpenTelemetry traces, following the GenAI semantic conventions.

::

    from reactor.otel import OpenTelemetryReporter

    result = await graph.run(input=..., reporters=[OpenTelemetryReporter()])

One trace per run: a span for the run (``invoke_workflow <graph>``), one per agent
activation (``invoke_agent <agent>``), one per model call (``chat <model>``) and one
per tool call (``execute_tool <tool>``), with the attributes of the GenAI semantic
conventions (``gen_ai.operation.name``, ``gen_ai.agent.name``,
``gen_ai.request.model``, ``gen_ai.usage.*``, ``gen_ai.tool.name``, ...). Every span
carries ``reactor.run_id``. A span's parent follows causality: an activation hangs
under the activation whose signal triggered it (or under the run), a model or tool
call under its activation. Span times are the signals' own times, so a trace shows
what the log shows. Failures set the span's status to ``ERROR`` and ``error.type``.

Message contents (prompts, answers, tool arguments and results) are recorded only
with ``capture_content=True``: they may hold what your users typed.

The reporter sends nothing anywhere by itself: spans go to the tracer provider you
give (or the global one, which does nothing until an application configures it).
:func:`tracer_provider_from_env` builds one that exports over OTLP as the standard
``OTEL_*`` variables say; ``reactor serve`` and ``reactor worker`` use it when
``REACTOR_OTEL=1``. Install the ``otel`` extra (``pip install 'reactor-agents[otel]'``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from reactor._recording.info import RunInfo
from reactor._signals.names import (
    DELTAS,
    HARNESS_END,
    HARNESS_RESUMED,
    HARNESS_START,
    PROVIDER_END,
    PROVIDER_ERROR,
    PROVIDER_START,
    TOOL_CALL,
    TOOL_RESULT,
    parse_agent_event,
)
from reactor._signals.payloads import input_tokens
from reactor._signals.signal import Signal, to_jsonable
from reactor.exceptions._extras import importing

with importing("otel", what="reactor.otel"):
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, Status, StatusCode

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from reactor._providers.base import ProviderRequest

__all__ = ["OpenTelemetryReporter", "tracer_provider_from_env"]

PROVIDER_NAME = "anthropic"
"""``gen_ai.provider.name``: reactor's providers speak Anthropic's Messages API."""

_FAILED_RUNS = frozenset({"failed", "timeout", "aborted", "loop_limit"})
_SKIPPED = frozenset(DELTAS)


def _ns(timestamp: float) -> int:
    return int(timestamp * 1_000_000_000)


def _json(value: Any) -> str:
    return json.dumps(to_jsonable(value), ensure_ascii=False, default=str)


class _Run:
    """The spans of one run: what is open, and which span each signal belongs to."""

    __slots__ = ("activations", "calls", "graph", "owner", "requests", "root", "tools")

    def __init__(self, graph: str | None) -> None:
        self.graph = graph
        self.root: trace.Span | None = None
        self.owner: dict[str, trace.Span] = {}  # signal id -> the span it belongs to
        self.activations: dict[str, trace.Span] = {}  # activated signal id -> its span
        # activation id -> its open model calls, with the model each asked
        self.calls: dict[str, list[tuple[trace.Span, str | None]]] = {}
        self.tools: dict[str, trace.Span] = {}  # tool call id -> its span
        self.requests: dict[str, ProviderRequest] = {}  # request hash -> the request


class OpenTelemetryReporter:
    """Reports runs as OpenTelemetry spans (see the module's docstring).

    Use one reporter for as many runs as you like, at once too: spans are kept per run
    and let go when the run's ``harness:end`` arrives.

    Args:
        tracer_provider: Where spans go; the global tracer provider by default.
        capture_content: Also record prompts, answers and tool arguments and results
            (``gen_ai.input.messages``, ``gen_ai.output.messages``,
            ``gen_ai.system_instructions``, ``gen_ai.tool.call.arguments``,
            ``gen_ai.tool.call.result``). Off by default: they may hold personal data.
    """

    patterns = ("**",)

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        *,
        capture_content: bool = False,
    ) -> None:
        self._tracer = trace.get_tracer("reactor", tracer_provider=tracer_provider)
        self.capture_content = capture_content
        self._runs: dict[str | None, _Run] = {}

    def start(self, info: RunInfo) -> None:
        """Remember the run's graph, for the name of its span."""
        self._runs[info.run_id] = _Run(info.graph)

    def on_request(self, run_id: str, request: ProviderRequest) -> None:
        """Keep what a model is asked, for the contents of its ``chat`` span."""
        if self.capture_content:
            self._run(run_id).requests[request.request_hash] = request

    def on_signal(self, signal: Signal) -> None:
        """Open, annotate or end the span ``signal`` belongs to."""
        name = signal.name
        if name in _SKIPPED:
            return
        run = self._run(signal.run_id)
        if name in (HARNESS_START, HARNESS_RESUMED) or run.root is None:
            self._open_run(run, signal)
        parent = run.owner.get(signal.caused_by or "", run.root)
        agent_event = parse_agent_event(name)
        if agent_event is not None:
            self._agent(run, signal, agent_event[0], agent_event[1], parent)
        elif name == PROVIDER_START:
            self._chat(run, signal, parent)
        elif name in (PROVIDER_END, PROVIDER_ERROR):
            self._end_chat(run, signal)
        elif name == TOOL_CALL:
            self._tool(run, signal, parent)
        elif name == TOOL_RESULT:
            self._end_tool(run, signal)
        elif name == HARNESS_END:
            self._end_run(signal)
            return
        if parent is not None and parent is not run.root and signal.id not in run.owner:
            run.owner[signal.id] = parent

    # -- runs --------------------------------------------------------------------------

    def _run(self, run_id: str | None) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run(None)
        return run

    def _open_run(self, run: _Run, signal: Signal) -> None:
        if run.root is not None:
            return
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_workflow",
            "reactor.run_id": signal.run_id or "",
        }
        if run.graph:
            attributes["reactor.graph"] = run.graph
        if signal.name == HARNESS_RESUMED and isinstance(signal.payload, Mapping):
            attributes["reactor.resumed_from_seq"] = int(signal.payload.get("from_seq") or 0)
        name = f"invoke_workflow {run.graph}" if run.graph else "invoke_workflow"
        run.root = self._tracer.start_span(
            name,
            context=otel_context.Context(),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(signal.timestamp),
        )
        run.owner[signal.id] = run.root

    def _end_run(self, signal: Signal) -> None:
        run = self._runs.pop(signal.run_id, None)
        if run is None or run.root is None:
            return
        end = _ns(signal.timestamp)
        for span in [*run.tools.values(), *(s for c in run.calls.values() for s, _ in c)]:
            span.end(end_time=end)
        for span in run.activations.values():
            span.set_attribute("reactor.unfinished", True)
            span.end(end_time=end)
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        status = str(payload.get("status") or "")
        run.root.set_attribute("reactor.status", status)
        if status in _FAILED_RUNS:
            run.root.set_attribute("error.type", status)
            run.root.set_status(Status(StatusCode.ERROR, str(payload.get("reason") or status)))
        run.root.end(end_time=end)

    # -- activations -------------------------------------------------------------------

    def _agent(
        self, run: _Run, signal: Signal, agent: str, event: str, parent: trace.Span | None
    ) -> None:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        if event == "activated":
            span = self._tracer.start_span(
                f"invoke_agent {agent}",
                context=_within(parent),
                kind=SpanKind.INTERNAL,
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": agent,
                    "reactor.run_id": signal.run_id or "",
                    "reactor.trigger": str(payload.get("trigger") or ""),
                },
                start_time=_ns(signal.timestamp),
            )
            run.activations[signal.id] = span
            run.owner[signal.id] = span
            return
        if event not in ("completed", "failed", "cancelled"):
            return
        key = signal.caused_by or ""
        if key not in run.activations:
            return
        span = run.activations.pop(key)
        if event == "failed":
            error = payload.get("error") or {}
            span.set_attribute("error.type", str(error.get("type") or "error"))
            span.set_status(Status(StatusCode.ERROR, str(error.get("message") or "")))
        elif event == "cancelled":
            span.set_attribute("reactor.cancelled", str(payload.get("reason") or ""))
        span.end(end_time=_ns(signal.timestamp))
        run.calls.pop(key, None)

    # -- model calls -------------------------------------------------------------------

    def _chat(self, run: _Run, signal: Signal, parent: trace.Span | None) -> None:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        model = payload.get("model")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": PROVIDER_NAME,
            "gen_ai.agent.name": str(payload.get("agent") or ""),
            "reactor.run_id": signal.run_id or "",
            "reactor.request_hash": str(payload.get("request_hash") or ""),
        }
        if model:
            attributes["gen_ai.request.model"] = str(model)
        request = run.requests.get(str(payload.get("request_hash")))
        if request is not None:
            attributes.update(_request_content(request))
        span = self._tracer.start_span(
            f"chat {model}" if model else "chat",
            context=_within(parent),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=_ns(signal.timestamp),
        )
        run.calls.setdefault(signal.caused_by or "", []).append((span, model))
        run.owner[signal.id] = span

    def _end_chat(self, run: _Run, signal: Signal) -> None:
        open_calls = run.calls.get(signal.caused_by or "")
        if not open_calls:
            return
        span, model = open_calls.pop(0)
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        if signal.name == PROVIDER_ERROR:
            error = payload.get("error") or {}
            span.set_attribute("error.type", str(error.get("type") or "error"))
            span.set_status(Status(StatusCode.ERROR, str(error.get("message") or "")))
        else:
            span.set_attributes(_usage(payload))
            if model:
                span.set_attribute("gen_ai.response.model", str(model))
            if payload.get("stop_reason"):
                span.set_attribute("gen_ai.response.finish_reasons", [str(payload["stop_reason"])])
            if payload.get("cost_usd") is not None:
                span.set_attribute("reactor.cost_usd", float(payload["cost_usd"]))
            if self.capture_content:
                span.set_attribute("gen_ai.output.messages", _messages("assistant", payload))
        span.end(end_time=_ns(signal.timestamp))

    # -- tool calls --------------------------------------------------------------------

    def _tool(self, run: _Run, signal: Signal, parent: trace.Span | None) -> None:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        tool, call_id = str(payload.get("name") or ""), str(payload.get("id") or "")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "reactor.run_id": signal.run_id or "",
        }
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(payload.get("input"))
        # A provider runs its tools inside the model call that asked for them.
        open_calls = run.calls.get(signal.caused_by or "")
        span = self._tracer.start_span(
            f"execute_tool {tool}",
            context=_within(open_calls[-1][0] if open_calls else parent),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(signal.timestamp),
        )
        run.tools[call_id] = span
        run.owner[signal.id] = span

    def _end_tool(self, run: _Run, signal: Signal) -> None:
        payload = signal.payload if isinstance(signal.payload, Mapping) else {}
        span = run.tools.pop(str(payload.get("id") or ""), None)
        if span is None:
            return
        if payload.get("error"):
            span.set_attribute("error.type", "ToolError")
            span.set_status(Status(StatusCode.ERROR, str(payload["error"])))
        elif self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", _json(payload.get("result")))
        span.end(end_time=_ns(signal.timestamp))


def _within(parent: trace.Span | None) -> otel_context.Context:
    if parent is None:
        return otel_context.Context()
    return trace.set_span_in_context(parent, otel_context.Context())


def _usage(payload: Mapping[str, Any]) -> dict[str, int]:
    """The ``gen_ai.usage.*`` attributes of a ``provider:end``.

    Anthropic's ``input_tokens`` leaves out the tokens read from and written to the
    prompt cache; the convention's ``gen_ai.usage.input_tokens`` counts them (they are
    input the model read), and reports each cache part beside it.
    """
    usage: Mapping[str, Any] = payload.get("usage") or {}
    read = int(usage.get("cache_read_input_tokens") or 0)
    created = int(usage.get("cache_creation_input_tokens") or 0)
    attributes = {
        "gen_ai.usage.input_tokens": input_tokens(usage),
        "gen_ai.usage.output_tokens": int(usage.get("output_tokens") or 0),
    }
    if read:
        attributes["gen_ai.usage.cache_read.input_tokens"] = read
    if created:
        attributes["gen_ai.usage.cache_creation.input_tokens"] = created
    return attributes


def _messages(role: str, payload: Mapping[str, Any]) -> str:
    output = payload.get("output")
    part = (
        {"type": "text", "content": output}
        if isinstance(output, str)
        else {"type": "text", "content": _json(output)}
    )
    return json.dumps([{"role": role, "parts": [part]}], ensure_ascii=False)


def _request_content(request: ProviderRequest) -> dict[str, str]:
    messages = [
        {"role": message.role, "parts": [{"type": "text", "content": message.content}]}
        for message in request.messages
    ]
    content = {"gen_ai.input.messages": json.dumps(messages, ensure_ascii=False)}
    if request.system:
        content["gen_ai.system_instructions"] = json.dumps(
            [{"type": "text", "content": request.system}], ensure_ascii=False
        )
    return content


def tracer_provider_from_env(service_name: str = "reactor") -> TracerProvider:
    """A tracer provider that exports spans as the standard ``OTEL_*`` variables say.

    The exporter is OTLP over HTTP (``OTEL_EXPORTER_OTLP_ENDPOINT``,
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ...), or
    the console with ``OTEL_TRACES_EXPORTER=console``; the resource comes from
    ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` (``service_name`` when unset).
    Spans are batched (``OTEL_BSP_*``). Call ``shutdown()`` on it to flush at exit.

    Raises:
        ValueError: ``OTEL_TRACES_EXPORTER`` names an exporter other than ``otlp``,
            ``console`` or ``none``.
    """
    import os

    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    resource = Resource.create(
        {} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: service_name}
    )
    provider = TracerProvider(resource=resource)
    exporters = [
        name.strip()
        for name in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if name.strip()
    ]
    for name in exporters:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        elif name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name != "none":
            raise ValueError(
                f"OTEL_TRACES_EXPORTER={name!r} is not an exporter reactor can use: set it to "
                "'otlp' (OTLP over HTTP, the default), 'console' or 'none'."
            )
    return provider
