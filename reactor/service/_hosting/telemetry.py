"""``REACTOR_OTEL=1``: OpenTelemetry traces of every run a service or worker executes.

``reactor serve`` and ``reactor worker`` read the switch once, at start. When it is on,
an :class:`~reactor.otel.OpenTelemetryReporter` is added to the service's reporters,
exporting as the standard ``OTEL_*`` variables say (OTLP over HTTP by default:
``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME``,
...); the spans still batched are flushed when the process stops. Nothing is sent
anywhere unless the switch is on.

| variable | meaning | default |
|---|---|---|
| ``REACTOR_OTEL`` | ``1`` (or ``true``, ``yes``, ``on``): trace every run | off |
| ``REACTOR_OTEL_CAPTURE_CONTENT`` | ``1``: spans hold prompts and answers too | off |
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

from reactor._recording.store import Reporter
from reactor._signals.diagnostics import log
from reactor._signals.settings import settings
from reactor.exceptions import ServiceConfigError

__all__ = ["OTEL_ENV", "Telemetry", "telemetry_from_env"]

OTEL_ENV = "REACTOR_OTEL"


CLOSE_WITHIN = 2.0
"""Seconds a stopping process gives its last spans to be exported: a collector that is
down would otherwise hold it for the exporter's retries (6 to 10 s)."""


@dataclasses.dataclass(frozen=True)
class Telemetry:
    """The reporter that traces runs, and the tracer provider that exports its spans."""

    reporter: Reporter
    provider: Any  # opentelemetry.sdk.trace.TracerProvider (imported only when on)

    def close(self, within: float = CLOSE_WITHIN) -> None:
        """Export the spans still batched, and stop exporting, waiting ``within`` seconds.

        The export goes on in a daemon thread: a collector that does not answer in time
        costs the spans still batched (said in a warning), never a stop held for its
        retries.
        """
        closing = threading.Thread(
            target=self.provider.shutdown, name="reactor-otel-shutdown", daemon=True
        )
        closing.start()
        closing.join(within)
        if closing.is_alive():
            log(
                "reactor.service",
                "warning",
                "traces not all exported",
                reason=f"the OpenTelemetry collector did not take the last spans within "
                f"{within:g} s; the process stops without them",
            )


def telemetry_from_env(service_name: str = "reactor") -> Telemetry | None:
    """The telemetry ``REACTOR_OTEL`` asks for (in the process's settings), or ``None``.

    Raises:
        ServiceConfigError: A ``REACTOR_*`` value is bad, the ``otel`` extra is not
            installed, or ``OTEL_TRACES_EXPORTER`` names an exporter reactor cannot use.
    """
    config = settings()
    if not config.otel:
        return None
    try:
        from reactor.otel import OpenTelemetryReporter, tracer_provider_from_env

        provider = tracer_provider_from_env(service_name)
    except ImportError as exc:
        raise ServiceConfigError(
            f"{OTEL_ENV}=1 needs OpenTelemetry, which is not installed here ({exc.name or exc} "
            "cannot be imported): install the otel extra (pip install 'reactor-agents[otel]'), "
            f"or unset {OTEL_ENV}."
        ) from None
    except ValueError as exc:
        raise ServiceConfigError(str(exc)) from None
    content = config.otel_capture_content
    reporter = OpenTelemetryReporter(provider, capture_content=content)
    env = os.environ  # OpenTelemetry's own variables: its SDK reads them
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318 (the OTLP default)"
    )
    exporters = env.get("OTEL_TRACES_EXPORTER", "otlp")
    log(
        "reactor.service",
        "info",
        "tracing runs with OpenTelemetry",
        exporters=exporters,
        endpoint=endpoint,
        capture_content=content,
    )
    return Telemetry(reporter, provider)
