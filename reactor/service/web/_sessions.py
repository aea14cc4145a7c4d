"""Who is signed in to the web UI: opaque sessions, their cookie, and cross-site checks.

Signing in trades an API token for a session: a random id kept server-side (the token
itself is never stored nor put in a cookie) and sent back in an HTTP-only,
``SameSite=Strict`` cookie. Sessions live in the server's memory: they end when it
restarts, when the user signs out, or after :data:`LIFETIME` seconds unused.

Every state-changing form carries the session's CSRF token in a hidden field, checked
in constant time; with ``SameSite=Strict`` (a cross-site request has no session) and
the ``Origin`` check, a form posted from another site does nothing. The sign-in form
has its own token, in a short-lived cookie of its own, so no other site can sign a
browser in under its own token either.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import time
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from reactor.service._values import User

__all__ = [
    "COOKIE",
    "LIFETIME",
    "SIGN_IN_COOKIE",
    "Session",
    "Sessions",
    "same_origin",
    "set_cookie",
    "tokens_match",
]

COOKIE = "reactor_session"
"""The session cookie's name."""
SIGN_IN_COOKIE = "reactor_sign_in"
"""The sign-in form's own CSRF cookie."""
LIFETIME = 12 * 3600.0
"""Seconds a session lasts without being used."""
MAX_SESSIONS = 10_000
"""Sessions kept at most; the least recently used goes first."""


@dataclasses.dataclass
class Session:
    """A signed-in browser.

    Attributes:
        id: The opaque id its cookie carries.
        user: Who signed in (the actor of what they do through the UI).
        csrf: The token its forms carry.
        used_at: When it was last used (``time.monotonic()``).
        notices: Messages for the next page shown (``(kind, text)``, kind ``ok`` or ``error``).
    """

    id: str
    user: User
    csrf: str
    used_at: float
    notices: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def notify(self, kind: str, text: str) -> None:
        """Show ``text`` on the next page."""
        self.notices.append((kind, text))

    def take_notices(self) -> list[tuple[str, str]]:
        """The messages to show now (each is shown once)."""
        notices, self.notices = self.notices, []
        return notices


class Sessions:
    """The open sessions of one server, by id.

    Args:
        lifetime: Seconds a session lasts without being used.
    """

    def __init__(self, lifetime: float = LIFETIME) -> None:
        self.lifetime = lifetime
        self._open: dict[str, Session] = {}

    def open(self, user: User) -> Session:
        """A new session for ``user``."""
        if len(self._open) >= MAX_SESSIONS:
            oldest = min(self._open.values(), key=lambda session: session.used_at)
            del self._open[oldest.id]
        session = Session(
            secrets.token_urlsafe(32), user, secrets.token_urlsafe(32), time.monotonic()
        )
        self._open[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        """The session with this id, if it is open (using it keeps it open longer)."""
        session = self._open.get(session_id or "")
        if session is None:
            return None
        now = time.monotonic()
        if now - session.used_at > self.lifetime:
            del self._open[session.id]
            return None
        session.used_at = now
        return session

    def close(self, session_id: str | None) -> None:
        """End a session (signing out)."""
        self._open.pop(session_id or "", None)

    def __len__(self) -> int:
        return len(self._open)


def tokens_match(expected: str | None, given: str | None) -> bool:
    """Whether a form's CSRF token is the expected one (compared in constant time)."""
    if not expected or not given:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def same_origin(request: Request) -> bool:
    """Whether a form was posted from this site (a browser sends ``Origin`` with a POST)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return urlsplit(origin).netloc == host


def set_cookie(
    request: Request, response: Response, name: str, value: str, max_age: int | None
) -> None:
    """Set an HTTP-only, ``SameSite=Strict`` cookie (``Secure`` when served over HTTPS)."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
