"""Validating writes to pydantic models: new committed versions, and readable errors.

Writes never mutate a committed model: :func:`apply_model` makes a shallow copy and
validates the written fields on it with pydantic's ``validate_assignment``, so
nested writes are validated where they happen and errors carry their dotted path.

Validation is skipped only where pydantic would store the value unchanged: a field
whose type is exactly ``int``, ``float``, ``str`` or ``bool`` with no constraints,
no validators (field or model), no string transformations in the model's config,
receiving a value of exactly that type. :class:`ModelRules` works this out once
per model class.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pydantic
from pydantic_core import PydanticUndefined

from reactor.exceptions import StateValidationError

__all__ = ["ModelRules", "apply_model", "copy_with", "model_rules", "validation_error"]

# Config options that transform or constrain every string field of a model.
_STRING_OPTIONS = (
    "str_strip_whitespace",
    "str_to_lower",
    "str_to_upper",
    "str_min_length",
    "str_max_length",
)


@dataclasses.dataclass(frozen=True, slots=True)
class ModelRules:
    """How writes to one model class are validated.

    Attributes:
        whole: Validate the whole model even for one field (a frozen model, which
            refuses ``validate_assignment``).
        model_validators: The model has model-level validators: writes to several
            fields must be validated together, and every write runs them.
        trusted: Field name -> the exact value type pydantic stores unchanged.
    """

    whole: bool
    model_validators: bool
    trusted: dict[str, type[Any]]


_RULES: dict[type[pydantic.BaseModel], ModelRules] = {}


def model_rules(model: type[pydantic.BaseModel]) -> ModelRules:
    """Return the rules of ``model`` (worked out once per class)."""
    rules = _RULES.get(model)
    if rules is None:
        rules = _RULES[model] = _rules_of(model)
    return rules


def _rules_of(model: type[pydantic.BaseModel]) -> ModelRules:
    config = model.model_config
    decorators = model.__pydantic_decorators__
    model_validators = bool(decorators.model_validators or decorators.root_validators)
    validated: set[str] = set()
    for field_validator in decorators.field_validators.values():
        validated.update(field_validator.info.fields)
    for validator in decorators.validators.values():
        validated.update(validator.info.fields)
    trustable: set[Any] = {int, bool}
    if config.get("allow_inf_nan", True):
        trustable.add(float)
    if not any(config.get(option) for option in _STRING_OPTIONS):
        trustable.add(str)
    trusted: dict[str, type[Any]] = {}
    if not model_validators and "*" not in validated:
        for name, field in model.model_fields.items():
            plain = not field.metadata and not field.frozen and name not in validated
            if plain and field.annotation in trustable:
                trusted[name] = field.annotation  # type: ignore[assignment]  # a class here
    return ModelRules(
        whole=bool(config.get("frozen")), model_validators=model_validators, trusted=trusted
    )


def apply_model(base: pydantic.BaseModel, updates: dict[str, Any], path: str) -> Any:
    """Return a copy of ``base`` with ``updates`` validated and assigned.

    One field at a time through ``validate_assignment`` when that is equivalent;
    otherwise (several fields and model-level validators, which must see all of them
    at once, or a frozen model) by validating the merged fields in one go.
    """
    rules = model_rules(type(base))
    if rules.whole or (rules.model_validators and len(updates) > 1):
        return _revalidate(base, updates, path)
    trusted = rules.trusted
    exact = {}  # the values pydantic would store unchanged
    for name, value in updates.items():
        if trusted.get(name) is type(value):
            exact[name] = value
    new = copy_with(base, exact)
    if len(exact) < len(updates):
        validator = type(base).__pydantic_validator__
        for name, value in updates.items():
            if name in exact:
                continue
            try:
                validator.validate_assignment(new, name, value)
            except pydantic.ValidationError as exc:
                raise validation_error(path, name, exc) from exc
    return new


_set = object.__setattr__


def copy_with(model: pydantic.BaseModel, fields: dict[str, Any]) -> Any:
    """Return a shallow copy of ``model`` with ``fields`` set, unvalidated.

    What ``model.model_copy(update=fields)`` does, without its generic dispatch (this
    is the write path): new containers for the fields, extras, the set of fields given
    and private attributes; the values themselves are shared.
    """
    kind = type(model)
    new = kind.__new__(kind)
    _set(new, "__dict__", {**model.__dict__, **fields})
    _set(new, "__pydantic_fields_set__", model.__pydantic_fields_set__.union(fields))
    extra = model.__pydantic_extra__
    _set(new, "__pydantic_extra__", None if extra is None else dict(extra))
    private = getattr(model, "__pydantic_private__", None)  # unset on some models
    if private is not None:
        private = {k: v for k, v in private.items() if v is not PydanticUndefined}
    _set(new, "__pydantic_private__", private)
    return new


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def _revalidate(base: pydantic.BaseModel, updates: dict[str, Any], path: str) -> Any:
    model = type(base)
    if model.model_config.get("extra") != "allow":
        for name in updates:
            if name not in model.model_fields:
                raise StateValidationError(
                    f"Invalid value for {_join(path, name)!r}: {model.__name__} has no "
                    f"field {name!r}. The state was left unchanged.",
                    key=_join(path, name).split(".")[0],
                    path=_join(path, name),
                    errors=[{"type": "no_such_attribute", "loc": (name,)}],
                )
    data = {**base.__dict__, **(base.__pydantic_extra__ or {}), **updates}
    try:
        return model.model_validate(data, by_alias=False, by_name=True)
    except pydantic.ValidationError as exc:
        raise validation_error(path, next(iter(updates)), exc) from exc


def validation_error(
    parent: str, field: str, exc: pydantic.ValidationError
) -> StateValidationError:
    """Describe the first error of ``exc``, raised while writing ``field`` of ``parent``."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = [str(part) for part in first["loc"]] or [field]
    path = ".".join(filter(None, [parent, *loc]))
    got = repr(first.get("input"))
    if len(got) > 80:
        got = got[:77] + "..."
    more = f" ({len(errors) - 1} more in .errors)" if len(errors) > 1 else ""
    return StateValidationError(
        f"Invalid value for {path!r}: {first['msg']} (got {got}){more}. "
        "The state was left unchanged.",
        key=path.split(".")[0],
        path=path,
        errors=[dict(error) for error in errors],
    )
