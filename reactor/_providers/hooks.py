"""Hooks: code that sees every tool call and every session of an agent.

``Hooks(pre_tool_use=[...], post_tool_use=[...], session_start=[...],
session_end=[...])``: each a list of sync or async callables. A ``pre_tool_use`` hook
returns the call to let it run (or a changed one, or a dict that replaces its input),
or refuses it: :class:`Deny` (the tool does not run, the model gets the reason as the
tool's error), or ``None``, which refuses too: a guard that says nothing lets nothing
through. ``post_tool_use`` sees each result and may replace it (a
:class:`~reactor.ToolResult`, or a plain value as the tool's new result).
``session_start(info)`` runs before the first model request of a ``prompt()`` or an
activation and ``session_end(info, result)`` after the last. The older ``before_tool``
/ ``after_tool`` options are shorthands for one hook each, with the same meanings.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeAlias

from reactor._providers.base import ToolCall, ToolResult

__all__ = [
    "NO_HOOKS",
    "Deny",
    "Hooks",
    "PostToolUse",
    "PreToolUse",
    "SessionEnd",
    "SessionInfo",
    "SessionStart",
    "call_hook",
    "from_before_tool",
    "shorthand_hooks",
]


@dataclasses.dataclass(frozen=True, slots=True)
class Deny:
    """What a ``pre_tool_use`` hook returns to refuse a tool call.

    The tool does not run; the model receives ``reason`` as the tool's error, so it
    can change course (ask for something else, or answer without the tool).
    """

    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class SessionInfo:
    """What session hooks learn about the session that starts or ends.

    Attributes:
        agent: The agent whose session it is.
        run_id: The run it belongs to (``None`` for a ``prompt()`` outside a run).
        prompt: The rendered user message of its first request.
    """

    agent: str
    run_id: str | None
    prompt: str


PreToolUse: TypeAlias = Callable[[ToolCall], Any]
"""``pre_tool_use(call) -> ToolCall | dict | Deny | None`` (or an awaitable of one):
the call runs (as returned), its input is replaced, or it is refused (``Deny``, ``None``)."""
PostToolUse: TypeAlias = Callable[[ToolCall, ToolResult], Any]
"""``post_tool_use(call, result) -> None | ToolResult | value``: ``None`` keeps the result;
a plain value replaces the tool's result."""
SessionStart: TypeAlias = Callable[[SessionInfo], Any]
"""``session_start(info)``, before the first model request of a session."""
SessionEnd: TypeAlias = Callable[[SessionInfo, Any], Any]
"""``session_end(info, result)``, after the last (``result``: the output, or the error)."""


def _hooks(value: Any, field: str) -> tuple[Callable[..., Any], ...]:
    hooks = (value,) if callable(value) else tuple(value or ())
    for hook in hooks:
        if not callable(hook):
            raise TypeError(f"Hooks({field}=...) takes a list of functions, got {hook!r} in it.")
    return hooks


@dataclasses.dataclass(frozen=True, init=False)
class Hooks:
    """The hooks of an agent, a prompt or one call; see the module docstring.

    Args:
        pre_tool_use: Before each tool call, in order: return the
            :class:`~reactor.ToolCall` (as it is, or changed) to let it run, a dict to
            replace its input, :class:`Deny` to refuse it with a reason, or ``None`` to
            refuse it (as ``before_tool`` does).
        post_tool_use: After each tool call (denied ones too), in order: return a
            :class:`~reactor.ToolResult` or a plain value to replace the result,
            ``None`` to keep it.
        session_start: ``fn(info)`` before the first model request of a session.
        session_end: ``fn(info, result)`` after its last; ``result`` is the output, or
            the exception that ended the session.

    Raises:
        TypeError: A hook is not callable.
    """

    pre_tool_use: tuple[PreToolUse, ...]
    post_tool_use: tuple[PostToolUse, ...]
    session_start: tuple[SessionStart, ...]
    session_end: tuple[SessionEnd, ...]

    def __init__(
        self,
        pre_tool_use: Iterable[PreToolUse] | PreToolUse = (),
        post_tool_use: Iterable[PostToolUse] | PostToolUse = (),
        session_start: Iterable[SessionStart] | SessionStart = (),
        session_end: Iterable[SessionEnd] | SessionEnd = (),
    ) -> None:
        object.__setattr__(self, "pre_tool_use", _hooks(pre_tool_use, "pre_tool_use"))
        object.__setattr__(self, "post_tool_use", _hooks(post_tool_use, "post_tool_use"))
        object.__setattr__(self, "session_start", _hooks(session_start, "session_start"))
        object.__setattr__(self, "session_end", _hooks(session_end, "session_end"))

    def __bool__(self) -> bool:
        return bool(
            self.pre_tool_use or self.post_tool_use or self.session_start or self.session_end
        )

    def __add__(self, other: Hooks) -> Hooks:
        """Both sets of hooks: this one's run first."""
        if not other:
            return self
        if not self:
            return other
        return Hooks(
            (*self.pre_tool_use, *other.pre_tool_use),
            (*self.post_tool_use, *other.post_tool_use),
            (*self.session_start, *other.session_start),
            (*self.session_end, *other.session_end),
        )


NO_HOOKS = Hooks()


async def call_hook(hook: Callable[..., Any], *args: Any) -> Any:
    """Call a sync or async hook."""
    result = hook(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def from_before_tool(
    before: Callable[[ToolCall], ToolCall | Awaitable[ToolCall | None] | None],
) -> PreToolUse:
    """A ``before_tool(call)`` hook (``None`` blocks) as a ``pre_tool_use`` hook."""

    async def pre_tool_use(call: ToolCall) -> ToolCall | Deny:
        changed = await call_hook(before, call)
        return Deny("Blocked by a before_tool hook.") if changed is None else changed

    return pre_tool_use


def shorthand_hooks(
    before_tool: Callable[..., Any] | None, after_tool: Callable[..., Any] | None
) -> Hooks:
    """``before_tool`` / ``after_tool`` as :class:`Hooks`."""
    if before_tool is None and after_tool is None:
        return NO_HOOKS
    return Hooks(
        () if before_tool is None else (from_before_tool(before_tool),),
        () if after_tool is None else (after_tool,),
    )
