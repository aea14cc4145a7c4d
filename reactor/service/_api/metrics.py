"""``GET /metrics``: how far behind the agents are, requests and runs, for Prometheus.

The answer is Prometheus's text format (written by ``prometheus-client``):

* ``reactor_agent_waiting{agent}`` (gauge): the agent's ``pending`` entries in the
  processing log;
* ``reactor_agent_lag_seconds{agent}`` (gauge): how long its oldest ``pending`` entry
  has waited (0 when none waits);
* ``reactor_agent_admitted_total{agent,outcome}`` (counter): its entries by outcome:
  ``admitted`` (taken to be processed), and every other status but ``pending`` by its
  own name (``skipped``, ``superseded``, ``merged``, ``held``, ...);
* ``reactor_agent_held{agent}`` (gauge): its entries a spend cap holds;
* ``reactor_agent_spent_usd{agent}`` (gauge): what the model calls of its runs that
  ended this period cost (its ``SpendCap``'s period, else an hour);
* ``reactor_http_requests_total{method,route,status}`` (counter): the requests this
  process answered, by the template of their route (``/api/runs/{run_id}``;
  ``unmatched`` when none answered) and status, counted by the access log
  (:class:`~reactor.service._api.guard.AccessLog`, which ``reactor serve`` installs);
* ``reactor_runs_total{status}`` (counter): the runs this process executed that ended,
  by status (``completed``, ``failed``, ``aborted``, ...).

The agents' figures are read from the processing log at each scrape (one grouped,
indexed query: :meth:`~reactor.service.ReactionService.lag`), so every serving process
answers the same for them; requests and runs are this process's own. ``/metrics``
needs a ``viewer``'s credential, or none with ``REACTOR_METRICS_PUBLIC=1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import fastapi
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from reactor._signals.names import HARNESS_END
from reactor._signals.patterns import Pattern
from reactor._signals.settings import settings
from reactor._signals.signal import Signal
from reactor.service._access.roles import RoleGate, denied
from reactor.service._api.base import ApiError, Service, no_nul, principal_of, route_name
from reactor.service._objects.changes import Lag
from reactor.service._objects.values import Principal

__all__ = ["Metrics", "MetricsGate", "RunCounter", "router"]

router = fastapi.APIRouter(tags=["metrics"])

UNMATCHED = "unmatched"
"""The ``route`` of a request no route answered (a 404): one label, whatever its path."""


class _AgentLag(Collector):
    """The agents' gauges and counters, from the lag read for the scrape at hand."""

    def __init__(self) -> None:
        self.lags: Sequence[Lag] = ()

    def collect(self) -> Iterator[Metric]:
        waiting = GaugeMetricFamily(
            "reactor_agent_waiting", "Pending entries of the agent.", labels=["agent"]
        )
        oldest = GaugeMetricFamily(
            "reactor_agent_lag_seconds",
            "Seconds the agent's oldest pending entry has waited (0: none waits).",
            labels=["agent"],
        )
        outcomes = CounterMetricFamily(
            "reactor_agent_admitted",
            "Entries of the agent by outcome: admitted (taken to be processed), or the "
            "status it ended in otherwise.",
            labels=["agent", "outcome"],
        )
        held = GaugeMetricFamily(
            "reactor_agent_held", "Entries of the agent a spend cap holds.", labels=["agent"]
        )
        spent = GaugeMetricFamily(
            "reactor_agent_spent_usd",
            "What the model calls of the agent's runs that ended this period cost (US dollars).",
            labels=["agent"],
        )
        for lag in self.lags:
            waiting.add_metric([lag.agent], lag.waiting)
            oldest.add_metric([lag.agent], lag.oldest or 0.0)
            held.add_metric([lag.agent], lag.held)
            spent.add_metric([lag.agent], lag.spent)
            for outcome, count in lag.outcomes.items():
                outcomes.add_metric([lag.agent, outcome], count)
        yield from (waiting, oldest, outcomes, held, spent)


class Metrics:
    """What ``/metrics`` says of one app: its registry, its counters, the agents' lag."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter(
            "reactor_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.runs = Counter(
            "reactor_runs",
            "Runs this process executed that ended, by status.",
            ["status"],
            registry=self.registry,
        )
        self._lag = _AgentLag()
        self.registry.register(self._lag)
        self.reporter = RunCounter(self)

    def request(self, method: str, route: str | None, status: int) -> None:
        """Count one request answered (``route``: its template; ``None``: no route)."""
        self.requests.labels(method, route or UNMATCHED, str(status)).inc()

    def render(self, lags: Iterable[Lag]) -> bytes:
        """The text format of every metric, the agents' from ``lags``."""
        self._lag.lags = tuple(lags)
        try:
            return generate_latest(self.registry)
        finally:
            self._lag.lags = ()


class RunCounter:
    """A reporter of the service's runs: each ``harness:end`` counts its run's status."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    @property
    def patterns(self) -> Sequence[Pattern]:
        """Only the end of each run."""
        return (HARNESS_END,)

    def on_signal(self, signal: Signal) -> None:
        """Count the run's status."""
        payload = signal.payload
        status = payload.get("status") if isinstance(payload, Mapping) else None
        self.metrics.runs.labels(str(status or "unknown")).inc()


class MetricsGate(RoleGate):
    """The gate of ``/metrics``: a ``viewer``, or anyone with ``REACTOR_METRICS_PUBLIC=1``."""

    def __init__(self) -> None:
        super().__init__("viewer")

    async def __call__(self, request: Request) -> Principal | None:
        """The principal (``None`` when the metrics are public)."""
        if settings().metrics_public:
            return None
        principal = await principal_of(request)
        if not principal.may("viewer"):
            raise ApiError(403, str(denied(principal, "viewer", route_name(request))))
        return principal


def metrics_of(request: Request) -> Metrics:
    """The app's :class:`Metrics`."""
    found: Metrics = request.app.state.metrics
    return found


@router.get(
    "/metrics",
    dependencies=[fastapi.Depends(MetricsGate()), fastapi.Depends(no_nul)],
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
)
async def metrics(request: Request, service: Service) -> Response:
    """The service's metrics in Prometheus's text format (see the module)."""
    lags = await service.lag()
    body = metrics_of(request).render(lags.values())
    return Response(body, media_type=CONTENT_TYPE_LATEST)
