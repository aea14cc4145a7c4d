"""Who a request comes from: the :class:`Authenticator` protocol, and the one in use.

Every request of the HTTP API, every WebSocket and the web UI's sign-in are
authenticated by one authenticator into a :class:`~reactor.service.Principal` (an id,
its roles, and the authenticator's name, recorded with every decision it makes), or
``None``: the request is answered ``401``. Built in:

* :class:`~reactor.service.TokenAuth`: the API tokens (``REACTOR_API_TOKENS``,
  ``REACTOR_API_TOKENS_FILE``);
* :class:`~reactor.service.JWTAuth`: bearer JWTs (``REACTOR_AUTH=jwt``);
* :class:`LocalAuth`: a service with neither, which listens on a loopback address
  only: every request is the person on this machine, ``local``, an ``admin``.

An application passes its own to ``create_app(authenticator=...)``: any object with
``async authenticate(request) -> Principal | None`` (``request`` is Starlette's
``HTTPConnection``: a request or a WebSocket).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from starlette.requests import HTTPConnection

from reactor.service._objects.values import Principal

__all__ = [
    "LOCAL_USER",
    "Authenticator",
    "BearerAuth",
    "LocalAuth",
    "NotAuthenticated",
    "bearer_token",
]

LOCAL_USER = "local"
"""Who calls a service that has no tokens (it listens on a loopback address only)."""


class NotAuthenticated(Exception):
    """A credential was presented and refused: ``detail`` says why, in reactor's words.

    An authenticator raises it for a ``401`` that says more than "no valid token" (an
    expired JWT, one for another audience); returning ``None`` gives the general one.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@runtime_checkable
class Authenticator(Protocol):
    """Turns a request into the principal it comes from (``None``: not authenticated)."""

    async def authenticate(self, request: HTTPConnection) -> Principal | None:
        """The principal ``request`` comes from, or ``None`` (it is answered ``401``).

        Raises:
            NotAuthenticated: A credential was presented and is refused, for a reason
                the ``401`` says.
        """
        ...


def bearer_token(request: HTTPConnection) -> str | None:
    """The token of the request's ``Authorization: Bearer <token>`` header, if any."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


class BearerAuth:
    """An authenticator of bearer tokens (API tokens, JWTs): the header, or a form's token.

    The web UI's sign-in form takes the same token as the header: :meth:`principal`.
    """

    name = "bearer"
    """What it records as the ``authenticator`` of its principals."""

    async def authenticate(self, request: HTTPConnection) -> Principal | None:
        """The principal of the request's bearer token (``None`` without one).

        Raises:
            NotAuthenticated: The token is presented and refused.
        """
        token = bearer_token(request)
        if token is None:
            raise NotAuthenticated(
                "This route needs an API token: send the header `Authorization: Bearer <token>`."
            )
        return await self.principal(token)

    async def principal(self, token: str) -> Principal | None:
        """The principal ``token`` stands for, or ``None``."""
        raise NotImplementedError

    @property
    def configured(self) -> bool:
        """Whether it can authenticate anyone (a token list that is empty cannot)."""
        return True


class LocalAuth:
    """A service without tokens (loopback only): every request is ``local``, an admin.

    It is the person on this machine, who could read the database anyway; ``reactor
    serve`` refuses to listen on another address without tokens.
    """

    name = "local"

    def __init__(self) -> None:
        self._local = Principal(LOCAL_USER, frozenset({"admin"}), self.name)

    async def authenticate(self, request: HTTPConnection) -> Principal | None:
        """Always the local principal."""
        return self._local

    def __repr__(self) -> str:
        return "<LocalAuth: every request is the local admin>"
