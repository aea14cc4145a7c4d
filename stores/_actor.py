"""Who is writing: the actor recorded in every state signal."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["acting_as", "current_actor"]

_ACTOR: contextvars.ContextVar[str | None] = contextvars.ContextVar("stores_actor", default=None)


@contextlib.contextmanager
def acting_as(actor: str) -> Iterator[None]:
    """Attribute every store write in this context to ``actor``.

    The runtime wraps each agent activation in ``acting_as("agent:<name>")``; use it
    yourself for writes made on behalf of something else::

        with acting_as("system"):
            store.reset_day()

    An ``actor=`` given to a single write still takes precedence.
    """
    if not isinstance(actor, str) or not actor:
        raise ValueError(f"An actor is a non-empty string, got {actor!r}.")
    token = _ACTOR.set(actor)
    try:
        yield
    finally:
        _ACTOR.reset(token)


def current_actor() -> str:
    """Return the actor of writes made now: the innermost ``acting_as``, else ``"user"``."""
    return _ACTOR.get() or "user"
