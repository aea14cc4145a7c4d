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

__all__ = ["OutputSpec"]

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
