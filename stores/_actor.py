"""Who is writing: the actor recorded in every state signal."""

from __future__ import annotations

import contextvars
from types import TracebackType

__all__ = ["ActingAs", "acting_as", "actor_context", "current_actor"]

_ACTOR: contextvars.ContextVar[str | None] = contextvars.ContextVar("stores_actor", default=None)
"""The actor of the current context. Each asyncio task runs in a copy of the context
it was created in, so an actor set in one task never leaks into another."""


class ActingAs:
    """The context manager returned by :func:`acting_as`.

    It sets the actor for the current context on entry and restores the previous one
    on exit (also when the block raises or is cancelled). Because the actor lives in a
    :class:`contextvars.ContextVar`, it holds across ``await``: other tasks running
    meanwhile keep their own actors, and tasks created inside the block inherit it.
    """

    __slots__ = ("_actor", "_token")

    def __init__(self, actor: str) -> None:
        if not isinstance(actor, str) or not actor:
            raise ValueError(f"An actor is a non-empty string, got {actor!r}.")
        self._actor = actor
        self._token: contextvars.Token[str | None] | None = None

    def __enter__(self) -> None:
        if self._token is not None:
            raise RuntimeError(
                f"acting_as({self._actor!r}) is already in use; call acting_as() again "
                "for each `with` block."
            )
        self._token = _ACTOR.set(self._actor)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        token, self._token = self._token, None
        if token is not None:
            _ACTOR.reset(token)


def acting_as(actor: str) -> ActingAs:
    """Attribute every store write in this context to ``actor``.

    The runtime wraps each agent activation in ``with acting_as("agent:<name>"):``;
    use it yourself for writes made on behalf of something else::

        with acting_as("system"):
            store.reset_day()

    The actor holds across ``await`` and is private to the task (concurrent
    activations keep their own), and tasks started inside the block inherit it. An
    ``actor=`` given to a single write still takes precedence.

    Raises:
        ValueError: ``actor`` is not a non-empty string.
    """
    return ActingAs(actor)


def actor_context(actor: str) -> contextvars.Context:
    """A copy of the current context in which writes are attributed to ``actor``.

    For code that starts a task on someone's behalf: ``loop.create_task(coro,
    context=actor_context("agent:trader"))`` runs the whole task as that actor, with no
    ``with`` block in it (the runtime starts each agent activation this way).
    """
    context = contextvars.copy_context()
    context.run(_ACTOR.set, actor)
    return context


def current_actor() -> str:
    """Return the actor of writes made now: the innermost ``acting_as``, else ``"user"``."""
    return _ACTOR.get() or "user"
