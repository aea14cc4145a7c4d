"""JSON values as edge-based flows saw them: paths into them, equality, state writes.

Everything a flow reads or records is JSON data: the flow's input, node outputs and
the flow's ``state``. This module holds the small operations both executors share on
such data, so that they cannot drift apart: looking up a dotted path, comparing two
values as JSON, applying a node's state writes, and showing a value in a message
without letting a huge one swallow the message.
"""

from __future__ import annotations

import copy
import math
import reprlib
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic_core

__all__ = [
    "MISSING",
    "RESERVED_ROOTS",
    "apply_writes",
    "binding_context",
    "clip",
    "json_equal",
    "jsonable",
    "lookup",
    "shorten",
    "step",
]


class _Missing:
    """The value of a path that leads nowhere (distinct from ``null``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "(missing)"


MISSING: Any = _Missing()
"""What :func:`step` returns for a key or index that is not there."""

RESERVED_ROOTS = ("flow", "workflow", "state")
"""Names the binding context gives to the flow's input and state, never to nodes."""


def binding_context(
    flow_input: Mapping[str, Any],
    outputs: Mapping[str, Any],
    state: Mapping[str, Any] | None = None,
    variables: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The names bindings and conditions read.

    Node outputs by node id, ``flow.input`` (alias ``workflow.input``), the flow's
    ``state``, and ``variables`` (the item of a ``forEach``, by its ``as`` name).
    """
    return {
        **outputs,
        **(variables or {}),
        "flow": {"input": flow_input},
        "workflow": {"input": flow_input},
        "state": state if state is not None else {},
    }


def step(current: Any, segment: str) -> Any:
    """One segment of a dotted path: a mapping key, or a list index; ``MISSING`` if absent."""
    if isinstance(current, Mapping):
        return current.get(segment, MISSING)
    if isinstance(current, Sequence) and not isinstance(current, str) and segment.isdigit():
        index = int(segment)
        return current[index] if index < len(current) else MISSING
    return MISSING


def lookup(context: Mapping[str, Any], path: str) -> Any:
    """The value at dotted ``path``, or ``MISSING``; ``null`` counts as missing too.

    The old kernel read these paths with JavaScript property access, so ``length`` of
    a list or a string is its length (``flow.input.files.length``), as it was there;
    a mapping's own ``length`` key still wins.
    """
    current: Any = context
    for segment in path.split("."):
        if segment == "length" and isinstance(current, str | list | tuple):
            current = len(current)
            continue
        current = step(current, segment)
        if current is MISSING:
            return MISSING
    return MISSING if current is None else current


def json_equal(left: Any, right: Any) -> bool:
    """Compare as JSON values: ``true`` is not ``1``, ``1`` is ``1.0``, lists are arrays.

    ``NaN`` equals ``NaN``: the old kernel compared values through their JSON text,
    where both are the same, and a node that records ``NaN`` must agree with itself.
    """
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
            return math.isnan(right)
        return left == right
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        return left.keys() == right.keys() and all(json_equal(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(
            json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if type(left) is not type(right) and not (isinstance(left, str) and isinstance(right, str)):
        return False
    return bool(left == right)


def jsonable(value: Any) -> Any:
    """A node output as JSON data (as edge-based flows recorded outputs)."""
    return pydantic_core.to_jsonable_python(value, fallback=repr)


def apply_writes(state: Mapping[str, Any], writes: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``state`` with each ``(dotted path, value)`` of ``writes`` set, in order.

    The state given is not changed (a copy is returned when there are writes);
    missing (or non-mapping) parents along a path become mappings.
    """
    if not writes:
        return dict(state)
    result = copy.deepcopy(dict(state))
    for path, value in writes:
        *parents, last = path.split(".")
        here = result
        for segment in parents:
            child = here.get(segment)
            if not isinstance(child, dict):
                child = here[segment] = {}
            here = child
        here[last] = copy.deepcopy(value)
    return result


_REPR = reprlib.Repr()
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxlevel = 3


def clip(text: str, limit: int = 80) -> str:
    """``text``, cut down to about ``limit`` characters (with ``...``), for messages."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shorten(value: Any, limit: int = 120) -> str:
    """``repr(value)``, cut down to about ``limit`` characters, for error messages.

    A message names the value it is about; a value built from YAML aliases can be
    astronomically large when spelled out, and must not become the message.
    """
    text = _REPR.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
