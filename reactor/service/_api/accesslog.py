"""One log line per HTTP request ``reactor serve`` answers, through structlog.

uvicorn's own access lines are plain text with neither the time taken nor the caller;
:class:`AccessLog` replaces them (``reactor serve`` turns uvicorn's off) with an event
``request`` at ``info`` on the logger ``reactor.access``, whose fields are:

| field | what |
|---|---|
| ``method`` | ``GET``, ``POST``, ... |
| ``path`` | the path, without the query string (which may carry what is not to be logged) |
| ``status`` | the response's status (``500`` if the app failed before it answered) |
| ``duration_ms`` | from the request to the response's last byte (a stream's whole life) |
| ``user`` | the authenticated caller's user id, when the route authenticated one |
| ``client`` | ``host:port`` of the peer (the proxy's forwarded address, if trusted) |

The line is written once the response has been sent (or the app failed, or the client
went away): a stream is logged when it ends. Each request is counted too, when the
middleware is given a counter (``reactor serve`` gives it the app's ``/metrics``
counter): by method, the template of the route that answered it (``/api/runs/{run_id}``,
``None`` when none did) and status.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reactor._signals.diagnostics import log
from reactor.service._objects.values import User

__all__ = ["CALLER", "AccessLog", "Count"]

CALLER = "caller"
"""The key of the request's state (``scope["state"]``) under which the API notes its
authenticated :class:`User` (``base.user_of``), for the access line."""


Count = Callable[[str, str | None, int], object]
"""Counts one request: its method, its route's template (``None``: no route), its status."""


class AccessLog:
    """ASGI middleware: an access line per HTTP request (see the module's docstring).

    Args:
        app: The ASGI app it wraps (WebSockets and the lifespan pass through unlogged:
            uvicorn says when a WebSocket opens and closes).
        count: Counts each request too (the metrics' request counter).
    """

    def __init__(self, app: ASGIApp, count: Count | None = None) -> None:
        self.app = app
        self.count = count

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        state: dict[str, Any] = scope.setdefault("state", {})  # the routes' request.state
        status = 500  # what the server answers for an app that fails before answering

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            fields: dict[str, Any] = {
                "method": scope["method"],
                "path": scope["path"],
                "status": status,
                "duration_ms": round((time.perf_counter() - began) * 1000, 3),
            }
            caller = state.get(CALLER)
            if isinstance(caller, User):
                fields["user"] = caller.id
            client = scope.get("client")
            if client:
                fields["client"] = f"{client[0]}:{client[1]}"
            log("reactor.access", "info", "request", **fields)
            if self.count is not None:
                self.count(scope["method"], _template(scope), status)


def _template(scope: Scope) -> str | None:
    """The path template of the route that answered (set in the scope by the router)."""
    template = getattr(scope.get("route"), "path", None)
    return f"{scope.get('root_path', '')}{template}" if isinstance(template, str) else None
