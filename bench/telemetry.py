"""What observability costs: the OpenTelemetry reporter on LLM-shaped activations.

The reporter is measured with the OpenTelemetry SDK's own tracer provider and a span
processor that drops what it gets, so the figure is reactor's work plus the SDK's span
bookkeeping, not an exporter's network. Without the reporter, nothing of it runs: the
same workload's baseline is the run with no reporter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from bench._runner import Row, best_of_pair, micros
from bench.runtime import LLM_STEPS, llm_graph
from reactor.otel import OpenTelemetryReporter


class _Drop(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _provider() -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_Drop()))
    return provider


async def _loop(steps: int, *, traced: str = "") -> tuple[float, int]:
    graph, provider = llm_graph(steps)
    tracers = {"sdk": _provider, "noop": trace.NoOpTracerProvider}
    reporters = [OpenTelemetryReporter(tracers[traced]())] if traced else []
    start = time.perf_counter()
    result = await graph.run(provider=provider, reporters=reporters)
    elapsed = time.perf_counter() - start
    assert result.metrics.activations == steps, (result.status, result.error)
    return elapsed, len(result.signals)


def run(runs: int, scale: float) -> list[Row]:
    steps = max(200, int(LLM_STEPS * scale))
    signals = asyncio.run(_loop(steps))[1]
    rows = []
    for traced, what in (
        ("sdk", "the SDK's tracer provider, spans dropped"),
        ("noop", "the API's no-op tracer provider: reactor's own share"),
    ):
        plain, ours = best_of_pair(
            runs,
            lambda: asyncio.run(_loop(steps))[0],
            lambda traced=traced: asyncio.run(_loop(steps, traced=traced))[0],  # type: ignore[misc]
        )
        rows.append(
            Row(
                workload=f"OpenTelemetry reporter on {steps:,} LLM-shaped activations "
                f"({signals:,} signals, 2 spans per activation; {what})",
                ours=f"{micros(ours / steps)} per activation",
                baseline=f"{micros(plain / steps)} per activation (no reporter)",
                ratio=ours / plain,
                ratio_text=f"+{micros((ours - plain) / signals)} per signal",
                target="report (nothing when not attached)",
                met=None,
            )
        )
    return rows
