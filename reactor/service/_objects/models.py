"""Object types: the pydantic models registered for them, and data checked against them.

A registered type stays typed: data is validated by its model and stored as the
model dumps it, and a field the model does not declare is refused, not dropped
(pydantic's default would drop it, and an update of nothing but a misspelled field
would be stored as a change of nothing). A model that sets ``extra`` in its
``model_config`` decides itself: ``"allow"`` keeps such fields, ``"ignore"`` drops
them. Objects of other types are stored as they are given (JSON objects), unless the
store takes no untyped objects.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic
import pydantic_core

from reactor._agents.reaction import type_name_problem
from reactor._signals.door import check_payload, check_text
from reactor.exceptions import ObjectValidationError, ServiceConfigError

__all__ = ["ObjectTypes", "Types", "fields_of"]

Types = Iterable[type[pydantic.BaseModel]] | Mapping[str, type[pydantic.BaseModel]]
"""Models named by their class names, or ``{"Person": Person}``."""


class ObjectTypes:
    """The registered types of an object store, and whether it takes others.

    Args:
        types: The models, by name.
        untyped: Whether objects of a type no model is registered for are stored.

    Raises:
        ServiceConfigError: A name is not a type name, or a model not a pydantic model.
    """

    def __init__(self, types: Types, *, untyped: bool) -> None:
        self.models = _registered(types)
        self.untyped = bool(untyped)
        self._checking = {name: _no_other_fields(model) for name, model in self.models.items()}

    def validate(self, type: str, data: Any) -> dict[str, Any]:
        """``data`` as it would be stored as a ``type``: validated, as JSON data.

        Raises:
            ObjectValidationError: It does not fit.
            PayloadError: The database cannot hold it or the type (a NUL character, a
                lone surrogate, ``NaN``).
        """
        check_text(type, "type")
        problem = type_name_problem(type)
        if problem is not None:
            raise ObjectValidationError(
                f"Cannot store the object: {problem}.", type=str(type), errors=[]
            )
        data = fields_of(type, data)
        model = self._checking.get(type)
        if model is None:
            try:
                jsonable = pydantic_core.to_jsonable_python(data)
            except pydantic_core.PydanticSerializationError as exc:
                raise ObjectValidationError(
                    f"{type} data cannot be stored as JSON ({exc}); give plain JSON values.",
                    type=type,
                    errors=[],
                ) from None
            assert isinstance(jsonable, dict)
            check_payload(jsonable, "data", nul=True)  # jsonb on PostgreSQL has no NUL
            return jsonable
        try:
            stored = model.model_validate(data).model_dump(mode="json")
        except pydantic.ValidationError as exc:
            raise _invalid(type, self.models[type], exc) from None
        check_payload(stored, "data", nul=True)
        return stored

    def check_new(self, type: str) -> None:
        """Refuse a new object of an unregistered ``type`` when untyped ones are not taken.

        Raises:
            ObjectValidationError: It is refused.
        """
        if self.untyped or type in self.models:
            return
        raise ObjectValidationError(
            f"Cannot store a {type!r} object: no type of that name is registered "
            f"({', '.join(sorted(self.models)) or 'none is'}), and this object store takes "
            "no untyped objects (untyped=False). Check the spelling of the type, or "
            "register a model for it (ObjectStore(types=[...])).",
            type=type,
            errors=[],
        )


def fields_of(type: str, data: Any) -> dict[str, Any]:
    """``data`` as a dict of fields.

    Raises:
        ObjectValidationError: It is not a mapping.
    """
    if not isinstance(data, Mapping):
        raise ObjectValidationError(
            f"{type} data must be a JSON object (a dict of fields), got "
            f"{builtins.type(data).__name__}.",
            type=type,
            errors=[],
        )
    return dict(data)


def _invalid(
    type: str, model: builtins.type[pydantic.BaseModel], exc: pydantic.ValidationError
) -> ObjectValidationError:
    """The error of data a registered model refused, naming each field and why."""
    errors = exc.errors(include_url=False, include_context=False)
    listed = "; ".join(
        f"{'.'.join(map(str, e['loc'])) or '(root)'}: "
        + (
            f"{type} has no such field"
            if e["type"] == "extra_forbidden"
            else f"{e['msg']} (got {e.get('input')!r})"
        )
        for e in errors
    )
    hint = ""
    if any(e["type"] == "extra_forbidden" for e in errors) and "extra" not in model.model_config:
        hint = (
            f" A {model.__name__} that takes other fields says so: model_config = "
            "ConfigDict(extra='allow') keeps them, extra='ignore' drops them."
        )
    return ObjectValidationError(
        f"{type} data is invalid: {listed}. Nothing was stored; fix the data (or the "
        f"{model.__name__} model).{hint}",
        type=type,
        errors=[dict(e) for e in errors],
    )


def _no_other_fields(model: type[pydantic.BaseModel]) -> type[pydantic.BaseModel]:
    """``model``, refusing fields it lacks, unless its config says what to do with them."""
    if "extra" in model.model_config or issubclass(model, pydantic.RootModel):
        return model
    namespace = {
        "model_config": pydantic.ConfigDict(extra="forbid"),
        "__module__": model.__module__,
        "__qualname__": model.__qualname__,
        "__doc__": model.__doc__,
    }
    try:
        return builtins.type(model.__name__, (model,), namespace)
    except (TypeError, pydantic.PydanticUserError):  # a model that cannot be subclassed
        return model


def _registered(types: Types) -> dict[str, type[pydantic.BaseModel]]:
    items = types.items() if isinstance(types, Mapping) else ((t.__name__, t) for t in types)
    registered: dict[str, type[pydantic.BaseModel]] = {}
    for name, model in items:
        problem = type_name_problem(name)
        if problem is not None:
            raise ServiceConfigError(f"Cannot register the type: {problem}.")
        if not (isinstance(model, type) and issubclass(model, pydantic.BaseModel)):
            raise ServiceConfigError(
                f"types must be pydantic models (or {{name: model}}), got {model!r} for {name!r}."
            )
        registered[name] = model
    return registered
