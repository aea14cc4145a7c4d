"""The web UI of ``reactor serve``: runs live, graphs drawn, prompts, suggestions, agents.

Server-rendered pages (Jinja2 templates, one stylesheet, one small script, all shipped
in the package: nothing comes from a CDN; graphs are laid out and drawn as SVG on the
server) on top of the same service objects as the HTTP API. :func:`install_web` adds
them to an app: the sign-in form at ``/``, then ``/runs``, ``/runs/{run_id}``,
``/runs/{a}/compare/{b}``, ``/evals/{eval_id}``, ``/graphs``, ``/graphs/{name}``,
``/objects``, ``/objects/{type}/{id}``, ``/suggestions``, ``/suggestions/{id}``,
``/agents``, ``/processing-log`` and ``/workers``. Each route declares the role it needs
(:mod:`._render`); a page shows only the controls its principal may use.
"""

from __future__ import annotations

from importlib import resources

import fastapi
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import Response

from reactor.service._objects.db import Database
from reactor.service.web._agents import router as agents_router
from reactor.service.web._auth import router as auth_router
from reactor.service.web._compare import router as compare_router
from reactor.service.web._forks import router as forks_router
from reactor.service.web._graphs import router as graphs_router
from reactor.service.web._manage import router as manage_router
from reactor.service.web._objects import router as objects_router
from reactor.service.web._render import (
    Forbidden,
    FormRejected,
    SignInNeeded,
    Web,
    back,
    page,
    root_of,
    signed_in,
)
from reactor.service.web._runs import router as runs_router
from reactor.service.web._sessions import Sessions
from reactor.service.web._workers import router as workers_router

__all__ = ["install_web", "root_of"]


def install_web(app: fastapi.FastAPI, db: Database | None = None, prefix: str = "") -> None:
    """Serve the web UI from ``app`` (its routes, static files and sessions, kept in ``db``).

    ``prefix`` begins its URLs unless the request's ``root_path`` says where it is mounted.
    """
    app.state.web = Web(Sessions(db), prefix=prefix)
    static = resources.files("reactor.service.web") / "static"
    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    for router in (
        auth_router,
        runs_router,
        compare_router,
        forks_router,
        graphs_router,
        objects_router,
        agents_router,
        manage_router,
        workers_router,
    ):
        app.include_router(router)

    @app.exception_handler(SignInNeeded)
    async def sign_in_first(request: Request, exc: SignInNeeded) -> Response:
        return back(request, "/")

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden) -> Response:
        return page(request, "rejected.html", await signed_in(request), 403, what=exc.detail)

    @app.exception_handler(FormRejected)
    async def rejected(request: Request, exc: FormRejected) -> Response:
        return page(
            request,
            "rejected.html",
            None,
            403,
            what="The form was not sent from this site's own page (its CSRF token is missing "
            "or wrong). Reload the page and try again.",
        )
