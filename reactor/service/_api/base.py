"""What every route of the HTTP API shares: the caller, the service, and JSON errors.

Every error is ``{"error": <kind>, "detail": <what to do>}`` with its status: 401
(no or a wrong token), 403 (the caller's roles do not allow it: the sentence names the
role needed), 404 (unknown), 409 (conflict with the current state), 422
(invalid input, FastAPI's own validation included) and 503 (the service is stopping,
or its database or the job queue's Redis cannot be reached: said in one log line).
The library's errors map to these by kind, so a route raises what the service raised.

Each route declares the role it needs with one dependency (:data:`VIEWS`,
:data:`OPERATES`, :data:`APPROVES`, :data:`ADMINISTERS`, or :data:`PUBLIC` for the few
that need no principal), or takes the principal with its role (:data:`Viewer`,
:data:`Operator`, :data:`Approver`, :data:`Admin`): the caller is authenticated by the
app's authenticator, and refused ``403`` without the role (:mod:`reactor.service._access.roles`).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import fastapi
import sqlalchemy as sa
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection

from reactor._signals.diagnostics import log
from reactor._signals.door import check_text
from reactor._signals.settings import settings
from reactor.exceptions import (
    AgentConfigError,
    AgentConflictError,
    AgentNotFoundError,
    BackpressureError,
    CapabilityError,
    EntryNotFoundError,
    GraphChangedError,
    ObjectNotFoundError,
    ObjectValidationError,
    PayloadError,
    PermissionDeniedError,
    PromptNotFoundError,
    ReactorError,
    ReplyValidationError,
    RetryRefusedError,
    RunClosedError,
    RunFinishedError,
    RunNotFoundError,
    RunSuspendedError,
    ServiceConfigError,
    ServiceStateError,
    SignalNameError,
    StateValidationError,
    SuggestionNotFoundError,
    SuggestionResolvedError,
    SuggestionStaleError,
    TemplateError,
)
from reactor.service._access.authenticators import Authenticator, NotAuthenticated
from reactor.service._access.roles import RoleGate, denied
from reactor.service._api.guard import CALLER
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.values import Principal, Role

__all__ = [
    "ADMINISTERS",
    "APPROVES",
    "CHECKS",
    "MAX_CURSOR",
    "OPERATES",
    "PUBLIC",
    "VIEWS",
    "Admin",
    "ApiError",
    "Approver",
    "Caller",
    "Decider",
    "Decides",
    "Operator",
    "Public",
    "Requires",
    "Service",
    "State",
    "Viewer",
    "authenticate",
    "error_response",
    "install_errors",
    "no_nul",
    "principal_of",
    "route_name",
    "state_of",
]

MAX_CURSOR = 2**63 - 1
"""The largest ``seq``, id or cursor a request may give: the databases' 64-bit integers.

A larger one is ``422`` where it is read (``fastapi.Query(le=MAX_CURSOR)``), never an
overflow in the database."""

KINDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    422: "invalid",
    429: "too_many_requests",
    500: "internal",
    503: "unavailable",
}
"""The ``error`` of each status."""

STATUSES: tuple[tuple[type[ReactorError], int], ...] = (
    (ObjectNotFoundError, 404),
    (SuggestionNotFoundError, 404),
    (AgentNotFoundError, 404),
    (RunNotFoundError, 404),
    (EntryNotFoundError, 404),
    (PromptNotFoundError, 404),
    (PermissionDeniedError, 403),
    (SuggestionResolvedError, 409),
    (SuggestionStaleError, 409),
    (AgentConflictError, 409),
    (RunFinishedError, 409),
    (RunClosedError, 409),
    (RunSuspendedError, 409),
    (RetryRefusedError, 409),
    (GraphChangedError, 409),
    (CapabilityError, 409),
    (ServiceStateError, 503),
    (BackpressureError, 503),
    (ObjectValidationError, 422),
    (PayloadError, 422),
    (AgentConfigError, 422),
    (SignalNameError, 422),
    (ReplyValidationError, 422),
    (ServiceConfigError, 422),
    (StateValidationError, 422),
    (TemplateError, 422),
)
"""The status of each error the service raises on purpose (the first match wins)."""


BACKPRESSURE_RETRY = 1
"""Seconds a client is told to wait while a run's store catches up (``Retry-After``)."""

RETRY_AFTER = 5
"""Seconds a client is told to wait while a database or Redis is unreachable (``Retry-After``)."""

_REDIS_AWAY = ("ConnectionError", "TimeoutError", "BusyLoadingError")
"""The errors of redis-py that say the job queue's Redis is away (not a bug)."""


def unreachable(exc: BaseException) -> str | None:
    """What ``exc`` says is away, if anything.

    ``"redis"`` (the job queue's, scale-out), ``"database"`` (the service's, the log's),
    or ``None`` when it says neither.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = type(current)
        if kind.__module__.startswith("redis.") and kind.__name__ in _REDIS_AWAY:
            return "redis"
        if isinstance(current, sa.exc.OperationalError | sa.exc.InterfaceError):
            return "database"
        if isinstance(current, sa.exc.DBAPIError) and current.connection_invalidated:
            return "database"
        if kind.__module__.startswith("psycopg") and kind.__name__ in (
            "OperationalError",
            "InterfaceError",
            "PoolTimeout",
        ):
            return "database"
        if isinstance(current, ConnectionError | TimeoutError):
            return "database"
        current = current.__cause__ or current.__context__
    return None


def _redis_away() -> tuple[type[Exception], ...]:
    """redis-py's errors that say Redis is away.

    None without a job queue (``REACTOR_REDIS_URL``), so a service without one never
    imports redis-py, nor without the ``scaleout`` extra.
    """
    if settings().redis_url is None:
        return ()
    try:
        from redis import exceptions
    except ImportError:
        return ()
    return tuple(getattr(exceptions, name) for name in _REDIS_AWAY)


class ApiError(Exception):
    """An HTTP error of the API, answered as ``{error, detail}``."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


_AWAY = {
    "database": "The service's database cannot be reached right now",
    "redis": "The job queue (Redis, REACTOR_REDIS_URL) cannot be reached right now",
}


def _unavailable(request: fastapi.Request, exc: BaseException, what: str) -> JSONResponse:
    """The 503 of a database or Redis that is away, said in one log line (no traceback)."""
    error = (str(exc) or type(exc).__name__).splitlines()[0]
    log("reactor.service", "warning", f"{what} unreachable", path=request.url.path, error=error)
    return error_response(
        503,
        f"{_AWAY[what]}; nothing was changed. Try again in {RETRY_AFTER} seconds.",
        {"Retry-After": str(RETRY_AFTER)},
    )


def error_response(status: int, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The JSON answer of an error."""
    kind = KINDS.get(status, "error")
    return JSONResponse({"error": kind, "detail": detail}, status_code=status, headers=headers)


def _location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc if part not in ("body", "query", "path")) or "body"


def install_errors(app: fastapi.FastAPI) -> None:
    """Answer every error as ``{error, detail}``."""

    @app.exception_handler(ApiError)
    async def api_error(request: fastapi.Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_response(exc.status, exc.detail, headers)

    @app.exception_handler(ReactorError)
    async def reactor_error(request: fastapi.Request, exc: ReactorError) -> JSONResponse:
        status = next((code for kind, code in STATUSES if isinstance(exc, kind)), None)
        away = None if status is not None else unreachable(exc)
        if away is not None:  # the signal store's database (or Redis) is away
            return _unavailable(request, exc, away)
        later = {"Retry-After": str(BACKPRESSURE_RETRY)} if status == 503 else None
        return error_response(status or 500, str(exc), later)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: fastapi.Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{_location(tuple(e['loc']))}: {e['msg']}" for e in exc.errors()]
        return error_response(422, f"The request is invalid: {'; '.join(problems)}.")

    async def away(request: fastapi.Request, exc: Exception) -> JSONResponse:
        # Handled here, not by the catch-all below: its answer is sent and the error
        # raised again, which drops the client's kept-alive connection.
        what = unreachable(exc)
        if what is not None:
            return _unavailable(request, exc, what)
        log("reactor.service", "error", "request failed", path=request.url.path, error=repr(exc))
        return error_response(500, "The service failed on this request; see its log.")

    app.add_exception_handler(sa.exc.SQLAlchemyError, away)
    app.add_exception_handler(OSError, away)
    for kind in _redis_away():  # the job queue's Redis (scale-out)
        app.add_exception_handler(kind, away)

    @app.exception_handler(Exception)
    async def unexpected(request: fastapi.Request, exc: Exception) -> JSONResponse:
        what = unreachable(exc)
        if what is not None:
            return _unavailable(request, exc, what)
        return error_response(500, "The service failed on this request; see its log.")

    @app.exception_handler(HTTPException)
    async def http_error(request: fastapi.Request, exc: HTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        return error_response(exc.status_code, detail, dict(exc.headers or {}) or None)


@dataclasses.dataclass
class State:
    """What the app keeps: the service, who authenticates its callers, whether it is stopping."""

    service: ReactionService
    authenticator: Authenticator
    stopping: Any  # an asyncio.Event, made in the server's event loop


def state_of(conn: HTTPConnection) -> State:
    """The app's :class:`State`."""
    state: State = conn.app.state.reactor
    return state


def _service(request: fastapi.Request) -> ReactionService:
    return state_of(request).service


_bearer = HTTPBearer(auto_error=False, description="An API token: `Authorization: Bearer <token>`.")


async def principal_of(conn: HTTPConnection) -> Principal:
    """The principal a request (or a WebSocket) comes from, as the app's authenticator says.

    Raises:
        ApiError: 401, when the authenticator refuses it (saying why), or knows no one.
    """
    try:
        principal = await state_of(conn).authenticator.authenticate(conn)
    except NotAuthenticated as refused:
        raise ApiError(401, refused.detail) from None
    if principal is None:
        raise ApiError(401, "The API token is not valid; ask the operator for one.")
    setattr(conn.state, CALLER, principal.user)  # the access line names who called
    return principal


async def authenticate(
    request: fastapi.Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, fastapi.Depends(_bearer)],
) -> Principal:
    """The calling principal: a dependency of every ``/api`` route.

    The authenticator reads the request; ``credentials`` documents the bearer scheme in
    the OpenAPI description.
    """
    return await principal_of(request)


def no_nul(request: fastapi.Request) -> None:
    """Refuse a NUL in any path or query parameter: 422 naming it, on every database."""
    for name, value in (*request.path_params.items(), *request.query_params.multi_items()):
        if isinstance(value, str):
            check_text(value, name)


CHECKS = [fastapi.Depends(authenticate), fastapi.Depends(no_nul)]
"""The dependencies of every ``/api`` router: the caller's token, and no NUL anywhere."""

Caller = Annotated[Principal, fastapi.Depends(authenticate)]
"""The calling principal (the route answers 401 without a valid credential)."""


def route_name(conn: HTTPConnection) -> str:
    """What a request asked for, as a refusal names it: ``POST /api/runs/{run_id}/abort``."""
    route = conn.scope.get("route")
    path = getattr(route, "path", None) or conn.url.path
    method = conn.scope.get("method", "WEBSOCKET")
    return f"{method} {path}"


class Requires(RoleGate):
    """The API's gate: the caller's principal, refused ``403`` without the role."""

    async def __call__(self, request: fastapi.Request, principal: Caller) -> Principal:
        """The principal, once it is known to hold the role."""
        if self.role is not None and not principal.may(self.role):
            refused = denied(principal, self.role, route_name(request))
            raise ApiError(403, str(refused))
        return principal


class Decides(RoleGate):
    """The gate of a decision on a suggestion: declared ``approver``, decided by the agent.

    Who may decide is the suggestion's agent's ``Approval`` (``by``: roles or users; an
    ``admin`` always): the service refuses the principal (``403``), not the route.
    """

    def __init__(self) -> None:
        super().__init__("approver")

    async def __call__(self, principal: Caller) -> Principal:
        """The principal (the decision checks it against the agent's ``Approval``)."""
        return principal


class Public(RoleGate):
    """The gate of a route anyone may call, without a principal (``/healthz``, ``/docs``)."""

    def __init__(self) -> None:
        super().__init__(None)

    async def __call__(self) -> None:
        """Nothing to check."""


def _gate(role: Role) -> Any:
    return fastapi.Depends(Requires(role))


VIEWS = _gate("viewer")
"""A route that reads (every principal may)."""
OPERATES = _gate("operator")
"""A route that writes objects or drives runs."""
APPROVES = _gate("approver")
"""A route that decides on suggestions (the agent's ``Approval`` decides further)."""
ADMINISTERS = _gate("admin")
"""A route that changes agents, schedules or the processing log."""
PUBLIC = fastapi.Depends(Public())
"""A route that needs no principal."""

Viewer = Annotated[Principal, VIEWS]
"""The principal of a route that reads."""
Operator = Annotated[Principal, OPERATES]
"""The principal of a route that writes objects or drives runs."""
Approver = Annotated[Principal, APPROVES]
"""The principal of a route that decides on suggestions."""
Admin = Annotated[Principal, ADMINISTERS]
"""The principal of a route that changes agents, schedules or the processing log."""
Decider = Annotated[Principal, fastapi.Depends(Decides())]
"""The principal of a decision on a suggestion (the agent's ``Approval`` says who may)."""

Service = Annotated[ReactionService, fastapi.Depends(_service)]
"""The service the app serves."""
