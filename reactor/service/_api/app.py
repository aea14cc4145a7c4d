"""The HTTP app of a service: ``create_app(service)`` is a FastAPI app that owns it.

The app's lifespan runs the service (``async with service:``: migrations, agents,
dispatcher, stuck-job detector, scheduler, resumed runs). Stopping takes two steps,
so that a server can begin the second as soon as it is told to stop: :meth:`Lifecycle.stop`
stops taking work (streams end, the scheduler and dispatcher pause, new runs are
refused with 503) and gives what is in flight ``grace`` seconds; the lifespan's end
waits for that, then exits the service (unfinished runs are held for the next start,
the log is flushed).

The OpenAPI description is at ``/openapi.json`` and its Swagger UI at ``/docs``, served
from the package's own copy (no CDN: it works offline). ``/healthz`` answers without a
token, for process managers and load balancers. ``/metrics`` is the service in
Prometheus's text format (:mod:`reactor.service._api.metrics`). The web UI
(:mod:`reactor.service.web`) is served from ``/``.

Mounted in another FastAPI app (``app.mount("/reactor", create_app(service,
prefix="/reactor"))``), every path above is under the prefix, and every link, form,
redirect, stream and asset of the web UI says so. A mounted app's lifespan is not run
by its parent: the parent's lifespan enters it (``FastAPI(lifespan=
reactor_app.router.lifespan_context)``), and the service runs while the parent does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping

import fastapi
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from reactor._signals.diagnostics import log
from reactor.exceptions import ServiceConfigError
from reactor.service._access.authenticators import Authenticator, LocalAuth
from reactor.service._access.tokens import TokenAuth
from reactor.service._api.agents import router as agents_router
from reactor.service._api.audit import router as audit_router
from reactor.service._api.base import PUBLIC, State, install_errors
from reactor.service._api.compare import router as compare_router
from reactor.service._api.follow import Streams, StreamSettings
from reactor.service._api.guard import Guard, GuardSettings
from reactor.service._api.metrics import Metrics
from reactor.service._api.metrics import router as metrics_router
from reactor.service._api.objects import objects_router, suggestions_router
from reactor.service._api.resumes import router as resumes_router
from reactor.service._api.runs import router as runs_router
from reactor.service._api.stream import router as events_router
from reactor.service._api.stream import ws_router
from reactor.service._hosting.service import ReactionService
from reactor.service.web import install_web, root_of

__all__ = ["Lifecycle", "authenticator_for", "create_app"]

_DESCRIPTION = """\
Objects, reaction agents, scheduled agents and runs of a reactor service.

Every `/api` route needs `Authorization: Bearer <token>` (an API token or a JWT: it
stands for a principal, whose id is the actor of object changes, replies and decisions,
and whose roles say what it may do: `viewer` reads, `operator` writes objects and drives
runs, `approver` decides on suggestions, `admin` changes agents and schedules). Errors are
`{"error": ..., "detail": ...}` with 401, 403 (naming the role needed), 404, 409, 422,
429 or 503.
"""


def authenticator_for(
    authenticator: Authenticator | None,
    tokens: TokenAuth | Mapping[str, str | tuple[str, str]] | None,
) -> Authenticator:
    """The authenticator an app uses: the one given, else the tokens, else the local admin.

    Raises:
        ServiceConfigError: Both an authenticator and tokens are given, or the
            authenticator has no ``authenticate`` method.
    """
    if authenticator is not None:
        if tokens:
            raise ServiceConfigError(
                "Give create_app either an authenticator or tokens, not both (a TokenAuth "
                "is an authenticator: pass it as authenticator=)."
            )
        if not callable(getattr(authenticator, "authenticate", None)):
            raise ServiceConfigError(
                f"authenticator must have an async authenticate(request) method, got "
                f"{authenticator!r}."
            )
        return authenticator
    access = tokens if isinstance(tokens, TokenAuth) else TokenAuth(tokens)
    return access if access else LocalAuth()


class Lifecycle:
    """Stops a served service in two steps (see the module's docstring).

    Args:
        service: The service the app runs.
        grace: Seconds in-flight work is given to finish once stopping begins.
    """

    def __init__(self, service: ReactionService, grace: float) -> None:
        self.service = service
        self.grace = grace
        self.stopping = asyncio.Event()
        self.held: list[str] = []
        self._draining: asyncio.Task[list[str]] | None = None

    def stop(self) -> None:
        """Stop taking work, and give what is in flight ``grace`` seconds (call it once or more)."""
        if self._draining is None and self.service.running:
            log("reactor.service", "info", "stopping", grace_s=self.grace)
            self.stopping.set()
            self._draining = asyncio.get_running_loop().create_task(self.service.drain(self.grace))

    async def stopped(self) -> list[str]:
        """Wait until stopping is done; the ids of the runs held for the next start."""
        self.stop()
        if self._draining is not None:
            self.held = await self._draining
        return self.held


def create_app(
    service: ReactionService,
    *,
    tokens: TokenAuth | Mapping[str, str | tuple[str, str]] | None = None,
    authenticator: Authenticator | None = None,
    grace: float = 30.0,
    bind: str | None = None,
    allowed_hosts: Iterable[str] = (),
    prefix: str = "",
) -> fastapi.FastAPI:
    """A FastAPI app serving ``service``'s HTTP API; it runs the service while it is served.

    Args:
        service: The service (not started: the app's lifespan starts it).
        tokens: The API's bearer tokens (``{token: user_id}``, or ``{token: (user_id,
            "role+role")}``; a user without roles is an ``operator``).
        authenticator: Who authenticates the requests instead (a
            :class:`~reactor.service.TokenAuth`, a :class:`~reactor.service.JWTAuth`,
            or the application's own ``async authenticate(request) -> Principal |
            None``). With neither, every request is the user ``local``, an ``admin``:
            serve it on a loopback address only.
        grace: Seconds in-flight work is given when the app stops.
        bind: The address it is served on (a host it answers to).
        allowed_hosts: More host names it answers to (besides ``localhost``, the
            loopback addresses and ``REACTOR_ALLOWED_HOSTS``).
        prefix: The path it is mounted at in another app (``"/reactor"``): its URLs
            begin with it. A parent app's mount (or a server's ``root_path``) says so
            too, and wins; the prefix serves behind a proxy that strips the path.

    Raises:
        ServiceConfigError: ``REACTOR_MAX_BODY``, ``REACTOR_STREAM_BUFFER`` or
            ``REACTOR_MAX_STREAMS`` is not a positive whole number, ``prefix`` is
            not a path (``/name``, no trailing ``/``), or both ``tokens`` and
            ``authenticator`` are given.
    """
    access = authenticator_for(authenticator, tokens)
    metrics = Metrics()
    guard = GuardSettings.read(bind, allowed_hosts)
    streams = Streams(StreamSettings.read())  # the cap counts this app's streams
    if prefix and (not prefix.startswith("/") or prefix.endswith("/") or "//" in prefix):
        raise ServiceConfigError(
            f"prefix must be the path the app is mounted at, like '/reactor' (a leading "
            f"'/', none at the end), or '' for none; got {prefix!r}."
        )

    @contextlib.asynccontextmanager
    async def lifespan(_: fastapi.FastAPI) -> AsyncIterator[None]:
        # Its own app, whichever app's lifespan enters it (a parent's, when mounted).
        lifecycle = Lifecycle(service, grace)
        app.state.reactor = State(service, access, lifecycle.stopping)
        app.state.lifecycle = lifecycle
        service.reporters.append(metrics.reporter)  # counts the runs' ends for /metrics
        try:
            async with service:
                log(
                    "reactor.service",
                    "info",
                    "service started",
                    agents=len(service.catalog.agents),
                    scheduled=len(service.cron.scheduled()),
                    resumed=len(service.live),
                )
                try:
                    yield
                finally:
                    held = await lifecycle.stopped()
                    log("reactor.service", "info", "service stopped", held_runs=len(held))
        finally:
            service.reporters.remove(metrics.reporter)

    app = fastapi.FastAPI(
        title="reactor service",
        description=_DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.streams = streams
    app.state.metrics = metrics
    install_errors(app)
    app.add_middleware(Guard, settings=guard)
    for router in (
        agents_router,
        objects_router,
        suggestions_router,
        runs_router,
        compare_router,
        resumes_router,
        events_router,
        ws_router,
        audit_router,
        metrics_router,
    ):
        app.include_router(router)
    _docs(app)
    install_web(app, service.db, prefix)

    @app.get("/healthz", tags=["health"], dependencies=[PUBLIC])
    async def healthz() -> dict[str, str]:
        """Whether the service runs (no token needed)."""
        lifecycle: Lifecycle = app.state.lifecycle
        return {"status": "stopping" if lifecycle.stopping.is_set() else "ok"}

    return app


def _docs(app: fastapi.FastAPI) -> None:
    """Swagger UI at ``/docs``, from the assets shipped in the ``swagger-ui-bundle`` package."""
    from swagger_ui_bundle import swagger_ui_path

    app.mount("/docs/assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False, dependencies=[PUBLIC])
    async def docs(request: fastapi.Request) -> HTMLResponse:
        root = root_of(request)
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title="reactor service: API",
            swagger_js_url=f"{root}/docs/assets/swagger-ui-bundle.js",
            swagger_css_url=f"{root}/docs/assets/swagger-ui.css",
            swagger_favicon_url=f"{root}/docs/assets/favicon-32x32.png",
        )
