"""``REACTOR_OTEL=1``: ``reactor serve`` traces every run it executes over OTLP/HTTP.

A real server process exports to a receiver in the test that decodes the protobuf,
configured by the standard ``OTEL_*`` variables only.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reactor.exceptions import ServiceConfigError
from reactor.service._hosting.telemetry import telemetry_from_env
from tests.reactor.otlp import Receiver
from tests.service.server import serving, wait_for


def _attributes(span: Any) -> dict[str, Any]:
    values = {}
    for attribute in span.attributes:
        kind = attribute.value.WhichOneof("value")
        values[attribute.key] = getattr(attribute.value, kind) if kind else None
    return values


def test_reactor_serve_traces_its_runs_when_asked(tmp_path: Path) -> None:
    receiver = Receiver()
    env = {
        "REACTOR_OTEL": "1",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "crm-service",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    try:
        with serving(f"sqlite:///{tmp_path / 'app.db'}", tmp_path / "log", env=env) as server:
            with server.client() as api:
                started = api.post("/api/runs", json={"graph": "count", "input": 41})
                assert started.status_code == 202, started.text
                run_id = started.json()["run_id"]

                def traced() -> list[Any]:
                    spans = receiver.spans()
                    ours = [s for s in spans if _attributes(s).get("reactor.run_id") == run_id]
                    names = {span.name for span in ours}
                    return ours if {"invoke_workflow count", "invoke_agent count"} <= names else []

                spans = wait_for(traced, timeout=30)
            assert server.stop() == 0
            output = server.output()
    finally:
        receiver.close()
    assert "tracing runs with OpenTelemetry" in output
    by_name = {span.name: span for span in spans}
    workflow, agent = by_name["invoke_workflow count"], by_name["invoke_agent count"]
    assert agent.parent_span_id == workflow.span_id
    assert agent.trace_id == workflow.trace_id
    assert _attributes(agent)["gen_ai.agent.name"] == "count"
    assert set(receiver.paths) == {"/v1/traces"}
    resource = {
        attribute.key: attribute.value.string_value
        for request in receiver.requests
        for resource_spans in request.resource_spans
        for attribute in resource_spans.resource.attributes
    }
    assert resource["service.name"] == "crm-service"


def test_without_the_switch_nothing_is_traced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTOR_OTEL", raising=False)
    assert telemetry_from_env() is None
    monkeypatch.setenv("REACTOR_OTEL", "0")
    assert telemetry_from_env() is None


def test_a_switch_that_is_neither_on_nor_off_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_OTEL", "maybe")
    with pytest.raises(ServiceConfigError, match=r"^REACTOR_OTEL='maybe': is neither on nor off"):
        telemetry_from_env()


def test_without_the_otel_extra_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REACTOR_OTEL", "1")
    monkeypatch.delitem(sys.modules, "reactor.otel", raising=False)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)  # as if it were not installed
    with pytest.raises(ServiceConfigError) as raised:
        telemetry_from_env()
    message = str(raised.value)
    assert message.startswith("REACTOR_OTEL=1 needs OpenTelemetry, which is not installed here")
    assert "pip install 'reactor-agents[otel]'" in message


def test_an_unknown_exporter_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTOR_OTEL", "1")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ServiceConfigError, match="OTEL_TRACES_EXPORTER='zipkin'"):
        telemetry_from_env()


def test_closing_does_not_wait_for_a_collector_that_is_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from structlog.testing import capture_logs

    from tests.redis_server import free_port

    monkeypatch.setenv("REACTOR_OTEL", "1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    telemetry = telemetry_from_env()
    assert telemetry is not None
    with telemetry.provider.get_tracer("test").start_as_current_span("a span"):
        pass
    started = time.monotonic()
    with capture_logs() as logs:
        telemetry.close(within=0.5)
    took = time.monotonic() - started
    warned = [line for line in logs if line["event"] == "traces not all exported"]
    assert warned, logs  # it stopped waiting: the exporter still retried the dead collector
    assert "did not take the last spans within 0.5 s" in warned[0]["reason"]
    assert took < 60  # a bound on a hang, not a speed check
