"""Who is signed in to the web UI: opaque sessions, their cookie, and cross-site checks.

Signing in trades an API token (or a JWT) for a session: a random id kept server-side
(the token itself is never stored nor put in a cookie), which carries the principal the
token stood for (its id, roles and authenticator, as they were at sign-in; a session
made before sessions kept roles is signed out), sent back in an HTTP-only,
``SameSite=Strict`` cookie. Sessions are kept in the service's database (only a hash
of the id), so every serving process knows them and a restart keeps them; they end when
the user signs out, or after :data:`LIFETIME` seconds unused.

Every state-changing form carries the session's CSRF token in a hidden field, checked
in constant time; with ``SameSite=Strict`` (a cross-site request has no session) and
the ``Origin`` check, a form posted from another site does nothing. The sign-in form
has its own token, in a short-lived cookie of its own, so no other site can sign a
browser in under its own token either.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import secrets
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import sqlalchemy as sa
from starlette.requests import Request
from starlette.responses import Response

from reactor.service._objects.db import Database
from reactor.service._objects.schema import web_sessions
from reactor.service._objects.values import ROLES, Principal, User

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
"""Sessions kept at most in memory (without a database); the least recently used goes first."""
TOUCH_EVERY = 60.0
"""Seconds between two writes of a session's last use to the database."""


@dataclasses.dataclass
class Session:
    """A signed-in browser.

    Attributes:
        id: The opaque id its cookie carries.
        principal: Who signed in, with the roles they held then.
        csrf: The token its forms carry.
        used_at: When it was last used (UNIX seconds).
        notices: Messages for the next page shown (``(kind, text)``, kind ``ok`` or ``error``).
    """

    id: str
    principal: Principal
    csrf: str
    used_at: float
    notices: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    @property
    def user(self) -> User:
        """The actor of what they do through the UI."""
        return self.principal.user

    def notify(self, kind: str, text: str) -> None:
        """Show ``text`` on the next page."""
        self.notices.append((kind, text))

    def take_notices(self) -> list[tuple[str, str]]:
        """The messages to show now (each is shown once)."""
        notices = self.notices.copy()
        self.notices.clear()
        return notices


class Sessions:
    """The open sessions, in the service's database or in this process's memory.

    In the database every serving process shares them, and they outlive a restart.
    Notices wait in the memory of the process that made them, for the next page it
    shows that browser.

    Args:
        db: The service's database (``web_sessions``); None keeps sessions in memory.
        lifetime: Seconds a session lasts without being used.
    """

    def __init__(self, db: Database | None = None, lifetime: float = LIFETIME) -> None:
        self.db = db
        self.lifetime = lifetime
        self._open: dict[str, Session] = {}  # without a database
        self._notices: dict[str, list[tuple[str, str]]] = {}

    async def open(self, principal: Principal) -> Session:
        """A new session for ``principal``."""
        session = Session(
            secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32), time.time()
        )
        if self.db is None:
            if len(self._open) >= MAX_SESSIONS:
                oldest = min(self._open.values(), key=lambda open: open.used_at)
                del self._open[oldest.id]
            self._open[session.id] = session
            return session
        now = datetime.now(UTC)
        async with self.db.write() as conn:
            await conn.execute(
                web_sessions.delete().where(web_sessions.c.used_at < now - self._lifetime)
            )
            await conn.execute(
                web_sessions.insert().values(
                    id_hash=_hash(session.id),
                    user_id=principal.id,
                    csrf=session.csrf,
                    created_at=now,
                    used_at=now,
                    roles="+".join(sorted(principal.roles)),
                    authenticator=principal.authenticator,
                )
            )
        return self._with_notices(session)

    async def get(self, session_id: str | None) -> Session | None:
        """The session with this id, if it is open (using it keeps it open longer)."""
        if not session_id:
            return None
        if self.db is None:
            session = self._open.get(session_id)
            if session is None or self._expired(session.used_at):
                self._open.pop(session_id, None)
                return None
            session.used_at = time.time()
            return session
        found = sa.select(web_sessions).where(web_sessions.c.id_hash == _hash(session_id))
        row = await self.db.run_read(lambda conn: conn.execute(found).first())
        if row is None:
            return None
        used_at = row.used_at.timestamp()
        if self._expired(used_at) or row.roles is None:  # no roles: made before they were kept
            await self.close(session_id)
            return None
        if time.time() - used_at > TOUCH_EVERY:
            async with self.db.write() as conn:
                await conn.execute(
                    web_sessions.update()
                    .where(web_sessions.c.id_hash == row.id_hash)
                    .values(used_at=datetime.now(UTC))
                )
        principal = Principal(row.user_id, _roles(row.roles), row.authenticator or "token")
        return self._with_notices(Session(session_id, principal, row.csrf, used_at))

    async def close(self, session_id: str | None) -> None:
        """End a session (signing out)."""
        if not session_id:
            return
        self._open.pop(session_id, None)
        self._notices.pop(session_id, None)
        if self.db is not None:
            async with self.db.write() as conn:
                await conn.execute(
                    web_sessions.delete().where(web_sessions.c.id_hash == _hash(session_id))
                )

    @property
    def _lifetime(self) -> timedelta:
        return timedelta(seconds=self.lifetime)

    def _expired(self, used_at: float) -> bool:
        return time.time() - used_at > self.lifetime

    def _with_notices(self, session: Session) -> Session:
        """Give ``session`` the notices this process keeps for it."""
        if len(self._notices) >= MAX_SESSIONS:
            self._notices = {key: value for key, value in self._notices.items() if value}
        session.notices = self._notices.setdefault(session.id, [])
        return session

    def __len__(self) -> int:
        """Sessions kept in this process's memory (none when they are in a database)."""
        return len(self._open)


def _roles(stored: str) -> frozenset[str]:
    """The roles a session's row keeps (``+``-separated; unknown names are dropped)."""
    return frozenset(role for role in stored.split("+") if role in ROLES)


def _hash(session_id: str) -> str:
    """What the database keeps of a session id."""
    return hashlib.sha256(session_id.encode()).hexdigest()


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
    request: Request,
    response: Response,
    name: str,
    value: str,
    max_age: int | None,
    path: str = "/",
) -> None:
    """Set an HTTP-only, ``SameSite=Strict`` cookie (``Secure`` when served over HTTPS).

    ``path`` is where the UI is (``/reactor`` when mounted there): only it gets the cookie.
    """
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=path,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
