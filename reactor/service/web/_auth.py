"""Signing in and out of the web UI.

``GET /`` shows the sign-in form (or the runs, to a signed-in browser); posting it
with a valid API token (or JWT) opens a session (:mod:`._sessions`) for the principal
the token stands for, with its roles. With no tokens configured (a service on a
loopback address) any token signs in as the user ``local``, an ``admin``, as the API
lets every request act as ``local`` then. An application's own authenticator (one that
takes no bearer token) is asked about the sign-in request itself: its cookies or the
headers of the proxy in front.
"""

from __future__ import annotations

import secrets
from typing import Annotated

import fastapi
from starlette.requests import Request
from starlette.responses import Response

from reactor.service._access.authenticators import Authenticator, BearerAuth, NotAuthenticated
from reactor.service._api.base import PUBLIC, state_of
from reactor.service._objects.values import Principal
from reactor.service.web._render import Signed, back, page, root_of, web_of
from reactor.service.web._sessions import (
    COOKIE,
    LIFETIME,
    SIGN_IN_COOKIE,
    same_origin,
    set_cookie,
    tokens_match,
)

__all__ = ["router"]

router = fastapi.APIRouter(include_in_schema=False)

_SIGN_IN_AGE = 3600
"""Seconds a sign-in form stays valid."""


def _path(request: Request) -> str:
    """The cookies' path: the UI's root (``/`` unless it is mounted under a prefix)."""
    return root_of(request) or "/"


def _sign_in_form(request: Request, code: int = 200, error: str | None = None) -> Response:
    form_token = secrets.token_urlsafe(32)
    response = page(request, "sign_in.html", None, code, form_token=form_token, error=error)
    set_cookie(request, response, SIGN_IN_COOKIE, form_token, _SIGN_IN_AGE, _path(request))
    return response


@router.get("/", dependencies=[PUBLIC])
async def home(request: Request) -> Response:
    """The sign-in form, or the runs for a signed-in browser."""
    if await web_of(request).sessions.get(request.cookies.get(COOKIE)) is not None:
        return back(request, "/runs")
    return _sign_in_form(request)


async def _principal(
    authenticator: Authenticator, token: str, request: Request
) -> Principal | None:
    """Who the sign-in form's token stands for.

    An authenticator of no bearer tokens is asked who the sign-in request comes from.

    Raises:
        NotAuthenticated: The token is refused, for a reason the form shows.
    """
    if isinstance(authenticator, BearerAuth):
        return await authenticator.principal(token) if token else None
    return await authenticator.authenticate(request)


@router.post("/", dependencies=[PUBLIC])
async def sign_in(
    request: Request,
    token: Annotated[str, fastapi.Form()] = "",
    csrf: Annotated[str, fastapi.Form()] = "",
) -> Response:
    """Trade an API token for a session cookie."""
    if not same_origin(request) or not tokens_match(request.cookies.get(SIGN_IN_COOKIE), csrf):
        return _sign_in_form(request, 403, "The form expired or came from another site; try again.")
    try:
        principal = await _principal(state_of(request).authenticator, token.strip(), request)
    except NotAuthenticated as refused:
        return _sign_in_form(request, 401, refused.detail)
    if principal is None:
        return _sign_in_form(request, 401, "That token is not valid; ask the operator for one.")
    session = await web_of(request).sessions.open(principal)
    response = back(request, "/runs")
    set_cookie(request, response, COOKIE, session.id, int(LIFETIME), _path(request))
    response.delete_cookie(SIGN_IN_COOKIE, path=_path(request))
    return response


@router.post("/sign-out")
async def sign_out(request: Request, session: Signed) -> Response:
    """End the session and clear its cookie."""
    await web_of(request).sessions.close(session.id)
    response = back(request, "/")
    response.delete_cookie(COOKIE, path=_path(request), httponly=True, samesite="strict")
    return response
