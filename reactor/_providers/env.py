"""Per-call environment variables: ``agent(env={...})`` seen through :func:`getenv`.

An agent's ``env`` is an overlay on the process environment, scoped to the call (a
``ContextVar``): tools read it with :func:`reactor.getenv`, stdio MCP servers get it in
their process's environment, and ``os.environ`` is never written, so two agents running
at once each see their own values.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator, Mapping

__all__ = ["current_env", "env_overlay", "getenv", "set_env"]

_ENV: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "reactor_env", default=None
)


def getenv(name: str, default: str | None = None) -> str | None:
    """Read an environment variable as the running agent sees it.

    The calling agent's ``env={...}`` comes first, then ``os.environ``. Tools call it
    instead of ``os.getenv`` so that the agent that called them decides their
    settings, even when several agents with different settings run at once.

    Args:
        name: The variable.
        default: What to return when neither the agent nor the process sets it.
    """
    overlay = _ENV.get()
    if overlay is not None and name in overlay:
        return overlay[name]
    return os.environ.get(name, default)


def current_env() -> Mapping[str, str]:
    """The overlay in force here (empty outside an agent with ``env``)."""
    return _ENV.get() or {}


def set_env(env: Mapping[str, str]) -> None:
    """Make ``env`` the overlay for the rest of this context (an activation's task).

    The overlay is replaced, not extended: an activation started while another agent's
    code ran must not see that agent's variables.
    """
    if env or _ENV.get() is not None:
        _ENV.set(env or None)


@contextlib.contextmanager
def env_overlay(env: Mapping[str, str]) -> Iterator[None]:
    """Lay ``env`` over the overlay in force, inside the block only."""
    if not env:
        yield
        return
    outer = _ENV.get()
    token = _ENV.set({**outer, **env} if outer else dict(env))
    try:
        yield
    finally:
        _ENV.reset(token)
