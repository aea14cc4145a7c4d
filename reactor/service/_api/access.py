"""Who may call the HTTP API: bearer tokens, each mapped to a user id.

Tokens come from ``REACTOR_API_TOKENS="token1:alice,token2:bob"`` or a tokens file
(one ``token:user`` a line; blank lines and ``#`` comments are skipped). A request's
token is compared with every configured one in constant time (their SHA-256 digests,
with :func:`hmac.compare_digest`), and tokens are never logged or shown: a
:class:`Tokens` prints as how many it holds.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from pathlib import Path

from reactor.exceptions import ServiceConfigError
from reactor.service._objects.values import NAME_LENGTH, User

__all__ = ["LOCAL_USER", "Tokens"]

LOCAL_USER = "local"
"""Who calls a service that has no tokens (it listens on a loopback address only)."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Tokens:
    """The API's bearer tokens and the users they stand for.

    Args:
        pairs: ``{token: user_id}``.

    Raises:
        ServiceConfigError: A token or a user id is empty, a user id has a ``:`` or is
            longer than 200 characters.
    """

    def __init__(self, pairs: Mapping[str, str] | None = None) -> None:
        self._pairs: list[tuple[bytes, str]] = []
        for token, user in (pairs or {}).items():
            if not token.strip() or not user.strip() or ":" in user:
                raise ServiceConfigError(
                    "Each API token needs a user: write token:user_id pairs (user ids "
                    "without ':'), e.g. REACTOR_API_TOKENS='s3cret:alice,0ther:bob'."
                )
            if len(user.strip()) > NAME_LENGTH:
                raise ServiceConfigError(
                    f"The API token of user {user.strip()[:40]!r}... names a user id of "
                    f"{len(user.strip())} characters; at most {NAME_LENGTH} are kept."
                )
            self._pairs.append((_digest(token.strip()), user.strip()))

    @classmethod
    def parse(cls, text: str, *, where: str = "REACTOR_API_TOKENS") -> Tokens:
        """Read ``token:user`` pairs separated by commas or new lines (``#`` comments).

        Raises:
            ServiceConfigError: An entry is not ``token:user``.
        """
        pairs: dict[str, str] = {}
        entries = (
            entry.strip()
            for line in text.splitlines()
            for entry in line.split("#", 1)[0].split(",")
        )
        for number, entry in enumerate(filter(None, entries), start=1):
            token, colon, user = entry.rpartition(":")
            if not colon or not token.strip() or not user.strip():
                raise ServiceConfigError(
                    f"Entry {number} of {where} is not token:user_id; write pairs such as "
                    "s3cret:alice, separated by commas or new lines."
                )
            pairs[token.strip()] = user.strip()
        return cls(pairs)

    @classmethod
    def read(cls, path: Path | str) -> Tokens:
        """Read a tokens file.

        Raises:
            ServiceConfigError: It cannot be read, or an entry is not ``token:user``.
        """
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ServiceConfigError(
                f"Cannot read the tokens file {str(path)!r}: {exc.strerror or exc}."
            ) from None
        return cls.parse(text, where=f"the tokens file {str(path)!r}")

    @classmethod
    def combine(cls, sets: Iterable[Tokens]) -> Tokens:
        """All the tokens of several sets."""
        combined = cls()
        for tokens in sets:
            combined._pairs.extend(tokens._pairs)
        return combined

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def user(self, token: str) -> User | None:
        """The user ``token`` stands for, or ``None`` (every token is compared: no early exit)."""
        presented = _digest(token)
        found: str | None = None
        for digest, user in self._pairs:
            if hmac.compare_digest(digest, presented):
                found = user
        return None if found is None else User(found)

    def __repr__(self) -> str:
        return f"<Tokens: {len(self._pairs)} configured>"
