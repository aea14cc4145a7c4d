"""What every page of the web UI shares: templates, the signed-in session, forms.

Pages are Jinja2 templates shipped in the package (``templates/``), with one CSS file
and one small script (``static/``); nothing is loaded from elsewhere. A page needs a
session (:func:`signed_in`; without one the browser is sent to the sign-in form), and
a form that changes something needs the session's CSRF token too (:func:`form_session`).

Each route declares the role it needs (:class:`PageGate` for a page, :class:`FormGate`
for a form: the aliases :data:`Viewing`, :data:`Operating`, :data:`Administering`,
:data:`Deciding`, :data:`Approving`, :data:`Signed`); a session whose principal lacks
it gets a ``403`` page naming the role (:class:`Forbidden`), and pages show only the
controls the principal may use (``may(role)`` in the templates).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import weakref
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import Annotated, Any
from urllib.parse import urlencode

import fastapi
import jinja2
from starlette.requests import HTTPConnection, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from reactor._graph.reactive import Reactive
from reactor._signals.signal import iso_time
from reactor.service._access.roles import RoleGate, denied
from reactor.service._api.base import route_name, state_of
from reactor.service._hosting.service import ReactionService
from reactor.service._objects.values import Role
from reactor.service.web._drawing import Drawing
from reactor.service.web._sessions import COOKIE, Session, Sessions, same_origin, tokens_match

__all__ = [
    "Administering",
    "Approving",
    "Deciding",
    "Forbidden",
    "Forking",
    "FormGate",
    "FormRejected",
    "Operating",
    "PageGate",
    "SignInNeeded",
    "Signed",
    "Viewing",
    "Web",
    "back",
    "form_session",
    "json_field",
    "json_text",
    "page",
    "root_of",
    "signed_in",
    "web_of",
    "when",
]

_TEMPLATES = resources.files("reactor.service.web") / "templates"


def when(value: float | datetime | str | None) -> str:
    """A moment as ``YYYY-MM-DD HH:MM:SS`` UTC (``-`` when unknown)."""
    if value is None or value == "":
        return "-"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if isinstance(value, int | float):
        value = datetime.fromtimestamp(value, UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _seconds(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:.2f} s" if value < 60 else f"{int(value // 60)} min {value % 60:.0f} s"


def _money(value: float | None) -> str:
    """Dollars, or ``unknown`` when a price is unknown (an unknown price is not a zero)."""
    return "unknown" if value is None else f"${value:.4f}"


def _ago(value: float | None) -> str:
    """How long ago a moment (UNIX seconds) was, in whole seconds."""
    if value is None:
        return "-"
    return f"{max(0.0, time.time() - value):.0f} s ago"


def json_text(value: Any, indent: int | None = 2) -> str:
    """``value`` (JSON data) as JSON for a page: pretty, keys sorted (the ``json`` filter)."""
    return json.dumps(value, indent=indent, sort_keys=True, default=str, ensure_ascii=False)


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json_text(value, None)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def json_field(text: str) -> Any:
    """The JSON value a form's field holds (``None`` when it is left empty).

    Raises:
        ValueError: It is not JSON; the message says where, and what to write.
    """
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"The input is not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}). "
            'Write a JSON value, e.g. {"symbol": "NVDA"}, 42 or "text", or leave it empty '
            "for none."
        ) from None


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: (_TEMPLATES / name).read_text()),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        when=when,
        iso=iso_time,
        seconds=_seconds,
        money=_money,
        json=json_text,
        short=_short,
        ago=_ago,
    )
    return environment


@dataclasses.dataclass
class Web:
    """What the UI keeps while it is served: its templates, sessions, and run labels."""

    sessions: Sessions = dataclasses.field(default_factory=Sessions)
    templates: jinja2.Environment = dataclasses.field(default_factory=_environment)
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    """The label of each run the list showed (from its first signal: it never changes)."""
    drawings: weakref.WeakKeyDictionary[Reactive, Drawing] = dataclasses.field(
        default_factory=weakref.WeakKeyDictionary
    )
    """Graphs drawn (a graph does not change: it is drawn once, and forgotten with it)."""
    prefix: str = ""
    """Where the app's URLs begin when no server or parent app says (``root_path``)."""


def web_of(conn: HTTPConnection) -> Web:
    """The UI's :class:`Web`."""
    web: Web = conn.app.state.web
    return web


def root_of(conn: HTTPConnection) -> str:
    """The path the app's own URLs begin with (``""`` when it is served at ``/``).

    Mounted in another app (``app.mount("/reactor", ...)``), or behind a server that
    says so, it is the request's ``root_path``; otherwise ``create_app(prefix=...)``.
    """
    root = str(conn.scope.get("root_path") or web_of(conn).prefix)
    return root.rstrip("/")


class SignInNeeded(Exception):
    """A page was asked for without a session: the browser goes to the sign-in form."""


class FormRejected(Exception):
    """A form came without the session's CSRF token, or from another site (403)."""


async def signed_in(request: Request) -> Session:
    """The session of the browser asking (a dependency of every page but sign-in)."""
    session = await web_of(request).sessions.get(request.cookies.get(COOKIE))
    if session is None:
        raise SignInNeeded
    return session


async def form_session(request: Request) -> Session:
    """The session of a form that changes something, once its CSRF token is checked."""
    session = await signed_in(request)
    form = await request.form()
    given = form.get("csrf")
    if not same_origin(request) or not tokens_match(
        session.csrf, given if isinstance(given, str) else None
    ):
        raise FormRejected
    return session


class Forbidden(Exception):
    """A signed-in principal asked for what its roles do not allow (a ``403`` page)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _check(request: Request, session: Session, role: Role | None) -> None:
    if role is not None and not session.principal.may(role):
        raise Forbidden(str(denied(session.principal, role, route_name(request))))


class PageGate(RoleGate):
    """The web UI's gate of a page: a signed-in session whose principal holds the role."""

    async def __call__(self, request: Request) -> Session:
        """The session, once its principal is known to hold the role."""
        session = await signed_in(request)
        _check(request, session, self.role)
        return session


class FormGate(RoleGate):
    """The web UI's gate of a form: the session's CSRF token, and the role.

    ``decided_later``: the role is the default of a decision whose own rules (an
    agent's ``Approval``) say who may make it: the form is refused there, not here.
    """

    def __init__(self, role: Role, *, decided_later: bool = False) -> None:
        super().__init__(role)
        self.decided_later = decided_later

    async def __call__(self, request: Request) -> Session:
        """The session, once its form and its principal's role are checked."""
        session = await form_session(request)
        _check(request, session, None if self.decided_later else self.role)
        return session


Viewing = Annotated[Session, fastapi.Depends(PageGate("viewer"))]
"""The signed-in session of a page (every principal may read)."""
Forking = Annotated[Session, fastapi.Depends(PageGate("operator"))]
"""The signed-in session of a page that is a form an operator sends (a fork's)."""
Signed = Annotated[Session, fastapi.Depends(FormGate("viewer"))]
"""The session of a form every signed-in principal may send (signing out)."""
Operating = Annotated[Session, fastapi.Depends(FormGate("operator"))]
"""The session of a form that writes objects or drives runs."""
Deciding = Annotated[Session, fastapi.Depends(FormGate("approver", decided_later=True))]
"""The session of a decision on a suggestion (the agent's ``Approval`` says who may)."""
Approving = Annotated[Session, fastapi.Depends(FormGate("approver"))]
"""The session of a form that rejects many suggestions: an approver's (each agent's
``Approval`` decides further, suggestion by suggestion)."""
Administering = Annotated[Session, fastapi.Depends(FormGate("admin"))]
"""The session of a form that changes agents or the processing log."""


def service_of(conn: HTTPConnection) -> ReactionService:
    """The service the UI shows."""
    return state_of(conn).service


def page(
    request: Request,
    template: str,
    session: Session | None,
    code: int = 200,
    *,
    fragment: bool = False,
    **context: Any,
) -> HTMLResponse:
    """A page rendered from ``template``, with the session's user, CSRF token and notices.

    A ``fragment`` (a part of a page its script fetches) leaves the notices for the next page.
    """
    html = (
        web_of(request)
        .templates.get_template(template)
        .render(
            request=request,
            root=root_of(request),
            user=session.user if session else None,
            principal=session.principal if session else None,
            may=session.principal.may if session else _nobody,
            csrf=session.csrf if session else "",
            notices=session.take_notices() if session and not fragment else [],
            **context,
        )
    )
    return HTMLResponse(html, status_code=code, headers=_HEADERS)


def _nobody(role: str) -> bool:
    """What a page shown without a session may do: nothing."""
    return False


_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def back(request: HTTPConnection, path: str, query: Mapping[str, str] | None = None) -> Response:
    """Send the browser on to the app's ``path`` after a form (303: the next request is a GET)."""
    url = root_of(request) + path
    if query:
        url = f"{url}?{urlencode(query)}"
    return RedirectResponse(url, status_code=303)
