"""An agent's ``output=`` type: what the model is asked for, and how answers are checked.

``output`` is a pydantic model (``Analysis``), a ``RootModel``, or any type pydantic
validates (``list[Headline]``, ``dict[str, float]``). The model is asked for JSON
matching its schema; a schema that is not an object is sent wrapped as
``{"result": ...}`` (structured output wants an object) and unwrapped on the way back.
What ``updates=`` writes into the state is the plain value: a ``RootModel``'s root.
"""

from __future__ import annotations

import re
from typing import Any

import pydantic
import pydantic_core

from reactor.exceptions import OutputValidationError

__all__ = ["OutputSpec", "check_output", "feedback", "summarize_errors"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*)\n\s*```\s*$", re.DOTALL)
_WRAP = "result"


class OutputSpec:
    """The output type of an agent, with its validator and the schema sent to models.

    Raises:
        TypeError: pydantic cannot build a validator or a JSON schema for the type.
    """

    def __init__(self, kind: Any) -> None:
        self.kind = kind
        self.adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(kind)
        try:
            schema = self.adapter.json_schema()
        except pydantic.PydanticUserError as exc:  # pragma: no cover - pydantic's wording
            raise TypeError(str(exc)) from exc
        self.wrapped = schema.get("type") != "object"
        if self.wrapped:
            defs = schema.pop("$defs", None)
            schema = {
                "type": "object",
                "properties": {_WRAP: schema},
                "required": [_WRAP],
                "additionalProperties": False,
            }
            if defs:
                schema["$defs"] = defs
        self.schema: dict[str, Any] = schema

    @property
    def name(self) -> str:
        """How messages name the type (``Analysis``, ``list[Headline]``)."""
        return getattr(self.kind, "__name__", None) or str(self.kind).replace("typing.", "")

    def validate(self, raw: Any) -> Any:
        """Validate an answer (an instance, JSON data, or JSON text, possibly fenced).

        Raises:
            pydantic.ValidationError: The answer does not match.
        """
        if isinstance(self.kind, type) and isinstance(raw, self.kind):
            return raw
        if isinstance(raw, str | bytes):
            text = raw.decode() if isinstance(raw, bytes) else raw
            fenced = _FENCE.match(text)
            if fenced:
                text = fenced.group(1)
            try:
                raw = pydantic_core.from_json(text)
            except ValueError:
                return self.adapter.validate_json(text)  # not JSON: pydantic says where
        if self.wrapped and isinstance(raw, dict) and set(raw) == {_WRAP}:
            raw = raw[_WRAP]
        return self.adapter.validate_python(raw)

    @staticmethod
    def state_value(output: Any) -> Any:
        """What ``updates=`` writes: a ``RootModel``'s root, else the output itself."""
        return output.root if isinstance(output, pydantic.RootModel) else output


def check_output(spec: OutputSpec, raw: Any, agent: str) -> Any:
    """Validate a handler's output against its agent's ``output`` type.

    Raises:
        OutputValidationError: It does not match (the message says where).
    """
    try:
        return spec.validate(raw)
    except pydantic.ValidationError as exc:
        raise OutputValidationError(
            f"Agent {agent!r}: the output does not match {spec.name}: {summarize_errors(exc)}.",
            agent=agent,
            output=raw,
            errors=[dict(e) for e in exc.errors(include_url=False)],
        ) from exc


def summarize_errors(exc: pydantic.ValidationError) -> str:
    """The first few errors of ``exc``, on one line."""
    parts = []
    for error in exc.errors(include_url=False)[:3]:
        loc = ".".join(str(p) for p in error["loc"]) or "(root)"
        parts.append(f"{loc}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def feedback(exc: pydantic.ValidationError) -> str:
    """What the model is told when its answer did not validate."""
    lines = [
        f"- {'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
        for e in exc.errors(include_url=False)
    ]
    return (
        "Your answer did not match the required JSON schema:\n"
        + "\n".join(lines)
        + "\nReply again with only the corrected JSON object."
    )
