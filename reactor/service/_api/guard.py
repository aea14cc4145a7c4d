"""What every request passes before it reaches a route (hosts, origins, bodies), and its log line.

A service without tokens trusts its callers to be on this machine; a web page in a
browser is on this machine too. So, with tokens or without:

* ``Host`` must name the service (its bind address, ``localhost``, a loopback
  address, or one of ``REACTOR_ALLOWED_HOSTS``): a DNS-rebinding page that reaches
  ``127.0.0.1`` under its own name gets ``403``;
* a state-changing request (``POST``, ``PUT``, ``PATCH``, ``DELETE``) and a WebSocket
  whose ``Origin`` (else ``Referer``) is another site's gets ``403``;
* a body sent to ``/api`` must be ``Content-Type: application/json`` (``415``), so
  that no form or ``text/plain`` request another page can make is read as JSON;
* a body over ``REACTOR_MAX_BODY`` bytes (default 1 MiB) gets ``413`` before it is
  read whole;
* a body holding a NUL character (U+0000), in a JSON string or a form field, gets
  ``422`` naming the field before any route reads it: PostgreSQL cannot store one in
  text (an abort's reason, an agent's name or prompt), SQLite can, and both must answer
  alike; so nothing a request carries reaches a write that fails for it, and fails
  other runs' writes with it.

| variable | meaning | default |
|---|---|---|
| ``REACTOR_ALLOWED_HOSTS`` | more host names it answers to, comma-separated (``*``: any) | none |
| ``REACTOR_MAX_BODY`` | the largest request body, in bytes | ``1048576`` |

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

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reactor._signals.diagnostics import log
from reactor._signals.door import check_payload, check_text
from reactor._signals.settings import settings_from
from reactor.exceptions import PayloadError
from reactor.service._objects.values import User

__all__ = [
    "ALLOWED_HOSTS_ENV",
    "CALLER",
    "MAX_BODY_ENV",
    "AccessLog",
    "Count",
    "Guard",
    "GuardSettings",
]

ALLOWED_HOSTS_ENV = "REACTOR_ALLOWED_HOSTS"
MAX_BODY_ENV = "REACTOR_MAX_BODY"
DEFAULT_MAX_BODY = 1024 * 1024
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
_CHANGING = frozenset(("POST", "PUT", "PATCH", "DELETE"))


@dataclasses.dataclass(frozen=True)
class GuardSettings:
    """The hosts the service answers to and the largest body it reads.

    Attributes:
        hosts: Host names (no port), lower case; ``*`` allows any.
        max_body: Bytes.
    """

    hosts: frozenset[str]
    max_body: int = DEFAULT_MAX_BODY

    @classmethod
    def read(
        cls,
        bind: str | None = None,
        extra: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> GuardSettings:
        """The settings for a service bound to ``bind``, from ``REACTOR_*`` variables.

        ``env``: read these variables instead of the process's (checked alike).

        Raises:
            ServiceConfigError: A ``REACTOR_*`` value is bad (one line per bad variable).
        """
        config = settings_from(env)
        hosts = {*LOCAL_HOSTS, *extra, *config.allowed_hosts}
        if bind and bind not in ("0.0.0.0", "::"):  # a wildcard bind names no host
            hosts.add(bind)
        max_body = config.max_body
        return cls(frozenset(_bare(h) for h in hosts), max_body)

    def allows(self, host: str) -> bool:
        """Whether a ``Host`` header (with or without its port) names this service."""
        return "*" in self.hosts or _bare(_host_only(host)) in self.hosts


def _bare(host: str) -> str:
    return host.strip().strip("[]").lower()


def _host_only(value: str) -> str:
    """``example.com:8000`` -> ``example.com``; ``[::1]:8000`` -> ``::1``."""
    value = value.strip()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class _TooLarge(Exception):
    pass


class Guard:
    """The ASGI middleware that enforces :class:`GuardSettings` (see the module)."""

    def __init__(self, app: ASGIApp, settings: GuardSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._refused(scope, headers)
        if problem is not None:
            await _answer(scope, send, *problem)
            return
        if scope["type"] == "http" and scope["method"] in _CHANGING:
            try:
                body, receive = await self._bounded(headers, receive)
            except _TooLarge:
                limit = self.settings.max_body
                await _answer(
                    scope,
                    send,
                    413,
                    f"The request body is over {limit} bytes ({MAX_BODY_ENV}); send less, "
                    "or ask the operator to raise the limit.",
                )
                return
            refused = nul_refusal(body, headers.get("content-type", ""))
            if refused is not None:  # before any route reads it, on every database
                await _answer(scope, send, 422, refused)
                return
        await self.app(scope, receive, send)

    def _refused(self, scope: Scope, headers: Mapping[str, str]) -> tuple[int, str] | None:
        host = headers.get("host", "")
        if not self.settings.allows(host):
            return (
                403,
                f"This service does not answer to the host {host!r}; the operator can "
                f"allow it with {ALLOWED_HOSTS_ENV}.",
            )
        changing = scope["type"] == "websocket" or scope["method"] in _CHANGING
        if not changing:
            return None
        origin = headers.get("origin") or headers.get("referer")
        if origin and origin != "null":
            parts = urlsplit(origin)
            if parts.netloc.lower() != host.lower() or not self.settings.allows(parts.netloc):
                return (
                    403,
                    f"Refused a cross-site request (CSRF) from {origin}: state changes come "
                    "from the service's own pages or from API clients that send no Origin.",
                )
        elif origin == "null":
            return 403, "Refused a request from an opaque origin (Origin: null)."
        if scope["type"] == "http" and _route_path(scope).startswith("/api/"):
            length = headers.get("content-length")
            has_body = (length is not None and length.strip() != "0") or (
                "transfer-encoding" in headers
            )
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if has_body and kind != "application/json":
                return (
                    415,
                    f"The API reads JSON: send the body with Content-Type: application/json "
                    f"(got {kind or 'none'!r}).",
                )
        return None

    async def _bounded(self, headers: Mapping[str, str], receive: Receive) -> tuple[bytes, Receive]:
        """The body read whole (up to the limit), and a ``receive`` handing it to the app."""
        limit = self.settings.max_body
        length = headers.get("content-length", "")
        if length.strip().isdigit() and int(length) > limit:
            raise _TooLarge
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                chunks.clear()
                return b"", _replay([message], receive)
            body = message.get("body", b"")
            size += len(body)
            if size > limit:
                raise _TooLarge
            chunks.append(body)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        first: Message = {"type": "http.request", "body": body, "more_body": False}
        return body, _replay([first], receive)


def nul_refusal(body: bytes, content_type: str) -> str | None:
    """Why a JSON or form body cannot be stored, when a field holds a NUL character.

    The message is the door's (:mod:`reactor._signals.door`), naming the field's path
    (``data.name``, ``reason``). JSON can hold a NUL only escaped (a backslash, then
    ``u0000``) and a form only as ``%00``: a body without either is passed at the cost
    of one search.
    """
    kind = content_type.split(";")[0].strip().lower()
    try:
        if kind == "application/json" and b"\\u0000" in body:
            try:
                data = json.loads(body)
            except ValueError:  # not JSON: the route answers that
                return None
            _check_nul(data)
        elif kind == "application/x-www-form-urlencoded" and b"%00" in body:
            for name, value in parse_qsl(body.decode("latin-1"), keep_blank_values=True):
                check_text(name, "a field's name")
                check_text(value, name)
    except PayloadError as refused:
        return str(refused)
    return None


def _check_nul(data: Any) -> None:
    """Raise the door's ``PayloadError`` for the first NUL in a request's JSON body."""
    if not isinstance(data, dict):
        check_payload(data, "the body", nul=True)
        return
    for key, value in data.items():
        check_text(key, "a field's name")
        if isinstance(value, str):
            check_text(value, key)
        else:
            check_payload(value, key, nul=True)


def _route_path(scope: Scope) -> str:
    """The path within the app (mounted under ``root_path``, the full path begins with it)."""
    path, root = str(scope["path"]), str(scope.get("root_path") or "").rstrip("/")
    return path[len(root) :] if root and path.startswith(root + "/") else path


def _replay(messages: list[Message], receive: Receive) -> Receive:
    async def replayed() -> Message:
        if messages:
            return messages.pop(0)
        return await receive()

    return replayed


async def _answer(scope: Scope, send: Send, status: int, detail: str) -> None:
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": detail[:120]})
        return
    kinds = {403: "forbidden", 413: "too_large", 415: "unsupported_media_type", 422: "invalid"}
    body = json.dumps({"error": kinds.get(status, "error"), "detail": detail}).encode()
    head: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    message: dict[str, Any] = {"type": "http.response.start", "status": status, "headers": head}
    await send(message)
    await send({"type": "http.response.body", "body": body})


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
