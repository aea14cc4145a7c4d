"""``TokenAuth``: API tokens, each standing for a user and the roles they hold.

Tokens come from ``REACTOR_API_TOKENS="token1:alice,token2:bob:approver"`` or a tokens
file (one entry a line; blank lines and ``#`` comments are skipped). An entry is
``token:user`` (the user is an ``operator``) or ``token:user:role+role`` (any of
``viewer``, ``operator``, ``approver``, ``admin``); neither tokens nor user ids hold a
``:``. A request's token is compared with every configured one in constant time (their
SHA-256 digests, with :func:`hmac.compare_digest`, no early exit), and tokens are never
logged or shown: a :class:`TokenAuth` prints as how many it holds.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from pathlib import Path

from reactor._signals.settings import token_entries, token_entry_problem
from reactor.exceptions import ServiceConfigError
from reactor.service._access.authenticators import BearerAuth
from reactor.service._objects.values import NAME_LENGTH, ROLES, Principal

__all__ = ["DEFAULT_ROLES", "TokenAuth"]

DEFAULT_ROLES = frozenset({"operator"})
"""The roles of a token whose entry names none."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _roles(given: str | Iterable[str] | None, user: str) -> frozenset[str]:
    if given is None:
        return DEFAULT_ROLES
    names = given.split("+") if isinstance(given, str) else list(given)
    roles = frozenset(name.strip() for name in names if name.strip())
    unknown = sorted(roles - set(ROLES))
    if unknown or not roles:
        raise ServiceConfigError(
            f"The API token of user {user!r} names the unknown role(s) "
            f"{', '.join(repr(role) for role in unknown) or 'none'}; the roles are "
            f"{', '.join(ROLES)} (join several with '+', e.g. s3cret:{user}:approver+operator)."
        )
    return roles


class TokenAuth(BearerAuth):
    """The API's bearer tokens, and the principals they stand for.

    Args:
        pairs: ``{token: user_id}`` or ``{token: (user_id, roles)}``; a user without
            roles is an ``operator``.

    Raises:
        ServiceConfigError: A token or a user id is empty, a user id has a ``:`` or is
            longer than 200 characters, or a role is unknown.
    """

    name = "token"

    def __init__(
        self, pairs: Mapping[str, str | tuple[str, str | Iterable[str]]] | None = None
    ) -> None:
        self._pairs: list[tuple[bytes, Principal]] = []
        for token, given in (pairs or {}).items():
            user, roles = (given, None) if isinstance(given, str) else given
            self._add(token, user, roles)

    def _add(self, token: str, user: str, roles: str | Iterable[str] | None) -> None:
        if not token.strip() or not user.strip() or ":" in user:
            raise ServiceConfigError(
                "Each API token needs a user: write token:user_id entries (user ids "
                "without ':'), e.g. REACTOR_API_TOKENS='s3cret:alice,0ther:bob:approver'."
            )
        if len(user.strip()) > NAME_LENGTH:
            raise ServiceConfigError(
                f"The API token of user {user.strip()[:40]!r}... names a user id of "
                f"{len(user.strip())} characters; at most {NAME_LENGTH} are kept."
            )
        principal = Principal(user.strip(), _roles(roles, user.strip()), self.name)
        self._pairs.append((_digest(token.strip()), principal))

    @classmethod
    def parse(cls, text: str, *, where: str = "REACTOR_API_TOKENS") -> TokenAuth:
        """Read ``token:user[:role+role]`` entries separated by commas or new lines.

        Raises:
            ServiceConfigError: An entry is malformed or names an unknown role.
        """
        tokens = cls()
        for number, entry in enumerate(token_entries(text), start=1):
            problem = token_entry_problem(entry)
            if problem is not None:
                raise ServiceConfigError(f"Entry {number} of {where} {problem}.")
            token, user, *roles = entry.split(":")
            tokens._add(token, user, roles[0] if roles else None)
        return tokens

    @classmethod
    def read(cls, path: Path | str) -> TokenAuth:
        """Read a tokens file.

        Raises:
            ServiceConfigError: It cannot be read, or an entry is malformed.
        """
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ServiceConfigError(
                f"Cannot read the tokens file {str(path)!r}: {exc.strerror or exc}."
            ) from None
        return cls.parse(text, where=f"the tokens file {str(path)!r}")

    @classmethod
    def combine(cls, sets: Iterable[TokenAuth]) -> TokenAuth:
        """All the tokens of several sets."""
        combined = cls()
        for tokens in sets:
            combined._pairs.extend(tokens._pairs)
        return combined

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    @property
    def configured(self) -> bool:
        """Whether it holds any token."""
        return bool(self._pairs)

    def find(self, token: str) -> Principal | None:
        """The principal ``token`` stands for, or ``None`` (every token is compared)."""
        presented = _digest(token)
        found: Principal | None = None
        for digest, principal in self._pairs:
            if hmac.compare_digest(digest, presented):
                found = principal
        return found

    async def principal(self, token: str) -> Principal | None:
        """The principal ``token`` stands for, or ``None``."""
        return self.find(token)

    def __repr__(self) -> str:
        return f"<TokenAuth: {len(self._pairs)} configured>"
